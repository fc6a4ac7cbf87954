"""The compile service: plans a file's compile jobs, serves them from the result cache or the worker pool, and
turns the results into problems (KC001–KC011, registered in analyzers/rules/compile.py).

No triton import here: compiles run in `WorkerPool` processes (`compile_job` below is what they execute). The
pool starts lazily (the server starts its first worker when it first compiles a file with kernels, so that
triton's import overlaps with planning), so a workspace that never compiles starts no process and writes nothing. Triton's own cache lives in `<workspace>/.kernel-lsp/triton-cache`, kernel-lsp's results in
`<workspace>/.kernel-lsp/cache` (content-addressed by the job key, which ignores where the kernel sits: a cached
result is re-mapped with `relocate` to the lines of the job that asks).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import re
import shutil
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from analyzers.model import FileAnalysis, LaunchSite, Problem, Related, Severity, Span
from analyzers.rules import RULES
from analyzers.targets import TargetSpec, parse_target

from ...settings import Settings
from ..cache import WORKSPACE_DIR, ResultCache, unwritable
from ..executor import make_executor
from ..pool import Outcome, Status, WorkerPool
from .jobs import NOT_COMPILED, CompileError, CompileJob, CompileResult, Target
from ..record.store import pins_for, qualname_at, recorded_for
from .specialize import ASSUMED_OPTION, make_target, plan_jobs
from .irmap import user_line
from .worker import CACHE_DIR_ENV, relocate

if TYPE_CHECKING:
    from ..ray_executor import RayExecutor

log = logging.getLogger(__name__)

COMPILE_FN = "kernel_lsp.engine.compile.service:compile_job"
WARM_FN = "kernel_lsp.engine.compile.service:warm_worker"
TRITON_CACHE = "triton-cache"
# Files at least this large are planned in a separate process. Planning is pure Python and keeps the file's syntax
# trees: a 1.7 MB file with 500 kernels takes seconds to parse and about 0.2 s per kernel, which in a thread holds
# the GIL and grows the heap the server's collector rescans (pauses of up to a second); below this size a thread
# takes milliseconds and spares the process start.
PLAN_IN_PROCESS_BYTES = 256 * 1024
# Not the kernel's fault: try again next time. A timeout is cached, with its timeout (see _cached).
COMPILE_NICENESS = 10  # compile workers (and the ptxas they start) run at this much lower priority
_UNCACHED_KINDS = ("crash", "internal", "cancelled")


# --- what runs in the worker -------------------------------------------------------------------------------------


def warm_worker() -> None:
    """Pool initializer: import triton once per worker, so that its import does not count against job timeouts."""
    try:
        import triton  # noqa: F401
    except ImportError:  # run_job reports it per job
        pass


def compile_job(job: CompileJob) -> CompileResult:
    """A worker's job: run_job without SASS disassembly (resources come from the PTX and ptxas' report)."""
    from .worker import run_job

    return run_job(job, sass=False)


def plan_in_process(text: str, kernel: str, targets: list[Target], path: str, sites: list,
                    pins: dict | None, recorded: tuple = (), recorded_stale: str = "") -> list[CompileJob]:
    """plan_jobs, in the planning process (large files)."""
    return plan_jobs(text, kernel, targets, path=path, launch_sites=sites, pins=pins, recorded=recorded,
                     recorded_stale=recorded_stale)


def compile_job_with_sass(job: CompileJob) -> CompileResult:
    """The same compile with the SASS disassembly, for Show IR: triton's cache makes the compile itself a hit."""
    from .worker import run_job

    return run_job(job, sass=True)


# --- results -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobReport:
    job: CompileJob
    result: CompileResult
    cached: bool


@dataclass
class KernelCompileReport:
    """One kernel of one file compiled for one target: a result per configuration."""

    path: str
    kernel: str
    target: Target
    span: Span  # the kernel's name in its def line: where kernel-wide problems go
    jobs: list[JobReport] = field(default_factory=list)
    plan_error: str | None = None  # the kernel could not be prepared for compiling


