"""Batch checking of files and folders: what `kernel-lsp check` runs, through the same index as the server."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from analyzers.model import Problem, Severity, Span
from analyzers.rules import make_problem
from analyzers.suppression import select_problems

from ..settings import Settings
from .executor import Messages
from .files import read_source, walk_sources
from .index import WorkspaceIndex


@dataclass
class CheckResult:
    index: WorkspaceIndex
    problems: dict[str, list[Problem]] = field(default_factory=dict)  # every checked file, problems or not
    missing: list[str] = field(default_factory=list)  # paths given that do not exist
    compiled: list[Any] = field(default_factory=list)  # service.KernelCompileReport, with --target only
    compile_stats: dict[str, Any] = field(default_factory=dict)
    cuda: list[Any] = field(default_factory=list)  # cuda.CudaKernel per kernel and target, with --target only
    verdicts: list[Any] = field(default_factory=list)  # (path, verify.Verdict) per spec, with --run-checks only
    latency: list[Any] = field(default_factory=list)  # latency.LatencyReport per file with a correct spec
    latency_source: str | None = None  # "measured" (on this machine's GPU) or "estimate" (roofline model, no GPU)
    root: str = ""  # where caches and timing histories live (`<root>/.kernel-lsp`)
    messages: list[str] = field(default_factory=list)  # about where jobs ran (a Ray cluster lost, ...)
    # Results the infrastructure lost for good (checking processes or Ray workers killed on every try): "path: why"
    infrastructure_lost: list[str] = field(default_factory=list)
    executors: dict[str, Any] = field(default_factory=dict)  # "compile"/"checks" -> the executor's stats

    def count(self, severity: Severity) -> int:
        return sum(1 for ps in self.problems.values() for p in ps if p.severity == severity)

    def worst(self) -> Severity | None:
        levels = [p.severity for ps in self.problems.values() for p in ps]
        return min(levels) if levels else None


# progress(what, done, total): "analysing", "compiling", "checking", "timing" (files or kernels done of total).
Progress = Callable[[str, int, int], None]


def _silent(what: str, done: int, total: int) -> None:
    return None


def check_paths(paths: Iterable[str], settings: Settings, targets: Sequence[str] = (),
                root: str | Path | None = None, run_specs: bool = False, latency: bool = False,
                progress: Progress | None = None) -> CheckResult:
    """Analyse the files; with `targets`, also compile every kernel for them (in worker processes, results cached
    under `<root>/.kernel-lsp`, root defaulting to the working directory) and merge the compile problems; with
    `run_specs`, also run every correctness spec (docs/specs.md) and merge what the checks found; with `latency`
    as well, time every kernel whose spec passed at its bench shapes (measured where the checks ran on a GPU, else
    estimated for each target's device; kept in the kernel's history under `<root>/.kernel-lsp/history`)."""
    progress = progress or _silent
    index = WorkspaceIndex(settings)
    result = CheckResult(index, root=str(Path(root or os.getcwd())))
    for given in paths:
        if not os.path.exists(given):
            result.missing.append(given)
            continue
        for source in walk_sources(given, settings.exclude):
            index.load_from_disk(str(Path(source).resolve()))
            progress("analysing", len(index.files), 0)
    extra: dict[str, list[Problem]] = {}
    texts: dict[str, str | None] = {}

    def text_of(path: str) -> str | None:
        """The file's text, read once for the compiles and the specs; None when empty or unreadable."""
        if path not in texts:
            texts[path] = read_source(path, settings.max_file_bytes).text or None
        return texts[path]

    say = Messages()
    if targets:
        result.compiled, result.compile_stats = asyncio.run(
            _compile(index, settings, list(targets), Path(result.root), text_of, progress, say))
        if "pool" in result.compile_stats:
            result.executors["compile"] = result.compile_stats["pool"]
        from .compile.service import compile_problems

        for report in result.compiled:
            extra.setdefault(report.path, []).extend(compile_problems(report))
    if run_specs:
        _run_specs(result, settings, Path(result.root), extra, text_of, progress, say)
        if latency and settings.latency != "off":
            _run_latency(result, settings, list(targets) or list(settings.targets), text_of, progress)
    result.messages = say.lines
    for path in sorted(index.files):
        result.problems[path] = index.problems(path, extra.get(path, []))
    if targets:
        _check_cuda_files(result, paths, settings, list(targets))
    return result


