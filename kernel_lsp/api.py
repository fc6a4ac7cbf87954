"""The stable Python API: analyze, compile, check, measure, tune, compare and propose_edit over one workspace.

    from kernel_lsp.api import Workspace
    with Workspace("path/to/project") as ws:
        found = ws.analyze(path="kernels/add.py")              # static findings, nothing runs
        built = ws.compile(path="kernels/add.py", targets=["sm_90"])
        verdict = ws.check(path="kernels/add.py")              # runs the file's code: needs trust

Every operation returns a frozen dataclass of plain values (`to_dict()` gives JSON-ready data); lines and columns
are 1-based. The MCP server (`kernel-lsp mcp`) exposes the same operations with these types as its output
schemas. The API follows semantic versioning (`API_VERSION`, docs/api.md): fields are only added within a major
version.

Safety, as in the editor (docs/security.md): static analysis and the offline compile run none of the workspace's
code; check, measure, tune, compare and the verification of a proposed edit run it, in child processes with time
and memory limits, only when the folder is trusted (`kernel-lsp trust`) or the caller passes `allow_run=True`.
Paths must lie inside the workspace. `propose_edit` never writes the file it is given: it writes a proposal under
`<root>/.kernel-lsp/proposals/` for a person to accept. Values of environment variables that look like secrets
are blanked out of every result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from analyzers.model import Problem, Severity

from .settings import Settings

API_VERSION = "2.5.0"

__all__ = [
    "API_VERSION", "AnalyzeResult", "ApiError", "BatchResult", "BatchStats", "CandidateResult", "CaseInfo", "CheckErrorInfo",
    "CheckResult", "CompareResult", "CompileResult", "CompiledConfig", "CudaKernelInfo", "Finding", "FixInfo", "HistoryPoint",
    "CompiledIR", "KernelInfo", "LatencyEntry", "MeasureResult", "NotTrustedError", "ProposalResult", "RelatedInfo",
    "TuneResult",
    "TuneRow", "UncompiledKernel", "VerdictInfo", "Workspace",
]


class ApiError(ValueError):
    """Bad input (a missing file, a source too large, an unknown kernel or target): the message says what."""


class NotTrustedError(ApiError):
    """The operation runs the workspace's code and the workspace is not trusted."""


def _to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _to_dict(v) for k, v in obj.items()}
    return obj


class _Result:
    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)


# --- result types ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixInfo(_Result):
    title: str  # what the fix does
    edits: list[dict[str, Any]]  # {"line", "column", "end_line", "end_column", "text"}, 1-based


@dataclass(frozen=True)
class RelatedInfo(_Result):
    """Another place a finding concerns (the launch a kernel problem comes from, a helper's call site)."""

    path: str  # the file
    line: int  # 1-based line
    column: int  # 1-based column
    end_line: int  # 1-based end line
    end_column: int  # 1-based end column
    message: str  # what this place has to do with the finding


@dataclass(frozen=True)
class Finding(_Result):
    code: str  # the rule's code (TR002, NK001, ...; docs/rules.md)
    severity: str  # "error" | "warning" | "information" | "hint"
    message: str
    line: int  # 1-based line where it starts
    column: int  # 1-based column where it starts
    end_line: int  # 1-based line where it ends
    end_column: int  # 1-based column where it ends
    kernel: str | None = None  # the kernel it concerns, if any
    rule: str | None = None  # the rule's name
    fix: FixInfo | None = None  # an edit that fixes it, where one exists
    related: list[RelatedInfo] = field(default_factory=list)  # other places it concerns


@dataclass(frozen=True)
class KernelInfo(_Result):
    name: str  # the kernel's function name
    line: int  # 1-based line of its def
    language: str  # "triton" | "nki"
    params: list[str] = field(default_factory=list)
    autotune_configs: int = 0  # its autotune configurations, as written
    constexprs: list[str] = field(default_factory=list)  # the parameters that are tl.constexpr (Triton)
    decorators: list[str] = field(default_factory=list)  # "jit", "autotune", "heuristics"; NKI: "jit", ...
    api: str | None = None  # NKI: "legacy" (neuronxcc.nki) or "current" (nki)


@dataclass(frozen=True)
class AnalyzeResult(_Result):
    path: str  # the file analysed
    kernels: list[KernelInfo]  # the file's kernels
    findings: list[Finding]  # the static findings, by line


@dataclass(frozen=True)
class CompiledConfig(_Result):
    kernel: str  # the kernel
    target: str  # the compile target (sm_90, gfx942, ...)
    config: str  # how the configuration is known: "default", "autotune config 1", "launch at line 40"
    constexprs: dict[str, Any]
    num_warps: int  # warps per program
    num_stages: int  # software pipelining stages
    ok: bool  # whether it compiled
    cached: bool  # answered from the compile cache
    seconds: float  # compile time
    error: str | None = None  # the compile error, when not ok
    error_line: int | None = None  # 1-based line of the error
    error_column: int | None = None  # 1-based column of the error
    registers: int | None = None  # registers per thread
    spill_bytes: int | None = None  # bytes spilled to local memory per thread
    shared_bytes: int | None = None  # shared memory per program, bytes
    occupancy: float | None = None  # resident warps over the most the SM holds (0..1)
    # whether the kernel uses the target's matrix instructions (tensor cores, MFMA)
    matrix_instructions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was assumed rather than known
    ir: dict[str, str] = field(default_factory=dict)  # stage -> text, only the stages asked for
    path: str = ""  # the kernel's file
    line: int | None = None  # the kernel's def line
    values: str = ""  # its constexpr values as `BLOCK_SIZE=1024, num_warps=4` (`config` when it has none)
    error_kind: str | None = None  # "compilation", "ptxas", "timeout", "crash", "internal", "offline"
    stack_bytes: int | None = None
    load_widths: list[int] = field(default_factory=list)  # bits per global load instruction seen
    store_widths: list[int] = field(default_factory=list)
    uses_tma: bool = False  # whether it uses the Tensor Memory Accelerator
    # parameter or option -> where its value came from: "recorded" (a launch recorded by `kernel-lsp record`,
    # named with its command and date in `config`), "pin", "spec", "code", "autotune", "default", "assumed"
    values_from: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CompileResult(_Result):
    path: str  # the file compiled
    configs: list[CompiledConfig]  # one per kernel, target and configuration
    findings: list[Finding]  # compile problems (KC codes) at the user's lines
    not_compiled: list[str] = field(default_factory=list)  # kernel: why it was not compiled
    uncompiled: list[UncompiledKernel] = field(default_factory=list)  # the same kernels, each with its target


@dataclass(frozen=True)
class CompiledIR(_Result):
    """One compiled configuration's IR at one stage, as Show IR opens it (`Workspace.ir_buffer`)."""

    path: str
    kernel: str
    target: str
    config: str  # the CompiledConfig's `config`
    stage: str  # "ttir", "ttgir", "llir", "ptx", "sass", "amdgcn"
    text: str | None  # its locations naming the user's file and lines; None: the stage is not available
    lines: dict[int, list[int]]  # IR line -> the lines of the user's file it was compiled from
    available: list[str]  # the configuration's stages ("sass" on NVIDIA targets, disassembled when asked)


@dataclass(frozen=True)
class CaseInfo(_Result):
    shape: list[int]  # the case's shape
    dtype: str  # the case's dtype
    ok: bool  # whether every output matched the reference
    max_abs: float | None = None  # largest absolute error
    max_rel: float | None = None  # largest relative error
    mismatched: int = 0  # elements outside the tolerance
    total: int = 0  # elements compared
    config: str | None = None  # the autotune config that ran
    note: str | None = None  # what else to know of this case
    seed: int | None = None  # the random seed of its inputs
    first_index: list[int] | None = None  # the first mismatching element
    tail_only: bool | None = None  # every mismatch past the last full block (None: no block size applies)
    line: int | None = None  # the store that wrote the first wrong element (interpreter)


