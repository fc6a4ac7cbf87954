"""`kernel-lsp check` output: human text, JSON, and SARIF 2.1.0 for code-scanning services, from the API's
`BatchResult` (`Workspace.check_files`) and nothing else: what the command line prints is what the API promises.

The JSON follows kernel_lsp/schema/check-report.schema.json: keys in camelCase, lines and columns 1-based
everywhere, durations in seconds, latencies in microseconds (`us`)."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from analyzers.model import Severity
from analyzers.rules import RULES

from . import __version__
from .api import BatchResult, CaseInfo, CompiledConfig, Finding, LatencyEntry, VerdictInfo

# The `$schema` of every JSON report and the `$id` of kernel_lsp/schema/check-report.schema.json.
SCHEMA_ID = "urn:kernel-lsp:check-report:2"
# The API's severities as the reports name them.
_LEVEL = {"error": "error", "warning": "warning", "information": "info", "hint": "hint"}
_SARIF_LEVEL = {"error": "error", "warning": "warning", "information": "note", "hint": "note"}
_RULE_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note", Severity.HINT: "note"}


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _display(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


display_path = _display


def _count(batch: BatchResult, severity: str) -> int:
    return sum(1 for f in batch.files for x in f.findings if x.severity == severity)


def _cuda_line(line: int | None) -> int:
    return line if line is not None else 0  # a kernel ptxas named that the source does not show


def text_report(batch: BatchResult, color: bool = False) -> str:
    lines = []
    paint = (lambda code, s: f"\033[{code}m{s}\033[0m") if color else (lambda code, s: s)
    colors = {"error": "31", "warning": "33", "information": "36", "hint": "2"}
    for f in batch.files:
        for p in f.findings:
            fix = " [fix available]" if p.fix else ""
            where = f"{_display(f.path)}:{p.line}:{p.column}"
            lines.append(f"{paint('1', where)}: {paint(colors[p.severity], _LEVEL[p.severity])} "
                         f"{paint('1', p.code)} {p.message}{fix}")
    for path in batch.missing:
        lines.append(f"{path}: {paint(colors['error'], 'error')}: no such file or directory")
    lines += compiled_lines(batch)
    lines += [f"{_display(k.path)}:{_cuda_line(k.line)} {k.name} {k.target} {k.registers} regs, "
              f"{k.spill_bytes or 0} B spill, {k.shared_bytes} B smem (nvcc)" for k in batch.cuda]
    verdicts = [(c.path, v) for c in batch.checks for v in c.verdicts]
    lines += [f"{_display(path)}:{v.kernel_line} {v.kernel}: {v.message}" for path, v in verdicts]
    lines += latency_lines(batch)
    stats = batch.stats
    total = sum(len(f.findings) for f in batch.files)
    counts = ", ".join(_n(_count(batch, s), _LEVEL[s]) for s in ("error", "warning", "information")
                       if _count(batch, s))
    summary = (f"{_n(len(batch.files), 'file')}, {_n(stats.triton_kernels, 'Triton kernel')}, "
               f"{_n(stats.nki_kernels, 'NKI kernel')}, {_n(stats.launch_sites, 'launch site')} checked: ")
    summary += f"{_n(total, 'problem')} ({counts})" if total else "no problems"
    if batch.compile_targets:
        cached = sum(1 for c in batch.compiled if c.cached)
        summary += (f"; {_n(len(batch.compiled), 'compile job')} for {', '.join(batch.compile_targets)} "
                    f"({cached} cached)")
    if verdicts:
        correct = sum(1 for _, v in verdicts if v.ok)
        summary += f"; {_n(len(verdicts), 'spec')} checked ({correct} correct)"
    timed = [e for r in batch.latency for e in r.entries if e.us is not None and (e.chosen or e.source == "measured")]
    if timed:
        how = "measured on the GPU" if batch.latency_source == "measured" else "estimated by the latency model, no GPU"
        if batch.latency_source != "measured" and any(e.engine_us for e in timed):
            how = "estimated" + (" by the latency model and" if any(not e.engine_us for e in timed) else "") + \
                " from the NKI model's counts, no device"
        summary += f"; {_n(len(timed), 'latency figure')} ({how})"
    fixable = sum(1 for f in batch.files for p in f.findings if p.fix)
    if fixable:
        summary += f"; {fixable} with a quick fix (--fix applies them, --diff shows them)"
    if batch.missing:
        summary += f"; {_n(len(batch.missing), 'path')} not found"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def compiled_lines(batch: BatchResult) -> list[str]:
    """A resource line per compiled configuration; the figures hold for launches that match what was assumed, so
    that is said beside them: once per kernel and target for what every configuration assumed, under the
    configuration for what only it did."""
    groups: dict[tuple[str, str, str], list] = {}
    for c in batch.compiled:
        if c.ok:
            groups.setdefault((c.path, c.kernel, c.target), []).append(c)
    lines = []
    for group in groups.values():
        common = [n for n in group[0].notes if all(n in c.notes for c in group[1:])]
        for c in group:
            lines.append(resource_line(c))
            lines += [f"    assumed: {_assumption(note)}" for note in c.notes if note not in common]
        if len(group) > 1 and common:
            lines.append(f"    assumed for all {len(group)} configurations:")
            lines += [f"      {_assumption(note)}" for note in common]
        else:
            lines += [f"    assumed: {_assumption(note)}" for note in common]
    return lines


def _assumption(note: str) -> str:
    """`n: assumed 4 (...)` reads `n: 4 (...)` after the line's own `assumed:`."""
    return note.replace(": assumed ", ": ", 1).removeprefix("assumed ")


