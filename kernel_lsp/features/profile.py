"""Per-line hot spots from Nsight Compute: `kernel-lsp.profileLines` profiles the kernel under the cursor (or every
spec'd kernel of the file) at its bench shapes; each hot line gets an end-of-line inlay hint ("23% · long
scoreboard"), a hover with its stall breakdown, and ncu's advice arrives as KP001 information diagnostics on the
kernel's def line. Shown while the text is the one that was profiled."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from lsprotocol import types

import analyzers.rules.profile  # noqa: F401 - registers KP001
from analyzers.model import Problem, Span
from analyzers.rules import make_problem

from .. import convert
from ..background import background_job
from ..commands import PROFILE_LINES

if TYPE_CHECKING:
    from ..engine.profile import KernelProfile, ProfileReport
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)

HOT_SHARE = 0.02  # lines below 2% of the kernel's samples get no hint
ADVICE_KINDS = ("OPT", "WRN")  # INF results are notes about the report, not advice


class Profiles:
    """The per-line profiles of one server session: each file's last profile with the text that was profiled
    (shown while that text is current), and the profiles in flight (a newer one for a file supersedes the older)."""

    def __init__(self, server: KernelLanguageServer):
        self.ls = server
        self.results: dict[str, tuple[str, ProfileReport]] = {}  # path -> (the text that was profiled, its report)
        self.running: dict[str, threading.Event] = {}  # path -> cancel of the profile in flight

    def report(self, path: str) -> ProfileReport | None:
        return self.ls.while_current(self.results, path)

    async def run(self, path: str, text: str, kernels: tuple[str, ...] | None) -> ProfileReport | None:
        """Profile the file's spec'd kernels (or `kernels`) with Nsight Compute and keep the result for this text;
        None when a newer profile of the file superseded this one. Other kernels' profiles of the same text stay."""
        from ..engine.profile import profile_file

        ls = self.ls
        title = f"profiling {', '.join(kernels) if kernels else 'the file'} with Nsight Compute"
        root = ls.state.roots[0] if ls.state.roots else None
        async with background_job(ls, title, running=self.running, key=path) as job:  # a newer one supersedes
            report = await job.run(profile_file, path, text, kernels, root, cancel=job.cancel,
                                   progress=job.thread_progress())
        if job.cancelled:
            return None
        from ..engine.redact import scrubber

        scrub = scrubber()  # what the profiled code printed may hold a secret in any simple form
        report.errors = [scrub(e) for e in report.errors]
        if report.profiles:
            before = self.results.get(path)
            if before is not None and before[0] == text:  # other kernels' profiles of this text stay
                names = {p.kernel for p in report.profiles}
                report.profiles = [p for p in before[1].profiles if p.kernel not in names] + report.profiles
            self.results[path] = (text, report)
            ls.refresh_hints()
            ls.publish([path])
        if report.errors:
            log.info("profile of %s: %s", path, "; ".join(report.errors))
        return report


def _shown(report: ProfileReport) -> list[KernelProfile]:
    return [p for p in (report.shown(k) for k in dict.fromkeys(p.kernel for p in report.profiles)) if p]


def _label(share: float, stalls) -> str:
    return f"{share:.0%} · {stalls[0][0]}" if stalls else f"{share:.0%} of samples"


def line_hints(ls: KernelLanguageServer, path: str, visible: types.Range) -> list[types.InlayHint]:
    report = ls.profiles.report(path)
    if report is None:
        return []
    pos = ls.positions(path)
    by_line: dict[int, list[tuple[str, str]]] = {}
    shown = _shown(report)
    for p in shown:
        for ln in p.lines:
            if ln.share >= HOT_SHARE and visible.start.line <= ln.line <= visible.end.line and ln.line < len(
                    pos.lines):
                by_line.setdefault(ln.line, []).append((p.kernel, _label(ln.share, ln.stalls)))
    hints = []
    for line, labels in sorted(by_line.items()):
        text = " | ".join(f"{k} {lab}" if len(shown) > 1 else lab for k, lab in labels)
        hints.append(convert.line_end_hint(pos, line, text, "warp-stall samples at this line (Nsight Compute); "
                                                            "hover for the breakdown"))
    return hints


