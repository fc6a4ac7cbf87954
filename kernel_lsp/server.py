"""The language server: state, document analysis flow, and the feature registration table.

Features live one per module in kernel_lsp/features/; this module owns what they share: the workspace
index, the settings, the scheduler and the watcher, and the flow from a change to published results.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
import logging
import os
import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from analyzers import analyze_source
from analyzers.model import FileAnalysis
from analyzers.source import ParseCache

from . import __version__
from .background import background_job
from .convert import Positions
from .engine.files import PRIVATE_DIR, oversize, path_is_excluded, read_source, untrusted_private_dir, walk_sources
from .engine.index import WorkspaceIndex
from .engine.scheduler import Scheduler
from .engine.watcher import DELETED, DELETED_DIR, WorkspaceWatcher
from .settings import Settings
from .transport import KernelProtocol

if TYPE_CHECKING:
    from .engine.apidocs import ApiDocsStore
    from .engine.compile.service import CompileService
    from .engine.cuda import CudaReport
    from .engine.executor import Executor
    from .engine.latency import LatencyReport
    from .engine.profile import ProfileReport
    from .engine.verify import CheckReport

log = logging.getLogger(__name__)

# With pull diagnostics the client's request analyses a changed document; the background analysis waits this
# long (seconds) and runs only if no request came, so a version is not analysed twice.
PULL_FALLBACK_DELAY = 0.3
# Seconds without a change after which the server collects what typing left (see collect_garbage).
IDLE_GC_DELAY = 1.0
# Seconds without a change after which it also collects among the long-lived objects (180 ms with a 500-file
# index here, too long to risk between two keystrokes; a pause this long is not typing).
IDLE_FULL_GC_DELAY = 60.0
# Partial compile results of a file are shown at most this often (seconds): each showing republishes the file.
PARTIAL_COMPILE_INTERVAL = 0.25
_PROGRESS_TOKENS = itertools.count(1)


@dataclass
class ServerState:
    settings: Settings = field(default_factory=Settings)  # in effect: `requested`, restricted while untrusted
    initial_settings: Settings = field(default_factory=Settings)  # from initializationOptions
    requested: Settings = field(default_factory=Settings)  # what the client's settings ask for
    client_trusted: bool = False  # the client vouches for the workspace (VS Code's workspace trust)
    trust_asked: bool = False  # the user has been asked once this session
    index: WorkspaceIndex = field(default_factory=WorkspaceIndex)
    scheduler: Scheduler = field(default_factory=Scheduler)
    roots: list[str] = field(default_factory=list)
    watcher: WorkspaceWatcher | None = None
    pull: bool = False  # the client pulls diagnostics (textDocument/diagnostic); otherwise we push
    refresh_support: bool = False  # the client accepts workspace/diagnostic/refresh
    inlay_hint_refresh: bool = False  # the client accepts workspace/inlayHint/refresh
    related_support: bool = True
    configuration_support: bool = False
    pushed: set[str] = field(default_factory=set)  # paths with non-empty pushed diagnostics
    stale_dropped: int = 0
    indexing: bool = False
    ready: bool = False  # the first workspace index is complete
    log_level_from_cli: str | None = None
    parse_caches: dict[str, ParseCache] = field(default_factory=dict)  # per open document
    idle_gc: asyncio.TimerHandle | None = None
    idle_full_gc: asyncio.TimerHandle | None = None
    compiler: "CompileService | None" = None  # created on first use: it starts worker processes
    # path -> (the analysis it was compiled from, its reports, their problems): valid while that analysis is current
    compiled: dict[str, tuple[FileAnalysis, list, list]] = field(default_factory=dict)
    # path -> the same, for the jobs finished so far of a compile still running (shown while its analysis is current)
    compiling: dict[str, tuple[FileAnalysis, list, list]] = field(default_factory=dict)
    opening: set[str] = field(default_factory=set)  # documents just opened: compiled without waiting for the debounce
    stale_compiles_dropped: int = 0
    compile_unavailable: bool = False  # triton is not installed where the server runs
    focus: dict[str, int] = field(default_factory=dict)  # path -> the line the user last asked about
    # CUDA C++ documents: path -> (document version, nvcc's report of that version)
    cuda: dict[str, tuple[int | None, "CudaReport"]] = field(default_factory=dict)
    nvcc: str | None = None
    nvcc_missing_told: bool = False
    pin_hint_told: bool = False  # the user has been told how to pin parameter types the compile had to assume
    code_lens_refresh: bool = False  # the client accepts workspace/codeLens/refresh
    change_annotations: bool = False  # the client previews edits whose change annotations need confirmation
    # Correctness checks: path -> (the text that was checked, its report); shown while that text is current
    checks: dict[str, tuple[str, "CheckReport"]] = field(default_factory=dict)
    checking: dict[str, threading.Event] = field(default_factory=dict)  # path -> the running check's cancel
    checks_run: int = 0
    check_executor: "Executor | None" = None  # with `executor: ray`: the checks' Ray executor, created on first use
    # Latency: path -> (the text that was timed or estimated, its LatencyReport); shown while that text is current
    latency: dict[str, tuple[str, "LatencyReport"]] = field(default_factory=dict)
    timing: dict[str, threading.Event] = field(default_factory=dict)  # path -> cancel of the run in flight
    # Per-line profiles (features/profile.py): path -> (the text that was profiled, its ProfileReport); shown while
    # that text is current
    profiles: dict[str, tuple[str, "ProfileReport"]] = field(default_factory=dict)
    profiling: dict[str, threading.Event] = field(default_factory=dict)  # path -> cancel of the run in flight
    api_docs: "ApiDocsStore | None" = None  # tl.*/triton.*/nl.* docs: created on first use (features/api_docs.py)
    # Without a workspace folder: the folder of the first file opened, the root its compiles use (nothing is indexed
    # or watched there); the user is told once what that leaves out.
    file_root: str | None = None


class CompileProgress:
    """One "compiling 3/12" progress report for all the compiles in flight, where the client shows progress."""

    def __init__(self, server: "KernelLanguageServer"):
        self.server = server
        self.total = 0
        self.done = 0
        self.token: str | None = None
        self.supported = False  # the client has window.workDoneProgress
        self._begun: asyncio.Task | None = None
        self._count = 0

    def add(self, jobs: int, finished: int) -> None:
        self.total += jobs
        self.done += finished
        if not self.supported:
            return
        if self.token is None and self.total > self.done:
            self._count += 1
            self.token = f"kernel-lsp-compile-{self._count}"
            self._begun = asyncio.get_running_loop().create_task(self._begin(self.token))
        elif self.token is not None:
            token, begun = self.token, self._begun
            if self.done >= self.total:
                send = partial(self.server.end_progress, token, f"compiled {self.done}")
                self.token, self.total, self.done = None, 0, 0
            else:
                send = partial(self.server.report_progress, token, self._message(), self._percent())
            if begun is None or begun.done():
                send()
            else:  # the client has not acknowledged the token yet
                begun.add_done_callback(lambda _: send())

    def _message(self) -> str:
        return f"compiling {self.done}/{self.total}"

    def _percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else 100

    async def _begin(self, token: str) -> None:
        try:
            await self.server.work_done_progress.create_async(token)
            self.server.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                title="kernel-lsp", message=self._message(), percentage=self._percent(), cancellable=False))
        except Exception:  # noqa: BLE001 - progress is a nicety; compiling goes on without it
            log.debug("cannot report progress", exc_info=True)


@dataclass
class _Partial:
    """A running compile's results as shown so far, and what converting them has already produced."""

    analysis: FileAnalysis
    latest: list = field(default_factory=list)  # the reports with the jobs finished so far
    timer: asyncio.TimerHandle | None = None  # a showing is due
    shown_at: float = float("-inf")  # loop time of the last showing
    stripped: dict[int, tuple] = field(default_factory=dict)  # id(JobReport) -> (it, it without IR text)
    problems: dict[int, tuple] = field(default_factory=dict)  # id(report) -> (it, jobs seen, its problems)


class KernelLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("kernel-lsp", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=KernelProtocol)
        self.state = ServerState()
        self.progress = CompileProgress(self)
        self._partials: dict[str, _Partial] = {}  # path -> its running compile's partial results
        # More code actions for textDocument/codeAction, each `(ls, params) -> list[CodeAction]` (the assistant's);
        # features/code_actions.py answers the request and adds theirs.
        self.code_action_providers: list = []

    # -- helpers shared by features ------------------------------------------------------------------------

    def message(self, text: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        log.log(logging.WARNING if kind <= types.MessageType.Warning else logging.INFO, "%s", text)
        try:
            self.window_show_message(types.ShowMessageParams(type=kind, message=f"kernel-lsp: {text}"))
        except Exception:  # noqa: BLE001 - not connected yet (tests, shutdown)
            log.debug("could not show message", exc_info=True)

    def open_document(self, path: str):
        """The open document for a path, or None when the file is only known from disk."""
        return self.workspace.text_documents.get(from_fs_path(path) or "")

    def positions(self, path: str) -> Positions:
        """Positions for a file's current text: the open buffer, else the file on disk (none if unreadable)."""
        doc = self.open_document(path)
        if doc is not None:
            return Positions(doc.lines, doc.position_codec)
        read = read_source(path, self.state.settings.max_file_bytes)
        lines = read.text.splitlines(keepends=True) if read.text is not None else []
        return Positions(lines, self.workspace.position_codec)

    def in_workspace(self, path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in self.state.roots)

    def is_excluded(self, path: str) -> bool:
        root = next((r for r in self.state.roots if path.startswith(r.rstrip(os.sep) + os.sep)), None)
        return path_is_excluded(path, root, self.state.settings.exclude)

    # -- analysis flow -------------------------------------------------------------------------------------

    def analyze_document(self, uri: str) -> None:
        """Schedule the analysis of an open document's current version; the result is published if still current."""
        doc = self.workspace.get_text_document(uri)
        path = to_fs_path(uri)
        if path is None:
            return
        version, text = doc.version, doc.source
        # The older text's compile is superseded: its results would never be shown, and its planning would only
        # compete with this version's analysis for the interpreter.
        self.state.scheduler.cancel(("compile", path))
        if is_cuda(path):
            self.schedule_cuda(path, uri, version, text)
            return
        # A pulling client asks for the problems right after each change, and that request analyses the new
        # version itself; the background job only matters when no request comes (then dependents need it).
        delay = PULL_FALLBACK_DELAY if self.state.pull else 0.0
        self.state.scheduler.submit(
            ("analyze", path),
            lambda: self._analyze_text(path, text, version),
            lambda a: self._deliver(path, uri, version, a),
            delay=delay,
        )

    def collect_garbage(self, full: bool = True) -> None:
        """Collect now, then freeze what survives.

        The index and the open documents' syntax trees are large and long-lived; left to the collector, they are
        rescanned while the user types and add tens of milliseconds to an edit's diagnostics. They hold no
        reference cycles, so frozen objects are still freed by reference counting when replaced. `full=False`
        collects the young generations only and freezes what survived them unscanned (the syntax trees of a
        newly opened 1.7 MB file take 0.7 s to scan); a full collection rescans everything (about 180 ms with a
        500-file index), so it runs at startup and after a long idle time only.
        """
        if full:
            gc.unfreeze()
        gc.collect(2 if full else 1)
        gc.freeze()

    def _schedule_idle_collection(self) -> None:
        loop = asyncio.get_running_loop()
        for timer in (self.state.idle_gc, self.state.idle_full_gc):
            if timer is not None:
                timer.cancel()
        self.state.idle_gc = loop.call_later(IDLE_GC_DELAY, partial(self.collect_garbage, False))
        self.state.idle_full_gc = loop.call_later(IDLE_FULL_GC_DELAY, self.collect_garbage)

    def _is_current(self, path: str, version: int) -> bool:
        entry = self.state.index.get(path)
        return entry is not None and entry.from_buffer and entry.version == version

    def _analyze_text(self, path: str, text: str, version: int | None = None) -> FileAnalysis | None:
        if version is not None and self._is_current(path, version):
            return None  # a request already analysed this version
        if oversize(text, self.state.settings.max_file_bytes) is not None:
            return None  # set_text records the size problem
        return analyze_source(text, path, self.parse_cache(path))

    def parse_cache(self, path: str) -> ParseCache | None:
        """Open documents keep their parsed statements between edits; files on disk do not."""
        if self.open_document(path) is None:
            self.state.parse_caches.pop(path, None)
            return None
        return self.state.parse_caches.setdefault(path, ParseCache())

    def ensure_current(self, uri: str) -> str | None:
        """Bring the index up to the open document's version now (for pull requests); returns the path."""
        path = to_fs_path(uri)
        if path is None or is_cuda(path):
            return path  # CUDA C++ has no static analysis: nvcc's results arrive from schedule_cuda
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            if self.state.index.get(path) is None:
                self.state.index.load_from_disk(path)
            return path
        if not self._is_current(path, doc.version):
            self._store(path, doc.version, self._analyze_text(path, doc.source), doc.source)
            if not self.state.pull:
                self.publish([path])  # the background analysis of this version will find it current and not push
        return path

    def _deliver(self, path: str, uri: str, version: int, analysis: FileAnalysis | None) -> None:
        doc = self.workspace.text_documents.get(uri)
        if doc is None or doc.version != version:
            self.state.stale_dropped += 1  # superseded by a newer edit or closed: never publish old results
            return
        if self._is_current(path, version):
            return  # a pull request already brought the index to this version
        self._store(path, version, analysis, doc.source)
        if not self.state.pull:
            self.publish([path])  # a pulling client asks for an open document's problems after each change itself

    def _store(self, path: str, version: int | None, analysis: FileAnalysis | None, text: str) -> None:
        index = self.state.index
        before = _signatures(index, path)
        if analysis is None:
            index.set_text(path, text, version, from_buffer=version is not None)
        else:
            index.store_analysis(path, analysis, version, from_buffer=version is not None)
        if version is not None:
            self._schedule_idle_collection()  # the user is typing: collect once they pause
            # A document just opened is not being typed in: its compile (often all cache hits) starts now.
            opened = path in self.state.opening
            self.state.opening.discard(path)
            self.schedule_compile(path, priority=0,
                                  delay=0.0 if opened else self.state.settings.compile_debounce_ms / 1000)
        dependents = index.dependents(_changed(before, _signatures(index, path)), exclude=path)
        if dependents:
            self.publish(dependents)

    # -- CUDA C++ ------------------------------------------------------------------------------------------

    def schedule_cuda(self, path: str, uri: str, version: int | None, text: str) -> None:
        """Compile an open .cu document with nvcc for the configured CUDA targets once typing settles."""
        settings = self.state.settings
        if settings.compile == "off":
            return
        if self.state.nvcc is None:
            from .engine.cuda import find_nvcc

            self.state.nvcc = find_nvcc()
            if self.state.nvcc is None:
                if not self.state.nvcc_missing_told:
                    self.state.nvcc_missing_told = True
                    self.message("CUDA C++ files are compiled with nvcc, which is not installed here (or not on "
                                 "PATH / under CUDA_HOME); only Triton and NKI kernels are checked",
                                 types.MessageType.Info)
                return
        nvcc, targets, timeout = self.state.nvcc, list(settings.targets), settings.compile_timeout_s

        async def work():
            from .engine.cuda import check_cuda

            return await asyncio.to_thread(check_cuda, path, targets, nvcc, timeout, text)

        def done(report) -> None:
            doc = self.workspace.text_documents.get(uri)
            if doc is None or doc.version != version:
                self.state.stale_dropped += 1  # edited or closed while nvcc ran: a newer compile follows
                return
            self.state.cuda[path] = (version, report)
            self.publish([path], hints=True)

        self.state.scheduler.submit_async(("cuda", path), work, done, delay=settings.compile_debounce_ms / 1000)

    def cuda_report(self, path: str) -> "CudaReport | None":
        """nvcc's report of an open .cu document's current version."""
        found = self.state.cuda.get(path)
        doc = self.open_document(path)
        if found is None or doc is None or doc.version != found[0]:
            return None
        return found[1]

    # -- correctness checks --------------------------------------------------------------------------------

    def current_text(self, path: str) -> str | None:
        doc = self.open_document(path)
        return doc.source if doc is not None else read_source(path, self.state.settings.max_file_bytes).text

    def while_current(self, results: dict[str, tuple[str, Any]], path: str):
        """The result kept for a file with the text it was made from (checks, timing, profiles), while that text
        is still the file's current text."""
        found = results.get(path)
        return found[1] if found is not None and self.current_text(path) == found[0] else None

    def check_report(self, path: str) -> "CheckReport | None":
        """The last check report of a file, while its text is still the one that was checked."""
        return self.while_current(self.state.checks, path)

    def check_problems(self, path: str) -> list:
        found = self.state.checks.get(path)
        report = self.check_report(path)
        if report is None or found is None:
            return []
        from .engine.checks import check_problems

        return check_problems(report, found[0])

    def is_checking(self, path: str) -> bool:
        return path in self.state.checking

    async def run_checks(self, path: str, kernels: tuple[str, ...] | None = None) -> "CheckReport | None":
        """Check a file's specs (or those of `kernels`) against their references, in a separate process. A newer
        request for the same file cancels this one (None is returned for the cancelled one)."""
        from .engine.verify import CheckReport, CheckRequest, run_checks

        text = self.current_text(path)
        if text is None:
            return None
        settings = self.state.settings
        request = CheckRequest(path, text, kernels, device=settings.check_device,
                               timeout_s=float(settings.check_timeout_s),
                               root=self.state.roots[0] if self.state.roots else None)
        title = f"checking {', '.join(kernels) if kernels else os.path.basename(path)}"
        executor = self.check_executor()
        async with background_job(self, title, running=self.state.checking, key=path,
                                  started=self.refresh_lenses) as job:  # a newer check supersedes this one
            if executor is not None:  # a Ray task; a newer check of the file (same key) cancels it
                from .engine.check import check_with

                report = await check_with(executor, request, settings.check_timeout_s, key=path)
            else:
                report = await job.run(run_checks, request, job.cancel)
        if job.cancelled:
            return None
        self.state.checks_run += 1
        before = self.state.checks.get(path)
        if kernels and before is not None and before[0] == text:  # keep the other kernels' verdicts of this text
            kept = tuple(v for v in before[1].verdicts if v.kernel not in kernels)
            report = CheckReport(path, kept + report.verdicts, report.errors)
        self.state.checks[path] = (text, report)
        self.publish([path])
        self.refresh_lenses()
        correct = tuple(dict.fromkeys(v.kernel for v in report.verdicts if v.ok))
        if correct and settings.latency != "off":  # timing a kernel that computes the wrong thing means nothing
            # Time where the check ran: a CPU build of torch on a GPU machine checks on the interpreter.
            on_gpu = any(v.ok and "interpreter" not in v.device.lower() for v in report.verdicts)
            task = asyncio.ensure_future(self.run_latency(path, text, correct, gpu=on_gpu))
            task.add_done_callback(log_task_failure)
        return report

    def check_executor(self) -> "Executor | None":
        """Where checks run with `executor: ray` (None: in a process of this machine, as `run_checks` starts it).
        A cluster that cannot be reached or is lost: the checks run here, and a window message says so."""
        settings = self.state.settings
        if settings.executor != "ray":
            return None
        if self.state.check_executor is None:
            from .engine.executor import ThreadExecutor, make_executor

            self.state.check_executor = make_executor(
                "ray", lambda: ThreadExecutor(max(1, (os.cpu_count() or 2) - 1)),
                address=settings.ray_address or None, say=lambda line: self.message(f"checks: {line}"))
        return self.state.check_executor

    async def close_check_executor(self) -> None:
        executor, self.state.check_executor = self.state.check_executor, None
        if executor is not None:
            await executor.close()

    def latency_report(self, path: str) -> "LatencyReport | None":
        return self.while_current(self.state.latency, path)

    async def run_latency(self, path: str, text: str, kernels: tuple[str, ...],
                          gpu: bool | None = None) -> "LatencyReport | None":
        """Time the kernels at their bench shapes on this machine's GPU, or estimate them for each target's device
        without one. Kernels of the text not asked about keep their earlier figures for the same text."""
        from analyzers.hardware import parse_hardware_overrides

        from .engine.gpu import runs_on_gpu
        from .engine.latency import LatencyReport, estimate_file, measure_file, record_estimates

        settings = self.state.settings
        root = self.state.roots[0] if self.state.roots else None
        if gpu is None:
            gpu = runs_on_gpu(settings.check_device)
        title = f"{'timing' if gpu else 'estimating'} {', '.join(kernels)}"
        async with background_job(self, title, running=self.state.timing, key=path,
                                  current=lambda: self.current_text(path) == text) as job:
            if gpu:
                report = await job.run(measure_file, path, text, list(kernels), root, cancel=job.cancel)
            else:
                table, _ = parse_hardware_overrides(settings.hardware or None)
                report = await job.run(estimate_file, path, text, list(settings.targets), list(kernels), root,
                                       hardware=table, resources=self._compiled_resources(path), cancel=job.cancel)
                if root and not job.cancelled:
                    await job.run(record_estimates, report, root)
        if not job.still_current():
            return None  # superseded, or the text changed meanwhile: a newer check times it again
        before = self.state.latency.get(path)
        if before is not None and before[0] == text:
            kept = [e for e in before[1].entries if e.kernel not in kernels]
            report = LatencyReport(path, kept + report.entries, report.errors, report.seconds)
        self.state.latency[path] = (text, report)
        if report.errors:
            log.info("latency of %s: %s", path, "; ".join(report.errors))
        for error in report.errors:  # the worker failed (killed, timed out): no hint will say so, a message does
            if error.startswith(("work counting failed:", "timing failed:")):
                self.message(f"latency of {os.path.basename(path)}: {error}")
        self.refresh_hints()
        self.refresh_lenses()
        return report

    def _compiled_resources(self, path: str):
        """Registers and shared memory of the file's compiled configurations, for the estimate's occupancy."""
        from .engine.check import resources_lookup

        return resources_lookup(self.compile_reports(path))

    def refresh_hints(self) -> None:
        if self.state.inlay_hint_refresh:
            try:
                self.workspace_inlay_hint_refresh(None)
            except Exception:  # noqa: BLE001
                log.debug("inlay hint refresh failed", exc_info=True)

    def refresh_lenses(self) -> None:
        if self.state.code_lens_refresh:
            try:
                self.workspace_code_lens_refresh(None)
            except Exception:  # noqa: BLE001
                log.debug("code lens refresh failed", exc_info=True)

    async def begin_progress(self, message: str) -> str | None:
        """A work-done progress for one piece of work, where the client shows progress; returns its token."""
        if not self.progress.supported:
            return None
        token = f"kernel-lsp-work-{next(_PROGRESS_TOKENS)}"
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), 5.0)
            self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title="kernel-lsp", message=message))
        except Exception:  # noqa: BLE001 - progress is a nicety
            log.debug("cannot report progress", exc_info=True)
            return None
        return token

    def answering_command(self, name: str, handler) -> None:
        """Register `async handler(ls, *args)` as a workspace command that always answers: an exception becomes
        {"error": ...} (and the log has the traceback), a cancelled request stays cancelled."""

        async def command(ls, *args):  # unannotated: pygls resolves annotations of command handlers
            ls.follow_cancel(asyncio.current_task())  # $/cancelRequest stops the work and its processes
            try:
                return await handler(ls, *args)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a command answers, whatever happened
                log.exception("%s failed", name)
                return {"error": f"internal error: {type(exc).__name__}: {exc}"}

        self.command(name)(command)

    def follow_cancel(self, task: asyncio.Task | None) -> None:
        """Cancel `task` when the client cancels the request being handled ($/cancelRequest).

        pygls answers a cancelled workspace/executeCommand itself but lets the handler's task run on (pygls#517):
        watch the request's future (pygls 2.1's request table; the message id is a context variable, so it is the
        current request's) and cancel the work too, which kills its checking, timing or profiling process."""
        protocol = self.protocol
        futures = getattr(protocol, "_request_futures", None)
        msg_id = getattr(protocol, "msg_id", None)
        future = futures.get(msg_id) if isinstance(futures, dict) and msg_id is not None else None
        if future is None or task is None or future is task:
            return
        loop = asyncio.get_running_loop()
        future.add_done_callback(lambda f: f.cancelled() and loop.call_soon_threadsafe(task.cancel))

    def offer(self, answer: dict, arguments: object = None) -> dict:
        """Deliver a command's proposal (convert.proposal): also as a workspace/applyEdit request whose change needs
        confirmation, so the editor previews it (VS Code's refactor preview; the Neovim plugin's diff), unless the
        command's argument object says {"deliver": "result"} (a client that previews the answer itself). The
        server never applies anything: the editor applies it once the user confirms."""
        wants = arguments.get("deliver") if isinstance(arguments, dict) else None
        if "proposal" not in answer or wants == "result" or not self.state.change_annotations:
            return answer
        from lsprotocol import converters

        proposal = answer["proposal"]
        edit = converters.get_converter().structure(proposal["edit"], types.WorkspaceEdit)

        async def send() -> None:
            try:
                result = await self.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
                    edit=edit, label=proposal["title"]))
                log.info("proposal %r: %s", proposal["title"], "applied" if result.applied else
                         f"not applied ({result.failure_reason or 'declined'})")
            except Exception:  # noqa: BLE001 - the answer still carries the proposal
                log.debug("workspace/applyEdit failed", exc_info=True)

        task = asyncio.ensure_future(send())
        task.add_done_callback(log_task_failure)
        return {**answer, "delivered": "applyEdit"}

    def report_progress(self, token: str | None, message: str, percentage: int | None = None) -> None:
        if token is None:
            return
        try:
            self.work_done_progress.report(token, types.WorkDoneProgressReport(message=message, percentage=percentage))
        except Exception:  # noqa: BLE001
            log.debug("cannot report progress", exc_info=True)

    def thread_progress(self, token: str | None):
        """A `progress(message, fraction)` callback for work running in another thread: reports on the loop."""
        loop = asyncio.get_running_loop()

        def progress(message: str, fraction: float) -> None:
            if token is not None:
                loop.call_soon_threadsafe(self.report_progress, token, message, int(100 * fraction))

        return progress

    def end_progress(self, token: str | None, message: str | None = None) -> None:
        if token is None:
            return
        try:
            self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
        except Exception:  # noqa: BLE001
            log.debug("cannot end progress", exc_info=True)

    # -- compiling -----------------------------------------------------------------------------------------

    def compile_root(self) -> str | None:
        """The folder compiles resolve imports from and keep their caches for: the first workspace folder, or
        without one the folder of the first file opened."""
        return self.state.roots[0] if self.state.roots else self.state.file_root

    def adopt_file_root(self, path: str) -> None:
        """No workspace folder: the file's own folder becomes the compile root, and the user hears once what a
        single file does not get and how to get it."""
        if self.state.roots or self.state.file_root is not None:
            return
        self.state.file_root = os.path.dirname(path)
        self.message(
            f"no workspace folder: {os.path.basename(path)} is compiled with its own folder ({self.state.file_root}) "
            "as the root, but that folder is not indexed or watched, so launches, references and renames in other "
            "files are seen only while those files are open, and checks and timing stay off (they need a trusted "
            "workspace folder). Open the folder as a workspace to get all of it (Neovim finds one from a .git or "
            "pyproject.toml above the file).", types.MessageType.Info)

    def compile_service(self) -> "CompileService | None":
        settings = self.state.settings
        if settings.compile == "off" or self.compile_root() is None or self.state.compile_unavailable:
            return None
        if self.state.compiler is None:
            from .engine.compile import triton_installed

            if not triton_installed():
                self.state.compile_unavailable = True
                self.message("background compiles need triton in the Python environment that runs kernel-lsp "
                             "(pip install triton); the static checks keep working", types.MessageType.Info)
                return None
            from .engine.compile.service import CompileService

            self.state.compiler = CompileService(self.compile_root(), settings, private_dir=self.private_dir(),
                                                 say=lambda line: self.message(f"compiles: {line}"))
        return self.state.compiler

    def private_dir(self) -> Path:
        """Where this workspace's caches and IR go: `<root>/.kernel-lsp` once trusted, the user's cache before."""
        from .features.lifecycle import workspace_trusted

        root = self.compile_root()
        return Path(root) / PRIVATE_DIR if workspace_trusted(self) else untrusted_private_dir(root)

    def schedule_compile(self, path: str, *, priority: int = 0, delay: float = 0.0) -> None:
        """Compile a file's kernels for the configured targets in the background (superseding an older request)."""
        if not self.state.roots and self.state.settings.compile != "off" and self.open_document(path) is not None:
            self.adopt_file_root(path)
        service = self.compile_service()
        entry = self.state.index.get(path)
        if service is None or entry is None or entry.read_problem or not entry.analysis or not entry.analysis.kernels:
            return
        if not entry.from_buffer and self.state.settings.compile != "workspace":
            return
        text = self.current_text(path)
        if text is None:
            return
        analysis, targets = entry.analysis, list(self.state.settings.targets)

        async def work() -> list:
            sites = self._launches_of(path)  # after the debounce: typing supersedes this work before it gets here
            service.pool.prestart()  # a cold worker imports triton while the first kernel is planned
            planned = done = 0

            def progress(jobs: int, finished: int) -> None:
                nonlocal planned, done
                planned, done = planned + jobs, done + finished
                self.progress.add(jobs, finished)

            try:
                return await service.compile_file(path, text, analysis, targets, sites, priority=priority,
                                                  progress=progress, first=self.focused_kernel(path, analysis),
                                                  on_result=lambda reports: self._compiled_partly(path, analysis,
                                                                                                  reports))
            except BaseException:
                self._drop_partial(path, analysis)
                raise
            finally:
                self.progress.add(done - planned, 0)  # superseded or failed: its remaining jobs will not come

        self.state.scheduler.submit_async(
            ("compile", path), work, lambda reports: self._compiled(path, analysis, reports), delay=delay)

    def _tell_how_to_pin(self, reports: list) -> None:
        """Once per session: some pointer types were guessed, so the figures hold only for launches like that."""
        if self.state.pin_hint_told:
            return
        for report in reports:
            guessed = next((n for j in report.jobs for n in j.job.notes if ": assumed *" in n), None)
            if guessed:
                self.state.pin_hint_told = True
                first = guessed.split(":")[0].split(",")[0].strip()
                self.message(
                    f"{report.kernel} was compiled with assumed parameter types ({guessed}); its registers, "
                    "errors and IR hold for launches with those types. Pin them with an annotation in the kernel "
                    f"(`{first}: \"*bf16\"`) or the `pins` setting ({{\"{report.kernel}\": {{\"{first}\": "
                    "\"*bf16\"}}); hover a kernel's name to see what each compile assumed.", types.MessageType.Info)
                return

    def kernel_at(self, path: str, line: int | None):
        """The Triton kernel whose definition holds this line of the file's current analysis (None: none there)."""
        entry = self.state.index.get(path)
        return _kernel_on_line(entry.analysis, line) if entry is not None and entry.analysis is not None else None

    def note_focus(self, path: str | None, line: int) -> None:
        """Where the user is looking in a document (from the requests the editor makes at the cursor)."""
        if path is not None:
            self.state.focus[path] = line

    def focused_kernel(self, path: str, analysis: FileAnalysis) -> str | None:
        kernel = _kernel_on_line(analysis, self.state.focus.get(path))
        return kernel.name if kernel is not None else None

    def _launches_of(self, path: str) -> list[tuple]:
        """(launch site, its file's text, its path) for every workspace launch of a kernel defined in path."""
        texts: dict[str, str | None] = {}
        found = []
        for site, where in self.state.index.launches_by_kernel_file().get(path, []):
            if where not in texts:
                texts[where] = self.current_text(where)
            if texts[where] is not None:
                found.append((site, texts[where], where))
        return found

    def _compiled(self, path: str, analysis: FileAnalysis, reports: list) -> None:
        entry = self.state.index.get(path)
        if entry is None or entry.analysis is not analysis:
            self.state.stale_compiles_dropped += 1  # the text changed while compiling: a newer compile follows
            self._drop_partial(path, analysis)
            return
        self._tell_how_to_pin(reports)
        shown = self._as_shown(path, analysis, reports)
        self._drop_partial(path, analysis)
        self.state.compiled[path] = shown
        self.state.compiling.pop(path, None)
        self.publish([path], hints=True)

    def _compiled_partly(self, path: str, analysis: FileAnalysis, reports: list) -> None:
        """Some jobs of a file's compile have finished: show them without waiting for the others (the first at
        once, then at most every PARTIAL_COMPILE_INTERVAL, since each showing republishes the file)."""
        partial_state = self._partials.setdefault(path, _Partial(analysis))
        if partial_state.analysis is not analysis:
            self._partials[path] = partial_state = _Partial(analysis)
        partial_state.latest = reports
        if partial_state.timer is None:
            loop = asyncio.get_running_loop()
            wait = max(0.0, partial_state.shown_at + PARTIAL_COMPILE_INTERVAL - loop.time())
            partial_state.timer = loop.call_later(wait, self._show_partial, path, partial_state)

    def _show_partial(self, path: str, partial_state: "_Partial") -> None:
        partial_state.timer = None
        partial_state.shown_at = asyncio.get_running_loop().time()
        entry = self.state.index.get(path)
        if self._partials.get(path) is not partial_state or entry is None or entry.analysis is not partial_state.analysis:
            return  # superseded: the newer text's compile shows its own
        self.state.compiling[path] = self._as_shown(path, partial_state.analysis, partial_state.latest)
        self.publish([path], hints=True)

    def _drop_partial(self, path: str, analysis: FileAnalysis) -> None:
        partial_state = self._partials.get(path)
        if partial_state is not None and partial_state.analysis is analysis:
            if partial_state.timer is not None:
                partial_state.timer.cancel()
            del self._partials[path]

    def _as_shown(self, path: str, analysis: FileAnalysis, reports: list) -> tuple[FileAnalysis, list, list]:
        """(analysis, reports without their IR text, their problems). A compile's jobs finish one by one: what an
        earlier showing of the same compile converted is reused, so each showing costs only what is new."""
        from .engine.compile.service import compile_problems

        partial_state = self._partials.get(path)
        if partial_state is None or partial_state.analysis is not analysis:
            partial_state = _Partial(analysis)
        shown, problems = [], []
        for report in reports:
            jobs = []
            for j in report.jobs:
                known = partial_state.stripped.get(id(j))
                if known is None or known[0] is not j:
                    # The IR text stays in the disk cache (Show IR reads it from there): memory does not grow with it.
                    known = (j, dataclasses.replace(j, result=dataclasses.replace(j.result, asm={})))
                    partial_state.stripped[id(j)] = known
                jobs.append(known[1])
            found = partial_state.problems.get(id(report))
            if found is None or found[0] is not report or found[1] != len(jobs):
                found = (report, len(jobs), compile_problems(report))
                partial_state.problems[id(report)] = found
            problems += found[2]
            shown.append(dataclasses.replace(report, jobs=jobs))
        return analysis, shown, problems

    def compiled_asm(self, job, result) -> dict[str, str]:
        """The IR of a compile result: in the result itself, else from the compile cache (by the job's key)."""
        if result.asm:
            return result.asm
        full = self.state.compiler.cache.get(job.key) if self.state.compiler is not None and job.key else None
        return getattr(full, "asm", None) or {}

    def _shown_compile(self, path: str) -> tuple[FileAnalysis, list, list] | None:
        """The compile results of a file's current text: complete, else those of the jobs finished so far."""
        entry = self.state.index.get(path)
        if entry is None:
            return None
        for shown in (self.state.compiled.get(path), self.state.compiling.get(path)):
            if shown is not None and entry.analysis is shown[0]:
                return shown
        return None

    def compile_reports(self, path: str) -> list:
        """The compile reports of a file's current text (none while a compile of it is pending, except the jobs
        of a running compile that have finished)."""
        shown = self._shown_compile(path)
        return shown[1] if shown else []

    def compile_problems(self, path: str) -> list:
        shown = self._shown_compile(path)
        return shown[2] if shown else []

    def reload_from_disk(self, paths: Iterable[str]) -> None:
        """Re-read files that changed on disk (unless open in the editor, whose buffer wins)."""
        touched = []
        for path in paths:
            if self.open_document(path) is not None:
                continue
            before = _signatures(self.state.index, path)
            entry = self.state.index.load_from_disk(path)
            touched.append(path)
            if entry is not None:
                self.schedule_compile(path, priority=10)
            after = _signatures(self.state.index, path) if entry else {}
            touched.extend(self.state.index.dependents(_changed(before, after), exclude=path))
        self.publish(touched)

    def forget(self, paths: Iterable[str]) -> None:
        touched = []
        for path in paths:
            if self.open_document(path) is not None:
                continue
            entry = self.state.index.remove(path)
            touched.append(path)
            if entry is not None:
                touched.extend(self.state.index.dependents(entry.kernel_names))
        self.publish(touched)

    def publish(self, paths: Iterable[str], hints: bool = False) -> None:
        """Make the client show the current problems of these files.

        A client that pulls is asked to pull again when it accepts a refresh. One that pulls but cannot be
        refreshed gets the problems of files it has not opened pushed instead (it would never ask for them);
        open documents are only ever pulled, so no document gets both.
        """
        from .features.diagnostics import push_diagnostics

        paths = set(paths)
        if not paths:
            return
        if hints:
            self.refresh_hints()
        if self.state.pull and self.state.refresh_support:
            try:
                self.workspace_diagnostic_refresh(None)
            except Exception:  # noqa: BLE001
                log.debug("diagnostic refresh failed", exc_info=True)
            return
        for path in sorted(paths):
            if self.state.pull and self.open_document(path) is not None:
                continue
            push_diagnostics(self, path)

    @property
    def pushes_closed_files(self) -> bool:
        return not (self.state.pull and self.state.refresh_support)

    # -- workspace -----------------------------------------------------------------------------------------

    async def index_workspace(self) -> None:
        """Index every source file under the workspace folders (in a thread), then publish what was found."""
        state = self.state
        state.indexing = True
        settings, roots = state.settings, list(state.roots)

        def scan() -> list[tuple[str, object, FileAnalysis | None]]:
            found = []
            for root in roots:
                for p in walk_sources(root, settings.exclude):
                    path = str(p)
                    read = read_source(path, settings.max_file_bytes)
                    if read.missing:
                        continue
                    analysis = analyze_source(read.text, path) if read.text is not None else None
                    found.append((path, read, analysis))
            return found

        try:
            found = await asyncio.get_running_loop().run_in_executor(None, scan)
        finally:
            state.indexing = False
        for path, read, analysis in found:
            if self.open_document(path) is not None:
                continue  # the buffer's version is already indexed
            if analysis is not None:
                state.index.store_analysis(path, analysis, None, False)
            else:
                state.index.store_unreadable(path, read.problem)
        state.ready = True
        log.info("indexed %s", state.index.stats())
        self.collect_garbage()
        self.publish({p for p, e in state.index.files.items() if e.is_interesting} | state.pushed)
        if state.settings.compile == "workspace":
            for path, entry in state.index.files.items():
                if entry.analysis and entry.analysis.kernels and not entry.from_buffer:
                    self.schedule_compile(path, priority=10)

    def start_watching(self) -> None:
        self.stop_watching()
        if not self.state.settings.watch_files or not self.state.roots:
            return
        try:
            self.state.watcher = WorkspaceWatcher(
                self.state.roots, self.state.settings.exclude, self.on_disk_changes, asyncio.get_running_loop()
            )
            self.state.watcher.start()
        except Exception as exc:  # noqa: BLE001 - no watching is better than no server
            self.message(f"cannot watch the workspace for changes on disk: {exc}")
            self.state.watcher = None

    def stop_watching(self) -> None:
        if self.state.watcher is not None:
            self.state.watcher.stop()
            self.state.watcher = None

    def on_disk_changes(self, changes: list[tuple[str, str]]) -> None:
        changed, deleted = [], []
        for path, kind in changes:
            if kind == DELETED_DIR:
                prefix = path.rstrip(os.sep) + os.sep
                deleted.extend(p for p in self.state.index.files if p.startswith(prefix))
            elif kind == DELETED:
                deleted.append(path)
            elif not self.is_excluded(path):
                changed.append(path)
        log.debug("disk changes: %d changed, %d deleted", len(changed), len(deleted))
        self.forget(deleted)
        self.reload_from_disk(changed)


