"""Requests sent right after an edit answer about the edited text: the analysis they need runs off the event loop
(bring_current), and what they say is about the version the editor holds, never an older one's positions."""

from __future__ import annotations

import asyncio

from lsprotocol import types

from tests.slow import scaled

from .kernels import GOOD, SECOND_KERNEL, TYPO_LINE


def _doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def test_requests_right_after_edits_see_the_newest_text(start):
    s = await start({"k.py": GOOD})
    uri = s.open("k.py")
    await s.diagnostics(uri, timeout=scaled(10))
    # A second kernel typed at the end, then the first one renamed: each request follows its edit at once.
    lines = GOOD.count("\n")
    s.replace(uri, (lines, 0), (lines, 0), SECOND_KERNEL)
    symbols = await asyncio.wait_for(s.client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=_doc(uri))), scaled(20))
    assert [sym.name for sym in symbols] == ["add_kernel", "scale_kernel"]
    s.replace(uri, (5, 4), (5, 14), "sum_kernel")
    hints, symbols = await asyncio.wait_for(asyncio.gather(
        s.client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=_doc(uri), range=types.Range(types.Position(0, 0), types.Position(40, 0)))),
        s.client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=_doc(uri)))),
        scaled(20))
    assert [sym.name for sym in symbols] == ["sum_kernel", "scale_kernel"]
    assert symbols[1].range.start.line == lines + 2  # the second kernel's decorator, where the edit put it
    # A typo typed in: the diagnostics of that version report it on its line.
    col = GOOD.splitlines()[TYPO_LINE].index("arange") + 2
    s.replace(uri, (TYPO_LINE, col), (TYPO_LINE, col), "r")  # tl.arange -> tl.arrange
    diags = await s.diagnostics(uri, timeout=scaled(10))
    assert [(d.code, d.range.start.line) for d in diags if d.code == "TR007"] == [("TR007", TYPO_LINE)]
