"""Latency where the kernel is: an inlay hint on its def line, a code lens with one figure per bench shape, a hover
section with the per-shape table and the kernel's history, and `kernel-lsp.optimizeTiling`, which proposes the
tiling the search found (measured on a GPU, else ranked by the model and labelled so)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os
import threading
from typing import TYPE_CHECKING, Any

from .. import convert
from ..api import ApiError, LatencyEntry, MeasureResult
from ..background import background_job
from ..commands import OPTIMIZE_TILING, position_argument
from .compiling import text_edit

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)


def _numel(shape) -> int:
    return math.prod(shape) if shape else 1


def _shown(entries: list[LatencyEntry]) -> list[LatencyEntry]:
    """The entries a user reads: measured ones, else estimates of the configuration an autotuner would pick on the
    first device; one per (shape, dtype)."""
    ok = [e for e in entries if e.us is not None]
    measured = [e for e in ok if e.source == "measured"]
    pool = measured or [e for e in ok if e.chosen]
    if not measured and pool:
        first = pool[0].device
        pool = [e for e in pool if e.device == first]
    seen, out = set(), []
    for e in sorted(pool, key=lambda e: (_numel(e.shape), e.dtype)):
        if (tuple(e.shape), e.dtype) not in seen:
            seen.add((tuple(e.shape), e.dtype))
            out.append(e)
    return out


def for_kernel(result: MeasureResult | None, kernel: str) -> list[LatencyEntry]:
    return [e for e in result.entries if e.kernel == kernel] if result else []


def _figure(e: LatencyEntry) -> str:
    text = e.label
    if e.fraction_of_roofline is not None and e.bound in ("memory", "compute"):
        text += f" · {e.fraction_of_roofline:.0%} of {'HBM' if e.bound == 'memory' else 'compute'} roofline"
    elif e.source == "measured" and e.fraction_of_roofline is not None:
        text += f" · {e.fraction_of_roofline:.0%} of roofline" + (" (work est.)" if e.work_estimated else "")
    if e.change_vs_previous is not None:
        text += f" · {e.change_vs_previous:+.0%} vs previous"
    if e.suspicious:
        text += " · ⚠ suspicious"
    return text


class Latency:
    """The latency figures of one server session: each file's last timing or estimate (the API's `MeasureResult`)
    with the text it was made from (shown while that text is current), and the runs in flight (a newer run for a file supersedes the older)."""

    def __init__(self, server: "KernelLanguageServer"):
        self.ls = server
        self.results: dict[str, tuple[str, MeasureResult]] = {}  # path -> (the text timed or estimated, result)
        self.running: dict[str, threading.Event] = {}  # path -> cancel of the run in flight

    def report(self, path: str) -> MeasureResult | None:
        """The file's timing or estimate, while its text is still the one that was timed."""
        return self.ls.while_current(self.results, path)

    async def run(self, path: str, text: str, kernels: tuple[str, ...],
                  gpu: bool | None = None) -> MeasureResult | None:
        """Time the kernels at their bench shapes on this machine's GPU, or estimate them for each target's device
        without one, through the API's `Workspace.measure_buffer`. Kernels of the text not asked about keep their
        earlier figures for the same text."""
        from ..engine.gpu import runs_on_gpu

        ls = self.ls
        if gpu is None:
            gpu = runs_on_gpu(ls.state.settings.check_device)
        title = f"{'timing' if gpu else 'estimating'} {', '.join(kernels)}"
        try:
            workspace = ls.api_workspace(path)
            async with background_job(ls, title, running=self.running, key=path,
                                      current=lambda: ls.current_text(path) == text) as job:
                # An estimate's occupancy comes from the registers and shared memory of the file's compiles; the
                # history is kept under a workspace folder only.
                report = await workspace.measure_buffer(path, text, kernels=kernels, gpu=gpu,
                                                        compiled=ls.compiles.configs(path), cancel=job.cancel,
                                                        history=bool(ls.state.roots), confined=ls.in_workspace(path))
        except ApiError as exc:  # nobody awaits this run: the user hears why it did not run
            ls.message(f"latency of {os.path.basename(path)}: {exc}")
            return None
        if not job.still_current():
            return None  # superseded, or the text changed meanwhile: a newer check times it again
        before = self.results.get(path)
        if before is not None and before[0] == text:
            kept = [e for e in before[1].entries if e.kernel not in kernels]
            report = dataclasses.replace(report, entries=kept + report.entries)
        self.results[path] = (text, report)
        if report.errors:
            log.info("latency of %s: %s", path, "; ".join(report.errors))
        for error in report.errors:  # the worker failed (killed, timed out): no hint will say so, a message does
            if error.startswith(("work counting failed:", "timing failed:")):
                ls.message(f"latency of {os.path.basename(path)}: {error}")
        ls.refresh_hints()
        ls.refresh_lenses()
        return report