@dataclass(frozen=True)
class VerdictInfo(_Result):
    kernel: str  # the kernel checked
    spec: str  # the spec's inputs function
    status: str  # "correct", "mismatch", "rejected", "out-of-bounds", "crashed", "timeout", ...
    ok: bool
    device: str  # where it ran: "interpreter" or the GPU
    message: str
    line: int | None = None  # 1-based line the verdict's problem belongs to
    failed_check: str | None = None  # which honesty check decided a rejection ("no-launch", "provenance", ...)
    cases: list[CaseInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # seeds used, dtype handling, configs, what was assumed
    column: int | None = None  # 1-based column, where known
    spec_line: int | None = None  # the spec's inputs function
    kernel_line: int | None = None  # the kernel's def line
    seconds: float = 0.0  # how long the check took
    on_gpu: bool = False  # ran on a GPU: not on Triton's interpreter, nor in the NKI model (which is never timed here)


@dataclass(frozen=True)
class CheckErrorInfo(_Result):
    """A problem that kept specs from running, with the line it belongs to where one does."""

    message: str  # what kept the specs from running
    line: int | None = None  # 1-based line it belongs to, if known


@dataclass(frozen=True)
class CheckResult(_Result):
    path: str  # the file checked
    ok: bool  # every spec correct and no error
    verdicts: list[VerdictInfo]
    errors: list[str]  # problems that kept specs from running (import errors, no spec found)
    error_details: list[CheckErrorInfo] = field(default_factory=list)  # the same errors, each with its line


@dataclass(frozen=True)
class LatencyEntry(_Result):
    kernel: str  # the kernel
    shape: list[int]  # the bench shape
    dtype: str  # the bench dtype
    source: str  # "measured" | "estimate"
    device: str
    us: float | None  # latency in microseconds
    label: str  # "41.2 µs on NVIDIA H200" or "≈38 µs H200 est."
    config: str = ""
    chosen: bool = True  # an autotuned kernel's config its autotuner is expected to pick
    bound: str | None = None  # estimates: "memory" | "compute" | "launch" ...
    # The time the kernel's counted work takes at the device's roofs (DRAM bandwidth, peak FLOP/s) over `us`:
    # of a measurement, how close the kernel came to the hardware; of an estimate, the model's own figure.
    fraction_of_roofline: float | None = None
    reference_us: float | None = None  # measurements: the PyTorch reference timed alike
    speedup: float | None = None
    suspicious: str | None = None  # why the figure cannot be trusted (faster than the roofline allows, ...)
    error: str | None = None  # why it has no figure
    roofline_us: float | None = None  # the counted work at the roofs: the fastest it can run on `device`
    achieved_tflops: float | None = None  # measurements: counted FLOPs / measured time
    achieved_tbps: float | None = None  # measurements: DRAM bytes / measured time, TB/s
    peak_tflops: float | None = None  # the compute roof for this work's dtypes on `device`
    peak_tbps: float | None = None  # the DRAM roof of `device`
    work_estimated: bool | None = None  # the work count is itself an estimate (sampled programs, a scaled shape)
    work_note: str | None = None  # how the work was counted, or why the roofline fraction is missing
    spec: str | None = None  # the spec whose bench shape this is
    change_vs_previous: float | None = None  # measurements: against the last one of the same shape and device
    iqr_us: float | None = None  # measurements: the spread (interquartile range) of the timed runs
    dram_bytes: float | None = None  # estimates: the DRAM bytes the model counted
    flops: float | None = None  # the floating-point operations counted, every dtype together
    notes: list[str] = field(default_factory=list)  # estimates: what the model assumed
    engine_us: dict[str, float] | None = None  # NKI estimates: each NeuronCore engine's counted work alone


@dataclass(frozen=True)
class MeasureResult(_Result):
    path: str  # the file timed
    source: str  # "measured" (a GPU here) | "estimate" (no GPU: the roofline model on counted work)
    entries: list[LatencyEntry]
    errors: list[str]  # what kept kernels from being timed


@dataclass(frozen=True)
class TuneRow(_Result):
    config: str  # the configuration's label
    overrides: dict[str, Any]  # the values it sets, by name
    estimated_us: float | None  # the model's latency
    measured_us: float | None = None  # the measured latency, where timed
    note: str | None = None  # why it was skipped or failed
    source: str | None = None  # "measured" | "estimated": which figure ranks this row
    node: str | None = None  # the cluster node that timed it (a search timed on Ray)
    resources: dict[str, Any] | None = None  # registers, shared_bytes, spill_bytes the compiler reported (None: assumed)


@dataclass(frozen=True)
class TuneResult(_Result):
    kernel: str  # the kernel tuned
    device: str  # the device it was tuned for
    source: str  # "measured" | "estimated" | "none"
    current: str | None
    winner: str | None  # the best configuration's label
    current_us: float | None  # the kernel's latency as written
    winner_us: float | None  # the winner's latency
    speedup: float | None  # current_us over winner_us
    verified: bool | None  # the winner checked with the correctness checker (None: nothing to verify)
    verify_message: str | None
    table: list[TuneRow]  # every configuration tried, best first
    edits: list[dict[str, Any]]  # {"line", "column", "end_line", "end_column", "text"}, 1-based
    errors: list[str]
    winner_overrides: dict[str, Any] | None = None  # each tunable of the winner by name
    status: str = ""  # "estimated; not measured", "measured on the GPU (29% of 48 configurations timed)", ...
    space_size: int = 0  # configurations in the searched space
    measured_fraction: float = 0.0  # of the space, timed on the GPU
    frozen: list[str] = field(default_factory=list)  # block sizes the launch grid ties, kept at their values
    cached: bool = False  # answered from an identical earlier search
    nodes: list[dict[str, Any]] = field(default_factory=list)  # per cluster node: device, reference timings
    compared: str | None = None  # how figures from several nodes were made comparable
    not_measured_because: str | None = None  # why nothing was timed ("no GPU", "no GPU on the Ray cluster at ...")
    tunables: dict[str, dict[str, str]] = field(default_factory=dict)  # block size -> {"status", "reason"}
    noise: float | None = None  # relative noise of repeated timings a measured winner beat the start by
    within_noise: list[str] = field(default_factory=list)  # candidates as fast as the winner within the noise
    drawn_from: int = 0  # configurations the searched candidates were drawn from


@dataclass(frozen=True)
class CandidateResult(_Result):
    name: str  # the candidate's name
    rank: int  # 1 is best; every failed candidate ranks after every passing one
    passed: bool
    status: str  # the worst verdict's status ("correct" when every spec passed)
    reason: str | None  # why it failed, or why it has no latency
    latency_us: float | None
    latency_source: str | None  # "measured" | "estimate"
    latency_label: str | None
    speedup_vs_baseline: float | None  # the baseline's latency over this one's
    verdicts: list[VerdictInfo]  # its verdicts, one per spec
    fraction_of_roofline: float | None = None  # the timed launches' time at the roofs over `latency_us`
    # The latency's spread: measured, each timed launch's median +- half its interquartile range, summed; an
    # estimate (or a measurement without a spread) has none, so low = high = latency_us.
    latency_low_us: float | None = None  # the spread's lower end, µs
    latency_high_us: float | None = None  # the spread's upper end, µs
    tied_with: list[str] = field(default_factory=list)  # passing candidates whose spreads overlap this one's
    # Rank-based, within the group (docs/api.md): (1 + candidates it beats + half those it ties) / group size
    # for a passing candidate, REWARD_FLOOR for one that failed, gamed the check or has no verified latency.
    reward: float = 0.0
    advantage: float = 0.0  # (reward - the group's mean) / the group's standard deviation; 0 when they all agree


REWARD_FLOOR = 0.0


@dataclass(frozen=True)
class RewardGroup(_Result):
    size: int  # candidates in the group
    passed: int  # candidates that passed and were timed
    mean: float  # the mean reward
    std: float  # the rewards' standard deviation
    floor: float = REWARD_FLOOR  # the reward of a failing, gamed or untimed candidate
    formula: str = ("passing: (1 + beaten + 0.5 * tied) / size, beaten = candidates it is faster than beyond both "
                    "spreads (every failing one included), tied = passing ones whose spreads overlap; failing, "
                    "gamed or untimed: floor")


@dataclass(frozen=True)
class CompareResult(_Result):
    kernel: str | None  # the kernel compared, or None for every spec'd kernel
    baseline: str  # the candidate the speedups are against
    source: str  # "measured" | "estimate": how the latencies were obtained
    ranking: list[CandidateResult]
    group: RewardGroup | None = None  # the group's reward statistics and the formula


@dataclass(frozen=True)
class CandidateState(_Result):
    name: str  # the candidate's name
    state: str  # "queued" | "running" | "done" | "cancelled"
    status: str | None = None  # once done: the worst verdict's status
    seconds: float | None = None  # how long it has run, or ran


@dataclass(frozen=True)
class BatchStatus(_Result):
    batch: str  # the batch's id
    total: int  # candidates in the batch
    done: int  # candidates done
    finished: bool  # every candidate done or cancelled
    cancelled: bool
    candidates: list[CandidateState]  # each candidate's state, in the order given
    result: CompareResult | None = None  # the ranking with rewards, once every candidate is done


@dataclass(frozen=True)
class ProposalResult(_Result):
    path: str  # the file the proposal is for (never modified)
    proposal_path: str  # the unified diff, for a person to review and apply
    diff: str
    verified: bool  # new source checked correct (every spec), with no static error
    verdicts: list[VerdictInfo]
    findings: list[Finding]  # errors and warnings of the new source
    notes: list[str]


@dataclass(frozen=True)
class BatchStats(_Result):
    """What a batch check covered."""

    files: int = 0
    kernel_files: int = 0  # files with at least one kernel
    triton_kernels: int = 0
    nki_kernels: int = 0
    launch_sites: int = 0
    open_documents: int = 0


@dataclass(frozen=True)
class UncompiledKernel(_Result):
    """A kernel that could not be prepared for compiling on a target (its KC finding says why)."""

    path: str  # the file
    kernel: str  # the kernel
    line: int  # 1-based line of its def
    target: str  # the target it was not compiled for
    reason: str  # why not


@dataclass(frozen=True)
class CudaKernelInfo(_Result):
    """A CUDA C++ `__global__` kernel's resources on one target, from ptxas' verbose report."""

    path: str
    name: str
    line: int | None  # its definition; None where it was not found in the source
    target: str
    registers: int | None = None
    spill_bytes: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None


@dataclass(frozen=True)
class HistoryPoint(_Result):
    """One figure of a kernel's timing history, kept under `<root>/.kernel-lsp/history` across runs."""

    path: str
    kernel: str
    device: str
    source: str  # "measured" | "estimate"
    shape: list[int]
    dtype: str
    us: float
    time: float | None = None  # when it was recorded (seconds since the epoch)


@dataclass(frozen=True)
class BatchResult(_Result):
    """Files and folders checked at once (`Workspace.check_files`): all that `kernel-lsp check` and `kernel-lsp report`
    print, as plain data."""

    files: list[AnalyzeResult]  # every file checked, with its findings (compile and spec findings merged in)
    missing: list[str]  # paths given that do not exist
    compiled: list[CompiledConfig]  # with `targets` only
    checks: list[CheckResult]  # with `run_checks` only: one per file that has a spec
    latency: list[MeasureResult]  # with `latency`: one per file whose kernels passed their specs
    latency_source: str | None  # "measured" | "estimate" | None (nothing timed)
    messages: list[str]  # where the jobs ran, when not where asked (a Ray cluster lost, ...)
    worst: str | None  # the most severe finding's severity, None without findings
    stats: BatchStats = field(default_factory=BatchStats)
    compile_targets: list[str] = field(default_factory=list)  # with `targets`: the targets compiled for
    compile_stats: dict[str, int] = field(default_factory=dict)  # the compile service's counts (cache hits, ...)
    uncompiled: list[UncompiledKernel] = field(default_factory=list)  # with `targets`
    cuda: list[CudaKernelInfo] = field(default_factory=list)  # with `targets`, where nvcc is installed
    history: list[HistoryPoint] = field(default_factory=list)  # with `history`: the checked kernels' timing history
    # Checks whose result the infrastructure lost on every try (their checking process or Ray worker killed from
    # outside): "path: spec: why". Not the kernels' fault, and not a pass: `kernel-lsp check` exits 3 on them.
    infrastructure_lost: list[str] = field(default_factory=list)


# --- helpers --------------------------------------------------------------------------------------------------

_SEVERITY = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "information",
             Severity.HINT: "hint"}
