"""Semantic tokens that set a Triton kernel's constexpr parameters and its program-id-derived values apart
(engine/highlights.py). Standard token types, so every theme colours them; the `constexpr` and `programId`
modifiers let a user style them on their own (docs/editors.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types

from ..convert import semantic_tokens

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)

TOKEN_TYPES = ["parameter", "variable"]
TOKEN_MODIFIERS = ["declaration", "readonly", "constexpr", "programId"]
LEGEND = types.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)
_last: dict[str, tuple[str, list]] = {}  # path -> (the text, its highlights) of the last whole-file request


def _bits(*names: str) -> int:
    return sum(1 << TOKEN_MODIFIERS.index(n) for n in names)


async def _tokens(ls: "KernelLanguageServer", uri: str, lines: tuple[int, int] | None) -> types.SemanticTokens:
    from ..engine.highlights import CONSTEXPR, highlights  # on first use: startup stays as it was

    path = await ls.bring_current(uri)
    entry = ls.state.index.get(path) if path else None
    text = ls.current_text(path) if entry is not None else None
    if entry is None or entry.analysis is None or text is None:
        return types.SemanticTokens(data=[])
    try:
        kept = _last.get(path)
        if kept is not None and kept[0] == text:  # VS Code asks for the visible range, then the whole file
            found = [h for h in kept[1] if lines is None or lines[0] <= h.span.start_line <= lines[1]]
        else:
            found = highlights(text, entry.analysis, ls.parse_cache(path), lines)
            if lines is None:
                _last.clear()  # one file's tokens are kept: the one being looked at
                _last[path] = (text, found)
    except (SyntaxError, SystemError, ValueError, RecursionError):  # odd text: no colours, never a dead server
        log.debug("semantic tokens of %s", path, exc_info=True)
        return types.SemanticTokens(data=[])
    tokens = []
    for h in found:
        if lines is not None and not lines[0] <= h.span.start_line <= lines[1]:
            continue
        if h.kind == CONSTEXPR:
            kind, mods = 0, _bits("readonly", "constexpr", *(("declaration",) if h.declaration else ()))
        else:
            kind, mods = 1, _bits("programId", *(("declaration",) if h.declaration else ()))
        tokens.append((h.span, kind, mods))
    return semantic_tokens(ls.positions(path), tokens)


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
    async def full(ls: "KernelLanguageServer", params: types.SemanticTokensParams):
        return await _tokens(ls, params.text_document.uri, None)

    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_RANGE, LEGEND)
    async def in_range(ls: "KernelLanguageServer", params: types.SemanticTokensRangeParams):
        """The visible part first (VS Code asks for it before the whole file)."""
        return await _tokens(ls, params.text_document.uri, (params.range.start.line, params.range.end.line))