def hint_label(result: MeasureResult | None, kernel: str) -> str | None:
    """The def line's figure for `kernel` from its file's current result (`Latency.report`)."""
    shown = _shown(for_kernel(result, kernel))
    return _figure(shown[-1]) if shown else None  # the largest bench shape


def lens_title(result: MeasureResult | None, kernel: str) -> str | None:
    """The per-shape code lens for `kernel` from its file's current result (`Latency.report`)."""
    shown = _shown(for_kernel(result, kernel))
    if not shown:
        return None
    parts = [f"{tuple(e.shape)} {e.dtype}: {e.label}" for e in shown]
    flagged = [e for e in shown if e.suspicious]
    title = " · ".join(parts)
    return f"⚠ {flagged[0].suspicious} · {title}" if flagged else title


def hover_section(ls: "KernelLanguageServer", path: str, kernel: str) -> str | None:
    entries = [e for e in for_kernel(ls.latency.report(path), kernel) if e.us is not None or e.error]
    if not entries:
        return None
    measured = any(e.source == "measured" for e in entries)
    lines = ["", f"**Latency** ({'measured' if measured else 'estimated by the latency model, no GPU'})", "",
             "| shape | dtype | device | config | time | bound | roofline | vs reference | vs previous |",
             "| --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: |"]
    for e in sorted(entries, key=lambda e: (_numel(e.shape), e.dtype, e.device, not e.chosen)):
        if e.error:
            lines.append(f"| {tuple(e.shape)} | {e.dtype} | {e.device or '-'} | | {e.error} |||||")
            continue
        pick = " (picked)" if e.chosen and e.source == "estimate" else ""
        spread = f" ±{e.iqr_us / 2:.1f}" if e.iqr_us else ""
        ref = f"{e.speedup:.2f}x" if e.speedup else "-"
        roof = f"{e.fraction_of_roofline:.0%}" if e.fraction_of_roofline is not None else "-"
        if e.source == "measured" and e.work_estimated and e.fraction_of_roofline is not None:
            roof += " (work est.)"
        change = f"{e.change_vs_previous:+.0%}" if e.change_vs_previous is not None else "-"
        lines.append(f"| {tuple(e.shape)} | {e.dtype} | {e.device} | {e.config or '-'}{pick} | {e.label}{spread} | "
                     f"{e.bound or '-'} | {roof} | {ref} | {change} |")
    notes = dict.fromkeys(e.work_note for e in entries if e.source == "measured" and e.work_note)
    if notes:  # how each measurement's work was counted, or why it has no roofline fraction
        lines += ["", *(f"Roofline: {note}." for note in notes)]
    flagged = [e for e in entries if e.suspicious]
    if flagged:
        lines += ["", f"⚠ {flagged[0].suspicious}: a result faster than the hardware allows usually means the kernel "
                  "skipped work or the timing missed it."]
    if ls.state.roots:
        from ..engine.latency import history_name, load_history

        # The same kind of figure on the same device only: measurements with measurements, estimates with
        # estimates, one line per device (an H200 estimate after an A100 one is not a speedup).
        largest = max(entries, key=lambda e: (_numel(e.shape), e.dtype))
        devices = list(dict.fromkeys(e.device for e in entries if e.device and e.shape == largest.shape
                                     and e.dtype == largest.dtype))
        kept = [h for h in load_history(ls.workspace_root(path), history_name(path, kernel))
                if (h.get("source") == "estimate") != measured and h.get("shape") == list(largest.shape)
                and h.get("dtype") == largest.dtype and h.get("us")]
        what = "measured" if measured else "estimated"
        for device in devices:
            history = [h for h in kept if h.get("device") == device][-8:]
            if len(history) > 1:
                lines += ["", f"History on {device} at {tuple(largest.shape)} {largest.dtype} ({what}, this "
                          "workspace, newest last): " + " → ".join(f"{h['us']:.1f} µs" for h in history)]
    return "\n".join(lines)