_RANK_WORST = ("correct", "not-checked", "timeout", "out-of-memory", "crashed", "error", "out-of-bounds",
               "rule-broken", "mismatch", "rejected")


def _secret_values() -> list[str]:
    """Values of environment variables named like secrets (and keys given in settings), longest first."""
    from .engine.redact import secret_values

    return secret_values()


def _scrub(obj: Any, secrets: list[str] | Callable[[str], str]) -> Any:
    """`obj` with every secret blanked out, whole or in a simple transform (engine/redact.py)."""
    if not secrets:
        return obj
    if not callable(secrets):
        from .engine.redact import scrubber

        secrets = scrubber(secrets)
    if isinstance(obj, str):
        return secrets(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: _scrub(getattr(obj, f.name), secrets)
                                           for f in dataclasses.fields(obj)})
    if isinstance(obj, list):
        return [_scrub(x, secrets) for x in obj]
    if type(obj) is tuple:
        return tuple(_scrub(x, secrets) for x in obj)
    if isinstance(obj, dict):
        return {k: _scrub(v, secrets) for k, v in obj.items()}
    return obj


def _finding(p: Problem, path: str) -> Finding:
    """An analyzer problem of the file at `path` as the API's finding."""
    from analyzers.rules import RULES

    fix = None
    if p.fix:
        fix = FixInfo(p.fix.title, [{"line": e.span.start_line + 1, "column": e.span.start_col + 1,
                                     "end_line": e.span.end_line + 1, "end_column": e.span.end_col + 1,
                                     "text": e.new_text} for e in p.fix.edits])
    rule = RULES.get(p.code)
    related = [RelatedInfo(r.path or path, r.span.start_line + 1, r.span.start_col + 1, r.span.end_line + 1,
                           r.span.end_col + 1, r.message) for r in p.related]
    return Finding(p.code, _SEVERITY.get(p.severity, "information"), p.message, p.span.start_line + 1,
                   p.span.start_col + 1, p.span.end_line + 1, p.span.end_col + 1, p.kernel,
                   rule.name if rule else None, fix, related)


def _kernel_infos(analysis: Any) -> list[KernelInfo]:
    """A file analysis' Triton kernels, then its NKI kernels."""
    if analysis is None:
        return []
    return ([KernelInfo(k.name, k.name_span.start_line + 1, "triton", [q.name for q in k.params],
                        len(k.autotune_configs), [q.name for q in k.params if q.is_constexpr], list(k.decorators))
             for k in analysis.kernels]
            + [KernelInfo(k.name, k.name_span.start_line + 1, "nki", list(k.params), decorators=list(k.decorators),
                          api=k.api) for k in analysis.nki_kernels])


def _line(zero_based: int | None) -> int | None:
    return None if zero_based is None else zero_based + 1


def _verdict(v: Any) -> VerdictInfo:
    cases = [CaseInfo(list(c.shape), c.dtype, c.ok, c.max_abs, c.max_rel, c.mismatched, c.total, c.config, c.note,
                      c.seed, None if c.first_index is None else list(c.first_index), c.tail_only, _line(c.line))
             for c in v.cases]
    return VerdictInfo(v.kernel, v.spec, v.status, v.ok, v.device, v.message, _line(v.line), v.failed_check, cases,
                       list(v.notes), _line(v.column), v.spec_line + 1, v.kernel_line + 1, round(v.duration_s, 3),
                       v.on_gpu)


def _check_result(full: str, report: Any, kernels: Sequence[str] | None, *, explain_empty: bool) -> CheckResult:
    """An engine check report as the API's result. `explain_empty`: a check that found no spec to run says so in
    its errors (an editor checks only files with specs, and shows nothing for the others)."""
    verdicts = [_verdict(v) for v in report.verdicts]
    details = [CheckErrorInfo(msg, _line(line)) for line, msg in report.errors]
    if explain_empty and not verdicts and not details:
        details.append(CheckErrorInfo(f"no spec for {', '.join(kernels)}" if kernels else
                                      "no spec in this source: a check needs a @spec (docs/specs.md)"))
    errors = [f"line {e.line}: {e.message}" if e.line is not None else e.message for e in details]
    ok = bool(verdicts) and not errors and all(v.ok for v in verdicts)
    return CheckResult(full, ok, verdicts, errors, details)


def _edits(edits: Sequence[tuple[tuple[int, int, int, int], str]]) -> list[dict[str, Any]]:
    return [{"line": r[0] + 1, "column": r[1] + 1, "end_line": r[2] + 1, "end_column": r[3] + 1, "text": t}
            for r, t in edits]


def _latency_entry(e: Any, **roofline: Any) -> LatencyEntry:
    """An engine latency entry as the API's; an estimate's roofline time is the model's fraction of its time."""
    if "roofline_us" not in roofline and e.fraction_of_roofline is not None and e.us is not None:
        roofline = {"roofline_us": e.fraction_of_roofline * e.us, "work_estimated": True,
                    "work_note": "an estimate: the roofline model's time for the work counted under the interpreter"}
    est, work = e.estimate or {}, e.work or {}
    flops = sum((work.get("tensor_flops") or {}).values()) + float(work.get("vector_flops") or 0.0) if work else None
    return LatencyEntry(e.kernel, list(e.shape), e.dtype, e.source, e.device, e.us, e.label, e.config, e.chosen,
                        e.bound, roofline.pop("fraction_of_roofline", e.fraction_of_roofline), e.reference_us,
                        e.speedup, e.suspicious, e.error, **roofline, spec=e.spec,
                        change_vs_previous=e.change_vs_previous, iqr_us=(e.timing or {}).get("iqr_us"),
                        dram_bytes=est.get("dram_bytes"), flops=flops, notes=list(est.get("notes") or ()),
                        engine_us=dict(est["engine_us"]) if est.get("engine_us") else None)


def _with_roofline(measured: Sequence[Any], counted: list[dict] | str) -> list[LatencyEntry]:
    """Measured entries with the roofline fraction of the work their kernel was counted to do at the same spec,
    shape and dtype; each says how the work was counted, and whether that count is itself an estimate."""
    from .engine.latency.roofline import measured_roofline

    return [_latency_entry(e, **got) for e, got in zip(measured, measured_roofline(measured, counted))]


def _measure_result(full: str, report: Any, counted: list[dict] | str | None, *,
                    source: str | None = None) -> MeasureResult:
    """An engine latency report as the API's result: its measured entries with the roofline fraction of the work
    `counted` for them (None: not counted), its estimates with the model's. `source`: the result's, where the
    caller knows it (else "measured" when any entry was measured)."""
    measured = [e for e in report.entries if e.source == "measured"]
    with_roofline = dict(zip(map(id, measured), _with_roofline(measured, counted))) if counted is not None else {}
    entries = [with_roofline.get(id(e)) or _latency_entry(e) for e in report.entries]
    if source is None:
        source = "measured" if measured else "estimate"
    return MeasureResult(full, source, entries, list(report.errors))


def _tune_result(p: Any) -> TuneResult:
    """The engine's `TilingProposal` as the API's `TuneResult`."""
    table = [TuneRow(t.label, {k: _json_value(v) for k, v in t.overrides.items()}, t.estimated_us, t.measured_us,
                     t.note, t.source, t.node, t.resources) for t in p.tried]
    winner = {k: _json_value(v) for k, v in p.winner_overrides.items()} if p.winner_overrides else None
    return _scrub(TuneResult(p.kernel, p.device, p.source, p.current, p.winner, p.current_us, p.winner_us, p.speedup,
                             p.verified, p.verify_message, table, _edits(p.edits), list(p.errors), winner, p.status,
                             p.space_size, p.measured_fraction, list(p.frozen), p.cached, list(p.nodes), p.compared,
                             p.not_measured_because, dict(getattr(p, "tunables", {})), getattr(p, "noise", None),
                             list(getattr(p, "within_noise", [])), getattr(p, "drawn_from", 0)),
                  _secret_values())


def _worst_status(verdicts: Sequence[VerdictInfo]) -> str:
    statuses = [v.status for v in verdicts]
    return max(statuses, key=lambda s: _RANK_WORST.index(s) if s in _RANK_WORST else len(_RANK_WORST))


def _json_value(v: Any) -> Any:
    return v if isinstance(v, (int, float, bool, str, type(None))) else repr(v)


class _Converted:
    """What converting a running compile's reports produced so far: each showing of its partial results converts
    only the jobs and reports that finished since (a file can have hundreds of kernels)."""

    def __init__(self) -> None:
        self.configs: dict[int, tuple[Any, CompiledConfig]] = {}  # id(JobReport) -> (it, its CompiledConfig)
        self.findings: dict[int, tuple[Any, int, list[Finding]]] = {}  # id(report) -> (it, jobs seen, findings)


def _compiled_configs(report: Any, stages: Sequence[str] = (), memo: _Converted | None = None) -> list[CompiledConfig]:
    """A compile report's configurations as plain data; `stages`: the IR texts to include."""
    from .engine.compile.service import config_text

    configs = []
    for jr in report.jobs:
        known = memo.configs.get(id(jr)) if memo is not None else None
        if known is not None and known[0] is jr:
            configs.append(known[1])
            continue
        r, res = jr.result, jr.result.resources
        err = r.error
        config = CompiledConfig(
            report.kernel, report.target.name, jr.job.config_label,
            {k: _json_value(v) for k, v in jr.job.constexprs}, jr.job.num_warps, jr.job.num_stages,
            r.ok, jr.cached, round(r.seconds, 3), err.message if err else None,
            err.line + 1 if err and err.line is not None else None,
            err.col + 1 if err and err.col is not None else None,
            res.registers, res.spill_bytes, res.shared_bytes, res.occupancy,
            list(res.matrix_instructions), list(jr.job.notes),
            {s: r.asm[s] for s in stages if s in r.asm}, report.path, report.span.start_line + 1,
            config_text(jr.job), err.kind if err else None, res.stack_bytes, list(res.load_widths),
            list(res.store_widths), bool(res.uses_tma), dict(jr.job.values_from))
        if memo is not None:
            memo.configs[id(jr)] = (jr, config)
        configs.append(config)
    return configs


