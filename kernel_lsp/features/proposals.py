"""Proposals an agent wrote through the API or `kernel-lsp mcp` (`propose_edit`), offered on the file they are for.

The file's code actions list "Review proposal from <who>: +N −M lines, <verdict>", "Accept …" and "Reject …"
for each proposal in `<root>/.kernel-lsp/proposals/` (engine/proposals.py); opening the file, or a proposal
arriving while it is open (the folder is looked at every second), says one is waiting. Review opens the diff as a document and asks accept or reject; accept sends the new text as one
versioned edit through `workspace/applyEdit` (the editor applies it, never the server) and removes the
proposal once the editor has applied it; reject removes it. A proposal made for a text that has changed since
is stale: it is refused with a message, and only rejecting it is offered.
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from analyzers.model import Span, TextEdit

from .. import convert
from ..commands import ACCEPT_PROPOSAL, REJECT_PROPOSAL, REVIEW_PROPOSAL, command_arguments
from ..engine import proposals as store

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)
_noticed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # server -> proposal ids already announced


def _roots(ls: "KernelLanguageServer", path: str) -> list[str]:
    """The folders whose proposals may be for `path`: the workspace folders holding it, else its compile root."""
    roots = [r for r in ls.state.roots if os.path.realpath(path).startswith(os.path.realpath(r) + os.sep)]
    root = ls.compile_root()
    return roots or ([root] if root else [os.path.dirname(path)])


def _current_text(ls: "KernelLanguageServer", path: str) -> tuple[str | None, int | None]:
    """The text the user sees (the open buffer, else the file on disk) and the buffer's version."""
    doc = ls.open_document(path)
    if doc is not None:
        return doc.source, doc.version
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read(), None
    except (OSError, UnicodeDecodeError):
        return None, None


def _name(path: str) -> str:
    return os.path.basename(path)


# How often the proposal folders of open files are looked at (one stat each): an agent proposes while the file is
# open in the editor, and the person should hear of it without reopening the file.
POLL_S = 1.0
_folders_seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # server -> {folder: its mtime}


def _watch(ls: "KernelLanguageServer") -> None:
    """Start looking for new proposals of the open documents (once per server, from its event loop)."""
    if ls in _folders_seen:
        return
    seen: dict[str, int | None] = {}
    _folders_seen[ls] = seen
    loop = asyncio.get_running_loop()

    def tick() -> None:
        try:
            paths = [p for uri in list(ls.workspace.text_documents) if (p := to_fs_path(uri)) and p.endswith(".py")]
            changed = False
            for root in {r for p in paths for r in _roots(ls, p)}:
                try:
                    mtime: int | None = store.folder(root).stat().st_mtime_ns
                except OSError:
                    mtime = None
                changed = changed or root not in seen or seen[root] != mtime  # each proposal is told once
                seen[root] = mtime
            for path in paths if changed else ():
                notice(ls, path, watch=False)
        except Exception:  # noqa: BLE001 - looking for proposals must never stop the server
            log.exception("cannot look for proposals")
        if not loop.is_closed():
            loop.call_later(POLL_S, tick)

    loop.call_later(POLL_S, tick)


def notice(ls: "KernelLanguageServer", path: str | None, *, watch: bool = True) -> None:
    """Say once per proposal, when its file is opened or a proposal arrives for an open file, that it is waiting."""
    if path is None:
        return
    if watch:
        try:
            _watch(ls)
        except RuntimeError:  # no running event loop (called outside the server's loop)
            log.debug("not watching for proposals", exc_info=True)
    try:
        waiting = store.for_file(_roots(ls, path), path)
    except Exception:  # noqa: BLE001 - opening a document must never fail over a proposal
        log.exception("cannot read the proposals for %s", path)
        return
    seen = _noticed.setdefault(ls, set())
    text, _ = _current_text(ls, path)
    for p in waiting:
        if p.id in seen:
            continue
        seen.add(p.id)
        stale = text is not None and p.is_stale(text)
        ls.message(f"{p.proposer} proposed a change to {_name(path)} ({p.summary})"
                   + (": it was made for an older text of the file, so it can only be rejected" if stale else
                      f": pick \"Review proposal from {p.proposer}\" in the code actions to see it and accept or "
                      "reject it"), types.MessageType.Info)


