"""What each kernel compiled to, where the kernel is: an inlay hint on its def line and a hover table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lsprotocol import types

from analyzers.model import Span

from .. import convert
from ..api import CompiledConfig
from ..engine.files import is_cuda
from . import api_docs, latency, profile

if TYPE_CHECKING:
    from ..server import KernelLanguageServer


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} B"


def _matrix(config: CompiledConfig) -> str:
    return "/".join(config.matrix_instructions) if config.matrix_instructions else "-"


# Error kinds that are kernel-lsp's gaps (a timeout, a crash, code it does not run), not the kernel's errors.
_NOT_THE_KERNELS = ("timeout", "crash", "internal", "offline", "cancelled")


def _by_target(configs: Sequence[CompiledConfig]) -> dict[str, list[CompiledConfig]]:
    """One kernel's configurations per target, in the order they were compiled."""
    out: dict[str, list[CompiledConfig]] = {}
    for c in configs:
        out.setdefault(c.target, []).append(c)
    return out


def _best(configs: list[CompiledConfig]) -> CompiledConfig:
    """The configuration a compact hint shows: a failed one first (it matters most), else the one using most
    registers."""
    failed = [c for c in configs if not c.ok]
    if failed:
        return failed[0]
    return max(configs, key=lambda c: c.registers or 0)


def hint_label(configs: Sequence[CompiledConfig]) -> str | None:
    """One kernel's compiles, per target, for the inlay hint on its def line."""
    parts = []
    for target, compiled in _by_target(configs).items():
        best = _best(compiled)
        if not best.ok:
            mine = best.error is not None and best.error_kind in _NOT_THE_KERNELS
            parts.append(f"{target}: {'not compiled' if mine else 'compile failed'}")
            continue
        text = f"{target}: {best.registers} regs"
        if best.spill_bytes:
            text += f" · {_size(best.spill_bytes)} spill"
        text += f" · {_size(best.shared_bytes)} smem"
        if best.occupancy is not None:
            text += f" · occ {best.occupancy:.0%}"
        if best.matrix_instructions:
            text += f" · {_matrix(best)}"
        if len(compiled) > 1:
            text += f" (max of {len(compiled)} configs)"
        if any(" are stale: " not in n for n in best.notes):
            text += " (assumed)"  # compiled with types or flags kernel-lsp assumed: the hover lists them
        elif "recorded" in best.values_from.values():
            text += " (recorded)"  # compiled with the values of a recorded launch: the hover names the run
        parts.append(text)
    return " | ".join(parts) or None