def _changed(before: dict[str, tuple], after: dict[str, tuple]) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def log_task_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("background work failed", exc_info=task.exception())


def is_cuda(path: str) -> bool:
    return path.endswith(".cu")


def _kernel_on_line(analysis: FileAnalysis, line: int | None):
    if line is None:
        return None
    return next((k for k in analysis.kernels if k.span.contains_line(line)), None)


def _signatures(index: WorkspaceIndex, path: str) -> dict[str, tuple]:
    """What launch checks depend on, per kernel of a file: parameters and decorator-provided names."""
    entry = index.get(path)
    if entry is None or entry.analysis is None:
        return {}
    return {k.name: k.launch_signature for k in entry.analysis.kernels}


def build_server(log_level_from_cli: str | None = None) -> KernelLanguageServer:
    from .features import register_all

    server = KernelLanguageServer()
    # Automatic full collections rescan every object not frozen yet, and building a large file's analysis
    # triggers one each time the heap grows by a quarter (pauses of up to 2.5 s for a 1.7 MB file, while other
    # files' requests wait): they come a hundred times more rarely; collect_garbage does the rest when idle.
    threshold0, threshold1, _ = gc.get_threshold()
    gc.set_threshold(threshold0, threshold1, 1000)
    server.state.log_level_from_cli = log_level_from_cli
    register_all(server)
    return server