async def optimize_tiling(ls: "KernelLanguageServer", *args: Any) -> dict[str, Any]:
    from analyzers.specs import specced_kernels

    uri, line = position_argument(args)
    path = ls.ensure_current(uri) if uri else None
    doc = ls.workspace.text_documents.get(uri) if uri else None
    if not path or doc is None or line is None:
        return {"error": "optimizeTiling needs an open document and a line inside a kernel"}
    if ls.state.settings.checks == "off":  # the search runs the launcher to count, time and verify
        from .verification import checks_off

        return {"error": checks_off(ls, "optimizing runs the kernel's launcher")}
    kernel = ls.kernel_at(path, line)
    if kernel is None:
        return {"error": "no Triton kernel at this line"}
    text, version = doc.source, doc.version
    if kernel.name not in specced_kernels(text):
        return {"error": f"{kernel.name} has no correctness spec: the search verifies its winner and times the "
                         "spec's bench shapes (write one with the code action \"Write a correctness spec\")"}
    settings = ls.state.settings

    def unchanged() -> bool:
        doc_now = ls.workspace.text_documents.get(uri)
        return doc_now is not None and doc_now.version == version

    loop = asyncio.get_running_loop()
    try:
        workspace = ls.api_workspace(path)
        async with background_job(ls, f"optimizing the tiling of {kernel.name}", current=unchanged) as job:
            # With executor: ray the candidates are timed on the cluster's GPUs; unreachable: said, timed here.
            found = await workspace.tune_buffer(
                path, text, kernel=kernel.name, target=settings.targets[0], progress=job.thread_progress(),
                cancel=job.cancel, say=lambda line: loop.call_soon_threadsafe(ls.message, f"optimize tiling: {line}"),
                cache=bool(ls.state.roots), confined=ls.in_workspace(path))
    except ApiError as exc:
        return {"error": str(exc)}
    rows = [["configuration", "estimated", "measured", "note"]] + [
        [t.config, f"{t.estimated_us:.1f} µs" if t.estimated_us else "-",
         f"{t.measured_us:.1f} µs" if t.measured_us else "-", t.note or ""] for t in found.table]
    what = ("measured on the GPU" if found.source == "measured"
            else f"ranked by the latency model for {found.device} "
                 f"({found.not_measured_because or 'no GPU'}: not measured)")
    if not found.edits:
        reason = "; ".join(found.errors) or f"the current configuration ({found.current}) is already the best " \
            f"{what}"
        return {"error": f"no tiling change proposed for {kernel.name}: {reason}", "table": rows}
    if found.verified is False:
        return {"error": f"the best configuration ({found.winner}) fails its check: {found.verify_message}",
                "table": rows}
    if not job.still_current():
        return {"error": "the document changed during the search: run it again"}
    speed = f"{found.current_us:.1f} -> {found.winner_us:.1f} µs ({found.winner_us / found.current_us - 1:+.0%})" \
        if found.current_us and found.winner_us else "no timing"
    checked = found.verify_message or "not verified"
    summary = (f"{kernel.name}: {found.current} -> {found.winner}; {speed} on {found.device}, {what}; "
               f"{checked}; {len(found.table)} of {found.space_size} configurations tried "
               f"({found.measured_fraction:.0%} measured)")
    pos = convert.Positions(doc.lines, doc.position_codec)
    edits = [text_edit(e) for e in found.edits]
    answer = convert.proposal(uri, version, pos, edits, title=f"Optimize tiling of {kernel.name}", summary=summary,
                              table=rows, kernel=kernel.name, source=found.source, verified=bool(found.verified))
    return ls.offer(answer, args[0] if args else None)


def register(server: "KernelLanguageServer") -> None:
    server.answering_command(OPTIMIZE_TILING, optimize_tiling)