def _kernel_lines(batch: BatchResult) -> dict[tuple[str, str], int]:
    """(path, kernel) -> 1-based def line, for the kernels of the files checked."""
    out: dict[tuple[str, str], int] = {}
    for f in batch.files:
        for k in f.kernels:
            out.setdefault((f.path, k.name), k.line)
    return out


def latency_lines(batch: BatchResult) -> list[str]:
    """`examples/vector_add.py:16 add_kernel (98432,) float32 H200: ≈3.1 µs H200 est. [BLOCK_SIZE=1024] memory-bound,
    83% of roofline`: one line per kernel, shape and device (estimates: the configuration an autotuner picks); a
    measurement says how close its counted work came to the device's roofs (`46.0 µs on NVIDIA H200 91% of roofline
    (work count estimated)`)."""
    where = _kernel_lines(batch)
    lines = []
    for report in batch.latency:
        for e in report.entries:
            if e.source == "estimate" and not e.chosen and e.error is None:
                continue
            head = f"{_display(report.path)}:{where.get((report.path, e.kernel), 1)} {e.kernel} {tuple(e.shape)} {e.dtype}"
            if e.error or e.us is None:
                lines.append(f"{head}: {e.label}: {e.error or 'no figure'}")
                continue
            parts = [e.label]
            if e.config:
                parts.append(f"[{e.config}]")
            extra = []
            if e.bound and e.fraction_of_roofline is not None:  # an estimate: the model names its bound
                extra.append(f"{e.bound}-bound, {e.fraction_of_roofline:.0%} of roofline")
            elif e.source == "measured" and e.fraction_of_roofline is not None:
                extra.append(f"{e.fraction_of_roofline:.0%} of roofline"
                             + (" (work count estimated)" if e.work_estimated else ""))
            elif e.bound:
                extra.append(f"{e.bound}-bound")
            if e.speedup:
                extra.append(f"{e.speedup:.2f}x the reference")
            if e.change_vs_previous is not None:
                extra.append(f"{e.change_vs_previous:+.0%} vs previous on {e.device}")
            if e.suspicious:
                extra.append(f"suspicious: {e.suspicious}")
            lines.append(f"{head}: " + " ".join(parts) + (f" {', '.join(extra)}" if extra else ""))
        lines += [f"{_display(report.path)}: latency: {err}" for err in report.errors]
    return lines