def config_text(job: CompileJob) -> str:
    """`BLOCK_SIZE=1024` style label of a job's constexpr values (the configuration label when there are none)."""
    parts = [f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in job.constexprs]
    return ", ".join(parts) if parts else job.config_label


def _label(job: CompileJob) -> str:
    """The configuration as the user recognises it: "autotune config 1 (BLOCK=..)", "launch at line 40 [BLOCK=..]"."""
    label = "the default configuration" if job.config_label == "default" else job.config_label
    if job.constexprs and not job.config_label.startswith("autotune"):
        return f"{label} [{config_text(job)}]"
    return label


def _where(job: CompileJob) -> str:
    return f"on {job.target.name} in {_label(job)}"


def _has_tensor_cores(spec: TargetSpec) -> bool:
    if spec.backend == "cuda":
        return int(spec.arch) >= 70
    return str(spec.arch).startswith(("gfx908", "gfx90a", "gfx94", "gfx95"))


def _uses_dot(job: CompileJob) -> bool:
    return ".dot(" in job.module_source or "dot_scaled(" in job.module_source


def _problem(code: str, span: Span, message: str, kernel: str, related: tuple[Related, ...] = (),
             severity: Severity | None = None) -> Problem:
    return Problem(code, message, severity or RULES[code].severity, span, None, related, kernel)


def _span_of(err: CompileError, fallback: Span) -> Span:
    if err.line is None:
        return fallback
    return Span.point(err.line, err.col or 0)


