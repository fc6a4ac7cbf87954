"""Hover docs for the kernel languages' API (`tl.load`, `triton.jit`, `nl.*`, `nisa.*`): the installed package's own
signature and docstring (engine/apidocs.py reads them in a child process, cached per package version).
Shared with completion and signature help, which show the same text."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

from lsprotocol import types

from .. import convert

if TYPE_CHECKING:
    from ..engine.apidocs import ApiDocsStore, ApiEntry
    from ..server import KernelLanguageServer

# The engine modules behind these features are imported on first use: the server's startup stays as it was.

_ROLE = re.compile(r":(?:code|class|func|meth|attr|obj|mod|data):`~?([^`]+)`")
_FIELD = re.compile(r"^:(param|type|return|returns|rtype)\s*([^:]*):\s*", re.M)


class ApiDocs:
    """The installed kernel languages' API docs of one server session, read on first use."""

    def __init__(self, server: "KernelLanguageServer"):
        self.ls = server
        self._store: "ApiDocsStore | None" = None

    def store(self) -> "ApiDocsStore":
        if self._store is None:
            from ..engine.apidocs import ApiDocsStore

            self._store = ApiDocsStore()
        return self._store

    async def entry_for(self, qualname: str) -> "tuple[ApiEntry, str] | None":
        """The API entry of a dotted name and its package's version (reading the package the first time)."""
        docs = await asyncio.to_thread(self.store().for_name, qualname)
        if docs is None:
            return None
        entry = docs.lookup(qualname)
        return (entry, docs.version) if entry is not None else None


def markdown(entry: "ApiEntry", version: str) -> str:
    """An entry as Markdown: its signature in a code block, its docstring, and which package version said so."""
    head = f"```python\n{entry.qualname}{entry.signature or ''}\n```" if entry.kind != "value" else \
        f"```python\n{entry.qualname}\n```"
    doc = _ROLE.sub(r"`\1`", entry.doc)

    def field(m: re.Match) -> str:
        kind, name = m.group(1), m.group(2).strip()
        label = {"param": "", "type": "type of ", "rtype": "returns type", "return": "returns",
                 "returns": "returns"}[kind]
        return f"- {label}`{name}`: " if name else f"- {label}: "

    doc = _FIELD.sub(field, doc)
    package = entry.qualname.split(".", 1)[0]
    return "\n\n".join(x for x in (head, doc.strip(), f"*{package} {version}*") if x)


async def hover(ls: "KernelLanguageServer", path: str, text: str, line: int, col: int,
                rng) -> types.Hover | None:
    """Hover on an API name: `load` in `tl.load(...)` (any import alias), `triton.jit`, `nl.add`."""
    from ..engine.apidocs import imported_names, resolve_dotted
    from ..engine.code_at import dotted_at

    lines = text.splitlines()
    if line >= len(lines):
        return None
    at = dotted_at(lines[line], col)
    if at is None:
        return None
    dotted, start, end = at
    qualname = resolve_dotted(dotted, imported_names(text))
    found = await ls.api_docs.entry_for(qualname)
    if found is None:
        own = user_function_markdown(ls, path, text, dotted)
        return convert.hover_over(own, rng(line, start, end)) if own else None
    if found[0].kind == "module" and not found[0].doc:
        return None
    return convert.hover_over(markdown(*found), rng(line, start, end))


def user_function_markdown(ls: "KernelLanguageServer", path: str, text: str, dotted: str) -> str | None:
    """A kernel or @jit helper of the workspace as Markdown: its signature, docstring and where it is defined."""
    import os

    from ..engine import navigation

    named = navigation.kernel_named(ls.state.index, path, text, dotted)
    if named is None:
        return None
    where, kernel = named
    doc = navigation.docstring(kernel, ls.current_text(where) or "")
    kinds = [d for d in kernel.decorators if d != "jit"]
    what = "@triton.jit function" + (f" ({', '.join('@triton.' + k for k in kinds)})" if kinds else "")
    place = f"{os.path.relpath(where, ls.workspace_root(where))}:{kernel.name_span.start_line + 1}"
    head = f"```python\ndef {navigation.signature_text(kernel)}\n```"
    return "\n\n".join(x for x in (head, doc, f"*{what}, {place}*") if x)