def hover_table(kernel: str, configs: Sequence[CompiledConfig]) -> str:
    lines = [f"**{kernel}** compiled ahead of time (no GPU needed)", "",
             "| target | config | regs | spill | smem | warps | stages | occupancy | tensor cores | ld/st bits | TMA |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    for c in configs:
        if not c.ok:
            err = c.error.splitlines()[0] if c.error is not None else "failed"
            what = "not compiled" if c.error is not None and c.error_kind in _NOT_THE_KERNELS else "compile failed"
            lines.append(f"| {c.target} | {c.config} | {what}: {err} |||||||||")
            continue
        ld = "/".join(map(str, sorted(set(c.load_widths)))) or "-"
        st = "/".join(map(str, sorted(set(c.store_widths)))) or "-"
        occ = f"{c.occupancy:.0%}" if c.occupancy is not None else "?"
        lines.append(f"| {c.target} | {c.config} | {c.registers} | {_size(c.spill_bytes)} | "
                     f"{_size(c.shared_bytes)} | {c.num_warps} | {c.num_stages} | {occ} | {_matrix(c)} | "
                     f"{ld} / {st} | {'yes' if c.uses_tma else 'no'} |")
    cached = sum(c.cached for c in configs)
    lines += ["", f"{len(configs)} configurations, {cached} from the cache."]
    sources = list(dict.fromkeys(f"- {c.config}: " + "; ".join(
        f"{src} {', '.join(n for n, s in c.values_from.items() if s == src)}"
        for src in dict.fromkeys(c.values_from.values())) for c in configs if c.values_from))
    if sources:
        lines += ["", "Where the values came from:"] + sources
    stale = list(dict.fromkeys(note for c in configs for note in c.notes if " are stale: " in note))
    if stale:
        lines += ["", *stale]
    # What the compile had to assume: the figures hold for launches that match it.
    assumed = list(dict.fromkeys(note for c in configs for note in c.notes if " are stale: " not in note))
    if assumed:
        lines += ["", "Compiled assuming:"] + [f"- {note}" for note in assumed]
        lines += ["", "Pin types and values with annotations (`x_ptr: \"*bf16\"`) or the `pins` setting."]
    return "\n".join(lines)


def cuda_hint_label(kernels: list) -> str:
    """One .cu kernel's resources per CUDA target, from ptxas' report."""
    parts = []
    for k in kernels:
        text = f"{k.target}: {k.registers if k.registers is not None else '?'} regs"
        if k.spill_bytes:
            text += f" · {_size(k.spill_bytes)} spill"
        parts.append(text + f" · {_size(k.shared_bytes)} smem")
    return " | ".join(parts)


def cuda_hover_table(name: str, kernels: list) -> str:
    lines = [f"**{name}** compiled with nvcc (ptxas report)", "",
             "| target | registers | stack | spills | shared |", "| --- | ---: | ---: | ---: | ---: |"]
    for k in kernels:
        lines.append(f"| {k.target} | {k.registers if k.registers is not None else '?'} | {_size(k.stack_bytes)} | "
                     f"{_size(k.spill_bytes)} | {_size(k.shared_bytes)} |")
    return "\n".join(lines)


def _cuda_kernels_by_line(ls: "KernelLanguageServer", path: str) -> dict[int, tuple[str, list]]:
    report = ls.cuda.report(path)
    out: dict[int, tuple[str, list]] = {}
    for k in report.kernels if report else ():
        if k.line >= 0:
            out.setdefault(k.line, (k.name, []))[1].append(k)
    return out


def _configs_by_kernel(ls: "KernelLanguageServer", path: str) -> dict[str, list[CompiledConfig]]:
    out: dict[str, list[CompiledConfig]] = {}
    for config in ls.compiles.configs(path):
        out.setdefault(config.kernel, []).append(config)
    return out


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def inlay_hints(ls: "KernelLanguageServer", params: types.InlayHintParams):
        path = await ls.bring_current(params.text_document.uri)
        if path and is_cuda(path):
            pos = ls.positions(path)
            return [convert.line_end_hint(pos, line, cuda_hint_label(kernels))
                    for line, (_, kernels) in sorted(_cuda_kernels_by_line(ls, path).items())
                    if params.range.start.line <= line <= params.range.end.line and line < len(pos.lines)]
        entry = ls.state.index.get(path) if path else None
        if entry is None or entry.analysis is None:
            return []
        by_kernel = _configs_by_kernel(ls, path)
        timings = ls.latency.report(path)
        pos = ls.positions(path)
        hints = []
        for kernel in [*entry.analysis.kernels, *entry.analysis.nki_kernels]:  # NKI: the Trainium2 estimate
            line = kernel.name_span.start_line
            if not params.range.start.line <= line <= params.range.end.line:
                continue
            timing = latency.hint_label(timings, kernel.name)
            label = " | ".join(x for x in (timing, hint_label(by_kernel.get(kernel.name, []))) if x)
            if not label:
                continue
            hints.append(convert.line_end_hint(pos, line, label,
                                               f"{kernel.name}: hover the name for every configuration and shape"))
        return hints + profile.line_hints(ls, path, params.range)  # per-line hot spots (features/profile.py)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: "KernelLanguageServer", params: types.HoverParams):
        path = await ls.bring_current(params.text_document.uri)
        if path and is_cuda(path):
            found = _cuda_kernels_by_line(ls, path).get(params.position.line)
            if found is None:
                return None
            return convert.markdown_hover(cuda_hover_table(*found))
        entry = ls.state.index.get(path) if path else None
        if entry is None or entry.analysis is None:
            return None
        pos = ls.positions(path)
        at = pos.span(types.Range(params.position, params.position))
        ls.note_focus(path, at.start_line)
        for kernel in entry.analysis.kernels:
            s = kernel.name_span
            if s.start_line == at.start_line and s.start_col <= at.start_col <= s.end_col:
                configs = _configs_by_kernel(ls, path).get(kernel.name)
                timing = latency.hover_section(ls, path, kernel.name)
                if not configs and not timing:
                    return None
                text = "\n".join(x for x in (hover_table(kernel.name, configs) if configs else None, timing) if x)
                return convert.markdown_hover(text, pos, s)
        found = profile.line_hover(ls, path, at.start_line)  # a profiled line's stall breakdown (features/profile.py)
        if found is not None:
            return found
        text = ls.current_text(path)  # the API's own docs: tl.load, triton.jit, nl.* (features/api_docs.py)
        return await api_docs.hover(ls, path, text, at.start_line, at.start_col,
                                    lambda line, a, b: pos.range(Span(line, a, line, b))) if text else None