def _compile_result(full: str, reports: Sequence[Any], stages: Sequence[str] = (),
                    memo: _Converted | None = None) -> CompileResult:
    """The engine's compile reports of a file as the API's result: `compile` and `compile_buffer` (also each partial
    result of the latter) build it here."""
    from .engine.compile.service import compile_problems

    configs: list[CompiledConfig] = []
    findings: list[Finding] = []
    not_compiled: list[str] = []
    uncompiled: list[UncompiledKernel] = []
    for report in reports:
        if report.plan_error:
            not_compiled.append(f"{report.kernel} on {report.target.name}: {report.plan_error}")
            uncompiled.append(UncompiledKernel(report.path, report.kernel, report.span.start_line + 1,
                                               report.target.name, report.plan_error))
        found = memo.findings.get(id(report)) if memo is not None else None
        if found is None or found[0] is not report or found[1] != len(report.jobs):
            found = (report, len(report.jobs), [_finding(p, full) for p in compile_problems(report)])
            if memo is not None:
                memo.findings[id(report)] = found
        findings += found[2]
        configs += _compiled_configs(report, stages, memo)
    return CompileResult(full, configs, findings, not_compiled, uncompiled)


def _resources_lookup(configs: Sequence[CompiledConfig]) -> Callable[..., Any]:
    """Registers, shared memory and spills of compiled configurations, for an estimate's occupancy (None: that
    configuration was not compiled)."""

    def lookup(kernel: str, target: str, constexprs: dict, num_warps: int, num_stages: int) -> Any:
        from analyzers.roofline import Resources

        for c in configs:
            if (c.kernel == kernel and c.target == target and c.ok and c.num_warps == num_warps
                    and c.num_stages == num_stages
                    and all(c.constexprs.get(k) == _json_value(v) for k, v in constexprs.items())):
                return Resources(c.registers, c.shared_bytes, c.spill_bytes)
        return None

    return lookup


def _target_names(targets: Sequence[str] | str) -> list[str]:
    """Compile targets as the settings name them (sm_90, gfx942), each once; ApiError for one not known."""
    from analyzers.targets import UnknownTargetError, parse_target

    names: list[str] = []
    for t in [targets] if isinstance(targets, str) else targets:
        try:
            name = parse_target(str(t)).name
        except UnknownTargetError as exc:
            raise ApiError(f"targets: {exc}") from None
        if name not in names:
            names.append(name)
    if not names:
        raise ApiError("targets: give at least one GPU target, such as sm_90")
    return names


def _history(root: str, kernels: Sequence[tuple[str, str]]) -> list[HistoryPoint]:
    """The timing history of each (path, kernel): the figures with a device and a number (older entries and
    damaged files hold others)."""
    from .engine.latency import history_name, load_history

    points = []
    for path, kernel in kernels:
        for h in load_history(root, history_name(path, kernel)):
            us, device, shape = h.get("us"), h.get("device"), h.get("shape")
            if isinstance(us, (int, float)) and not isinstance(us, bool) and device:
                points.append(HistoryPoint(path, kernel, str(device),
                                           "estimate" if h.get("source") == "estimate" else "measured",
                                           list(shape) if isinstance(shape, list) else [], str(h.get("dtype") or ""),
                                           float(us), h["time"] if isinstance(h.get("time"), (int, float)) else None))
    return points


# --- the workspace --------------------------------------------------------------------------------------------



@dataclass(frozen=True)
class _Named:
    name: str
    path: str
    text: str
    timeout_s: float | None = None  # the candidate's own check time limit per spec


def _spread(chosen: Sequence[LatencyEntry]) -> tuple[float, float]:
    low = high = 0.0
    for e in chosen:
        half = (e.iqr_us or 0.0) / 2 if e.source == "measured" else 0.0
        low += max(e.us - half, 0.0)  # type: ignore[operator]
        high += e.us + half  # type: ignore[operator]
    return low, high


def _faster(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """Whether spread `a` lies wholly below spread `b` (equal estimates are a tie, never an order)."""
    if a is None or b is None:
        return False
    return a[1] < b[0] and not math.isclose(a[1], b[0], rel_tol=1e-9, abs_tol=1e-12)


def _rank(named: Sequence[_Named], evaluated: Sequence[tuple[CheckResult, MeasureResult | None]], base: str,
          kernel: str | None) -> CompareResult:
    from .engine.gpu import gpu_present

    rows = []
    source = "measured" if gpu_present() else "estimate"  # what _latency does for every candidate
    for item, (checked, timed) in zip(named, evaluated):
        reason, us, label, lat_source, fraction, spread = None, None, None, None, None, None
        if not checked.ok:
            bad = next((v for v in checked.verdicts if not v.ok), None)
            reason = (f"{bad.status}: {bad.message}" if bad else "; ".join(checked.errors) or "not checked")
        elif timed is None:
            reason = "no latency: cancelled before it was timed"
        else:
            chosen = [e for e in timed.entries if e.chosen and (kernel is None or e.kernel == kernel)]
            failed = [e for e in chosen if e.us is None or e.suspicious]
            if timed.errors and not chosen:
                reason = "no latency: " + "; ".join(timed.errors)
            elif not chosen:
                reason = "no latency: the spec has no bench shapes"
            elif failed:
                e = failed[0]
                reason = (f"suspicious timing: {e.suspicious}" if e.suspicious
                          else f"no latency: {e.error or 'not timed'}")
            else:
                us = sum(e.us for e in chosen)  # type: ignore[misc]
                spread = _spread(chosen)
                lat_source = timed.source
                label = "; ".join(e.label for e in chosen)
                if all(e.roofline_us is not None for e in chosen):
                    fraction = sum(e.roofline_us for e in chosen) / us  # type: ignore[misc]
        rows.append((item.name, checked, reason, us, lat_source, label, fraction, spread))
    passing = sorted((r for r in rows if r[3] is not None), key=lambda r: float(r[3] or 0.0))
    failing = [r for r in rows if r[3] is None]
    size = len(rows)
    base_us = next((r[3] for r in rows if r[0] == base), None)
    scored = []
    for r in passing:
        beaten = sum(1 for o in passing if o is not r and _faster(r[7], o[7])) + len(failing)
        beaten_by = sum(1 for o in passing if o is not r and _faster(o[7], r[7]))
        tied = [o[0] for o in passing if o is not r and not _faster(r[7], o[7]) and not _faster(o[7], r[7])]
        scored.append((r, 1 + beaten_by, tied, (1 + beaten + 0.5 * len(tied)) / size))
    scored += [(r, len(passing) + i + 1, [], REWARD_FLOOR) for i, r in enumerate(failing)]
    rewards = [x[3] for x in scored]
    mean = sum(rewards) / size
    std = math.sqrt(sum((x - mean) ** 2 for x in rewards) / size)
    ranking = []
    for (name, checked, reason, us, lat_source, label, fraction, spread), rank, tied, reward in scored:
        status = _worst_status(checked.verdicts) if checked.verdicts else "error"
        speedup = base_us / us if base_us and us else None
        ranking.append(CandidateResult(
            name, rank, us is not None, status, reason, us, lat_source, label, speedup, checked.verdicts, fraction,
            spread[0] if spread else None, spread[1] if spread else None, tied, reward,
            (reward - mean) / std if std > 1e-12 else 0.0))
    return CompareResult(kernel, base, source, ranking, RewardGroup(size, len(passing), mean, std))


class _Batch:
    """A `compare` running in the background (Workspace.submit): candidates `max_parallel` at a time."""

    def __init__(self, named: list[_Named], base: str, kernel: str | None, target: str):
        self.id = uuid.uuid4().hex[:12]
        self.named, self.base, self.kernel, self.target = named, base, kernel, target
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.results: dict[str, tuple[CheckResult, MeasureResult | None]] = {}
        self.result: CompareResult | None = None
        self.finished = False

    def start(self, workspace: Workspace, max_workers: int) -> None:
        def one(item: _Named) -> None:
            if self.cancel.is_set():
                return
            with self.lock:
                self.started[item.name] = time.monotonic()
            try:
                found = workspace._evaluate(item, self.kernel, self.target, self.cancel)
            except Exception as exc:  # noqa: BLE001 - a tool failure is this candidate's, never the batch's
                found = (CheckResult(item.path, False, [], [f"the check failed: {type(exc).__name__}: {exc}"]), None)
            with self.lock:
                self.ended[item.name] = time.monotonic()
                if not self.cancel.is_set():
                    self.results[item.name] = found

        def run() -> None:
            with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(self.named)))) as pool:
                list(pool.map(one, self.named))
            with self.lock:
                if not self.cancel.is_set():
                    self.result = _scrub(_rank(self.named, [self.results[n.name] for n in self.named], self.base,
                                               self.kernel), _secret_values())
                self.finished = True

        threading.Thread(target=run, name=f"kernel-lsp-batch-{self.id}", daemon=True).start()

    def status(self) -> BatchStatus:
        now = time.monotonic()
        with self.lock:
            states = []
            for n in self.named:
                started, ended = self.started.get(n.name), self.ended.get(n.name)
                if n.name in self.results:
                    checked = self.results[n.name][0]
                    status = _worst_status(checked.verdicts) if checked.verdicts else "error"
                    states.append(CandidateState(n.name, "done", status, (ended or now) - (started or now)))
                elif self.cancel.is_set():
                    states.append(CandidateState(n.name, "cancelled", None,
                                                 None if started is None else (ended or now) - started))
                elif started is not None:
                    states.append(CandidateState(n.name, "running", None, now - started))
                else:
                    states.append(CandidateState(n.name, "queued"))
            return BatchStatus(self.id, len(self.named), len(self.results), self.finished, self.cancel.is_set(),
                               states, self.result)