def compile_problems(report: KernelCompileReport, target_spec: TargetSpec | None = None) -> list[Problem]:
    """Problems (KC001–KC011) of one kernel on one target. Pure: no I/O. The same error in several
    configurations is reported once, naming them all."""
    spec = target_spec or parse_target(report.target.name)
    kernel, here = report.kernel, report.span
    out: list[Problem] = []
    if report.plan_error:
        if report.plan_error.startswith(NOT_COMPILED):
            out.append(_problem("KC009", here, f"{kernel} was not compiled for {spec.name}: "
                                f"{report.plan_error[len(NOT_COMPILED):]}.", kernel))
        else:
            out.append(_problem("KC006", here, f"kernel-lsp could not compile {kernel} for {spec.name}: "
                                f"{report.plan_error}. This says nothing wrong about the kernel; report it if the "
                                "kernel is valid.", kernel))
        return out
    # Each group keeps the error or warning of its first job: it is the one whose place the problem shows.
    grouped: dict[tuple, tuple[CompileError, list[JobReport]]] = {}
    for jr in report.jobs:
        r = jr.result
        if r.error is not None:
            kind = r.error.kind
            code = ("KC006" if kind in ("timeout", "crash", "internal") else "KC008" if kind == "offline"
                    else "KC010" if kind == "version" else None if kind == "cancelled"
                    else "KC009" if _from_assumed_types(jr.job, r.error) else "KC001")
            if code:
                key = (code, r.error.line, r.error.col, r.error.message, r.error.related)
                grouped.setdefault(key, (r.error, []))[1].append(jr)
        for w in r.warnings:
            grouped.setdefault(("KC002", w.line, w.col, w.message, ()), (w, []))[1].append(jr)
    for (code, _line, _col, message, related), (err, jrs) in grouped.items():
        labels = "; ".join(dict.fromkeys(_label(jr.job) for jr in jrs))
        where = f"on {spec.name} in {labels}"
        rel = tuple(Related(Span.point(ln, c or 0), msg) for ln, c, msg in related if ln is not None)
        if code == "KC001" and err.line is None:
            # Rejected before any line of the kernel (an option such as num_warps=3): the fix is where the
            # configuration is set, not at the kernel's def.
            msg = (f"{kernel} does not compile {where}: {message}. The compiler rejects this configuration as a "
                   f"whole, not a line of the kernel: change it where it is set ({labels}).")
        elif code == "KC001":
            msg = (f"{kernel} does not compile {where}: {message}. Fix this line"
                   + (" (the related locations show the calls that reach it)" if rel else "")
                   + "; the compiler rejects it for every launch with this configuration.")
        elif code == "KC002":
            msg = f"compiler warning for {kernel} {where}: {message}."
        elif code == "KC009":
            types = "; ".join(n for n in jrs[0].job.notes if ": assumed *" in n)
            msg = (f"kernel-lsp could not compile {kernel} {where} with the pointer types it assumed ({types}): "
                   f"{message}. Pin the types (an annotation such as `x_ptr: \"*bf16\"`, or the `pins` setting) "
                   "to get its compile facts; this need not be an error of the kernel.")
        elif code == "KC010":
            msg = f"{kernel} does not compile {where}: {message}."
        elif code == "KC008":
            msg = (f"{kernel} was not compiled {where}: {message}. The offline compile runs none of the "
                   "workspace's code, so its registers, spills and compile errors are not known; this says nothing "
                   "wrong about the kernel.")
        else:
            what = {"timeout": "it timed out", "crash": "the compiler crashed",
                    "internal": "it failed inside kernel-lsp"}[err.kind]
            hint = ("raise the compileTimeoutS setting if the kernel is just large" if err.kind == "timeout"
                    else "report it with this message" if err.kind == "internal"
                    # the pool's own words for a worker killed by something else (engine/pool.py)
                    else "it compiles again when the file changes" if "from outside kernel-lsp" in message
                    else "a smaller configuration may compile; report it with this message")
            msg = (f"kernel-lsp could not compile {kernel} {where}: {what} ({message}). Nothing is known about this "
                   f"configuration, and nothing wrong is said of the kernel; {hint}.")
        out.append(_problem(code, _span_of(err, here) if code not in ("KC006", "KC009") else here, msg, kernel, rel))
    for jr in report.jobs:
        r, res = jr.result, jr.result.resources
        if not r.ok:
            continue
        where = _where(jr.job)
        # Spills and shared memory scale with the element types: with assumed pointer types they are facts of a
        # kernel nobody may run (an fp8 GEMM compiled as fp16 needs twice the shared memory), so they are
        # information that names the assumption, not a verdict.
        types = _resource_assumptions(jr.job)
        assumed = f" with what kernel-lsp assumed ({types})" if types else ""
        pin = " Pin these (the `pins` setting) to know." if types else ""
        if res.spill_bytes:
            out.append(_problem("KC003", here, f"{kernel}: {res.spill_bytes} bytes spilled {where}{assumed} "
                                f"({res.registers} registers per thread): use smaller block sizes or more "
                                f"num_warps so that each thread holds fewer values.{pin}", kernel,
                                severity=Severity.INFO if types else None))
        if res.shared_bytes is not None and res.shared_bytes > spec.shared_per_block:
            least = _least_shared_bytes(jr.job, res.shared_bytes) if types else res.shared_bytes
            if types and least > spec.shared_per_block:
                # Even with 1-byte elements (and one pipeline stage, where those were assumed) it does not fit:
                # no assumption changes the verdict.
                out.append(_problem("KC004", here, f"{kernel} fails at launch {where} for every element type: it "
                                    f"needs {res.shared_bytes // 1024} KB of shared memory per block{assumed}, and "
                                    f"at least {least // 1024} KB with 1-byte elements; {spec.name} allows "
                                    f"{spec.shared_per_block // 1024} KB. Use smaller tiles or fewer num_stages.",
                                    kernel))
            elif types:
                out.append(_problem("KC004", here, f"{kernel} would fail at launch {where}{assumed}: it needs "
                                    f"{res.shared_bytes // 1024} KB of shared memory per block, {spec.name} allows "
                                    f"{spec.shared_per_block // 1024} KB.{pin}", kernel, severity=Severity.INFO))
            else:
                out.append(_problem("KC004", here, f"{kernel} compiles but fails at launch {where}: it needs "
                                    f"{res.shared_bytes // 1024} KB of shared memory per block, {spec.name} allows "
                                    f"{spec.shared_per_block // 1024} KB. Use smaller tiles or fewer num_stages, or "
                                    f"leave this configuration out for {spec.name}.", kernel))
        for note in res.ptxas_notes:
            out.append(_problem("KC011", here, f"{kernel} {where}{assumed}: ptxas reports {note}.{pin}", kernel))
        if _has_tensor_cores(spec) and _uses_dot(jr.job) and not res.matrix_instructions:
            out.append(_problem("KC005", here, f"{kernel}: tl.dot does not use tensor cores {where}; it runs on "
                                "the FMA units. Use 16-bit (or tf32) inputs and tiles of at least 16 in every "
                                "dimension.", kernel))
    # One warning per line and kind, naming every configuration where the access stayed scalar.
    scalar: dict[tuple[int, str], list[tuple[JobReport, int, int]]] = {}
    for jr in report.jobs:
        if jr.result.ok:
            for module_line, kind, bits, per_thread in jr.result.resources.scalar_accesses:
                line = user_line(jr.job, module_line)
                if line is not None:
                    scalar.setdefault((line, kind), []).append((jr, bits, per_thread))
    for (line, kind), hits in sorted(scalar.items()):
        jr, bits, per_thread = hits[0]
        where = _where(jr.job) if len(hits) == 1 else f"on {spec.name} in {len(hits)} configurations"
        out.append(_problem(
            "KC007", Span.point(line, 0), f"{kernel}: the global {kind}s on this line compile to one {bits}-bit "
            f"access per element {where}, although each thread handles {per_thread} elements. The compiler could "
            "not prove the offsets contiguous and 16-byte aligned: use unit strides for the innermost dimension, "
            "sizes that are multiples of 16, or tl.multiple_of / tl.max_contiguous hints.", kernel))
    return out


