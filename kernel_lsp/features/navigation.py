"""Go to definition and find references between kernels, their @jit helpers and their launch sites, across the
workspace (engine/navigation.py finds them); definition on a line of a Show IR document goes to the source line
it was compiled from (features/ir.py keeps that map)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import from_fs_path

from ..convert import location
from . import ir

if TYPE_CHECKING:
    from ..server import KernelLanguageServer


def target_at(ls: "KernelLanguageServer", uri: str, position: types.Position):
    """(path, the kernel or parameter under the cursor) or (path, None)."""
    from ..engine import navigation  # on first use: the server's startup stays as it was

    path = ls.ensure_current(uri)
    text = ls.current_text(path) if path else None
    if path is None or text is None:
        return path, None
    at = ls.positions(path).span(types.Range(position, position))
    ls.note_focus(path, at.start_line)
    return path, navigation.target_at(ls.state.index, path, text, at.start_line, at.start_col, ls.current_text)


def to_locations(ls: "KernelLanguageServer", found: list) -> list[types.Location]:
    out = []
    for path, span in found:
        out.append(location(from_fs_path(path) or path, ls.positions(path), span))
    return out


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: "KernelLanguageServer", params: types.DefinitionParams):
        from_ir = ir.source_of_ir_line(ls, params.text_document.uri, params.position.line)
        if from_ir is not None:
            return from_ir
        _, target = target_at(ls, params.text_document.uri, params.position)
        if target is None:
            return None
        from ..engine import navigation

        return to_locations(ls, [navigation.definition(target)])

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    def references(ls: "KernelLanguageServer", params: types.ReferenceParams):
        _, target = target_at(ls, params.text_document.uri, params.position)
        if target is None:
            return None
        from ..engine import navigation

        return to_locations(ls, navigation.references(ls.state.index, target, ls.current_text,
                                                      params.context.include_declaration))
