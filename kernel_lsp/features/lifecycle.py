"""initialize / initialized / configuration changes / workspace folders / shutdown."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from ..engine import redact, trust
from ..settings import SECTION, Settings, parse_settings
from . import documents

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)


# What an untrusted workspace gets: every feature that would run its code is off (static analysis stays).
# What runs the workspace's code: off until it is trusted. The offline compile runs none (engine/compile/offline.py).
UNTRUSTED = {"checks": "off", "latency": "off"}
TRUST, NOT_NOW = "Trust", "Not now"


def workspace_trusted(server: "KernelLanguageServer") -> bool:
    """Whether the workspace's code may run: the client vouches for it (VS Code's workspace trust), or every root
    folder is in the user's trust file (engine/trust.py). Nothing inside the workspace can make this true."""
    state = server.state
    return state.client_trusted or (bool(state.roots) and all(trust.is_trusted(r) for r in state.roots))


def why_file_may_not_run(server: "KernelLanguageServer", path: str) -> str | None:
    """Why this file's code may not run, or None when it may. Trust is decided per file from its real path (a
    link into another folder is that folder's file): the file must lie in a folder of the user's trust file, or in
    a workspace folder the client vouches for. What else the session trusts does not matter: a file opened from
    outside the workspace, or one of a folder since removed, is not run."""
    if not workspace_trusted(server):
        return "the workspace is not trusted"
    real = os.path.realpath(path)
    folder = real if os.path.isdir(real) else os.path.dirname(real)
    if trust.is_trusted(folder):
        return None
    state = server.state
    if state.client_trusted and any(real == r or real.startswith(r.rstrip(os.sep) + os.sep)
                                    for r in (os.path.realpath(root) for root in state.roots)):
        return None
    return (f"{os.path.basename(real)} is outside every trusted folder, so its code is not run. Trust its folder "
            f"with `kernel-lsp trust {folder}` (or open that folder as a trusted workspace)")


def _effective(server: "KernelLanguageServer", settings: Settings) -> Settings:
    return settings if workspace_trusted(server) else dataclasses.replace(settings, **UNTRUSTED)


def _regate(server: "KernelLanguageServer") -> Settings:
    """Put the settings in effect in line with the workspace's trust now; returns those in effect before."""
    state = server.state
    old = state.settings
    state.settings = state.index.settings = _effective(server, state.requested)
    return old


def _apply_settings(server: "KernelLanguageServer", raw: Any, source: str, base: Settings | None = None) -> bool:
    """Validate and install settings over `base` (defaults when None); returns whether anything changed. Only the
    initializationOptions are user-level: the other sources cannot set a user-only setting (settings.py)."""
    state = server.state
    settings, messages = parse_settings(raw, base or Settings(), user_level=source == "initializationOptions")
    for m in messages:
        server.message(f"{m} ({source})")
    state.requested = settings
    redact.remember(settings.assistant_api_key)  # scrubbed out of every result, as the environment's key is
    settings = _effective(server, settings)
    changed = settings != state.settings
    state.settings = settings
    state.index.settings = settings
    level = (state.log_level_from_cli or settings.log_level).upper()
    logging.getLogger().setLevel(level)
    return changed


