"""Kernels as symbols: the outline of a file (textDocument/documentSymbol) and a workspace-wide search."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import from_fs_path

from analyzers.model import NkiKernel, TritonKernel

from .. import convert
from ..convert import Positions

if TYPE_CHECKING:
    from ..server import KernelLanguageServer


def _detail(kernel: TritonKernel | NkiKernel) -> str:
    if isinstance(kernel, NkiKernel):
        return f"NKI kernel ({kernel.api} API)"
    parts = ["Triton kernel"]
    if "autotune" in kernel.decorators:
        n = len(kernel.autotune_configs)
        parts.append(f"autotuned ({n} configs)" if kernel.autotune_configs_known else "autotuned")
    if kernel.heuristics:
        parts.append("heuristics: " + ", ".join(kernel.heuristics))
    return " · ".join(parts)


def _document_symbols(pos: Positions, kernel: TritonKernel | NkiKernel) -> types.DocumentSymbol:
    params = None
    if isinstance(kernel, TritonKernel):
        params = [(p.name, "tl.constexpr" if p.is_constexpr else (p.annotation or ""), p.is_constexpr, p.span)
                  for p in kernel.params]
    return convert.kernel_symbol(pos, kernel.name, _detail(kernel), kernel.span, kernel.name_span, params)


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbol(ls: "KernelLanguageServer", params: types.DocumentSymbolParams):
        path = await ls.bring_current(params.text_document.uri)
        entry = ls.state.index.get(path) if path else None
        if entry is None or entry.analysis is None:
            return []
        pos = ls.positions(path)
        kernels = [*entry.analysis.kernels, *entry.analysis.nki_kernels]
        kernels.sort(key=lambda k: k.span.start_line)
        return [_document_symbols(pos, k) for k in kernels]

    @server.feature(types.WORKSPACE_SYMBOL)
    def workspace_symbol(ls: "KernelLanguageServer", params: types.WorkspaceSymbolParams):
        query = params.query.lower()
        found = []
        for path, entry in sorted(ls.state.index.files.items()):
            if entry.analysis is None:
                continue
            kernels = [*entry.analysis.kernels, *entry.analysis.nki_kernels]
            matching = [k for k in kernels if query in k.name.lower()]
            if not matching:
                continue
            pos = ls.positions(path)
            uri = from_fs_path(path) or path
            for k in matching:
                found.append(convert.kernel_workspace_symbol(uri, pos, k.name, _detail(k), k.name_span))
        return found
