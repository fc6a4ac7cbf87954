"""Diagnostics through a real client: pull for Neovim 0.11, push for the VS Code profile, never both."""

from __future__ import annotations

import asyncio

from lsprotocol import types

from .kernels import GOOD, SECOND_KERNEL, TYPO, TYPO_LINE


def codes(diags):
    return sorted(str(d.code) for d in diags)


async def code_actions(s, uri, diags):
    """The actions an editor gets for the first diagnostic, as it asks with the cursor on it."""
    return await s.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diags[0].range,
        context=types.CodeActionContext(diagnostics=diags)))


def apply(s, uri, edits):
    for edit in edits:
        s.replace(uri, (edit.range.start.line, edit.range.start.character),
                  (edit.range.end.line, edit.range.end.character), edit.new_text)


async def test_problem_reported_and_cleared_by_typing(start):
    s = await start({"kernels.py": TYPO})
    uri = s.open("kernels.py")
    diags = await s.diagnostics(uri)
    assert codes(diags) == ["TR007"]
    d = diags[0]
    assert d.range.start.line == TYPO_LINE and d.source == "kernel-lsp"
    assert "arange" in d.message
    # Fix it with an incremental edit: "arrange" -> "arange".
    col = TYPO.splitlines()[TYPO_LINE].index("arrange")
    s.replace(uri, (TYPO_LINE, col), (TYPO_LINE, col + len("arrange")), "arange")
    assert await s.diagnostics(uri) == []


async def test_pull_clients_get_no_pushes(start):
    s = await start({"kernels.py": TYPO})
    uri = s.open("kernels.py")
    assert codes(await s.diagnostics(uri)) == ["TR007"]
    await asyncio.sleep(0.3)
    if s.refreshable:
        assert s.client.publish_count == 0
    elif s.pulls:
        # Problems of closed files are pushed to a client that cannot be asked to re-pull; once the document is
        # open, its pushed set is cleared and only pulls show it.
        assert not s.client.diagnostics.get(uri)
    else:
        assert s.client.pushed_versions[uri] == s.versions[uri]


async def test_rapid_edits_publish_only_the_latest_version(start):
    s = await start({"kernels.py": GOOD})
    uri = s.open("kernels.py")
    await s.diagnostics(uri)
    for i in range(15):
        s.set_text(uri, TYPO if i % 2 == 0 else GOOD)
    s.set_text(uri, TYPO)
    diags = await s.diagnostics(uri)
    assert codes(diags) == ["TR007"]
    if not s.pulls:
        await asyncio.sleep(0.3)
        assert s.client.pushed_versions[uri] == s.versions[uri]
        assert codes(s.client.diagnostics[uri]) == ["TR007"]


async def test_syntax_error_keeps_other_kernels_results(start):
    s = await start({"kernels.py": TYPO + SECOND_KERNEL})
    uri = s.open("kernels.py")
    assert codes(await s.diagnostics(uri)) == ["TR007"]
    broken = TYPO + SECOND_KERNEL.replace("def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):", "def scale_kernel(x_ptr, n,")
    s.set_text(uri, broken)
    diags = await s.diagnostics(uri)
    assert codes(diags) == ["KL001", "TR007"]


async def test_quick_fix_is_a_versioned_edit_that_fixes_the_problem(start):
    s = await start({"kernels.py": TYPO})
    uri = s.open("kernels.py")
    diags = await s.diagnostics(uri)
    actions = await code_actions(s, uri, diags)
    titles = [a.title for a in actions]
    assert any("arange" in t for t in titles), titles
    assert "Ignore TR007 on this line" in titles
    fix = next(a for a in actions if a.is_preferred)
    assert fix.kind == types.CodeActionKind.QuickFix and fix.diagnostics
    change = fix.edit.document_changes[0]
    assert change.text_document.version == s.versions[uri]
    apply(s, uri, change.edits)
    assert await s.diagnostics(uri) == []


async def test_suppression_comment_action(start):
    s = await start({"kernels.py": TYPO})
    uri = s.open("kernels.py")
    diags = await s.diagnostics(uri)
    actions = await code_actions(s, uri, diags)
    ignore = next(a for a in actions if a.title.startswith("Ignore"))
    edits = ignore.edit.document_changes[0].edits
    assert len(edits) == 1
    apply(s, uri, edits)
    assert await s.diagnostics(uri) == []


async def test_unicode_before_the_problem_on_the_same_line(start):
    text = TYPO.replace("offs = pid * BLOCK + tl.arrange(0, BLOCK)",
                        "offs = pid * BLOCK + tl.arrange(0, BLOCK)  # ä")
    text = text.replace("    offs = pid", "    ö = 0; offs = pid")
    s = await start({"kernels.py": text})
    uri = s.open("kernels.py")
    (d,) = await s.diagnostics(uri)
    line = text.splitlines()[d.range.start.line]
    code_points = line.index("tl.arrange")
    # "ö" is 1 code point, 1 UTF-16 unit and 2 UTF-8 bytes: the column depends on the negotiated encoding.
    before = line[:code_points]
    expected = {"utf-8": len(before.encode()), "utf-16": len(before.encode("utf-16-le")) // 2,
                "utf-32": code_points}[s.encoding]
    assert d.range.start.character == expected


async def test_a_request_right_after_an_edit_does_not_swallow_its_diagnostics(start):
    """A request that brings the file up to date before the background analysis does still leaves the edit's
    diagnostics shown: pushed for a pushing client, in the pull answer for a pulling one."""
    s = await start({"kernels.py": TYPO})
    uri = s.open("kernels.py")
    assert codes(await s.diagnostics(uri)) == ["TR007"]
    col = TYPO.splitlines()[TYPO_LINE].index("arrange")
    s.replace(uri, (TYPO_LINE, col), (TYPO_LINE, col + len("arrange")), "arange")
    await s.client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert await s.diagnostics(uri, timeout=10) == []