def _resource_assumptions(job: CompileJob) -> str:
    """What a compile assumed that its registers, spills and shared memory depend on: pointer element types, and
    launch options the launch computes at run time (compiled with triton's defaults)."""
    options = tuple(f"{name}: {ASSUMED_OPTION}" for name in ("num_warps", "num_stages"))
    return "; ".join(n for n in job.notes if ": assumed *" in n or n.startswith(options))


_ELEMENT_BYTES = {"fp8e4nv": 1, "fp8e5": 1, "fp8e4b15": 1, "fp8e4b8": 1, "fp8e5b16": 1, "i8": 1, "u8": 1,
                  "fp16": 2, "bf16": 2, "i16": 2, "fp32": 4, "tf32": 4, "i32": 4, "fp64": 8, "i64": 8}
_ASSUMED_POINTER = re.compile(r": assumed \*(\w+)")
_ASSUMED_STAGES = re.compile(r"^num_stages: " + ASSUMED_OPTION + r" (\d+)")


def _least_shared_bytes(job: CompileJob, shared: int) -> int:
    """A lower bound of the shared memory under every value of what was assumed: shared memory scales at most
    with the element size of the assumed pointers (1 byte is the least) and with an assumed num_stages (1 the
    least)."""
    names = [m.group(1) for n in job.notes for m in _ASSUMED_POINTER.finditer(n)]
    if any(name not in _ELEMENT_BYTES for name in names):
        return 0  # a type whose size is not known here: no bound
    scale = max((_ELEMENT_BYTES[name] for name in names), default=1)
    stages = [int(m.group(1)) for n in job.notes if (m := _ASSUMED_STAGES.match(n))]
    if any(n.startswith(f"num_warps: {ASSUMED_OPTION}") for n in job.notes) and not stages:
        return shared // scale
    return shared // scale // max(stages, default=1)