async def _pull_configuration(server: "KernelLanguageServer") -> Any:
    if not server.state.configuration_support:
        return None
    try:
        result = await asyncio.wait_for(
            server.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            ),
            timeout=5,
        )
    except Exception as exc:  # noqa: BLE001 - a client that fails here still gets a working server
        log.warning("workspace/configuration failed: %s", exc)
        return None
    return result[0] if result else None


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: "KernelLanguageServer", params: types.InitializeParams) -> None:
        caps = params.capabilities
        state = ls.state
        td = caps.text_document
        state.pull = bool(td and td.diagnostic is not None)
        ws = caps.workspace
        state.refresh_support = bool(ws and ws.diagnostics and ws.diagnostics.refresh_support)
        state.configuration_support = bool(ws and ws.configuration)
        state.inlay_hint_refresh = bool(ws and ws.inlay_hint and ws.inlay_hint.refresh_support)
        state.code_lens_refresh = bool(ws and ws.code_lens and ws.code_lens.refresh_support)
        state.change_annotations = bool(ws and ws.apply_edit and ws.workspace_edit
                                        and ws.workspace_edit.change_annotation_support is not None)
        state.progress_support = bool(caps.window and caps.window.work_done_progress)
        state.related_support = bool(td and td.publish_diagnostics and td.publish_diagnostics.related_information) \
            or bool(td and td.diagnostic and td.diagnostic.related_information)
        roots = [to_fs_path(f.uri) for f in params.workspace_folders or []]
        if not roots and (params.root_uri or params.root_path):
            roots = [to_fs_path(params.root_uri) if params.root_uri else params.root_path]
        state.roots = [r for r in roots if r]
        options = params.initialization_options
        if isinstance(options, dict):  # the client's own word on trust is not a setting
            options = dict(options)
            state.client_trusted = options.pop("workspaceTrusted", None) is True
            options.pop("token", None)  # the TCP session token (transport.py), checked before this
        _apply_settings(ls, options, "initializationOptions")
        state.initial_settings = state.requested
        log.info("initialize: roots=%s diagnostics=%s", state.roots, "pull" if state.pull else "push")

    @server.feature(types.INITIALIZED)
    async def initialized(ls: "KernelLanguageServer", params: types.InitializedParams) -> None:
        raw = await _pull_configuration(ls)
        if raw is not None:
            # Keys the editor's configuration leaves out keep their initializationOptions values.
            _apply_settings(ls, raw, "workspace/configuration", ls.state.initial_settings)
        ls.start_watching()
        if not workspace_trusted(ls) and state_wants_to_run(ls):
            asyncio.ensure_future(ask_for_trust(ls))
        await ls.index_workspace()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: "KernelLanguageServer", params: types.DidChangeConfigurationParams) -> None:
        raw = await _pull_configuration(ls)
        if raw is None:
            # Clients without workspace/configuration send the settings in the notification itself.
            raw = params.settings
        old = ls.state.settings
        if not _apply_settings(ls, raw, "configuration change", ls.state.initial_settings):
            return
        await settings_changed(ls, old)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_folders(ls: "KernelLanguageServer", params: types.DidChangeWorkspaceFoldersParams) -> None:
        removed = {to_fs_path(f.uri) for f in params.event.removed}
        ls.state.roots = [r for r in ls.state.roots if r not in removed]
        ls.state.roots += [p for p in (to_fs_path(f.uri) for f in params.event.added) if p]
        # A folder added to a trusted workspace is not trusted by that (every root must be): decided before
        # anything of the new folder is read.
        old = _regate(ls)
        if not workspace_trusted(ls) and state_wants_to_run(ls):
            ls.state.trust_asked = False  # a new folder: a new question
            asyncio.ensure_future(ask_for_trust(ls))
        ls.forget([p for p in ls.state.index.files if not ls.in_workspace(p)])
        if ls.state.settings != old:
            await settings_changed(ls, old)
        ls.start_watching()
        await ls.index_workspace()

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: "KernelLanguageServer", params: None) -> None:
        ls.stop_watching()
        ls.state.scheduler.shutdown()
        ls.state.request_executor.shutdown(wait=False, cancel_futures=True)
        await ls.compiles.close()  # no worker process outlives the server
        await ls.checks.close_executor()


def state_wants_to_run(server: "KernelLanguageServer") -> bool:
    """Whether the client's settings ask for something an untrusted workspace does not get."""
    requested = server.state.requested
    return any(getattr(requested, key) != "off" for key in UNTRUSTED)


