"""What each kernel compiled to, where the kernel is: an inlay hint on its def line and a hover table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from analyzers.model import Span

from .. import convert
from ..engine.files import is_cuda
from . import api_docs, latency, profile

if TYPE_CHECKING:
    from ..server import KernelLanguageServer


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} B"


def _matrix(res) -> str:
    return "/".join(res.matrix_instructions) if res.matrix_instructions else "-"


# Error kinds that are kernel-lsp's gaps (a timeout, a crash, code it does not run), not the kernel's errors.
_NOT_THE_KERNELS = ("timeout", "crash", "internal", "offline", "cancelled")


def _best(report):
    """The job a compact hint shows: a failed one first (it matters most), else the one using most registers."""
    jobs = report.jobs
    failed = [j for j in jobs if not j.result.ok]
    if failed:
        return failed[0]
    return max(jobs, key=lambda j: j.result.resources.registers or 0) if jobs else None


def hint_label(reports: list) -> str | None:
    parts = []
    for report in reports:
        job = _best(report)
        if job is None:
            continue
        target = report.target.name
        if not job.result.ok:
            err = job.result.error
            mine = err is not None and err.kind in _NOT_THE_KERNELS
            parts.append(f"{target}: {'not compiled' if mine else 'compile failed'}")
            continue
        res = job.result.resources
        text = f"{target}: {res.registers} regs"
        if res.spill_bytes:
            text += f" · {_size(res.spill_bytes)} spill"
        text += f" · {_size(res.shared_bytes)} smem"
        if res.occupancy is not None:
            text += f" · occ {res.occupancy:.0%}"
        if res.matrix_instructions:
            text += f" · {_matrix(res)}"
        if len(report.jobs) > 1:
            text += f" (max of {len(report.jobs)} configs)"
        if job.job.notes:
            text += " (assumed)"  # compiled with types or flags kernel-lsp assumed: the hover lists them
        parts.append(text)
    return " | ".join(parts) or None


def hover_table(kernel: str, reports: list) -> str:
    lines = [f"**{kernel}** compiled ahead of time (no GPU needed)", "",
             "| target | config | regs | spill | smem | warps | stages | occupancy | tensor cores | ld/st bits | TMA |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    for report in reports:
        for job in report.jobs:
            config = job.job.config_label
            if not job.result.ok:
                error = job.result.error
                err = error.message.splitlines()[0] if error else "failed"
                what = "not compiled" if error is not None and error.kind in _NOT_THE_KERNELS else "compile failed"
                lines.append(f"| {report.target.name} | {config} | {what}: {err} |||||||||")
                continue
            r = job.result.resources
            ld = "/".join(map(str, sorted(set(r.load_widths)))) or "-"
            st = "/".join(map(str, sorted(set(r.store_widths)))) or "-"
            occ = f"{r.occupancy:.0%}" if r.occupancy is not None else "?"
            lines.append(f"| {report.target.name} | {config} | {r.registers} | {_size(r.spill_bytes)} | "
                         f"{_size(r.shared_bytes)} | {r.num_warps} | {r.num_stages} | {occ} | {_matrix(r)} | "
                         f"{ld} / {st} | {'yes' if r.uses_tma else 'no'} |")
    cached = sum(j.cached for rep in reports for j in rep.jobs)
    lines += ["", f"{sum(len(r.jobs) for r in reports)} configurations, {cached} from the cache."]
    # What the compile had to assume: the figures hold for launches that match it.
    assumed = list(dict.fromkeys(note for rep in reports for j in rep.jobs for note in j.job.notes))
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


def _reports_by_kernel(ls: "KernelLanguageServer", path: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for report in ls.compiles.reports(path):
        if report.jobs:
            out.setdefault(report.kernel, []).append(report)
    return out


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    def inlay_hints(ls: "KernelLanguageServer", params: types.InlayHintParams):
        path = ls.ensure_current(params.text_document.uri)
        if path and is_cuda(path):
            pos = ls.positions(path)
            return [convert.line_end_hint(pos, line, cuda_hint_label(kernels))
                    for line, (_, kernels) in sorted(_cuda_kernels_by_line(ls, path).items())
                    if params.range.start.line <= line <= params.range.end.line and line < len(pos.lines)]
        entry = ls.state.index.get(path) if path else None
        if entry is None or entry.analysis is None:
            return []
        by_kernel = _reports_by_kernel(ls, path)
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
        path = ls.ensure_current(params.text_document.uri)
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
                reports = _reports_by_kernel(ls, path).get(kernel.name)
                timing = latency.hover_section(ls, path, kernel.name)
                if not reports and not timing:
                    return None
                text = "\n".join(x for x in (hover_table(kernel.name, reports) if reports else None, timing) if x)
                return convert.markdown_hover(text, pos, s)
        found = profile.line_hover(ls, path, at.start_line)  # a profiled line's stall breakdown (features/profile.py)
        if found is not None:
            return found
        text = ls.current_text(path)  # the API's own docs: tl.load, triton.jit, nl.* (features/api_docs.py)
        return await api_docs.hover(ls, path, text, at.start_line, at.start_col,
                                    lambda line, a, b: pos.range(Span(line, a, line, b))) if text else None
