"""Diagnostics, pulled (textDocument/diagnostic, workspace/diagnostic) when the client can, pushed otherwise.

Pushed diagnostics carry the document version they were computed from; the server drops results whose
version is no longer current before they get here.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import from_fs_path

from .. import convert
from ..engine.files import is_cuda
from . import profile

if TYPE_CHECKING:
    from ..server import KernelLanguageServer


def diagnostics_for(ls: "KernelLanguageServer", path: str) -> list[types.Diagnostic]:
    if is_cuda(path):
        report = ls.cuda.report(path)
        problems = ls.state.index.filtered(report.problems) if report else []
    else:
        # profile.profile_problems: Nsight Compute's advice (KP001) for the text that was profiled
        problems = ls.state.index.problems(path, ls.compiles.problems(path) + ls.checks.problems(path)
                                           + profile.profile_problems(ls, path))
    if not problems:
        return []
    pos = ls.positions(path)
    uri = from_fs_path(path) or path
    return [convert.diagnostic(p, pos, uri, ls.positions, ls.state.related_support) for p in problems]


def _result_id(diags: list[types.Diagnostic], version: int | None) -> str:
    key = repr([(d.range, d.code, d.message, d.severity) for d in diags])
    return f"{version}:{hashlib.blake2s(key.encode(), digest_size=8).hexdigest()}"


def push_diagnostics(ls: "KernelLanguageServer", path: str, clear: bool = False) -> None:
    uri = from_fs_path(path)
    if uri is None:
        return
    entry = ls.state.index.get(path)
    cuda_doc = ls.open_document(path) if is_cuda(path) else None
    diags = diagnostics_for(ls, path) if (entry is not None or cuda_doc is not None) and not clear else []
    open_buffer = (entry is not None and entry.from_buffer) or cuda_doc is not None
    if not diags and path not in ls.state.pushed and not open_buffer:
        return  # nothing to show and nothing shown before: spare the client
    version = cuda_doc.version if cuda_doc is not None else entry.version if open_buffer else None
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version))
    if diags:
        ls.state.pushed.add(path)
    else:
        ls.state.pushed.discard(path)


def register(server: "KernelLanguageServer") -> None:
    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier="kernel-lsp", inter_file_dependencies=True, workspace_diagnostics=True),
    )
    async def document_diagnostic(ls: "KernelLanguageServer", params: types.DocumentDiagnosticParams):
        path = await ls.bring_current(params.text_document.uri)
        if path is None:
            return types.RelatedFullDocumentDiagnosticReport(items=[])
        entry = ls.state.index.get(path)
        diags = diagnostics_for(ls, path)
        result_id = _result_id(diags, entry.version if entry else None)
        if params.previous_result_id == result_id:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
        return types.RelatedFullDocumentDiagnosticReport(items=diags, result_id=result_id)

    @server.feature(types.WORKSPACE_DIAGNOSTIC)
    def workspace_diagnostic(ls: "KernelLanguageServer", params: types.WorkspaceDiagnosticParams):
        previous = {p.uri: p.value for p in params.previous_result_ids or []}
        items: list = []
        if ls.pushes_closed_files:
            return types.WorkspaceDiagnosticReport(items=items)  # closed files' problems are pushed instead
        for path in sorted(ls.state.index.files):
            if ls.open_document(path) is not None:
                continue  # open documents are pulled one by one
            uri = from_fs_path(path)
            if uri is None:
                continue
            diags = diagnostics_for(ls, path)
            if not diags and uri not in previous:
                continue
            result_id = _result_id(diags, None)
            if previous.get(uri) == result_id:
                items.append(types.WorkspaceUnchangedDocumentDiagnosticReport(uri=uri, result_id=result_id, version=None))
            else:
                items.append(types.WorkspaceFullDocumentDiagnosticReport(
                    uri=uri, items=diags, result_id=result_id, version=None))
        return types.WorkspaceDiagnosticReport(items=items)
