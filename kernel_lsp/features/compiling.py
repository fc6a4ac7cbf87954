"""Background compiles of the documents' kernels: what the resources, IR, diagnostics and assistant features show
of a kernel's compile, and when it runs.

A file's kernels compile through the engine's `CompileService` at once when a document opens (cached facts show
without waiting) and once the text has been unchanged for `compileDebounceMs` after an edit (open documents; with
`compile: workspace` every kernel file, at a lower priority). Results are shown as jobs finish (at most every
PARTIAL_COMPILE_INTERVAL, the smallest autotune config first); a newer request for the same file supersedes an older
one, and results are kept together with the analysis they were compiled from, so the compile problems, hints and
hovers of an older text are never shown for a newer one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from lsprotocol import types

from analyzers.model import FileAnalysis

if TYPE_CHECKING:
    from ..engine.compile.service import CompileService
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)

# Partial compile results of a file are shown at most this often (seconds): each showing republishes the file.
PARTIAL_COMPILE_INTERVAL = 0.25


class CompileProgress:
    """One "compiling 3/12" progress report for all the compiles in flight, where the client shows progress."""

    def __init__(self, server: "KernelLanguageServer"):
        self.server = server
        self.total = 0
        self.done = 0
        self.token: str | None = None
        self._begun: asyncio.Task | None = None
        self._count = 0

    def add(self, jobs: int, finished: int) -> None:
        self.total += jobs
        self.done += finished
        if not self.server.state.progress_support:
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


class Compiles:
    """The compiles of one server session: the service, what is shown of each file, and the counters."""

    def __init__(self, server: "KernelLanguageServer"):
        self.ls = server
        self.progress = CompileProgress(server)
        self.compiler: "CompileService | None" = None  # created on first use: it starts worker processes
        # path -> (the analysis it was compiled from, its reports, their problems): valid while that analysis is
        # current
        self.compiled: dict[str, tuple[FileAnalysis, list, list]] = {}
        # path -> the same, for the jobs finished so far of a compile still running (shown while its analysis is
        # current)
        self.compiling: dict[str, tuple[FileAnalysis, list, list]] = {}
        self.partials: dict[str, _Partial] = {}  # path -> its running compile's partial results
        self.stale_dropped = 0
        self.unavailable = False  # triton is not installed where the server runs
        self.pin_hint_told = False  # the user has been told how to pin parameter types the compile had to assume

    def service(self) -> "CompileService | None":
        ls = self.ls
        settings = ls.state.settings
        if settings.compile == "off" or ls.compile_root() is None or self.unavailable:
            return None
        if self.compiler is None:
            from ..engine.compile import triton_installed

            if not triton_installed():
                self.unavailable = True
                ls.message("background compiles need triton in the Python environment that runs kernel-lsp "
                           "(pip install triton); the static checks keep working", types.MessageType.Info)
                return None
            from ..engine.compile.service import CompileService

            self.compiler = CompileService(ls.compile_root(), settings, private_dir=ls.private_dir(),
                                           say=lambda line: ls.message(f"compiles: {line}"))
        return self.compiler

    async def close(self) -> None:
        """Stop the service and forget every result (new settings, another cache place, shutdown)."""
        compiler, self.compiler = self.compiler, None
        self.compiled.clear()
        if compiler is not None:
            await compiler.close()  # no worker process outlives its service

    def schedule(self, path: str, *, priority: int = 0, delay: float = 0.0) -> None:
        """Compile a file's kernels for the configured targets in the background (superseding an older request)."""
        ls = self.ls
        if not ls.state.roots and ls.state.settings.compile != "off" and ls.open_document(path) is not None:
            ls.adopt_file_root(path)
        service = self.service()
        entry = ls.state.index.get(path)
        if service is None or entry is None or entry.read_problem or not entry.analysis or not entry.analysis.kernels:
            return
        if not entry.from_buffer and ls.state.settings.compile != "workspace":
            return
        text = ls.current_text(path)
        if text is None:
            return
        analysis, targets = entry.analysis, list(ls.state.settings.targets)

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
                                                  progress=progress, first=self._focused_kernel(path, analysis),
                                                  on_result=lambda reports: self._compiled_partly(path, analysis,
                                                                                                  reports))
            except BaseException:
                self._drop_partial(path, analysis)
                raise
            finally:
                self.progress.add(done - planned, 0)  # superseded or failed: its remaining jobs will not come

        ls.state.scheduler.submit_async(
            ("compile", path), work, lambda reports: self._compiled(path, analysis, reports), delay=delay)

    def _tell_how_to_pin(self, reports: list) -> None:
        """Once per session: some pointer types were guessed, so the figures hold only for launches like that."""
        if self.pin_hint_told:
            return
        for report in reports:
            guessed = next((n for j in report.jobs for n in j.job.notes if ": assumed *" in n), None)
            if guessed:
                self.pin_hint_told = True
                first = guessed.split(":")[0].split(",")[0].strip()
                self.ls.message(
                    f"{report.kernel} was compiled with assumed parameter types ({guessed}); its registers, "
                    "errors and IR hold for launches with those types. Pin them with an annotation in the kernel "
                    f"(`{first}: \"*bf16\"`) or the `pins` setting ({{\"{report.kernel}\": {{\"{first}\": "
                    "\"*bf16\"}}); hover a kernel's name to see what each compile assumed.", types.MessageType.Info)
                return

    def _focused_kernel(self, path: str, analysis: FileAnalysis) -> str | None:
        """The kernel the user last asked about (it compiles ahead of the file's other kernels)."""
        line = self.ls.state.focus.get(path)
        if line is None:
            return None
        return next((k.name for k in analysis.kernels if k.span.contains_line(line)), None)

    def _launches_of(self, path: str) -> list[tuple]:
        """(launch site, its file's text, its path) for every workspace launch of a kernel defined in path."""
        texts: dict[str, str | None] = {}
        found = []
        for site, where in self.ls.state.index.launches_by_kernel_file().get(path, []):
            if where not in texts:
                texts[where] = self.ls.current_text(where)
            if texts[where] is not None:
                found.append((site, texts[where], where))
        return found

    def _compiled(self, path: str, analysis: FileAnalysis, reports: list) -> None:
        entry = self.ls.state.index.get(path)
        if entry is None or entry.analysis is not analysis:
            self.stale_dropped += 1  # the text changed while compiling: a newer compile follows
            self._drop_partial(path, analysis)
            return
        self._tell_how_to_pin(reports)
        shown = self._as_shown(path, analysis, reports)
        self._drop_partial(path, analysis)
        self.compiled[path] = shown
        self.compiling.pop(path, None)
        self.ls.publish([path], hints=True)

    def _compiled_partly(self, path: str, analysis: FileAnalysis, reports: list) -> None:
        """Some jobs of a file's compile have finished: show them without waiting for the others (the first at
        once, then at most every PARTIAL_COMPILE_INTERVAL, since each showing republishes the file)."""
        partial_state = self.partials.setdefault(path, _Partial(analysis))
        if partial_state.analysis is not analysis:
            self.partials[path] = partial_state = _Partial(analysis)
        partial_state.latest = reports
        if partial_state.timer is None:
            loop = asyncio.get_running_loop()
            wait = max(0.0, partial_state.shown_at + PARTIAL_COMPILE_INTERVAL - loop.time())
            partial_state.timer = loop.call_later(wait, self._show_partial, path, partial_state)

    def _show_partial(self, path: str, partial_state: _Partial) -> None:
        partial_state.timer = None
        partial_state.shown_at = asyncio.get_running_loop().time()
        entry = self.ls.state.index.get(path)
        if self.partials.get(path) is not partial_state or entry is None or entry.analysis is not partial_state.analysis:
            return  # superseded: the newer text's compile shows its own
        self.compiling[path] = self._as_shown(path, partial_state.analysis, partial_state.latest)
        self.ls.publish([path], hints=True)

    def _drop_partial(self, path: str, analysis: FileAnalysis) -> None:
        partial_state = self.partials.get(path)
        if partial_state is not None and partial_state.analysis is analysis:
            if partial_state.timer is not None:
                partial_state.timer.cancel()
            del self.partials[path]

    def _as_shown(self, path: str, analysis: FileAnalysis, reports: list) -> tuple[FileAnalysis, list, list]:
        """(analysis, reports without their IR text, their problems). A compile's jobs finish one by one: what an
        earlier showing of the same compile converted is reused, so each showing costs only what is new."""
        from ..engine.compile.service import compile_problems

        partial_state = self.partials.get(path)
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

    def asm(self, job, result) -> dict[str, str]:
        """The IR of a compile result: in the result itself, else from the compile cache (by the job's key)."""
        if result.asm:
            return result.asm
        full = self.compiler.cache.get(job.key) if self.compiler is not None and job.key else None
        return getattr(full, "asm", None) or {}

    def _shown(self, path: str) -> tuple[FileAnalysis, list, list] | None:
        """The compile results of a file's current text: complete, else those of the jobs finished so far."""
        entry = self.ls.state.index.get(path)
        if entry is None:
            return None
        for shown in (self.compiled.get(path), self.compiling.get(path)):
            if shown is not None and entry.analysis is shown[0]:
                return shown
        return None

    def reports(self, path: str) -> list:
        """The compile reports of a file's current text (none while a compile of it is pending, except the jobs
        of a running compile that have finished)."""
        shown = self._shown(path)
        return shown[1] if shown else []

    def problems(self, path: str) -> list:
        shown = self._shown(path)
        return shown[2] if shown else []
