"""The language server: state, document analysis flow, and the feature registration table.

Features live one per module in kernel_lsp/features/; this module owns what they share: the workspace
index, the settings, the scheduler and the watcher, and the flow from a change to published results.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from analyzers import analyze_source
from analyzers.budget import AnalysisCancelled
from analyzers.model import FileAnalysis
from analyzers.source import ParseCache

from . import __version__
from .convert import Positions
from .background import log_task_failure
from .engine.files import (PRIVATE_DIR, is_cuda, oversize, path_is_excluded, read_source, untrusted_private_dir,
                           walk_sources)
from .engine.index import WorkspaceIndex
from .engine.scheduler import Scheduler
from .engine.watcher import DELETED, DELETED_DIR, WorkspaceWatcher
from .settings import Settings
from .features.api_docs import ApiDocs
from .features.compiling import Compiles
from .features.cuda import CudaDocuments
from .features.latency import Latency
from .features.profile import Profiles
from .features.verification import Checks
from .transport import KernelProtocol

if TYPE_CHECKING:
    from .api import Workspace

log = logging.getLogger(__name__)

# With pull diagnostics the client's request analyses a changed document; the background analysis waits this
# long (seconds) and runs only if no request came, so a version is not analysed twice.
PULL_FALLBACK_DELAY = 0.3
# Seconds without a change after which the server collects what typing left (see collect_garbage).
IDLE_GC_DELAY = 1.0
# Seconds without a change after which it also collects among the long-lived objects (180 ms with a 500-file
# index here, too long to risk between two keystrokes; a pause this long is not typing).
IDLE_FULL_GC_DELAY = 60.0
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
    # Analyses a request needs now (bring_current): not queued behind background jobs.
    request_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernel-lsp-request"))
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
    opening: set[str] = field(default_factory=set)  # documents just opened: compiled without waiting for the debounce
    focus: dict[str, int] = field(default_factory=dict)  # path -> the line the user last asked about
    code_lens_refresh: bool = False  # the client accepts workspace/codeLens/refresh
    change_annotations: bool = False  # the client previews edits whose change annotations need confirmation
    progress_support: bool = False  # the client shows work-done progress (window.workDoneProgress)
    # The Python API's Workspace per folder, as checks and timing reach the engine through it (api_workspace)
    workspaces: dict[str, "Workspace"] = field(default_factory=dict)
    # Without a workspace folder: the folder of the first file opened, the root its compiles use (nothing is indexed
    # or watched there); the user is told once what that leaves out.
    file_root: str | None = None


class KernelLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("kernel-lsp", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=KernelProtocol)
        self.state = ServerState()
        # Each feature that keeps results owns them, with its work in flight (features/<name>.py).
        self.compiles = Compiles(self)  # the documents' background compiles
        self.checks = Checks(self)  # correctness checks (features/verification.py)
        self.latency = Latency(self)  # timings and estimates
        self.profiles = Profiles(self)  # per-line profiles from Nsight Compute
        self.cuda = CudaDocuments(self)  # nvcc's reports of open .cu documents
        self.api_docs = ApiDocs(self)  # the kernel languages' API docs (hover, completion, signature help)
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
        """Schedule the analysis of an open Python document's current version; the result is published if still
        current. (CUDA C++ documents are compiled by features/cuda.py instead.)"""
        doc = self.workspace.get_text_document(uri)
        path = to_fs_path(uri)
        if path is None:
            return
        version, text = doc.version, doc.source
        # The older text's compile is superseded: its results would never be shown, and its planning would only
        # compete with this version's analysis for the interpreter.
        self.state.scheduler.cancel(("compile", path))
        self.compiles.typing()
        # A pulling client asks for the problems right after each change, and that request analyses the new
        # version itself; the background job only matters when no request comes (then dependents need it).
        delay = PULL_FALLBACK_DELAY if self.state.pull else 0.0
        cancel = threading.Event()  # set when a newer version supersedes this one: the analysis stops early
        self.state.scheduler.submit(
            ("analyze", path),
            lambda: self._analyze_text(path, text, version, cancel),
            lambda a: self._deliver(path, uri, version, a),
            delay=delay,
            cancel=cancel,
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

    def _analyze_text(self, path: str, text: str, version: int | None = None,
                      cancel: threading.Event | None = None) -> FileAnalysis | None:
        if version is not None and self._is_current(path, version):
            return None  # a request already analysed this version
        if oversize(text, self.state.settings.max_file_bytes) is not None:
            return None  # set_text records the size problem
        try:
            return analyze_source(text, path, self.parse_cache(path), cancel)
        except AnalysisCancelled:
            return None  # superseded: its task is cancelled too, so nothing of it is delivered

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
            return path  # CUDA C++ has no static analysis: nvcc's results arrive from features/cuda.py
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

    async def bring_current(self, uri: str) -> str | None:
        """ensure_current for requests, without holding up the event loop: the analysis of a version no analysis
        has reached yet runs in a thread (incremental: the document's parse cache and statement memo), so other
        messages are read and answered meanwhile, and the answer is about the text the request was sent for,
        never an older version's positions. Returns the path."""
        path = to_fs_path(uri)
        if path is None or is_cuda(path):
            return path
        for _ in range(3):  # a newer edit may arrive while its predecessor is analysed: then that one is
            doc = self.workspace.text_documents.get(uri)
            if doc is None or self._is_current(path, doc.version):
                break
            version, text = doc.version, doc.source
            # With the version: a request that queued behind another one for the same version finds it done.
            analysis = await asyncio.get_running_loop().run_in_executor(
                self.state.request_executor, self._analyze_text, path, text, version)
            doc = self.workspace.text_documents.get(uri)
            if doc is not None and doc.version == version and not self._is_current(path, version):
                self._store(path, version, analysis, text)
                if not self.state.pull:
                    self.publish([path])
        return self.ensure_current(uri)  # current by now, or a file on disk (loaded once)

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
            self.compiles.schedule(path, priority=0,
                                   delay=0.0 if opened else self.state.settings.compile_debounce_ms / 1000)
        dependents = index.dependents(_changed(before, _signatures(index, path)), exclude=path)
        if dependents:
            self.publish(dependents)

    # -- correctness checks --------------------------------------------------------------------------------

    def current_text(self, path: str) -> str | None:
        doc = self.open_document(path)
        return doc.source if doc is not None else read_source(path, self.state.settings.max_file_bytes).text

    def while_current(self, results: dict[str, tuple[str, Any]], path: str):
        """The result kept for a file with the text it was made from (checks, timing, profiles), while that text
        is still the file's current text."""
        found = results.get(path)
        return found[1] if found is not None and self.current_text(path) == found[0] else None

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
        if not self.state.progress_support:
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

        from .features import proposal_table

        proposal = answer["proposal"]
        edit = converters.get_converter().structure(proposal["edit"], types.WorkspaceEdit)
        table_uri = proposal_table.write(self, proposal)  # what was tried, as a document beside the preview

        async def send() -> None:
            if table_uri:
                await proposal_table.show(self, table_uri)
            try:
                result = await self.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
                    edit=edit, label=proposal["title"]))
                log.info("proposal %r: %s", proposal["title"], "applied" if result.applied else
                         f"not applied ({result.failure_reason or 'declined'})")
            except Exception:  # noqa: BLE001 - the answer still carries the proposal
                log.debug("workspace/applyEdit failed", exc_info=True)

        task = asyncio.ensure_future(send())
        task.add_done_callback(log_task_failure)
        return {**answer, "delivered": "applyEdit", **({"tableDocument": table_uri} if table_uri else {})}

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

    def workspace_root(self, path: str) -> str:
        """The folder a file's checks and timing run from and keep their history in: its workspace folder; for a
        file outside every folder the compile root; with neither, the file's own folder."""
        inside = next((r for r in self.state.roots if path == r or path.startswith(r.rstrip(os.sep) + os.sep)), None)
        return inside or self.compile_root() or os.path.dirname(path)

    def api_workspace(self, path: str, runs_code: bool = True) -> "Workspace":
        """The Python API's Workspace for a file's folder (`workspace_root`), with the settings in effect and the
        workspace's trust: the editor's checks and timing reach the engine through it, as the command line and the
        MCP server do. A new one replaces it when the settings or the trust change (it starts nothing of its own
        for these calls, so there is nothing to stop). Raises the API's ApiError for a folder that is gone, and
        its NotTrustedError when `runs_code` and the file itself may not run (`why_file_may_not_run`)."""
        from .api import NotTrustedError, Workspace
        from .features.lifecycle import why_file_may_not_run, workspace_trusted

        if runs_code and workspace_trusted(self):
            refused = why_file_may_not_run(self, path)
            if refused is not None:
                raise NotTrustedError(refused)
        root = self.workspace_root(path)
        trusted = workspace_trusted(self)
        found = self.state.workspaces.get(root)
        if found is None or found.settings is not self.state.settings or found.allow_run != trusted:
            found = Workspace(root, settings=self.state.settings, allow_run=trusted)
            self.state.workspaces[root] = found
        return found

    def private_dir(self) -> Path:
        """Where this workspace's caches and IR go: `<root>/.kernel-lsp` once trusted, the user's cache before."""
        from .features.lifecycle import workspace_trusted

        root = self.compile_root()
        return Path(root) / PRIVATE_DIR if workspace_trusted(self) else untrusted_private_dir(root)

    def kernel_at(self, path: str, line: int | None):
        """The Triton kernel whose definition holds this line of the file's current analysis (None: none there)."""
        entry = self.state.index.get(path)
        return _kernel_on_line(entry.analysis, line) if entry is not None and entry.analysis is not None else None

    def note_focus(self, path: str | None, line: int) -> None:
        """Where the user is looking in a document (from the requests the editor makes at the cursor)."""
        if path is not None:
            self.state.focus[path] = line

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
                self.compiles.schedule(path, priority=10)
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
                    self.compiles.schedule(path, priority=10)

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