def hover_text(report: ProfileReport, line: int) -> str | None:
    parts = []
    for p in _shown(report):
        found = next((ln for ln in p.lines if ln.line == line and (ln.samples or ln.instructions)), None)
        if found is None:
            continue
        where = f"{p.kernel} {tuple(p.shape)} {p.dtype} on {p.device or 'the GPU'}"
        head = (f"**Warp stalls at this line**: {found.share:.1%} of {p.total_samples:g} samples of {where}, "
                f"{found.instructions} SASS instructions (Nsight Compute)")
        rows = ["", "| stall reason | share of the line |", "| --- | ---: |"]
        rows += [f"| {r} | {s:.0%} |" for r, s in found.stalls]
        if not found.stalls:
            rows = [""]
            if p.kernel_stalls:
                rows += ["Per-line reasons are not available from this Nsight Compute; the kernel's: " + ", ".join(
                    f"{r} {s:.0%}" for r, s in p.kernel_stalls[:5])]
        notes = ["", *(f"_{n}_" for n in p.notes)] if p.notes else []
        parts.append("\n".join([head, *rows, *notes]))
    return "\n\n".join(parts) if parts else None


def line_hover(ls: KernelLanguageServer, path: str, line: int) -> types.Hover | None:
    report = ls.profiles.report(path)
    text = hover_text(report, line) if report else None
    if text is None:
        return None
    return convert.markdown_hover(text)


def advice_message(p: KernelProfile, a) -> str:
    gain = f" (estimated speedup {a.speedup:g}%{' ' + a.speedup_type if a.speedup_type else ''})" if a.speedup else ""
    return f"ncu {a.kind} {a.rule} for {p.kernel} {tuple(p.shape)}{gain}: {a.text}"


def profile_problems(ls: KernelLanguageServer, path: str) -> list[Problem]:
    """ncu's advice as KP001 problems on each profiled kernel's def line."""
    report = ls.profiles.report(path)
    entry = ls.state.index.get(path)
    if report is None or entry is None or entry.analysis is None:
        return []
    defs = {k.name: k.name_span for k in entry.analysis.kernels}
    out = []
    for p in _shown(report):
        span = defs.get(p.kernel)
        if span is None:
            continue
        for a in p.advice:
            if a.kind in ADVICE_KINDS:
                out.append(make_problem("KP001", Span(span.start_line, span.start_col, span.end_line, span.end_col),
                                        advice_message(p, a), kernel=p.kernel))
    return out


def answer(report: ProfileReport) -> dict[str, Any]:
    if not report.profiles:
        return {"error": report.errors[0] if report.errors else "nothing was profiled"}
    lines, advice = [], []
    for p in report.profiles:
        common = {"kernel": p.kernel, "shape": list(p.shape), "dtype": p.dtype}
        lines += [{**common, **ln.to_json()} for ln in p.lines]
        advice += [{**common, **a.to_json()} for a in p.advice]
    return {"lines": lines, "advice": advice, "kernels": [p.to_json() for p in report.profiles],
            "errors": list(report.errors), "seconds": round(report.seconds, 2)}


async def profile_lines(ls: KernelLanguageServer, *args: Any) -> dict[str, Any]:
    from .verification import spec_request

    if ls.state.settings.checks == "off":  # profiling runs the file's launcher, as checks do
        from .verification import checks_off

        return {"error": checks_off(ls, "profiling runs the kernel's launcher")}
    found = spec_request(ls, args, "profileLines", "profiling needs its inputs and bench shapes")
    if isinstance(found, dict):
        return found
    path, text, kernels = found
    from .lifecycle import why_file_may_not_run

    refused = why_file_may_not_run(ls, path)
    if refused is not None:
        return {"error": refused}
    report = await ls.profiles.run(path, text, kernels)
    if report is None:
        return {"error": "the profile was superseded by a newer one"}
    return answer(report)


def register(server: KernelLanguageServer) -> None:
    server.answering_command(PROFILE_LINES, profile_lines)
