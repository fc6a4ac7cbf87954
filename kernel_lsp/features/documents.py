"""Document synchronisation: pygls keeps the text (incremental sync); each change schedules an analysis."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import to_fs_path

from ..engine.files import is_cuda
from . import proposals
from .diagnostics import push_diagnostics

if TYPE_CHECKING:
    from ..server import KernelLanguageServer


def analyze(ls: "KernelLanguageServer", uri: str) -> None:
    """An open document changed: analyse its new version (a .cu file: compile it with nvcc)."""
    path = to_fs_path(uri)
    if path is not None and is_cuda(path):
        ls.cuda.schedule(uri)
    else:
        ls.analyze_document(uri)


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: "KernelLanguageServer", params: types.DidOpenTextDocumentParams) -> None:
        path = to_fs_path(params.text_document.uri)
        if ls.state.pull and path in ls.state.pushed:
            # Pushed while closed; from now on the client pulls it. Clearing avoids showing both.
            push_diagnostics(ls, path, clear=True)
        if path is not None and not is_cuda(path):
            ls.state.opening.add(path)  # its first analysis compiles it at once: opening is not typing
        analyze(ls, params.text_document.uri)
        proposals.notice(ls, path)  # an agent's proposal waiting for this file

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: "KernelLanguageServer", params: types.DidChangeTextDocumentParams) -> None:
        analyze(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: "KernelLanguageServer", params: types.DidCloseTextDocumentParams) -> None:
        path = to_fs_path(params.text_document.uri)
        if path is None:
            return
        ls.state.parse_caches.pop(path, None)
        ls.state.focus.pop(path, None)
        if is_cuda(path):  # .cu files are checked while open only
            if ls.cuda.forget(path) or path in ls.state.pushed:
                push_diagnostics(ls, path, clear=True)
            return
        # The buffer is gone: what counts now is the file on disk (if it is part of the workspace).
        if ls.in_workspace(path) and not ls.is_excluded(path):
            ls.reload_from_disk([path])
        else:
            ls.forget([path])