async def ask_for_trust(server: "KernelLanguageServer") -> None:
    """Once per session: ask whether the workspace's code may run; "Trust" records its folders in the user's trust
    file and turns compiling, checks and timing on as the settings say."""
    state = server.state
    if state.trust_asked or not state.roots:
        return
    state.trust_asked = True
    if await _person_says_trust(server, [r for r in state.roots if not trust.is_trusted(r)] or state.roots):
        await grant_trust(server)


async def _person_says_trust(server: "KernelLanguageServer", folders: list[str]) -> bool:
    """Whether the person at the editor answers the trust question with Trust (the editor shows it to them)."""
    try:
        answer = await server.window_show_message_request_async(types.ShowMessageRequestParams(
            type=types.MessageType.Warning,
            message=f"kernel-lsp: checking and timing kernels runs this folder's code (its specs, launchers and "
                    f"references). Trust {', '.join(folders)}? Until then only the static rules and the offline "
                    "compile run.",
            actions=[types.MessageActionItem(title=TRUST), types.MessageActionItem(title=NOT_NOW)]))
    except Exception as exc:  # noqa: BLE001 - a client that cannot ask: the static rules carry on
        log.info("could not ask for trust: %s", exc)
        return False
    return answer is not None and answer.title == TRUST


async def confirm_trust(server: "KernelLanguageServer") -> list[str] | None:
    """The `kernel-lsp.trust` command. A message alone never grants trust (over a socket it may come from any
    program): folders the user already trusted (`kernel-lsp trust PATH` in a shell) take effect at once; the others
    are trusted only when the person answers the server's question with Trust. Returns the folders trusted, or
    None when the answer was not Trust."""
    state = server.state
    pending = [r for r in state.roots if not trust.is_trusted(r)]
    if pending and not await _person_says_trust(server, pending):
        return None
    return await grant_trust(server)


async def grant_trust(server: "KernelLanguageServer") -> list[str]:
    """Trust every root folder and turn on what the settings ask for; returns the folders trusted."""
    state = server.state
    trusted = [trust.trust(root) for root in state.roots]
    old = _regate(server)
    await restart_compiles(server)  # its caches move into the workspace's .kernel-lsp/
    if state.settings != old:
        await settings_changed(server, old)
        server.message(f"trusted {', '.join(trusted)}: checks and timing follow the settings now",
                       types.MessageType.Info)
    return trusted


async def restart_compiles(ls: "KernelLanguageServer") -> None:
    """A new compile service (new settings, or another place for its caches); the open files compile again."""
    await ls.compiles.close()
    for doc in list(ls.workspace.text_documents.values()):
        path = to_fs_path(doc.uri)
        if path:
            ls.compiles.schedule(path)


async def settings_changed(ls: "KernelLanguageServer", old: Settings) -> None:
    """Catch up with new settings: re-watch and re-index for file settings, restart compiles for compile ones."""
    new = ls.state.settings
    if (old.exclude, old.max_file_bytes, old.watch_files) != (new.exclude, new.max_file_bytes, new.watch_files):
        ls.start_watching()
        for path in [p for p in ls.state.index.files if ls.open_document(p) is None]:
            ls.state.index.remove(path)
        await ls.index_workspace()
        for doc in list(ls.workspace.text_documents.values()):
            documents.analyze(ls, doc.uri)
    # The compiles' Workspace keeps the settings it was made with, its size limit among them.
    compile_keys = ("targets", "compile", "pins", "compile_workers", "compile_timeout_s", "cache_max_mb",
                    "executor", "ray_address", "max_file_bytes")
    if (old.executor, old.ray_address) != (new.executor, new.ray_address):
        await ls.checks.close_executor()  # the next check connects where the settings now say
    if any(getattr(old, k) != getattr(new, k) for k in compile_keys):
        await restart_compiles(ls)
    # Problems are filtered at publication, so select/ignore/severity need no re-analysis.
    ls.publish(path for path, e in ls.state.index.files.items() if e.is_interesting or path in ls.state.pushed)
