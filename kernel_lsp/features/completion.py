"""Completion of the kernel languages' API after `tl.`, `triton.`, `tl.math.`, `nl.`, `nisa.`, ...: the installed
package's own public names, with their signatures and docstrings (engine/apidocs.py); and at the start of an
argument, the keywords of the call the cursor is in (`mask=`, `other=` in `tl.load(`; a kernel's parameters and
launch options in `kernel[grid](`; a @jit helper's parameters in `helper(`), those already given left out."""

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
            return await _keywords(ls, path, text, lines[at.start_line], at.start_line, at.start_col)
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


_LAUNCH_OPTIONS = (("num_warps", "warps per program (triton's default 4)"),
                   ("num_stages", "software-pipelining stages of the kernel's loops"))


async def _keywords(ls: "KernelLanguageServer", path: str, text: str, line: str, line_no: int, col: int):
    """`name=` items for the call the cursor is in, where an argument starts (after `(` or `,`, an identifier
    being typed or none)."""
    from ..engine import navigation
    from ..engine.apidocs import imported_names, resolve_dotted
    from ..engine.code_at import call_at

    start = col
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
        start -= 1
    before = line[:start].rstrip()
    if before and before[-1] not in "(,":
        return None
    call = call_at(text, line_no, col)
    if call is None or call.keyword is not None:
        return None
    given = set(call.keywords)
    positional = call.index if not call.keywords else 0
    choices: list[tuple[str, str, str | None]] = []  # (name, detail, documentation)
    entry = None
    if not call.launch:
        found = await ls.api_docs.entry_for(resolve_dotted(call.callee, imported_names(text)))
        entry = found[0] if found is not None and found[0].signature is not None else None
    if entry is not None:
        for i, param in enumerate(entry.params):
            name = param.split(":", 1)[0].split("=", 1)[0].strip()
            if i >= positional and not name.startswith("*"):
                choices.append((name, param, f"`{entry.qualname}{entry.signature}`"))
    else:
        named = navigation.kernel_named(ls.state.index, path, text, call.callee)
        if named is None:
            return None
        kernel = named[1]
        provided = kernel.provided_by_decorators
        for i, p in enumerate(kernel.params):
            if i >= positional and p.name not in provided:
                detail = p.name + (f": {p.annotation}" if p.annotation else "") + (f" = {p.default}" if p.default
                                                                                     else "")
                choices.append((p.name, detail, f"parameter of `{kernel.name}`"))
        if call.launch:
            choices += [(name, f"{name}=", why) for name, why in _LAUNCH_OPTIONS]
    items = [types.CompletionItem(
        label=f"{name}=", kind=types.CompletionItemKind.Variable, detail=detail, insert_text=f"{name}=",
        filter_text=name, sort_text=f"0{i:03d}", documentation=convert.markdown(doc) if doc else None)
        for i, (name, detail, doc) in enumerate(choices) if name not in given]
    return types.CompletionList(is_incomplete=False, items=items) if items else None