class Workspace:
    """One project folder and the engine's services for it. Thread-safe; close it (or use `with`) to stop the
    compile workers it started.

    `allow_run`: run the folder's code (checks, timing, tuning) although it is not trusted. `max_parallel`: how
    many checking or timing processes one call may run at once. `memory_mb`: resident memory of each checking
    process. Timeouts come from `settings` (checkTimeoutS, compileTimeoutS)."""

    def __init__(self, root: str | os.PathLike | None = None, *, settings: Settings | None = None,
                 allow_run: bool = False, max_parallel: int = 2, memory_mb: int = 4096):
        self.root = Path(os.path.realpath(root or os.getcwd()))
        if not self.root.is_dir():
            raise ApiError(f"{self.root} is not a folder")
        self.settings = settings or Settings()
        self.allow_run = allow_run
        self.max_parallel = max(1, int(max_parallel))
        self.memory_mb = int(memory_mb)
        self._lock = threading.Lock()
        self._compile_lock = threading.Lock()
        self._batches: dict[str, _Batch] = {}  # submit's batches, by id
        self._parse_caches: dict[str, Any] = {}  # path -> analyzers.source.ParseCache
        self._analyzed: dict[str, tuple[str, Settings, AnalyzeResult]] = {}  # path -> (text, settings, result)
        self._loop: asyncio.AbstractEventLoop | None = None  # `compile`'s own loop, in a thread of its own
        self._service = None
        self._editor: tuple[asyncio.AbstractEventLoop, Any] | None = None  # compile_buffer's loop and its service

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            for batch in self._batches.values():
                batch.cancel.set()
            loop, service = self._loop, self._service
            self._loop = self._service = None
            editor, self._editor = self._editor, None
        if loop is not None:
            if service is not None:
                asyncio.run_coroutine_threadsafe(service.close(), loop).result(timeout=30)
            loop.call_soon_threadsafe(loop.stop)
        if editor is not None:  # on its own loop `await close_compiles()` waits for it; from elsewhere, wait here
            editor_loop, editor_service = editor
            try:
                running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is editor_loop:
                editor_loop.create_task(editor_service.close())
            elif editor_loop.is_running():
                asyncio.run_coroutine_threadsafe(editor_service.close(), editor_loop).result(timeout=30)

    # --- trust and inputs --------------------------------------------------------------------------------------

    @property
    def trusted(self) -> bool:
        from .engine.trust import is_trusted

        return is_trusted(self.root)

    @property
    def may_run(self) -> bool:
        """Whether operations that run the workspace's code may run here."""
        return self.allow_run or self.trusted

    def _require_run(self, what: str) -> None:
        if not self.may_run:
            raise NotTrustedError(
                f"{what} runs this folder's code, and {self.root} is not trusted: nothing was run. Trust it with "
                f"`kernel-lsp trust {self.root}` (docs/security.md), or start the caller with an explicit allow-run "
                "flag")

    def _path(self, path: str | os.PathLike) -> Path:
        given = Path(path)
        full = Path(os.path.realpath(given if given.is_absolute() else self.root / given))
        if full != self.root and self.root not in full.parents:
            raise ApiError(f"{path} is outside the workspace {self.root}")
        return full

    def _text(self, source: str, what: str = "source") -> str:
        if not isinstance(source, str):
            raise ApiError(f"{what} must be text, got {type(source).__name__}")
        try:
            size = len(source.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise ApiError(f"{what} is not valid UTF-8 text (an unpaired surrogate at character {exc.start})") from None
        if size > self.settings.max_file_bytes:
            raise ApiError(f"{what} is {size / 1e6:.1f} MB; the limit is {self.settings.max_file_bytes / 1e6:.1f} MB "
                           "(the maxFileBytes setting)")
        return source

    def _input(self, path: str | os.PathLike | None, source: str | None) -> tuple[str, str]:
        """(absolute path, text): the text given, else the file's. A text without a path is placed in the
        workspace's root under a name no file uses, for line maps and imports of its neighbours."""
        if source is not None:
            text = self._text(source)
            full = self._path(path) if path is not None else self.root / "<source>.py"
            return str(full), text
        if path is None:
            raise ApiError("give a path or a source")
        from .engine.files import read_source

        full = self._path(path)
        if not full.is_file():
            raise ApiError(f"{path}: no such file")
        read = read_source(full, self.settings.max_file_bytes)
        if read.text is None:
            reason = read.problem.message if read.problem else "cannot be read"
            raise ApiError(f"{path}: {reason}")
        return str(full), read.text

    def _timeout(self) -> float:
        return float(self.settings.check_timeout_s)

    # --- analyze -----------------------------------------------------------------------------------------------

    def analyze(self, path: str | os.PathLike | None = None, source: str | None = None) -> AnalyzeResult:
        """Static findings of one file (codes, 1-based lines, fixes), with launch sites checked against the
        kernels of the same file. Runs no code."""
        full, text = self._input(path, source)
        with self._lock:
            known = self._analyzed.get(full)
        # The findings depend on the text and the settings only: an agent that analyzes an unchanged file again
        # (it often does, between edits of other files) gets the same result without the rules running again.
        if known is not None and known[0] == text and known[1] is self.settings:
            result = known[2]
        else:
            result = self._analyze(full, text)
            with self._lock:
                self._analyzed.pop(full, None)
                self._analyzed[full] = (text, self.settings, result)  # most recently used last
                while len(self._analyzed) > 64:
                    self._analyzed.pop(next(iter(self._analyzed)))
        # Fresh lists: a caller that changes its result leaves the kept one as it was.
        return _scrub(dataclasses.replace(result, kernels=list(result.kernels), findings=list(result.findings)),
                      _secret_values())

    def _analyze(self, full: str, text: str) -> AnalyzeResult:
        from .engine.index import WorkspaceIndex

        index = WorkspaceIndex(self.settings)
        entry = index.store_analysis(full, self._analysis(full, text), None, True)
        return AnalyzeResult(full, _kernel_infos(entry.analysis), [_finding(p, full) for p in index.problems(full)])

    def _analysis(self, full: str, text: str):
        """The file's analysis, through a parse cache per path as the editor keeps per document: an agent re-reads
        the same file or one it changed slightly, and only the statements that changed are parsed and checked."""
        from analyzers.analyze import analyze_source
        from analyzers.source import ParseCache

        with self._lock:
            cache = self._parse_caches.pop(full, None) or ParseCache()
            self._parse_caches[full] = cache  # most recently used last
            while len(self._parse_caches) > 64:
                self._parse_caches.pop(next(iter(self._parse_caches)))
        return analyze_source(text, full, cache)

    # --- compile -----------------------------------------------------------------------------------------------

    def _run_async(self, coro):
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="kernel-lsp-api-loop", daemon=True).start()
                self._service = self._new_service(self.trusted)
                self._loop = loop
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _new_service(self, trusted: bool, say: Callable[[str], None] | None = None) -> Any:
        """A compile service for this workspace: its caches under `<root>/.kernel-lsp` when `trusted`, else in the
        user's cache (nothing is written into a folder the user has not trusted)."""
        from .engine.compile.service import CompileService
        from .engine.files import PRIVATE_DIR, untrusted_private_dir

        private = self.root / PRIVATE_DIR if trusted else untrusted_private_dir(self.root)
        return CompileService(self.root, self.settings, private_dir=private, say=say)

    def compile(self, path: str | os.PathLike | None = None, source: str | None = None, *,
                kernel: str | None = None, targets: Sequence[str] = ("sm_90",),
                config: dict[str, Any] | None = None, ir: Sequence[str] = ()) -> CompileResult:
        """Compile the file's kernels (or `kernel`) ahead of time for `targets` (sm_80 ... sm_120, gfx942, ...),
        no GPU needed: errors at the user's lines, and registers, spills, shared memory and occupancy per target
        and configuration. `config` pins parameter types or constexpr values (the `pins` setting's format, e.g.
        {"BLOCK_SIZE": 256, "x_ptr": "*fp16"}) where the file does not say them. `ir`: stages to return ("ttir",
        "ttgir", "llir", "ptx", "amdgcn"). The offline compile runs none of the workspace's code."""
        from .engine.compile import triton_installed
        from .settings import parse_settings

        full, text = self._input(path, source)
        names = _target_names(targets)
        stages = [str(s).lower() for s in ir]
        unknown = sorted(set(stages) - {"ttir", "ttgir", "llir", "ptx", "amdgcn"})
        if unknown:
            raise ApiError(f"ir: unknown stage {', '.join(unknown)} (ttir, ttgir, llir, ptx, amdgcn)")
        analysis = self._analysis(full, text)
        if kernel is not None and kernel not in {k.name for k in analysis.kernels}:
            known = ", ".join(k.name for k in analysis.kernels) or "none"
            raise ApiError(f"no Triton kernel named {kernel!r} in {full} (kernels: {known})")
        if config:
            if kernel is None and len(analysis.kernels) != 1:
                raise ApiError("config: name the kernel it is for (the file has several kernels)")
            settings, messages = parse_settings({"pins": {kernel or analysis.kernels[0].name: dict(config)}},
                                                self.settings)
            if messages:
                raise ApiError("config: " + "; ".join(messages))
            pins = settings.pins
        else:
            pins = None
        if not triton_installed():
            from .install import add_command

            raise ApiError("compiling needs triton in the server's Python environment: "
                           f"{add_command('triton>=3.6')}")
        if kernel is not None:
            analysis = dataclasses.replace(analysis, kernels=[k for k in analysis.kernels if k.name == kernel])
        service_pins = pins

        async def run():
            service = self._service
            saved = service.settings
            if service_pins is not None:
                service.settings = dataclasses.replace(saved, pins={**saved.pins, **service_pins})
            try:
                return await service.compile_file(full, text, analysis, names)
            finally:
                service.settings = saved

        with self._compile_lock:  # one compile call at a time sets the service's pins
            reports = self._run_async(run())
        return _scrub(_compile_result(full, reports, stages), _secret_values())

    # --- check -------------------------------------------------------------------------------------------------

    def _check(self, full: str, text: str, kernel: str | None, cancel: threading.Event | None = None, *,
               timeout_s: float | None = None) -> CheckResult:
        from .engine.verify import CheckRequest, run_checks

        report = run_checks(CheckRequest(full, text, (kernel,) if kernel else None, device=self.settings.check_device,
                                         timeout_s=timeout_s or self._timeout(), memory_mb=self.memory_mb,
                                         root=str(self.root)), cancel)
        return _check_result(full, report, [kernel] if kernel else None, explain_empty=True)

    def check(self, path: str | os.PathLike | None = None, source: str | None = None, *,
              kernel: str | None = None, cancel: threading.Event | None = None) -> CheckResult:
        """The hardened verdict of every spec (or those of `kernel`): each kernel against its PyTorch reference
        on the spec's shapes, with the checks that refuse launchers built to look correct (docs/specs.md). On
        the GPU when there is one, else through Triton's interpreter. Setting `cancel` kills the checking
        process at once (the result then says "check cancelled"). Runs the file's code: needs trust."""
        self._require_run("a check")
        full, text = self._input(path, source)
        return _scrub(self._check(full, text, kernel, cancel), _secret_values())

    # --- measure -----------------------------------------------------------------------------------------------

    def _latency(self, full: str, text: str, kernel: str | None, targets: Sequence[str],
                 cancel: threading.Event | None = None) -> MeasureResult:
        from .engine.gpu import gpu_present
        from .engine.latency import estimate_file, measure_file

        kernels = [kernel] if kernel else None
        if gpu_present():
            report = measure_file(full, text, kernels, str(self.root), history=False, cancel=cancel)
            return _measure_result(full, report, self._count_work(full, text, report.entries, cancel),
                                   source="measured")
        report = estimate_file(full, text, list(targets) or ["H200"], kernels, str(self.root), cancel=cancel)
        return _measure_result(full, report, None, source="estimate")

    def _count_work(self, full: str, text: str, measured: Sequence[Any],
                    cancel: threading.Event | None = None) -> list[dict] | str:
        """The work of each measured point, counted under the interpreter (the roofline fraction's numerator), or
        why it could not be counted."""
        from .engine.latency.roofline import count_measured_work

        return count_measured_work(full, text, measured, str(self.root), timeout=self._timeout(), cancel=cancel)

    def measure(self, path: str | os.PathLike | None = None, source: str | None = None, *,
                kernel: str | None = None, targets: Sequence[str] = ("H200",),
                cancel: threading.Event | None = None) -> MeasureResult:
        """Latency of each spec'd kernel at its spec's bench shapes: measured on this machine's GPU (with the
        reference timed alike, and the fraction of the roofline its counted work reaches: docs/api.md), or,
        without one, estimated by the roofline model for each of `targets` (device names such as H100, or compile
        targets: sm_90 -> H200) from work counted under the interpreter, with the model's fraction of the
        roofline. Runs the file's code: needs trust."""
        self._require_run("timing")
        full, text = self._input(path, source)
        return _scrub(self._latency(full, text, kernel, targets, cancel), _secret_values())

    # --- tune --------------------------------------------------------------------------------------------------

    def tune(self, path: str | os.PathLike | None = None, source: str | None = None, *, kernel: str,
             target: str = "H200", budget: int = 128, measure: bool | None = None, verify: bool = True,
             cache: bool = True, progress: Callable[[str, float], None] | None = None,
             cancel: threading.Event | None = None, timer: Any = None,
             compile_budget: int | None = None) -> TuneResult:
        """The tiling search for `kernel` on `target`: up to `budget` configurations ranked by the model on
        counted work, the best ones timed where there is a GPU (`measure=False`: the model only), the winner
        verified with the checker (unless `verify=False`); the table, the winner and the edit that would apply it
        (not applied). An identical earlier search is answered from the workspace's cache unless `cache=False`.
        `progress(message, fraction)` hears of each step; setting `cancel` stops the search and its processes.
        `timer`: an `engine.latency.cluster.ClusterTimer` to time the candidates on a Ray cluster's GPUs.
        `compile_budget`: how many of the model's best-ranked candidates are compiled for their registers, shared
        memory and spills (None: the search's default, 12; 0: none, all ranked on assumed resources).
        Runs the file's code: needs trust."""
        from .engine.latency import search_tiling

        self._require_run("the tiling search")
        full, text = self._input(path, source)
        if not isinstance(budget, int) or budget < 1:
            raise ApiError("budget: a number of configurations, at least 1")
        if compile_budget is not None and (not isinstance(compile_budget, int) or compile_budget < 0):
            raise ApiError("compile_budget: a number of candidates to compile, 0 or more")
        p = search_tiling(full, text, kernel, target, str(self.root), limit=budget, hardware=None, measure=measure,
                          verify=verify, cache=cache, progress=progress, cancel=cancel, timer=timer,
                          **({} if compile_budget is None else {"compile_budget": compile_budget}))
        return _tune_result(p)

    # --- compare -----------------------------------------------------------------------------------------------

    def _candidates(self, candidates: Any, baseline: str | None) -> tuple[list[_Named], str]:
        """The candidates as (name, path, text, check timeout), and the baseline's name; bad input raises."""
        if not isinstance(candidates, (list, tuple)) or not candidates:
            raise ApiError("candidates: a non-empty list of {\"name\": ..., \"source\": ...}")
        named: list[_Named] = []
        for i, c in enumerate(candidates):
            if not isinstance(c, dict) or not isinstance(c.get("source"), str):
                raise ApiError(f"candidates[{i}]: expected {{\"name\": ..., \"source\": ...}} with the whole file")
            name = str(c.get("name") or f"candidate {i + 1}")
            if name in (n.name for n in named):
                raise ApiError(f"candidates[{i}]: the name {name!r} is used twice")
            text = self._text(c["source"], f"candidates[{i}].source")
            budget = c.get("timeout_s")
            if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                       or not 0 < budget <= 3600):
                raise ApiError(f"candidates[{i}].timeout_s: seconds per spec, more than 0 and at most 3600")
            if c.get("path"):
                full = str(self._path(c["path"]))
            else:  # a name for line maps and tracebacks only: nothing is written there
                safe = re.sub(r"[^\w.-]", "_", name)
                full = str(self.root / f"<{safe}>.py")
            named.append(_Named(name, full, text, float(budget) if budget is not None else None))
        base = baseline if baseline is not None else named[0].name
        if base not in (n.name for n in named):
            raise ApiError(f"baseline: no candidate named {base!r}")
        return named, base

    def _evaluate(self, item: _Named, kernel: str | None, target: str,
                  cancel: threading.Event | None) -> tuple[CheckResult, MeasureResult | None]:
        """A candidate's verdict and, only when every spec is correct, its latency: a reward is never computed
        from a run that was not verified."""
        checked = self._check(item.path, item.text, kernel, cancel, timeout_s=item.timeout_s)
        if not checked.ok or (cancel is not None and cancel.is_set()):
            return checked, None
        return checked, self._latency(item.path, item.text, kernel, [target], cancel)

    def compare(self, candidates: Sequence[dict[str, Any]], *, kernel: str | None = None,
                baseline: str | None = None, target: str = "H200", cancel: threading.Event | None = None,
                progress: Callable[[int, int, str], None] | None = None) -> CompareResult:
        """Check every candidate (a dict with "name" and "source", each a whole file with its spec, optionally
        "path" and "timeout_s", its own check time limit per spec) with the hardened verdict and time the ones
        that pass (measured on a GPU, else the roofline estimate for `target`); rank the passing ones by latency,
        then every candidate that failed a check, a suspicious timing or had no latency, each with its reason,
        and give each a rank-based reward within the group (docs/api.md). `baseline`: the candidate the speedups
        are against (default: the first). `progress(done, total, name)` hears of each candidate finished;
        setting `cancel` kills the checking processes. Runs the candidates' code: needs trust."""
        self._require_run("comparing candidates")
        named, base = self._candidates(candidates, baseline)
        done = [0]
        done_lock = threading.Lock()

        def evaluate(item: _Named) -> tuple[CheckResult, MeasureResult | None]:
            result = self._evaluate(item, kernel, target, cancel)
            with done_lock:
                done[0] += 1
                n = done[0]
            if progress is not None:
                progress(n, len(named), item.name)
            return result

        with ThreadPoolExecutor(max_workers=min(self.max_parallel, len(named))) as pool:
            evaluated = list(pool.map(evaluate, named))
        return _scrub(_rank(named, evaluated, base, kernel), _secret_values())

    def submit(self, candidates: Sequence[dict[str, Any]], *, kernel: str | None = None,
               baseline: str | None = None, target: str = "H200") -> str:
        """Start `compare` on `candidates` in the background and return the batch's id at once; `poll(id)` says
        how far it is and gives the ranking when every candidate is done, `cancel(id)` stops it. Candidates run
        `max_parallel` at a time, each with its own "timeout_s" where given. Runs their code: needs trust."""
        self._require_run("comparing candidates")
        named, base = self._candidates(candidates, baseline)
        batch = _Batch(named, base, kernel, target)
        with self._lock:
            self._batches[batch.id] = batch
            while len(self._batches) > 64:  # the oldest finished batches go first
                oldest = next((k for k, b in self._batches.items() if b.finished), None)
                if oldest is None:
                    break
                del self._batches[oldest]
        batch.start(self, max_workers=self.max_parallel)
        return batch.id

    def poll(self, batch: str) -> BatchStatus:
        """Where batch `batch` stands: each candidate's state ("queued", "running", "done", "cancelled") and,
        once done, its verdict; `result` (a CompareResult with the rewards) when every candidate is done."""
        return self._batch(batch).status()

    def cancel(self, batch: str) -> BatchStatus:
        """Stop batch `batch`: queued candidates never start, running ones have their checking processes
        killed; returns the batch's status."""
        found = self._batch(batch)
        found.cancel.set()
        return found.status()

    def _batch(self, batch: str) -> _Batch:
        with self._lock:
            found = self._batches.get(str(batch))
            if found is None:
                known = ", ".join(self._batches) or "none"
                raise ApiError(f"no batch {batch!r} (batches: {known})")
            return found

    # --- many files at once ------------------------------------------------------------------------------------

    def check_files(self, paths: Sequence[str | os.PathLike], *, targets: Sequence[str] = (),
                    run_checks: bool = False, latency: bool = False, confined: bool = True,
                    history: bool = False, progress: Callable[[str, int, int], None] | None = None) -> BatchResult:
        """Files and folders at once, as `kernel-lsp check` and `kernel-lsp report` do: every Triton, NKI and CUDA
        source under `paths` analysed, with launch sites checked across files; with `targets`, every kernel compiled
        for them; with `run_checks`, every spec checked (runs the files' code: needs trust); with `latency` as well,
        every kernel that passed timed at its bench shapes (measured on a GPU, with the roofline fraction of its
        counted work, else estimated). `confined=False` lets paths lie outside the workspace (the command line
        names its own files); the workspace's root still holds the caches. `history`: every kernel's timing history
        kept in the workspace as well. `progress(what, done, total)` hears of "analysing", "compiling", "checking"
        and "timing"."""
        from .engine.batch import check_paths
        from .engine.files import read_source

        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        if run_checks:
            self._require_run("checking specs")
        given: dict[str, str] = {}  # the path checked -> the path as given
        for p in paths:
            if confined:
                self._path(p)
            full = str(p) if os.path.isabs(p) else os.path.join(self.root, p)
            given[full] = str(p)
        names = _target_names(targets) if targets else []  # no targets: nothing compiled
        record = check_paths(list(given), self.settings, names, root=self.root, run_specs=run_checks,
                             latency=run_checks and latency, progress=progress)
        record.missing = [given.get(m, m) for m in record.missing]
        files = []
        for path, problems in record.problems.items():
            entry = record.index.files.get(path)
            files.append(AnalyzeResult(path, _kernel_infos(entry.analysis if entry is not None else None),
                                       [_finding(p, path) for p in problems]))
        by_file: dict[str, list[VerdictInfo]] = {}
        for path, v in record.verdicts:
            by_file.setdefault(path, []).append(_verdict(v))
        checks = [CheckResult(path, all(v.ok for v in vs), vs, []) for path, vs in by_file.items()]
        timed = []
        for report in record.latency:
            counted = None
            if any(e.source == "measured" for e in report.entries):
                text = read_source(report.path, self.settings.max_file_bytes).text or ""
                counted = self._count_work(report.path, text, report.entries)
            timed.append(_measure_result(report.path, report, counted))
        worst = record.worst()
        stats = record.index.stats()
        cuda = [CudaKernelInfo(k.path, k.name, k.line + 1 if k.line >= 0 else None, k.target, k.registers,
                               k.spill_bytes, k.stack_bytes, k.shared_bytes) for k in record.cuda]
        uncompiled = [UncompiledKernel(r.path, r.kernel, r.span.start_line + 1, r.target.name, r.plan_error)
                      for r in record.compiled if r.plan_error]
        kernels = [(f.path, k.name) for f in files for k in f.kernels]
        plain = BatchResult(
            files, list(record.missing), [c for r in record.compiled for c in _compiled_configs(r)], checks, timed,
            record.latency_source, list(record.messages), _SEVERITY.get(worst) if worst is not None else None,
            BatchStats(stats["files"], stats["kernelFiles"], stats["tritonKernels"], stats["nkiKernels"],
                       stats["launchSites"], stats["openDocuments"]),
            list(dict.fromkeys(r.target.name for r in record.compiled)),
            {k: v for k, v in record.compile_stats.items() if k != "pool"}, uncompiled, cuda,
            _history(record.root, list(dict.fromkeys(kernels))) if history else [], list(record.infrastructure_lost))
        return _scrub(plain, _secret_values())

    # --- propose_edit ------------------------------------------------------------------------------------------

    def propose_edit(self, path: str | os.PathLike, new_source: str, *, proposer: str = "kernel_lsp.api"
                     ) -> ProposalResult:
        """Write `new_source` for `path` as a proposal under `<root>/.kernel-lsp/proposals/`: a unified diff for a
        person to read, and beside it what the editor needs to offer it ("Review proposal from <proposer>"),
        accept or reject it (engine/proposals.py). Verified first (static analysis; and the checker when the
        folder's code may run). The file at `path` is never written."""
        from .engine import proposals

        full, old = self._input(path, None)
        new = self._text(new_source, "new_source")
        rel = os.path.relpath(full, self.root)
        diff = proposals.unified_diff(old, new, rel)
        if not diff:
            raise ApiError(f"new_source is the same as {rel}: nothing to propose")
        notes: list[str] = []
        findings = [f for f in self.analyze(path=full, source=new).findings if f.severity in ("error", "warning")]
        verdicts: list[VerdictInfo] = []
        checked_ok = False
        if self.may_run:
            checked = self._check(full, new, None)
            verdicts, checked_ok = checked.verdicts, checked.ok
            notes += checked.errors
        else:
            notes.append(f"checks not run: {self.root} is not trusted (kernel-lsp trust), so the proposal is "
                         "verified by static analysis only")
        errors = [f for f in findings if f.severity == "error"]
        verified = checked_ok and not errors
        if verified:
            verdict = f"verified: {len(verdicts)} spec{'s' if len(verdicts) != 1 else ''} correct"
        else:
            bad = next((v for v in verdicts if not v.ok), None)
            verdict = ("NOT verified: " + (f"{bad.kernel} {bad.status}" if bad else
                                           f"{errors[0].code} at line {errors[0].line}" if errors else
                                           "checks not run" if not self.may_run else
                                           (notes[0] if notes else "no spec checked")))
        header = f"# Proposed change to {rel} by {proposer}: {'verified' if verified else 'NOT verified'}\n"
        header += "".join(f"# {' '.join(n.split())}\n" for n in notes)
        header += "".join(f"# {v.kernel}/{v.spec}: {v.status}: {' '.join(v.message.split())}\n" for v in verdicts)
        from .engine.redact import scrubber

        secrets = scrubber(_secret_values())
        # The proposal's files are read by people and agents: a secret in the new source or the diff is blanked
        # there as everywhere else (accepting it writes the blank, never the secret).
        written = proposals.write(self.root, full, old, new, proposer=_scrub(str(proposer), secrets),
                                  verified=verified, verdict=_scrub(" ".join(verdict.split()), secrets),
                                  header=_scrub(header, secrets), scrub=secrets)
        diff = secrets(diff)
        return _scrub(ProposalResult(full, written.diff_path, diff, verified, verdicts, findings, notes), secrets)

    # --- the editor's calls ------------------------------------------------------------------------------------
    # The language server compiles, checks and times the text of an open buffer, on its own event loop, stopping
    # the work when a newer edit or request supersedes it. Compiles return the `CompileResult` of `compile`, checks
    # and timing the `CheckResult` and `MeasureResult` of `check` and `measure`, and the tiling search the
    # `TuneResult` of `tune`, so the editor shows what the command line and the MCP server print.

    def _buffer(self, path: str | os.PathLike, source: str, confined: bool) -> tuple[str, str]:
        """(absolute path as given, text) of an editor buffer; the path is not resolved, so results and histories
        stay filed under the name the editor uses."""
        full = os.path.abspath(path)
        if confined:
            self._path(full)
        return full, self._text(source)

    def _editor_service(self, say: Callable[[str], None] | None) -> Any:
        """The compile service of the editor's calls, on the caller's event loop (made on the first call): the
        editor's compiles run on its own loop, while `compile` runs its service on a loop thread of its own."""
        loop = asyncio.get_running_loop()
        if self._editor is not None and self._editor[0] is not loop:
            raise ApiError("compile_buffer and ir_buffer run on one event loop per Workspace: await "
                           "close_compiles() on the first before calling them from another")
        if self._editor is None:
            # Caches in the folder only when the caller vouches for it (the editor: its session's trust, which a
            # folder opened without a workspace never has), else in the user's cache.
            self._editor = (loop, self._new_service(self.allow_run, say))
        return self._editor[1]

    async def close_compiles(self) -> None:
        """Stop the compile service of `compile_buffer` and `ir_buffer` and its worker processes (a compile still
        running ends cancelled); the next call starts a new one."""
        editor, self._editor = self._editor, None
        if editor is not None:
            await editor[1].close()

    def hold_compiles(self, seconds: float) -> None:
        """Start none of `compile_buffer`'s queued jobs for `seconds` from now (someone is typing)."""
        if self._editor is not None:
            self._editor[1].hold(seconds)

    def compile_counts(self) -> dict[str, Any]:
        """What the compile service of `compile_buffer` did: cache hits and misses, compiles, timeouts, crashes, and
        its workers' figures under "pool"; empty before its first compile."""
        return self._editor[1].stats() if self._editor is not None else {}

    async def compile_buffer(self, path: str | os.PathLike, source: str, *, analysis: Any = None,
                             targets: Sequence[str] | None = None, launches: Sequence[tuple] | None = None,
                             priority: int = 0, first: str | None = None,
                             progress: Callable[[int, int], None] | None = None,
                             on_partial: Callable[[CompileResult], None] | None = None, partial_every: float = 0.0,
                             say: Callable[[str], None] | None = None, confined: bool = True) -> CompileResult:
        """Compile the kernels of `source`, the text of `path` as an editor holds it, for `targets` (default: the
        settings'), on the caller's event loop: the `CompileResult` that `compile` returns (no IR text: `ir_buffer`
        gives it). `analysis`: the text's `FileAnalysis` where the caller has it. `launches`: (launch site, its
        file's text, its path) for the workspace's launches of these kernels (default: the file's own). Lower
        `priority` numbers run first; the jobs of kernel `first` go ahead of the others. `progress(jobs, done)`
        hears how many jobs were planned, then of each one that finished. `on_partial(result)` hears the results of
        the jobs finished so far, at most every `partial_every` seconds (the first at once), never after this call
        returns. `say` hears where compiles run when not where asked (a Ray cluster lost). Cancelling the call
        stops its jobs. The offline compile runs none of the workspace's code; its caches go under
        `<root>/.kernel-lsp` where the Workspace was made with `allow_run` (the caller vouches for the folder, as
        the editor does once it is trusted), else in the user's cache."""
        from .engine.compile import triton_installed

        full, text = self._buffer(path, source, confined)
        names = _target_names(list(self.settings.targets) if targets is None else targets)
        if not triton_installed():
            from .install import add_command

            raise ApiError("compiling needs triton in the server's Python environment: "
                           f"{add_command('triton>=3.6')}")
        if analysis is None:
            analysis = await asyncio.to_thread(self._analysis, full, text)
        service = self._editor_service(say)
        service.pool.prestart()  # a cold worker imports triton while the first kernel is planned
        memo, secrets = _Converted(), _secret_values()
        loop = asyncio.get_running_loop()
        latest: list = []
        timer: asyncio.TimerHandle | None = None
        shown_at = float("-inf")

        def show() -> None:
            nonlocal timer, shown_at
            timer, shown_at = None, loop.time()
            if on_partial is not None:
                on_partial(_scrub(_compile_result(full, latest, (), memo), secrets))

        def partly(reports: list) -> None:  # converted when shown, not after each job
            nonlocal latest, timer
            latest = reports
            if timer is None:
                wait = shown_at + partial_every - loop.time()
                if wait <= 0:
                    show()
                else:
                    timer = loop.call_later(wait, show)

        try:
            reports = await service.compile_file(full, text, analysis, names, launches, priority=priority,
                                                 progress=progress, first=first,
                                                 on_result=partly if on_partial is not None else None)
        finally:
            if timer is not None:
                timer.cancel()
        return _scrub(_compile_result(full, reports, (), memo), secrets)

    async def ir_buffer(self, path: str | os.PathLike, source: str, config: CompiledConfig, stage: str, *,
                        launches: Sequence[tuple] | None = None, say: Callable[[str], None] | None = None,
                        confined: bool = True) -> CompiledIR:
        """The IR at `stage` of `config`, a configuration `compile_buffer` compiled from `source` (with the same
        `launches`): its locations naming the user's file and lines, and which lines of the file each IR line comes
        from. The job is planned again from the text (the same text plans the same job) and its result read from
        the compile cache (compiled where it is not there); SASS is disassembled when asked. `text` is None where
        the stage is not available. ApiError where the text no longer has that configuration."""
        from .engine.compile.irmap import STAGES, relabel, source_lines_of_ir
        from .engine.compile.service import config_text
        from .engine.compile.specialize import plan_jobs

        full, text = self._buffer(path, source, confined)
        stage = str(stage).lower()
        if stage not in STAGES:
            raise ApiError(f"stage: unknown stage {stage!r} ({', '.join(STAGES)})")
        service = self._editor_service(say)

        def plan() -> list:
            sites = (list(launches) if launches is not None
                     else [(s, text, full) for s in self._analysis(full, text).launch_sites])
            from .engine.record.store import pins_for, qualname_at, recorded_for

            found = [k for k in self._analysis(full, text).kernels if k.name == config.kernel]
            qualname = qualname_at(text, found[0].name_span.start_line, config.kernel) if found else config.kernel
            recorded, stale = recorded_for(self.root, full, qualname, text)
            return plan_jobs(text, config.kernel, [config.target], path=full, launch_sites=sites,
                             pins=pins_for(self.settings.pins, self.root, full, qualname), recorded=recorded,
                             recorded_stale=stale)

        jobs = await asyncio.to_thread(plan)
        job = next((j for j in jobs if (j.config_label, config_text(j), j.num_warps, j.num_stages)
                    == (config.config, config.values, config.num_warps, config.num_stages)), None)
        if job is None:
            raise ApiError(f"{config.kernel} has no configuration {config.config} ({config.values}) on "
                           f"{config.target} in this text: compile it again")
        result, _ = await service.run_job(job, priority=-1)
        asm = result.asm
        on_request = {"sass"} if job.target.backend == "cuda" and asm.get("ptx") else set()  # disassembled when asked
        if stage in on_request and not asm.get(stage):
            asm = await service.asm_with_sass(job)
        available = [s for s in STAGES if asm.get(s) or s in on_request]
        if stage not in available:
            return CompiledIR(full, config.kernel, config.target, config.config, stage, None, {}, available)
        ir = asm[stage]
        lines = {n + 1: [u + 1 for u in users] for n, users in source_lines_of_ir(stage, ir, job).items()}
        return _scrub(CompiledIR(full, config.kernel, config.target, config.config, stage,
                                 relabel(stage, ir, job, full), lines, available), _secret_values())

    async def check_buffer(self, path: str | os.PathLike, source: str, *, kernels: Sequence[str] | None = None,
                           cancel: threading.Event | None = None, executor: Any = None, key: Any = None,
                           confined: bool = True) -> CheckResult:
        """Check the specs of `source`, the text of `path` as an editor holds it (or those of `kernels`): the
        `CheckResult` that `check` returns, except that a text with no spec to run has no error (an editor checks
        only files with specs). Setting `cancel` stops the checking process. `executor`: an engine executor
        (`engine.executor.make_executor`, e.g. a Ray cluster's) to run the checks as one of its jobs, `key` naming
        the job (a newer job with the same key supersedes it). `confined=False` lets the file lie outside the
        workspace (the root still goes on the checks' import path). Runs the file's code: needs trust."""
        from .engine.verify import CheckRequest, run_checks

        self._require_run("a check")
        full, text = self._buffer(path, source, confined)
        request = CheckRequest(full, text, tuple(kernels) if kernels else None, device=self.settings.check_device,
                               timeout_s=self._timeout(), memory_mb=self.memory_mb, root=str(self.root))
        if executor is not None:
            from .engine.batch import check_with

            report = await check_with(executor, request, self.settings.check_timeout_s, key=key)
        else:
            report = await asyncio.to_thread(run_checks, request, cancel)
        return _scrub(_check_result(full, report, kernels, explain_empty=False), _secret_values())

    async def measure_buffer(self, path: str | os.PathLike, source: str, *, kernels: Sequence[str] | None = None,
                             gpu: bool | None = None, compiled: Sequence[CompiledConfig] = (),
                             cancel: threading.Event | None = None, history: bool = True,
                             confined: bool = True, roofline: bool = True) -> MeasureResult:
        """Time the spec'd kernels of `source`, the text of `path` as an editor holds it (or `kernels`), at their
        bench shapes: the `MeasureResult` that `measure` returns. `gpu`: measure on this machine's GPU (each
        measurement with the roofline fraction of its counted work), or estimate with the roofline model for each
        of the settings' targets, on the settings' hardware table (None: where the checkDevice setting says).
        `compiled`: the file's compiled configurations (`CompileResult.configs`), whose registers and shared memory
        give an estimate's occupancy. `history`: compare with and add to the kernels' timing history under the root.
        `roofline=False`: leave out a measurement's roofline fraction (it counts the kernel's work on the CPU).
        Setting `cancel` stops the work's processes. Runs the file's code: needs trust."""
        from analyzers.hardware import parse_hardware_overrides

        from .engine.gpu import runs_on_gpu
        from .engine.latency import estimate_file, measure_file, record_estimates

        self._require_run("timing")
        full, text = self._buffer(path, source, confined)
        root = str(self.root)
        if gpu is None:
            gpu = runs_on_gpu(self.settings.check_device)
        names = list(kernels) if kernels else None
        if gpu:
            from .engine.latency.roofline import count_measured_work

            report = await asyncio.to_thread(measure_file, full, text, names, root, cancel=cancel, history=history)
            measured = [e for e in report.entries if e.source == "measured"]
            counted: list[dict] | str | None = None
            if roofline and measured and (cancel is None or not cancel.is_set()):  # how close it came to the roofs
                counted = await asyncio.to_thread(count_measured_work, full, text, measured, root, cancel=cancel)
            return _scrub(_measure_result(full, report, counted), _secret_values())
        table, _ = parse_hardware_overrides(self.settings.hardware or None)
        report = await asyncio.to_thread(estimate_file, full, text, list(self.settings.targets), names, root,
                                         hardware=table, resources=_resources_lookup(compiled), cancel=cancel)
        if history and (cancel is None or not cancel.is_set()):
            await asyncio.to_thread(record_estimates, report, root)
        return _scrub(_measure_result(full, report, None), _secret_values())

    async def tune_buffer(self, path: str | os.PathLike, source: str, *, kernel: str, target: str = "H200",
                          progress: Callable[[str, float], None] | None = None,
                          cancel: threading.Event | None = None, say: Callable[[str], None] | None = None,
                          cache: bool = True, confined: bool = True) -> TuneResult:
        """The tiling search for `kernel` of `source`, the text of `path` as an editor holds it, on `target`, as
        `tune` does but with the settings' hardware table and compile settings (the `searchCompileBudget`
        best-ranked candidates compiled by a compile service of the workspace), and, with `executor: ray`, the
        candidates timed on the cluster at `rayAddress` (`say` hears why where it cannot be; they are timed here
        then). Returns the `TuneResult` that `tune` returns (every candidate tried, the edits 1-based).
        `cache=False`: keep nothing under the root (no search or compile cache). `progress(message, fraction)` and
        `cancel` as for `tune`. Runs the file's code: needs trust."""
        from analyzers.hardware import parse_hardware_overrides

        from .engine.latency import search_tiling
        from .engine.latency.cluster import cluster_timer
        from .engine.latency.resources import service_compiler

        self._require_run("the tiling search")
        full, text = self._buffer(path, source, confined)
        settings = self.settings
        table, _ = parse_hardware_overrides(settings.hardware or None)
        root = str(self.root) if cache else None

        def search() -> TuneResult:  # in a worker thread, which also waits for the cluster
            with cluster_timer(settings.ray_address or None, say or (lambda line: None),
                               wanted=settings.executor == "ray") as timer:
                return _tune_result(search_tiling(full, text, kernel, target, root, timer=timer, progress=progress,
                                                  cancel=cancel, hardware=table,
                                                  compiler=service_compiler(root, settings),
                                                  compile_budget=settings.search_compile_budget))

        return await asyncio.to_thread(search)