def _run_specs(result: CheckResult, settings: Settings, root: Path, extra: dict[str, list[Problem]],
               text_of: Callable[[str], str | None], progress: Progress, say: Callable[[str], None]) -> None:
    """Every file with a spec, checked in its own process, a few at a time; or each file a task on a Ray cluster."""
    from analyzers.specs import find_specs

    from .verify.findings import check_problems

    texts = {path: text for path in sorted(result.index.files) if (text := text_of(path)) and find_specs(text)}
    if not texts:
        return
    progress("checking", 0, len(texts))
    reports, result.executors["checks"] = asyncio.run(
        _check_files(texts, settings, root, say, finished=lambda done, total: progress("checking", done, total)))
    for path, report in zip(texts, reports):
        result.verdicts += [(path, v) for v in report.verdicts]
        result.infrastructure_lost += [f"{path}: {why}" for why in infrastructure_losses(report)]
        extra.setdefault(path, []).extend(check_problems(report, texts[path]))


def _run_latency(result: CheckResult, settings: Settings, targets: list[str],
                 text_of: Callable[[str], str | None], progress: Progress) -> None:
    """Each file's kernels whose spec passed, timed at their bench shapes, as the editor does after a check: on the
    GPU where the checks ran on one, else estimated by the roofline model for each target's device (timing a
    kernel that computes the wrong thing means nothing)."""
    from analyzers.hardware import parse_hardware_overrides

    from .latency import estimate_file, measure_file, record_estimates

    correct: dict[str, list[str]] = {}
    on_gpu = False
    for path, v in result.verdicts:
        if v.ok:
            correct.setdefault(path, [])
            if v.kernel not in correct[path]:
                correct[path].append(v.kernel)
            on_gpu = on_gpu or v.on_gpu
    if not correct:
        return
    result.latency_source = "measured" if on_gpu else "estimate"
    table, _ = parse_hardware_overrides(settings.hardware or None)
    lookup = resources_lookup(result.compiled)
    progress("timing", 0, len(correct))
    for done, (path, kernels) in enumerate(sorted(correct.items()), 1):
        text = text_of(path)
        if on_gpu:
            report = measure_file(path, text, kernels, result.root)
        else:
            report = estimate_file(path, text, targets, kernels, result.root, hardware=table, resources=lookup)
            record_estimates(report, result.root)
        result.latency.append(report)
        progress("timing", done, len(correct))


def resources_lookup(reports: Sequence[Any]):
    """Registers and shared memory of compiled configurations, for an estimate's occupancy (None: not compiled)."""

    def lookup(kernel: str, target: str, constexprs: dict, num_warps: int, num_stages: int):
        from analyzers.roofline import Resources

        for report in reports:
            if report.kernel != kernel or report.target.name != target:
                continue
            for jr in report.jobs:
                job = jr.job
                if (jr.result.ok and job.num_warps == num_warps and job.num_stages == num_stages
                        and all(dict(job.constexprs).get(k) == v for k, v in constexprs.items())):
                    res = jr.result.resources
                    return Resources(res.registers, res.shared_bytes, res.spill_bytes)
        return None

    return lookup


CHECK_FN = "kernel_lsp.engine.verify:run_checks"
# A check job's deadline on a cluster: each spec has the check timeout (enforced on the node by the checking
# process), the import one more; this is the backstop for a node that stops answering altogether.
_CHECK_DEADLINE_SPECS_EXTRA = 1


async def check_device_on(executor: Any, device: str) -> tuple[str, Any]:
    """The device a check runs on and its resource request. On a cluster `auto` is decided against the cluster (its
    GPUs if it has any, else the interpreter), not on the node: a GPU check holds the GPU it runs on."""
    from .executor import CPU, gpu

    capacity = await executor.capacity() if hasattr(executor, "capacity") else None
    if device == "auto" and capacity is not None:
        device = "cuda" if capacity.get(("gpu", None)) else "interpreter"
    return device, gpu() if device == "cuda" and capacity is not None else CPU


# A check whose process or worker was killed from outside (a Ray worker or head that died, the out-of-memory
# killer) has no result: it is run again, at most this many times, on the cluster while it lives, else locally.
INFRASTRUCTURE_RETRIES = 2
_KILLED_FROM_OUTSIDE = "from outside kernel-lsp"


def infrastructure_losses(report: Any) -> list[str]:
    """Why some of a CheckReport's results are unknown for reasons outside the kernel (its checking process killed
    from outside, the job's Ray worker dead every time): one line per spec or file, empty when none."""
    lost = [f"{v.spec}: {v.message}" for v in report.verdicts if not v.ok and _KILLED_FROM_OUTSIDE in v.message]
    lost += [message for _, message in report.errors if _KILLED_FROM_OUTSIDE in message or (
        message.startswith("the checks were not run: ") and (
            "Ray worker died" in message or "Ray did not run it" in message))]
    return lost


