"""Background compiles of the documents' kernels: what the resources, IR, diagnostics and assistant features show
of a kernel's compile, and when it runs.

A file's kernels compile through the Python API (`Workspace.compile_buffer` of the compile root's workspace, whose
compile service this session keeps until the compile settings or the trust change) at once when a document opens
(cached facts show without waiting) and once the text has been unchanged for `compileDebounceMs` after an edit (open
documents; with `compile: workspace` every kernel file, at a lower priority). What is kept and shown is the API's
`CompileResult`, the one `kernel-lsp`'s `compile` prints. Results are shown as jobs finish (at most every
PARTIAL_COMPILE_INTERVAL, the smallest autotune config first); a newer request for the same file supersedes an older
one, and results are kept together with the analysis they were compiled from, so the compile problems, hints and
hovers of an older text are never shown for a newer one.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from lsprotocol import types

from analyzers.model import Fix, FileAnalysis, Problem, Related, Severity, Span, TextEdit

from ..api import ApiError, CompiledConfig, CompileResult, Finding

if TYPE_CHECKING:
    from ..api import Workspace
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)

# Partial compile results of a file are shown at most this often (seconds): each showing republishes the file.
PARTIAL_COMPILE_INTERVAL = 0.25
TYPING_HOLD = 0.8  # of the compile debounce: how long after a keystroke queued compiles wait


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


_SEVERITY = {"error": Severity.ERROR, "warning": Severity.WARNING, "information": Severity.INFO,
             "hint": Severity.HINT}


def _span(line: int, column: int, end_line: int, end_column: int) -> Span:
    return Span(line - 1, column - 1, end_line - 1, end_column - 1)


def text_edit(edit: dict) -> TextEdit:
    """One of the API's edits (1-based `line`, `column`, `end_line`, `end_column` and `text`) as the analyzers'."""
    return TextEdit(_span(edit["line"], edit["column"], edit["end_line"], edit["end_column"]), edit["text"])


def problem_of(f: Finding, path: str) -> Problem:
    """A compile finding of the file at `path` as the analyzers' problem, which diagnostics filter (suppressions,
    select/ignore, severity overrides) and merge with the static ones: the API's 1-based lines back to 0-based,
    places in the same file without a path, as the compile service made them."""
    fix = None
    if f.fix is not None:
        fix = Fix(f.fix.title, tuple(text_edit(e) for e in f.fix.edits))
    related = tuple(Related(_span(r.line, r.column, r.end_line, r.end_column), r.message,
                            None if r.path == path else r.path) for r in f.related)
    return Problem(f.code, f.message, _SEVERITY.get(f.severity, Severity.INFO),
                   _span(f.line, f.column, f.end_line, f.end_column), fix, related, f.kernel)


def problems_of(result: CompileResult) -> list[Problem]:
    return [problem_of(f, result.path) for f in result.findings]


@dataclass(frozen=True)
class Shown:
    """A file's compile result as shown, with the analysis it was compiled from (valid while that analysis is
    current) and its problems."""

    analysis: FileAnalysis
    result: CompileResult
    problems: list[Problem]


class Compiles:
    """The compiles of one server session: the workspace they run through, what is shown of each file, and the
    counters."""

    def __init__(self, server: "KernelLanguageServer"):
        self.ls = server
        self.progress = CompileProgress(server)
        # Made on first use (its compile service starts worker processes), kept until the compile settings or the
        # trust change: a Workspace replaced for other settings leaves the running compiles alone.
        self.api: "Workspace | None" = None
        self.compiled: dict[str, Shown] = {}  # path -> its last complete compile, valid while its analysis is current
        self.compiling: dict[str, Shown] = {}  # path -> the jobs finished so far of a compile still running
        self.stale_dropped = 0
        self.unavailable = False  # triton is not installed where the server runs
        self.pin_hint_told = False  # the user has been told how to pin parameter types the compile had to assume
        self._changed: dict[str, asyncio.Event] = {}  # path -> set when what is shown of its compile changes

    def _notify(self, path: str) -> None:
        event = self._changed.pop(path, None)
        if event is not None:
            event.set()

    async def settled(self, path: str, ready: Callable[[], bool], timeout: float) -> bool:
        """Wait until `ready()` holds, looking again each time a compile of the file finishes or shows some jobs
        (a request waiting on the compile it needs, such as Show IR after typing); False when it timed out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not ready():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            event = self._changed.setdefault(path, asyncio.Event())
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                return ready()
        return True

    def workspace(self) -> "Workspace | None":
        """The API workspace the compiles run through (the compile root's), or None where nothing compiles."""
        ls = self.ls
        settings = ls.state.settings
        root = ls.compile_root()
        if settings.compile == "off" or root is None or self.unavailable:
            return None
        if self.api is None:
            from ..engine.compile import triton_installed

            if not triton_installed():
                self.unavailable = True
                from ..install import add_command

                ls.message("background compiles need triton in the Python environment that runs kernel-lsp "
                           f"({sys.prefix}): install it with `{add_command('triton>=3.6')}` and restart the "
                           "server; the static checks keep working", types.MessageType.Info)
                return None
            try:
                self.api = ls.api_workspace(root, runs_code=False)  # the offline compile runs none
            except ApiError as exc:  # the folder is gone
                log.info("no compiles: %s", exc)
                return None
        return self.api

    def say(self, line: str) -> None:
        self.ls.message(f"compiles: {line}")

    def counts(self) -> dict:
        """The compile service's counts for the status command."""
        return self.api.compile_counts() if self.api is not None else {}

    async def close(self) -> None:
        """Stop the service and forget every result (new settings, another cache place, shutdown)."""
        api, self.api = self.api, None
        self.compiled.clear()
        if api is not None:
            await api.close_compiles()  # no worker process outlives its service

    def typing(self) -> None:
        """A keystroke: queued compiles (other files', `compile: workspace`) wait until typing pauses, a little
        less than the debounce, so that the edited file's own compile is the first to start after it."""
        if self.api is not None:
            self.api.hold_compiles(self.ls.state.settings.compile_debounce_ms / 1000 * TYPING_HOLD)

    def schedule(self, path: str, *, priority: int = 0, delay: float = 0.0) -> None:
        """Compile a file's kernels for the configured targets in the background (superseding an older request)."""
        ls = self.ls
        if not ls.state.roots and ls.state.settings.compile != "off" and ls.open_document(path) is not None:
            ls.adopt_file_root(path)
        api = self.workspace()
        entry = ls.state.index.get(path)
        if api is None or entry is None or entry.read_problem or not entry.analysis or not entry.analysis.kernels:
            return
        if not entry.from_buffer and ls.state.settings.compile != "workspace":
            return
        text = ls.current_text(path)
        if text is None:
            return
        analysis, targets = entry.analysis, list(ls.state.settings.targets)

        async def work() -> CompileResult | None:
            sites = self._launches_of(path)  # after the debounce: typing supersedes this work before it gets here
            planned = done = 0

            def progress(jobs: int, finished: int) -> None:
                nonlocal planned, done
                planned, done = planned + jobs, done + finished
                self.progress.add(jobs, finished)

            try:
                # Files outside the compile root's folder compile too (with its caches).
                return await api.compile_buffer(
                    path, text, analysis=analysis, targets=targets, launches=sites, priority=priority,
                    first=self._focused_kernel(path, analysis), progress=progress,
                    on_partial=lambda result: self._compiled_partly(path, analysis, result),
                    partial_every=PARTIAL_COMPILE_INTERVAL, say=self.say, confined=False)
            except ApiError as exc:  # a text the API refuses (too large): nothing to show
                log.info("not compiled: %s: %s", path, exc)
                return None
            finally:
                self.progress.add(done - planned, 0)  # superseded or failed: its remaining jobs will not come

        ls.state.scheduler.submit_async(
            ("compile", path), work, lambda result: self._compiled(path, analysis, result), delay=delay)

    def _tell_how_to_pin(self, result: CompileResult) -> None:
        """Once per session: some pointer types were guessed, so the figures hold only for launches like that."""
        if self.pin_hint_told:
            return
        for config in result.configs:
            guessed = next((n for n in config.notes if ": assumed *" in n), None)
            if guessed:
                self.pin_hint_told = True
                first = guessed.split(":")[0].split(",")[0].strip()
                self.ls.message(
                    f"{config.kernel} was compiled with assumed parameter types ({guessed}); its registers, "
                    "errors and IR hold for launches with those types. Pin them with an annotation in the kernel "
                    f"(`{first}: \"*bf16\"`) or the `pins` setting ({{\"{config.kernel}\": {{\"{first}\": "
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

    def _compiled(self, path: str, analysis: FileAnalysis, result: CompileResult | None) -> None:
        try:
            self._show_compiled(path, analysis, result)
        finally:
            self._notify(path)

    def _show_compiled(self, path: str, analysis: FileAnalysis, result: CompileResult | None) -> None:
        entry = self.ls.state.index.get(path)
        if result is None:
            return
        if entry is None or entry.analysis is not analysis:
            self.stale_dropped += 1  # the text changed while compiling: a newer compile follows
            return
        self._tell_how_to_pin(result)
        self.compiled[path] = Shown(analysis, result, problems_of(result))
        self.compiling.pop(path, None)
        self.ls.publish([path], hints=True)

    def _compiled_partly(self, path: str, analysis: FileAnalysis, result: CompileResult) -> None:
        """Some jobs of a file's compile have finished: show them without waiting for the others (the API hears
        them at most every PARTIAL_COMPILE_INTERVAL, since each showing republishes the file)."""
        entry = self.ls.state.index.get(path)
        if entry is None or entry.analysis is not analysis:
            return  # superseded: the newer text's compile shows its own
        self.compiling[path] = Shown(analysis, result, problems_of(result))
        self.ls.publish([path], hints=True)
        self._notify(path)

    def shown(self, path: str) -> Shown | None:
        """The compile results of a file's current text: complete, else those of the jobs finished so far."""
        entry = self.ls.state.index.get(path)
        if entry is None:
            return None
        for shown in (self.compiled.get(path), self.compiling.get(path)):
            if shown is not None and entry.analysis is shown.analysis:
                return shown
        return None

    def configs(self, path: str) -> Sequence[CompiledConfig]:
        """The compiled configurations of a file's current text (none while a compile of it is pending, except the
        jobs of a running compile that have finished)."""
        shown = self.shown(path)
        return shown.result.configs if shown else []

    def problems(self, path: str) -> list[Problem]:
        shown = self.shown(path)
        return shown.problems if shown else []
