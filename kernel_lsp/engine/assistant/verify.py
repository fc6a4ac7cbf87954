"""Verification of one candidate file: spec untouched, compiled, checked against the spec, timed or estimated.

The same pipeline the user's own code goes through (engine.verify, the compile service, engine.latency); a
candidate that fails anywhere comes back with the reason in words the model is told.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from analyzers import analyze_source
from analyzers.model import Problem, Severity
from analyzers.roofline import format_us
from analyzers.specs import specced_kernels

from . import integrity
from .code import spec_texts
from .session import status_of

FASTER_BY = 0.01  # an optimization must beat the kernel it replaces by at least this fraction


@dataclass
class Timing:
    us: float
    label: str  # "≈49 µs H200 est." | "41.2 µs on NVIDIA H200"
    measured: bool
    device: str
    key: tuple  # (shape, dtype, device): only equal keys are compared


@dataclass
class CheckOutcome:
    """What the assistant reads of one kernel's verdict. `cases` carry ok, shape, dtype, mismatched, total, max_abs,
    first_index, note and tail_only (the engine's `CaseResult` and the API's `CaseInfo` both do)."""

    ok: bool
    status: str  # "correct", "mismatch", "rejected", ...
    message: str
    line: int | None  # 0-based: where the verdict points
    cases: Sequence[Any]
    notes: list[str]
    on_gpu: bool


# (path, text) -> the compile problems (KC001-KC007) of every kernel of that text, for the configured targets
CompileFn = Callable[[str, str], Awaitable[list[Problem]]]
# (path, text, kernel) -> (its verdict, or None with why the check did not run)
CheckFn = Callable[[str, str, str], Awaitable[tuple[CheckOutcome | None, str]]]
# (path, text, kernel, on the GPU) -> (the kernel's latency entries at its specs' bench shapes, the errors). An entry
# carries kernel, shape, dtype, device, source, us, label, chosen and error, and `to_dict()` (the API's
# `LatencyEntry`) or `to_json()` (the engine's `KernelLatency`).
LatencyFn = Callable[[str, str, str, bool], Awaitable[tuple[list[Any], list[str]]]]


@dataclass
class Environment:
    """Where candidates are verified. `check` and `latency`: the front end's own checks and timing (the language
    server passes the Python API's, so a candidate gets the verdict and figures the editor shows for the same
    text); None: the engine's checker and latency engine, run here."""

    root: str
    targets: tuple[str, ...] = ("sm_90",)
    check_device: str = "auto"
    check_timeout_s: float = 60.0
    compile: CompileFn | None = None  # None: compiling is off (or triton is missing)
    gpu: bool = False  # checks and timing run on a GPU: latency is measured, not estimated
    cancel: threading.Event = field(default_factory=threading.Event)
    check: CheckFn | None = None
    latency: LatencyFn | None = None


@dataclass
class Verified:
    """What verification established about one candidate. Its label comes from `session.status_of` over these
    facts, and nowhere else: the table, the summary and the count cannot disagree."""

    ok: bool  # passed every gate of its action: it may be proposed
    failure: str  # the gate that turned it down ("does not compile", "mismatch", "refused", ...); "" when ok
    reason: str  # the feedback for the model, or what was verified
    check: str | None = None  # the verdict's message ("correct on 13 cases (CPU interpreter)")
    ran: bool = False  # a correctness check (or the NKI simulator) ran it and found it correct
    faster: bool | None = None  # Optimize: shown faster by timing both at one shape and device; None: not asked
    speed: str = ""  # the speed evidence ("≈106 µs -> ≈53 µs H200 est. (-50%)"), or why there is none
    on_gpu: bool = False
    compiled: str | None = None  # "compiles for sm_90", or why it was not compiled
    timing: Timing | None = None
    notes: list[str] = field(default_factory=list)
    path: str | None = None  # the new file the candidate's text is for (a port's own file); None: the user's

    @property
    def status(self) -> str:
        return status_of(self.ok, self.failure, self.ran, self.faster)


def refused(reason: str) -> Verified:
    return Verified(False, "refused", reason)


def has_spec(text: str, kernel: str) -> bool:
    return kernel in specced_kernels(text)


async def _cancelling(env: Environment, work: Awaitable):
    """Await work that runs a process (a front end's check or timing, or a thread); a cancelled action sets the
    cancel event, which stops that process."""
    try:
        return await work
    except asyncio.CancelledError:
        env.cancel.set()
        raise


async def in_thread(env: Environment, fn, *args, **kwargs):
    """Run blocking work (a checking process) in a thread; a cancelled action kills that process."""
    return await _cancelling(env, asyncio.to_thread(fn, *args, **kwargs))


async def compile_errors(env: Environment, path: str, text: str) -> tuple[list[Problem], str]:
    """(the compile errors, what the compile established)."""
    if env.compile is None:
        return [], "not compiled (the compile setting is off or triton is missing)"
    problems = await env.compile(path, text)
    errors = [p for p in problems if p.severity == Severity.ERROR]
    return errors, f"compiles for {', '.join(env.targets)}"


def describe_compile_errors(errors: list[Problem], text: str) -> str:
    lines = text.splitlines()
    out = []
    for p in errors[:5]:
        line = p.span.start_line
        source = lines[line].strip() if 0 <= line < len(lines) else ""
        out.append(f"{p.code} at line {line + 1} (`{source}`): {p.message}")
    return "does not compile: " + "; ".join(out)