async def check_with(executor: Any, request: Any, check_timeout_s: float, *, key: Any = None,
                     retries: int = 0) -> Any:
    """One file's checks (a verify.CheckRequest) as a job of `executor`: its CheckReport, or one whose error says
    why the checks were not run. `key`: a newer job with the same key supersedes this one. A check whose result
    was lost to the infrastructure (`infrastructure_losses`) runs again, up to `retries` times (the batch check
    gives INFRASTRUCTURE_RETRIES; the editor tells the user at once); what is still lost after that stays in the
    report for the caller to fail on."""
    report = await _check_once(executor, request, check_timeout_s, key=key)
    for _ in range(retries):
        if not infrastructure_losses(report):
            break
        report = await _check_once(executor, request, check_timeout_s, key=key)
    return report


async def _check_once(executor: Any, request: Any, check_timeout_s: float, *, key: Any = None) -> Any:
    from analyzers.specs import find_specs

    from .verify import CheckReport

    device, resources = await check_device_on(executor, request.device)
    specs = len(find_specs(request.source))
    outcome = await executor.run(CHECK_FN, replace(request, device=device), resources=resources, key=key,
                                 timeout=check_timeout_s * (specs + _CHECK_DEADLINE_SPECS_EXTRA))
    if outcome.ok and isinstance(outcome.value, CheckReport):
        return outcome.value
    why = outcome.message or outcome.status.value
    if outcome.traceback:
        why += ": " + outcome.traceback.strip().splitlines()[-1]
    return CheckReport(request.path, (), ((None, f"the checks were not run: {why}"),))


async def _check_files(texts: dict[str, str], settings: Settings, root: Path, say: Callable[[str], None],
                       finished: Callable[[int, int], None] | None = None) -> tuple[list, dict]:
    """Each file's CheckReport, in the order of `texts`, and the executor's stats; `finished(done, total)` after
    each file (for a progress display)."""
    from .executor import ThreadExecutor, make_executor
    from .verify import CheckReport, CheckRequest

    def local() -> ThreadExecutor:  # each check is a process of its own: the threads only wait on them
        return ThreadExecutor(max(1, min(len(texts), (os.cpu_count() or 2) - 1)))

    executor = make_executor(settings.executor, local, address=settings.ray_address or None, say=say)

    async def check(path: str) -> CheckReport:
        request = CheckRequest(path, texts[path], device=settings.check_device,
                               timeout_s=float(settings.check_timeout_s), root=str(root))
        report = await check_with(executor, request, settings.check_timeout_s, retries=INFRASTRUCTURE_RETRIES)
        done.append(path)
        if finished is not None:
            finished(len(done), len(texts))
        return report

    done: list[str] = []
    try:
        reports = await asyncio.gather(*(check(path) for path in texts))
        if (line := getattr(executor, "summary", lambda _: None)("check")) is not None:
            say(line)
        return list(reports), executor.stats()
    finally:
        await executor.close()


def _check_cuda_files(result: CheckResult, paths: Iterable[str], settings: Settings, targets: list[str]) -> None:
    """CUDA C++ files among the paths, compiled with nvcc where it is installed."""
    from .cuda import CUDA_SUFFIXES, check_cuda, find_nvcc

    files = [str(Path(f).resolve()) for given in paths if os.path.exists(given)
             for f in walk_sources(given, settings.exclude, CUDA_SUFFIXES)]
    if not files:
        return
    nvcc = find_nvcc()
    for path in files:
        if nvcc is None:
            problems = [make_problem("KC006", Span.point(0), "not compiled: nvcc is not installed (CUDA toolkit)")]
        else:
            report = check_cuda(path, targets, nvcc, timeout=settings.compile_timeout_s)
            problems = report.problems
            result.cuda.extend(report.kernels)
        result.problems[path] = select_problems(problems, {}, settings.select, settings.ignore)


async def _compile(index: WorkspaceIndex, settings: Settings, targets: list[str], root: Path,
                   text_of: Callable[[str], str | None], progress: Progress = _silent,
                   say: Callable[[str], None] = lambda _: None) -> tuple[list, dict]:
    from .compile.service import CompileService

    # kernel file -> (launch site, its file's text, its path)
    sites = {kernel_file: [(site, text_of(where), where) for site, where in launches]
             for kernel_file, launches in index.launches_by_kernel_file().items()}
    service = CompileService(root, settings, say=say)
    try:
        batches = []
        for path in sorted(index.files):
            entry = index.files[path]
            if entry.analysis and entry.analysis.kernels and entry.read_problem is None and (text := text_of(path)):
                batches.append(service.compile_file(path, text, entry.analysis, targets, sites.get(path, [])))
        done = 0
        progress("compiling", 0, len(batches))

        async def counted(batch):
            nonlocal done
            reports = await batch
            done += 1
            progress("compiling", done, len(batches))
            return reports

        reports = [r for batch in await asyncio.gather(*map(counted, batches)) for r in batch]
        if service._pool is not None and (line := getattr(service._pool, "summary", lambda _: None)("compile")):
            say(line)
        return reports, service.stats()
    finally:
        await service.close()