def _bits(widths: list[int]) -> str:
    return f"{max(widths)}b" if widths else "-"


def resource_line(c: CompiledConfig) -> str:
    """`examples/vector_add.py:16 add_kernel sm_90 [BLOCK_SIZE=1024] 25 regs, 0 B spill, ...`"""
    parts = [f"{c.registers if c.registers is not None else '?'} regs",
             f"{c.spill_bytes or 0} B spill", f"{c.shared_bytes or 0} B smem"]
    if c.occupancy is not None:
        parts.append(f"occ {c.occupancy:.0%}")
    ld, st = _bits(c.load_widths), _bits(c.store_widths)
    parts.append(f"ld/st {ld}" if ld == st else f"ld {ld} st {st}")
    if c.matrix_instructions:
        parts.append("/".join(c.matrix_instructions))
    if c.uses_tma:
        parts.append("TMA")
    return f"{_display(c.path)}:{c.line} {c.kernel} {c.target} [{c.values}] " + ", ".join(parts) + (
        f" ({summary})" if (summary := values_summary(c)) else "")


def values_summary(c: CompiledConfig) -> str:
    """Where a configuration's values came from, for the text report and hovers: `values from recorded launch 1
    (by `pytest tests/` on 2026-12-02; x: fp32[4096]); assumed: x_ptr`. Empty when the code gave every value."""
    by: dict[str, list[str]] = {}
    for name, src in c.values_from.items():
        by.setdefault(src, []).append(name)
    parts = []
    if "recorded" in by:
        parts.append(f"values from {c.config}")
    parts += [f"{src}: {', '.join(by[src])}" for src in ("pin", "spec", "assumed") if src in by]
    return "; ".join(parts)


def _compile_json(c: CompiledConfig) -> dict[str, Any]:
    return {
        "path": c.path, "kernel": c.kernel, "line": c.line, "target": c.target, "config": c.config,
        "constexprs": dict(c.constexprs), "numWarps": c.num_warps, "numStages": c.num_stages,
        "ok": c.ok, "cached": c.cached, "seconds": round(c.seconds, 3),
        "error": None if c.error_kind is None else {"kind": c.error_kind, "message": c.error},
        "resources": None if not c.ok else {
            "registers": c.registers, "spillBytes": c.spill_bytes, "stackBytes": c.stack_bytes,
            "sharedBytes": c.shared_bytes, "occupancy": c.occupancy,
            "matrixInstructions": list(c.matrix_instructions), "loadWidths": list(c.load_widths),
            "storeWidths": list(c.store_widths), "usesTma": c.uses_tma,
        },
        "notes": list(c.notes),
        "valuesFrom": dict(c.values_from),
    }


def _problem_json(path: str, p: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": path,
        "code": p.code,
        "rule": p.rule,
        "severity": _LEVEL[p.severity],
        "message": p.message,
        "line": p.line,
        "column": p.column,
        "endLine": p.end_line,
        "endColumn": p.end_column,
        "kernel": p.kernel,
    }
    if p.fix:
        out["fix"] = {
            "title": p.fix.title,
            "edits": [{"line": e["line"], "column": e["column"], "endLine": e["end_line"],
                       "endColumn": e["end_column"], "text": e["text"]} for e in p.fix.edits],
        }
    if p.related:
        out["related"] = [{"path": r.path, "line": r.line, "column": r.column, "message": r.message}
                          for r in p.related]
    return out


def _difference(x: float | None) -> float | str | None:
    """A case's largest difference: JSON has no infinity, so it is written "inf" ("-inf"); NaN is unknown."""
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _case_json(c: CaseInfo) -> dict[str, Any]:
    return {"shape": list(c.shape), "dtype": c.dtype, "seed": c.seed, "ok": c.ok, "maxAbs": _difference(c.max_abs),
            "maxRel": _difference(c.max_rel), "mismatched": c.mismatched, "total": c.total,
            "firstIndex": None if c.first_index is None else list(c.first_index), "tailOnly": c.tail_only,
            "config": c.config, "note": c.note, "line": c.line}