async def run_check(env: Environment, path: str, text: str, kernel: str) -> tuple[CheckOutcome | None, str]:
    """(the verdict for `kernel`, or None with the report's errors)."""
    if env.check is not None:
        return await _cancelling(env, env.check(path, text, kernel))
    from ..verify import CheckRequest, run_checks

    request = CheckRequest(path, text, (kernel,), device=env.check_device, timeout_s=env.check_timeout_s,
                           root=env.root)
    report = await in_thread(env, run_checks, request, env.cancel)
    v = next((v for v in report.verdicts if v.kernel == kernel), None)
    errors = "; ".join(f"line {line + 1}: {m}" if line is not None else m for line, m in report.errors)
    if v is None:
        return None, errors
    return CheckOutcome(v.ok, v.status, v.message, v.line, v.cases, list(v.notes), v.on_gpu), errors


def describe_verdict(v: CheckOutcome, text: str) -> str:
    """What the model is told about a failed check: the message, where, the notes and the failing cases."""
    lines = text.splitlines()
    out = [f"{v.status}: {v.message}"]
    if v.line is not None and 0 <= v.line < len(lines):
        out.append(f"at line {v.line + 1}: `{lines[v.line].strip()}`")
    bad = [c for c in v.cases if not c.ok][:3]
    for c in bad:
        out.append(f"case shape={c.shape} dtype={c.dtype}: {c.mismatched}/{c.total} elements differ, max abs "
                   f"{c.max_abs}, first at {c.first_index}" + (f" ({c.note})" if c.note else "")
                   + (" (all past the last full block: a mask?)" if c.tail_only else ""))
    if v.notes:
        out.append("notes: " + "; ".join(v.notes))
    if v.status == "rejected":
        out.append("The checks reject any answer that does not come from the kernel itself (a PyTorch fallback, "
                   "a caught exception, a skipped launch, a cached result): make the kernel compute it.")
    return "\n".join(out)


async def latency_report(env: Environment, path: str, text: str, kernel: str, on_gpu: bool):
    """The latency engine's report on the kernel: measured on the GPU, else estimated for the targets."""
    from ..latency import estimate_file, measure_file

    if on_gpu:
        return await in_thread(env, measure_file, path, text, [kernel], env.root, cancel=env.cancel, history=False)
    return await in_thread(env, estimate_file, path, text, list(env.targets), [kernel], env.root, cancel=env.cancel)


async def latency_entries(env: Environment, path: str, text: str, kernel: str,
                          on_gpu: bool) -> tuple[list[Any], list[str]]:
    """(the kernel's latency entries, the errors): measured on the GPU, else estimated for the targets."""
    if env.latency is not None:
        return await _cancelling(env, env.latency(path, text, kernel, on_gpu))
    report = await latency_report(env, path, text, kernel, on_gpu)
    return report.for_kernel(kernel), list(report.errors)


async def timing(env: Environment, path: str, text: str, kernel: str, on_gpu: bool) -> tuple[Timing | None, str]:
    """The kernel's latency at its spec's first bench shape: measured on the GPU, else estimated; or why not."""
    found, errors = await latency_entries(env, path, text, kernel, on_gpu)
    entries = [e for e in found if e.us is not None and e.chosen]
    if not entries:
        why = "; ".join(errors) or next((e.error for e in found if e.error), None)
        return None, why or "no latency figure"
    e = entries[0]
    return Timing(e.us, e.label, e.source == "measured", e.device, (tuple(e.shape), e.dtype, e.device)), ""


def compare(before: Timing | None, after: Timing | None) -> str:
    """"≈98 µs -> ≈49 µs H200 est. (-50%)" or "41.2 µs -> 30.1 µs on NVIDIA H200 (-27%)"."""
    if after is None:
        return ""
    if before is None or before.key != after.key or before.us <= 0:
        return after.label
    change = (after.us / before.us - 1.0) * 100
    if after.measured:
        return f"{format_us(before.us)} -> {format_us(after.us)} on {after.device} ({change:+.0f}%)"
    return f"≈{format_us(before.us)} -> ≈{format_us(after.us)} {after.device} est. ({change:+.0f}%)"


def spec_untouched(old: str, new: str) -> bool:
    """The specs' text byte for byte, and every module-level definition they read (a reference or inputs function
    defined elsewhere, a helper of theirs, a tolerance constant) statement for statement."""
    return spec_texts(old) == spec_texts(new) and not integrity.spec_changes(old, new)


def speed_evidence(base: Timing | None, base_why: str, found: Timing | None, found_why: str) -> tuple[bool, str]:
    """(shown faster, the evidence or why there is none): faster only by a timing of both kernels, at the same
    shape and dtype on the same device (measured, or both estimated by the same model)."""
    if found is None:
        return False, f"timing failed: {found_why or 'no latency figure'}"
    if base is None:
        return False, f"the current kernel could not be timed: {base_why or 'no latency figure'}"
    if base.key != found.key:
        return False, f"timed at another shape or device than the current kernel ({base.label} vs {found.label})"
    return found.us <= base.us * (1 - FASTER_BY), compare(base, found)


def kernel_defined(text: str, kernel: str) -> bool:
    return any(k.name == kernel for k in analyze_source(text).kernels)


def nki_problems(text: str, names: list[str]) -> tuple[list, list[Problem]]:
    """(the new NKI kernels among `names`, the NK problems inside them)."""
    analysis = analyze_source(text)
    kernels = [k for k in analysis.nki_kernels if k.name in names]
    inside = [p for p in analysis.problems if p.code.startswith("NK")
              and any(k.span.start_line <= p.span.start_line <= k.span.end_line for k in kernels)]
    return kernels, inside
