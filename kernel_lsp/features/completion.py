"""Completion of the kernel languages' API after `tl.`, `triton.`, `tl.math.`, `nl.`, `nisa.`, ...: the installed
package's own names, with their signatures and docstrings (engine/apidocs.py)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import to_fs_path

from .. import convert

from .api_docs import markdown

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

_KINDS = {"function": types.CompletionItemKind.Function, "class": types.CompletionItemKind.Class,
          "module": types.CompletionItemKind.Module, "value": types.CompletionItemKind.Constant}


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["."]))
    async def completion(ls: "KernelLanguageServer", params: types.CompletionParams):
        from ..engine.apidocs import imported_names, resolve_dotted
        from ..engine.code_at import member_prefix

        path = to_fs_path(params.text_document.uri)  # the current text is all it reads: no analysis to wait for
        text = ls.current_text(path) if path else None
        if text is None:
            return None
        pos = ls.positions(path)
        at = pos.span(types.Range(params.position, params.position))
        lines = text.splitlines()
        if at.start_line >= len(lines):
            return None
        found = member_prefix(lines[at.start_line], at.start_col)
        if found is None:
            return None
        base, _ = found
        module = resolve_dotted(base, imported_names(text))
        docs = await asyncio.to_thread(ls.api_docs.store().for_name, module)
        members = docs.members(module) if docs is not None else {}
        if not members:
            return None
        items = [types.CompletionItem(
            label=name, kind=_KINDS.get(entry.kind, types.CompletionItemKind.Text),
            detail=entry.label() if entry.signature else entry.kind,
            documentation=convert.markdown(markdown(entry, docs.version)),
            sort_text=("1" if name[0].isupper() else "0") + name,
        ) for name, entry in sorted(members.items())]
        return types.CompletionList(is_incomplete=False, items=items)