_TYPE_WORDS = re.compile(r"dtype|bitcast|bitwidth|\bu?int\d+|\bfp\d+|float\d+|bf(loat)?16|pointer type")


def _from_assumed_types(job: CompileJob, err: CompileError) -> bool:
    """A type error in a kernel whose pointer types kernel-lsp assumed: likely the assumption's, not the user's."""
    return any(": assumed *" in n for n in job.notes) and bool(_TYPE_WORDS.search(err.message))


# `return value` on its own line, or a one-line `def f(x): return value`.
_RETURNS_VALUE = re.compile(r"\s+return\s+[^\s#]|\s*def\s[^#]*\)\s*(->[^:]*)?:\s*return\s+[^\s#]")


def _is_helper(name: str, analysis: FileAnalysis, text: str) -> bool:
    call = re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(")
    lines = text.splitlines()
    own = next((k for k in analysis.kernels if k.name == name), None)
    if own is not None and any(_RETURNS_VALUE.match(line) for line in lines[own.span.start_line:own.span.end_line + 1]):
        return True  # a launched kernel cannot return a value: only a @jit helper does, called from another file
    for other in analysis.kernels:
        if other.name == name:
            continue
        body = "\n".join(lines[other.span.start_line:other.span.end_line + 1])
        if call.search(body):
            return True
    return False


def _size_of(job: CompileJob) -> int:
    """A rough measure of how long a job compiles: its tile (the product of its integer constexprs) times its
    pipeline stages. Only orders a kernel's configurations."""
    size = job.num_stages
    for _, value in job.constexprs:
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            size *= value
    return size


# --- the service -------------------------------------------------------------------------------------------------


class CompileService:
    def __init__(self, root: str | Path, settings: Settings | None = None, *, pool: WorkerPool | None = None,
                 cache: ResultCache | None = None, fn_path: str = COMPILE_FN, timeout: float | None = None,
                 private_dir: Path | None = None, say: Callable[[str], None] | None = None):
        """`say` gets what the user should read about where compiles run (a Ray cluster lost, ...)."""
        self.root = Path(root)
        self.say = say
        self.settings = settings or Settings()
        self.fn_path = fn_path
        self.timeout = float(timeout if timeout is not None else self.settings.compile_timeout_s)
        # `<root>/.kernel-lsp` unless the caller keeps this workspace's files elsewhere (an untrusted one).
        self.private_dir = private_dir or self.root / WORKSPACE_DIR
        self.cache = cache or ResultCache.in_private_dir(self.private_dir, self.settings.cache_max_mb * 2**20)
        self.triton_cache_dir = self.private_dir / TRITON_CACHE
        self._pool: WorkerPool | RayExecutor | None = pool
        self._planner: ProcessPoolExecutor | None = None  # started for the first large file
        self._looked_up: dict[int, tuple[CompileJob, CompileResult | None]] = {}  # id(job) -> (job, cached result)
        self._inflight: dict[str, asyncio.Future] = {}
        self.counts = dict.fromkeys(["cacheHits", "cacheMisses", "compiles", "timeouts", "crashes"], 0)
        self._temporary_cache: Path | None = None  # the triton cache used when ours cannot be written
        self._cache_off_said = False

    def _usable_triton_cache(self) -> None:
        """Triton writes every compile into its cache folder: where ours cannot be written (read-only, full),
        compile in a temporary one instead, and turn the result cache off, with one message. Caching is an
        optimisation; compiling must not fail for it (KC006 on every compile)."""
        why = unwritable(self.triton_cache_dir)
        if why is None:
            return
        import tempfile

        for base in (None, "/dev/shm"):
            try:
                folder = Path(tempfile.mkdtemp(prefix="kernel-lsp-triton-", dir=base))
            except OSError:
                continue
            if unwritable(folder) is None:
                break
            shutil.rmtree(folder, ignore_errors=True)
        else:
            return  # nowhere to write: the compiles will say what failed
        self._temporary_cache = folder
        self.triton_cache_dir = folder
        self.cache.off = self.cache.off or why
        self._say_cache_off(why)

    def _say_cache_off(self, why: str) -> None:
        if self._cache_off_said:
            return
        self._cache_off_said = True
        text = (f"caching is off: {self.private_dir} cannot be written ({why}); kernels are compiled without it "
                "(nothing is kept between runs)")
        log.info("%s", text)
        if self.say is not None:
            self.say(text)

    @property
    def pool(self) -> WorkerPool | RayExecutor:
        if self._pool is None:
            self._usable_triton_cache()
            env: dict[str, str | None] = {CACHE_DIR_ENV: str(self.triton_cache_dir),
                                          "TRITON_CACHE_DIR": str(self.triton_cache_dir), "TRITON_INTERPRET": None}
            def local() -> WorkerPool:
                # Below the server's priority: an analysis of the buffer being typed in never waits for a compile.
                return WorkerPool(self.settings.compile_workers or None, initializer=WARM_FN, env=env,
                                  niceness=COMPILE_NICENESS)

            # With `executor: ray` compiles are Ray tasks (a CPU each) and this pool is the fallback; results land
            # in this workspace's cache either way. The nodes use their own triton cache.
            self._pool = make_executor(self.settings.executor, local, address=self.settings.ray_address or None,
                                       say=self.say)
        return self._pool

    @property
    def planner(self) -> ProcessPoolExecutor:
        if self._planner is None:
            self._planner = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        return self._planner

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.counts)
        if self._pool is not None:
            out["pool"] = self._pool.stats()
        return out

    async def close(self) -> None:
        if self._planner is not None:
            self._planner.shutdown(wait=False, cancel_futures=True)
            self._planner = None
        if self._pool is not None:
            await self._pool.close()
        if self._temporary_cache is not None:
            shutil.rmtree(self._temporary_cache, ignore_errors=True)
            self._temporary_cache = None

    def hold(self, seconds: float) -> None:
        """Start no queued compile for `seconds` (the user is typing); one running carries on, at low priority."""
        if isinstance(self._pool, WorkerPool):
            self._pool.hold(seconds)

    async def compile_file(
        self, path: str, text: str, analysis: FileAnalysis, targets: Sequence[str | Target],
        launch_sites: Sequence[LaunchSite | tuple] | None = None, *, priority: int = 0,
        progress: Callable[[int, int], None] | None = None, first: str | None = None,
        on_result: Callable[[list[KernelCompileReport]], None] | None = None,
    ) -> list[KernelCompileReport]:
        """Every kernel of a file for every target, one report per (kernel, target). `launch_sites`: the
        workspace's launches of these kernels (default: the file's own, with its text). `progress(jobs, done)`
        is told how many jobs were planned, then of each one that finished. The jobs of kernel `first` (the one
        the user is looking at) go ahead of the file's others.

        Planning (extraction, specialization, hashing) and the cache look-ups run in a thread one kernel at a time,
        and each kernel's jobs start as soon as it is planned: the event loop stays free, and the first results do
        not wait for the last kernel's plan. A kernel's cache misses are compiled smallest configuration first,
        so that the first facts of an autotuned kernel come after its quickest compile. `on_result(reports)` is
        called after each finished job with the reports so far (the kernels planned yet, each with its finished
        jobs in plan order); the returned list is complete."""
        sites = list(launch_sites) if launch_sites is not None else [(s, text, path) for s in analysis.launch_sites]
        target_list = [make_target(t) for t in targets]
        launched = {(s[0] if isinstance(s, tuple) else s).target for s in sites}
        pins = self.settings.pins
        planned: dict[int, list[KernelCompileReport]] = {}  # position of the kernel in the file -> its reports
        slots: dict[int, list[JobReport | None]] = {}  # id(report) -> its jobs' reports in plan order, once done

        remote = len(text) >= PLAN_IN_PROCESS_BYTES

        def plan(kernel) -> list[tuple[CompileJob, CompileResult | None]] | None:  # in a thread
            if kernel.name not in launched and _is_helper(kernel.name, analysis, text):
                return None  # a @jit function called by a kernel of this file: compiled as part of its callers
            qualname = qualname_at(text, kernel.name_span.start_line, kernel.name)
            kernel_pins = pins_for(pins, self.root, path, qualname)
            recorded, stale = recorded_for(self.root, path, qualname, text)
            if remote:
                try:
                    jobs = self.planner.submit(plan_in_process, text, kernel.name, target_list, path, sites,
                                               kernel_pins, recorded, stale).result()
                except BrokenProcessPool:  # the planning process died (memory?): a new one plans the next kernel
                    self._planner = None
                    raise
            else:
                jobs = plan_jobs(text, kernel.name, target_list, path=path, launch_sites=sites, pins=kernel_pins,
                                 recorded=recorded, recorded_stale=stale)
            return [(job, self._cached(job)) for job in jobs]

        def so_far() -> list[KernelCompileReport]:
            return [r for i in sorted(planned) for r in planned[i]]

        def finished(report: KernelCompileReport, slot: int, job_report: JobReport) -> None:
            done = slots[id(report)]
            done[slot] = job_report
            report.jobs = [j for j in done if j is not None]
            if progress:
                progress(0, 1)

        async def run(report: KernelCompileReport, slot: int, job: CompileJob) -> None:
            result, cached = await self.run_job(job, priority=priority - 1 if job.kernel == first else priority)
            finished(report, slot, JobReport(job, result, cached))
            if on_result:
                on_result(so_far())

        order = sorted(range(len(analysis.kernels)), key=lambda i: analysis.kernels[i].name != first)
        tasks: list[asyncio.Task] = []
        mine: list[int] = []  # id() of this call's jobs in self._looked_up
        if progress:  # one job more while planning: the count does not reach its end between two kernels' plans
            progress(1, 0)
        try:
            for i in order:
                kernel = analysis.kernels[i]
                jobs: list[tuple[CompileJob, CompileResult | None]] | Exception | None
                try:
                    jobs = await asyncio.to_thread(plan, kernel)
                except Exception as exc:  # noqa: BLE001 - one kernel's planning failure must not hide the others
                    log.info("cannot plan compile jobs for %s in %s", kernel.name, path, exc_info=True)
                    jobs = exc
                if jobs is None:
                    continue
                by_target = {t.name: KernelCompileReport(path, kernel.name, t, kernel.name_span) for t in target_list}
                planned[i] = list(by_target.values())
                if isinstance(jobs, Exception):
                    for r in by_target.values():
                        r.plan_error = str(jobs) or type(jobs).__name__
                    continue
                counts = {name: 0 for name in by_target}
                placed = []
                for job, hit in jobs:
                    placed.append((by_target[job.target.name], counts[job.target.name], job, hit))
                    counts[job.target.name] += 1
                for r in by_target.values():
                    slots[id(r)] = [None] * counts[r.target.name]
                if progress:
                    progress(len(jobs), 0)
                for _, _, job, hit in placed:
                    self._looked_up[id(job)] = (job, hit)
                    mine.append(id(job))
                # Hits first, then the misses in the order the pool should get them.
                placed.sort(key=lambda p: (p[3] is None, _size_of(p[2]) if p[3] is None else 0))
                tasks += [asyncio.create_task(run(r, slot, job)) for r, slot, job, _ in placed]
            if progress:
                progress(-1, 0)
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            raise
        finally:
            for ident in mine:  # jobs cancelled before they ran leave their look-ups behind
                self._looked_up.pop(ident, None)
        return so_far()

    def _cached(self, job: CompileJob) -> CompileResult | None:
        """The cached result of a job, re-mapped to its lines (reads and unpickles a file: run in a thread)."""
        cached = self.cache.get(job.key) if job.key else None
        if not isinstance(cached, CompileResult):
            return None
        if cached.error is not None and cached.error.kind == "timeout" and (cached.timeout_s or 0) < self.timeout:
            return None  # timed out under a smaller compileTimeoutS than today's: worth another try
        return relocate(cached, job)

    async def run_job(self, job: CompileJob, *, priority: int = 0) -> tuple[CompileResult, bool]:
        """(result re-mapped to the job's lines, served from the cache?)"""
        looked_up = self._looked_up.pop(id(job), None)
        if looked_up is not None and looked_up[0] is job:
            cached = looked_up[1]  # compile_file looked it up while planning
        else:
            cached = await asyncio.to_thread(self._cached, job)
        if cached is not None:
            self.counts["cacheHits"] += 1
            return cached, True
        self.counts["cacheMisses"] += 1
        return await self._compile(job, priority=priority), False

    async def _compile(self, job: CompileJob, *, priority: int) -> CompileResult:
        """A job that missed the cache: compiled in a worker (or shared with the same compile in flight), cached."""
        shared = self._inflight.get(job.key)
        if shared is not None:  # the same content is being compiled for another kernel or file
            return relocate(await asyncio.shield(shared), job)
        future = asyncio.get_running_loop().create_future()
        if job.key:
            self._inflight[job.key] = future
        try:
            self.counts["compiles"] += 1
            outcome = await self.pool.run(self.fn_path, job, timeout=self.timeout, priority=priority)
            result = self._result(job, outcome)
            if job.key and (result.error is None or result.error.kind not in _UNCACHED_KINDS):
                await asyncio.to_thread(self.cache.put, job.key, result)
                if self.cache.off:
                    self._say_cache_off(self.cache.off)
            future.set_result(result)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody shares it
            raise
        finally:
            if self._inflight.get(job.key) is future:
                del self._inflight[job.key]
        return relocate(result, job)

    async def asm_with_sass(self, job: CompileJob) -> dict[str, str]:
        """Every IR stage of a job, SASS included (NVIDIA targets), computed on demand and cached with the result."""
        cached = self.cache.get(job.key) if job.key else None
        if isinstance(cached, CompileResult) and "sass" in cached.asm:
            return cached.asm
        outcome = await self.pool.run(f"{__name__}:compile_job_with_sass", job, timeout=self.timeout, priority=-1)
        result = self._result(job, outcome)
        if result.ok and job.key:
            await asyncio.to_thread(self.cache.put, job.key, result)
        return result.asm if result.ok else (cached.asm if isinstance(cached, CompileResult) else {})

    def _result(self, job: CompileJob, outcome: Outcome) -> CompileResult:
        if outcome.status is Status.OK and isinstance(outcome.value, CompileResult):
            return outcome.value
        if outcome.status is Status.TIMEOUT:
            self.counts["timeouts"] += 1
            kind, message = "timeout", f"no answer within {self.timeout:g} s (compileTimeoutS); the worker was killed"
        elif outcome.status is Status.CRASHED:
            self.counts["crashes"] += 1
            kind, message = "crash", f"the compiler process died ({outcome.message or 'no reason given'})"
        elif outcome.status is Status.CANCELLED:
            kind, message = "cancelled", outcome.message or "cancelled"
        else:
            last = (outcome.traceback.strip().splitlines() or [outcome.message or "unknown error"])[-1]
            kind, message = "internal", f"the compile job failed: {last}"
        return CompileResult(job_key=job.key, ok=False, error=CompileError(message, None, None, kind),
                             seconds=outcome.seconds, timeout_s=self.timeout if kind == "timeout" else None)
