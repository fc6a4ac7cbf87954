"""Rename a kernel (its definition, calls, imports and launch sites across the workspace) or a kernel parameter
(its uses in the kernel, `NAME=` at launch sites and helper calls, autotune config keys, heuristics and pruners,
`meta["NAME"]` in grids, `**kwargs` keys). A parameter rename with a place it cannot follow (a grid passed in,
a pruner imported from elsewhere) is refused with an error naming those places, before anything is edited."""

from __future__ import annotations

import keyword
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.uris import from_fs_path

from ..convert import files_edit
from .navigation import target_at

if TYPE_CHECKING:
    from ..server import KernelLanguageServer


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.TEXT_DOCUMENT_PREPARE_RENAME)
    def prepare_rename(ls: "KernelLanguageServer", params: types.PrepareRenameParams):
        path, target = target_at(ls, params.text_document.uri, params.position)
        if target is None:
            return None  # not a kernel or kernel parameter: the client says nothing can be renamed here
        from ..engine import navigation

        at = ls.positions(path).span(types.Range(params.position, params.position))
        name = target.param.name if target.param else target.kernel.name
        unproven = navigation.unproven_places(ls.state.index, target, ls.current_text)
        if unproven:
            raise _refused(navigation.UnsafeRename(name, unproven))
        for where, span in navigation.references(ls.state.index, target, ls.current_text):
            if where == path and span.start_line == at.start_line and span.start_col <= at.start_col <= span.end_col:
                return types.PrepareRenamePlaceholder(range=ls.positions(path).range(span), placeholder=name)
        return None

    @server.feature(types.TEXT_DOCUMENT_RENAME)
    def rename(ls: "KernelLanguageServer", params: types.RenameParams):
        new = params.new_name
        if not new.isidentifier() or keyword.iskeyword(new):
            raise ValueError(f"{new!r} is not a Python identifier")
        _, target = target_at(ls, params.text_document.uri, params.position)
        if target is None:
            return None
        from ..engine import navigation

        try:
            edits = navigation.rename_edits(ls.state.index, target, new, ls.current_text)
        except navigation.UnsafeRename as exc:
            raise _refused(exc) from None
        changes = []
        for path, file_edits in sorted(edits.items()):
            doc = ls.open_document(path)
            changes.append((from_fs_path(path) or path, doc.version if doc is not None else None,
                            ls.positions(path), file_edits))
        return files_edit(changes)


def _refused(exc: Exception) -> JsonRpcException:
    return JsonRpcException(message=str(exc), code=types.LSPErrorCodes.RequestFailed)