def _verdict_json(path: str, v: VerdictInfo) -> dict[str, Any]:
    return {"path": path, "kernel": v.kernel, "spec": v.spec, "specLine": v.spec_line,
            "kernelLine": v.kernel_line, "status": v.status, "device": v.device, "message": v.message,
            "line": v.line, "column": v.column, "failedCheck": v.failed_check,
            "seconds": round(v.seconds, 3), "notes": list(v.notes), "cases": [_case_json(c) for c in v.cases]}


def _latency_json(path: str, e: LatencyEntry, kernel_line: int | None) -> dict[str, Any]:
    """A latency entry; a measurement's notes end with how its work was counted (its roofline fraction's
    numerator)."""
    notes = list(e.notes)
    if e.source == "measured" and e.work_note:
        notes.append(e.work_note)
    return {"path": path, "kernel": e.kernel, "line": kernel_line, "spec": e.spec, "shape": list(e.shape),
            "dtype": e.dtype, "source": e.source, "device": e.device, "us": e.us, "label": e.label,
            "config": e.config, "chosen": e.chosen, "bound": e.bound, "fractionOfRoofline": e.fraction_of_roofline,
            "dramBytes": e.dram_bytes, "flops": e.flops,
            "iqrUs": e.iqr_us, "referenceUs": e.reference_us, "speedup": e.speedup,
            "suspicious": e.suspicious, "changeVsPrevious": e.change_vs_previous, "error": e.error,
            "notes": notes}