def _actions(ls: "KernelLanguageServer", params: types.CodeActionParams) -> list[types.CodeAction]:
    only = params.context.only
    if only and not any(k.startswith(types.CodeActionKind.Refactor) for k in only):
        return []
    uri = params.text_document.uri
    path = to_fs_path(uri)
    if path is None:
        return []
    found = store.for_file(_roots(ls, path), path)
    if not found:
        return []
    text, _ = _current_text(ls, path)
    out = []
    for p in found:
        argument = {"uri": uri, "proposal": p.id}
        if text is not None and p.is_stale(text):
            out.append(convert.command_action(
                f"Reject stale proposal from {p.proposer} ({_name(path)} changed since it was made)",
                types.CodeActionKind.Refactor, REJECT_PROPOSAL, [argument]))
            continue
        out.append(convert.command_action(f"Review proposal from {p.proposer}: {p.summary}",
                                          types.CodeActionKind.Refactor, REVIEW_PROPOSAL, [argument]))
        out.append(convert.command_action(f"Accept proposal from {p.proposer}: {p.summary}",
                                          types.CodeActionKind.RefactorRewrite, ACCEPT_PROPOSAL, [argument]))
        out.append(convert.command_action(f"Reject proposal from {p.proposer}", types.CodeActionKind.Refactor,
                                          REJECT_PROPOSAL, [argument]))
    return out


def _chosen(ls: "KernelLanguageServer", args: tuple) -> tuple[store.Proposal | None, str | None, str | None]:
    """(proposal, path, why not) for a command's {"uri", "proposal"?}: the named one, else the file's newest."""
    given = command_arguments(args, ("uri", "proposal"))
    uri = given.get("uri")
    path = to_fs_path(uri) if isinstance(uri, str) else None
    if path is None:
        return None, None, "expected {\"uri\": the file's URI, \"proposal\": its id (optional)}"
    found = store.for_file(_roots(ls, path), path)
    wanted = given.get("proposal")
    if wanted is not None:
        found = [p for p in found if p.id == wanted]
    if not found:
        what = f"the proposal {wanted}" if wanted else "no proposal"
        return None, path, f"{what} for {_name(path)}" + (" is gone (accepted or rejected already)" if wanted else "")
    return found[-1], path, None


async def _accept(ls: "KernelLanguageServer", p: store.Proposal, path: str) -> dict:
    text, version = _current_text(ls, path)
    if text is None:
        return {"applied": False, "error": f"{_name(path)} cannot be read: nothing was applied"}
    if p.is_stale(text):
        message = (f"The proposal from {p.proposer} was made for an older text of {_name(path)}, which has "
                   "changed since: it was not applied. Reject it and ask for a new one.")
        ls.message(message)
        return {"applied": False, "stale": True, "error": message}
    lines = text.splitlines(keepends=True)
    end = Span(0, 0, len(lines), 0)  # the start of the line after the last one: the whole text
    edit = convert.document_edit(from_fs_path(path) or path, version, ls.positions(path), [TextEdit(end, p.new_source)])
    result = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
        edit=edit, label=f"Proposal from {p.proposer}"))
    if not result.applied:
        reason = result.failure_reason or "the editor did not apply it"
        return {"applied": False, "error": f"not applied: {reason}; the proposal is kept"}
    store.remove(p)
    return {"applied": True, "proposal": p.id}


def register(server: "KernelLanguageServer") -> None:
    server.code_action_providers.append(_actions)

    async def review(ls: "KernelLanguageServer", *args) -> dict:
        p, path, why = _chosen(ls, args)
        if p is None or path is None:
            return {"error": why}
        text, _ = _current_text(ls, path)
        if text is not None and p.is_stale(text):
            return await _accept(ls, p, path)  # refuses, saying why
        if os.path.exists(p.diff_path):
            try:
                await ls.window_show_document_async(types.ShowDocumentParams(
                    uri=from_fs_path(p.diff_path) or p.diff_path, take_focus=False))
            except Exception:  # noqa: BLE001 - the question below still lets the user decide
                log.debug("cannot show %s", p.diff_path, exc_info=True)
        try:
            answer = await ls.window_show_message_request_async(types.ShowMessageRequestParams(
                type=types.MessageType.Info,
                message=f"Proposal from {p.proposer} for {_name(path)}: {p.summary}. Apply it?",
                actions=[types.MessageActionItem(title="Accept"), types.MessageActionItem(title="Reject")]))
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception:  # noqa: BLE001 - a client without questions uses the Accept/Reject actions
            log.debug("cannot ask about the proposal", exc_info=True)
            answer = None
        title = getattr(answer, "title", None)
        if title == "Accept":
            return await _accept(ls, p, path)
        if title == "Reject":
            store.remove(p)
            return {"rejected": True, "proposal": p.id}
        return {"shown": p.diff_path, "proposal": p.id}

    async def accept(ls: "KernelLanguageServer", *args) -> dict:
        p, path, why = _chosen(ls, args)
        if p is None or path is None:
            return {"applied": False, "error": why}
        return await _accept(ls, p, path)

    async def reject(ls: "KernelLanguageServer", *args) -> dict:
        p, _, why = _chosen(ls, args)
        if p is None:
            return {"rejected": False, "error": why}
        store.remove(p)
        return {"rejected": True, "proposal": p.id}

    server.answering_command(REVIEW_PROPOSAL, review)
    server.answering_command(ACCEPT_PROPOSAL, accept)
    server.answering_command(REJECT_PROPOSAL, reject)
