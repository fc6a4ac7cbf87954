"""The analyzers' entry points: one file's text in, its kernels, launch sites and problems out."""

from __future__ import annotations

import logging
import threading
import traceback
from typing import Callable

from .budget import Budget, analysis_budget, checkpoint
from .discovery import TritonDiscovery, discover_triton
from .model import FileAnalysis, LaunchSite, Problem, Severity, Span, TritonKernel
from .nki_discovery import NkiDiscovery, discover_nki
from .rules.triton_kernel.tr009_int32_offset_overflow import raise_with_sizes
from .sizes import launch_tensor_sizes, launch_values, spec_sizes
from .rules import FILE_CHECKS, LAUNCH_CHECKS, FileContext, LaunchContext, load_rule_modules, make_problem, merge_identical
from .source import ImportMap, ParseCache, SourceText, StatementMemo, parse_recovering
from .suppression import find_suppressions
from .values import ModuleIndex

log = logging.getLogger(__name__)
load_rule_modules()

# Resolves a launch site to the kernel it launches and the path of the file defining it (None: same file).
KernelLookup = Callable[[LaunchSite], "tuple[TritonKernel, str | None] | None"]


def _internal_error(where: str, exc: BaseException) -> Problem:
    log.error("analyzer failure in %s:\n%s", where, "".join(traceback.format_exception(exc)))
    return make_problem("KL900", Span.point(0), f"internal error in {where}: {type(exc).__name__}: {exc}")


def analyze_source(text: str, path: str = "<memory>", parse_cache: ParseCache | None = None,
                   cancel: threading.Event | None = None) -> FileAnalysis:
    """Discover kernels and run every per-file rule. Never raises on any input text, except AnalysisCancelled
    once `cancel` is set (at the next checkpoint: between rules, kernels, launch sites, evaluation steps).

    Re-analysing a document after an edit with the same parse_cache re-parses only the statements that changed.
    Constant folding is paid from a budget proportional to the text's length (analyzers.budget).
    """
    src = SourceText(text)
    with analysis_budget(Budget.for_text(text, cancel)):
        if parse_cache is None:
            return _analyze(src, path, parse_recovering(src))
        with parse_cache.lock:  # reused trees are renumbered in place: one analysis of a document at a time
            checkpoint()
            result = _analyze(src, path, parse_recovering(src, parse_cache), parse_cache.memo)
            # Only a finished analysis forgets what it did not use: a cancelled one saw only part of the file.
            parse_cache.memo.sweep()
            return result


def _analyze(src: SourceText, path: str, parsed, memo: StatementMemo | None = None) -> FileAnalysis:
    result = FileAnalysis(path=path, complete=parsed.error is None)
    result.suppressions = find_suppressions(src.lines)
    if parsed.error is not None:
        line, col, msg = parsed.error
        skipped = ", ".join(f"{a + 1}-{b}" for a, b in parsed.skipped_lines)
        note = f"; lines {skipped} are not analysed until it is fixed" if skipped else ""
        result.problems.append(make_problem("KL001", Span(line, col, line, col + 1), f"syntax error: {msg}{note}"))
    imports = ImportMap(parsed.body, memo)
    checkpoint()
    # Each discovery is guarded on its own: a bug in one must not hide what the other found.
    try:
        triton = discover_triton(src, imports, parsed.body, memo)
    except Exception as exc:  # noqa: BLE001
        result.problems.append(_internal_error("Triton discovery", exc))
        triton = TritonDiscovery()
    try:
        nki = discover_nki(src, imports, parsed.body)
    except Exception as exc:  # noqa: BLE001
        result.problems.append(_internal_error("NKI discovery", exc))
        nki = NkiDiscovery()
    result.kernels = [k.kernel for k in triton.kernels]
    result.launch_sites = triton.launch_sites
    result.nki_kernels = nki.kernels
    ctx = FileContext(path, src, imports, parsed.body, triton, nki, memo=memo)
    for check in FILE_CHECKS:
        checkpoint()
        try:
            check(ctx)
        except Exception as exc:  # noqa: BLE001
            ctx.problems.append(_internal_error(f"{check.__module__}.{check.__name__}", exc))
    checkpoint()
    try:
        # One index of the module for every launch site and spec; with a memo each top-level statement's values
        # are read once per parse and reused while the module names they read keep their bindings.
        index = ModuleIndex(parsed.body, memo)
        imports_key = tuple(sorted(imports.names.items())) if memo is not None else None
        sites = result.launch_sites
        result.launch_values = launch_values(parsed.body, sites, index, memo)
        result.spec_values, result.tensor_sizes = spec_sizes(src, imports, parsed.body, sites, index, memo, imports_key)
        for kernel, shown in launch_tensor_sizes(src, imports, parsed.body, sites, index, memo, imports_key).items():
            known = result.tensor_sizes.get(kernel)
            if known is None or shown.values[-1] > known.values[-1]:
                result.tensor_sizes[kernel] = shown
    except Exception as exc:  # noqa: BLE001
        ctx.problems.append(_internal_error("reading launch values", exc))
    result.problems.extend(merge_identical(raise_with_sizes(ctx.problems, result.tensor_sizes), src))
    return result


def check_launch_sites(analysis: FileAnalysis, lookup: KernelLookup) -> list[Problem]:
    """Problems at launch sites whose arguments do not fit the kernel they launch (possibly in another file)."""
    problems: list[Problem] = []
    for site in analysis.launch_sites:
        try:
            found = lookup(site)
        except Exception as exc:  # noqa: BLE001
            problems.append(_internal_error("kernel lookup", exc))
            continue
        if found is None:
            continue
        kernel, kernel_path = found
        ctx = LaunchContext(kernel_path, analysis.launch_values, analysis.spec_values)
        for check in LAUNCH_CHECKS:
            try:
                problems.extend(check(site, kernel, ctx))
            except Exception as exc:  # noqa: BLE001
                problems.append(_internal_error(f"{check.__module__}.{check.__name__}", exc))
    return problems


def local_lookup(analysis: FileAnalysis) -> KernelLookup:
    """Resolve launch sites against the kernels of the same file only."""

    def lookup(site: LaunchSite):
        if site.module is not None:
            return None
        k = analysis.kernel(site.target)
        return (k, None) if k is not None else None

    return lookup


def check_source(text: str, path: str = "<memory>") -> FileAnalysis:
    """A single file on its own: per-file rules plus launch checks against the file's own kernels."""
    analysis = analyze_source(text, path)
    analysis.problems.extend(check_launch_sites(analysis, local_lookup(analysis)))
    return analysis


__all__ = ["analyze_source", "check_launch_sites", "check_source", "local_lookup", "Severity"]