def json_document(batch: BatchResult) -> dict[str, Any]:
    """The report as one JSON-ready dict (kernel_lsp/schema/check-report.schema.json)."""
    s = batch.stats
    doc = {
        "$schema": SCHEMA_ID,
        "version": __version__,
        "summary": {"files": s.files, "kernelFiles": s.kernel_files, "tritonKernels": s.triton_kernels,
                    "nkiKernels": s.nki_kernels, "launchSites": s.launch_sites, "openDocuments": s.open_documents,
                    "errors": _count(batch, "error"), "warnings": _count(batch, "warning"),
                    "infos": _count(batch, "information")},
        "problems": [_problem_json(f.path, p) for f in batch.files for p in f.findings],
        "missing": list(batch.missing),
        "kernels": [
            {"path": f.path, "name": k.name, "line": k.line, "language": "triton", "decorators": list(k.decorators),
             "params": [{"name": p, "constexpr": p in k.constexprs} for p in k.params],
             "autotuneConfigs": k.autotune_configs}
            for f in batch.files for k in f.kernels if k.language == "triton"
        ] + [
            {"path": f.path, "name": k.name, "line": k.line, "language": "nki", "api": k.api,
             "decorators": list(k.decorators)}
            for f in batch.files for k in f.kernels if k.language == "nki"
        ],
    }
    if batch.compile_targets:
        doc["compile"] = [_compile_json(c) for c in batch.compiled]
        doc["compileStats"] = dict(batch.compile_stats)
    if batch.cuda:
        doc["cuda"] = [{"path": k.path, "name": k.name, "line": _cuda_line(k.line), "target": k.target,
                        "registers": k.registers, "spillBytes": k.spill_bytes, "stackBytes": k.stack_bytes,
                        "sharedBytes": k.shared_bytes} for k in batch.cuda]
    verdicts = [(c.path, v) for c in batch.checks for v in c.verdicts]
    if verdicts:
        doc["checks"] = [_verdict_json(path, v) for path, v in verdicts]
    if batch.latency:
        where = _kernel_lines(batch)
        doc["latency"] = [_latency_json(r.path, e, where.get((r.path, e.kernel))) for r in batch.latency
                          for e in r.entries]
        doc["latencySource"] = batch.latency_source
        doc["latencyErrors"] = [{"path": r.path, "message": m} for r in batch.latency for m in r.errors]
    return doc


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such a figure is unknown (null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def json_report(batch: BatchResult, *, one_line: bool = False) -> str:
    """The JSON report; `one_line` writes it on a single line (`--watch` prints one document per run: NDJSON)."""
    return json.dumps(_finite(json_document(batch)), indent=None if one_line else 2, allow_nan=False,
                      separators=(",", ":") if one_line else None) + "\n"


def _region(line: int, column: int, end_line: int, end_column: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def sarif_report(batch: BatchResult) -> str:
    used = sorted({p.code for f in batch.files for p in f.findings})
    rule_index = {code: i for i, code in enumerate(used)}
    rules = []
    for code in used:
        r = RULES[code]
        rules.append({
            "id": code, "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.explanation or r.summary},
            "help": {"text": f"See docs/rules.md, {code}."},
            "defaultConfiguration": {"level": _RULE_LEVEL[r.severity]},
        })
    results = []
    for f in batch.files:
        uri = _display(f.path).replace(os.sep, "/")
        for p in f.findings:
            entry: dict[str, Any] = {
                "ruleId": p.code, "ruleIndex": rule_index[p.code], "level": _SARIF_LEVEL[p.severity],
                "message": {"text": p.message},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri}, "region": _region(
                    p.line, p.column, p.end_line, p.end_column)}}],
            }
            if p.related:
                entry["relatedLocations"] = [
                    {"id": i, "message": {"text": r.message}, "physicalLocation": {
                        "artifactLocation": {"uri": _display(r.path).replace(os.sep, "/")},
                        "region": _region(r.line, r.column, r.end_line, r.end_column)}}
                    for i, r in enumerate(p.related)
                ]
            if p.fix:
                entry["fixes"] = [{"description": {"text": p.fix.title}, "artifactChanges": [{
                    "artifactLocation": {"uri": uri},
                    "replacements": [{"deletedRegion": _region(e["line"], e["column"], e["end_line"], e["end_column"]),
                                      "insertedContent": {"text": e["text"]}} for e in p.fix.edits]}]}]
            results.append(entry)
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "kernel-lsp", "version": __version__, "rules": rules}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    if batch.missing:  # the run did not check what it was asked to: say so where code scanning reads it
        run["invocations"] = [{"executionSuccessful": False, "toolExecutionNotifications": [
            {"level": "error", "message": {"text": f"{path}: no such file or directory"},
             "locations": [{"physicalLocation": {"artifactLocation": {"uri": path.replace(os.sep, "/")}}}]}
            for path in batch.missing]}]
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    }
    return json.dumps(doc, indent=2) + "\n"


_GITHUB_LEVEL = {"error": "error", "warning": "warning", "information": "notice", "hint": "notice"}


def _github_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def github_report(batch: BatchResult) -> str:
    """GitHub Actions workflow commands: one `::error file=...,line=...::message` annotation per problem (notices
    for information), shown on the pull request's diff; a missing path is an error annotation without a file."""
    lines = []
    for f in batch.files:
        name = _github_property(_display(f.path).replace(os.sep, "/"))
        for p in f.findings:
            where = f"file={name},line={p.line},col={p.column}"
            if p.end_line != p.line:
                where += f",endLine={p.end_line}"
            else:
                where += f",endColumn={p.end_column}"
            title = _github_property(f"{p.code} {p.rule}" if p.rule else p.code)
            fix = f" (quick fix: {p.fix.title})" if p.fix else ""
            lines.append(f"::{_GITHUB_LEVEL[p.severity]} {where},title={title}::{_github_data(p.message + fix)}")
    for path in batch.missing:
        lines.append(f"::error title=kernel-lsp::{_github_data(path + ': no such file or directory')}")
    return "\n".join(lines) + ("\n" if lines else "")
