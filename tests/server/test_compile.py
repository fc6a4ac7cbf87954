"""Background compilation through the language server: compile errors, resources as inlay hints and hovers."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from .kernels import GOOD

pytest.importorskip("triton")

BROKEN = GOOD + '''

@triton.jit
def shapes_kernel(x_ptr):
    a = tl.arange(0, 16)
    b = tl.arange(0, 32)
    c = a + b
    tl.store(x_ptr + a, c)
'''
BROKEN_LINE = BROKEN.splitlines().index("    c = a + b")
# add_kernel has no launch here: its block size is pinned (kernel-lsp never compiles with a made-up one).
OPTIONS = {"compile": "open", "compileDebounceMs": 0, "targets": ["sm_90"], "compileWorkers": 1,
           "pins": {"add_kernel": {"BLOCK": 1024}}}


@pytest.fixture(params=["vscode", "refresh"])
def profile(request) -> str:  # push, and pull with refresh: the two ways compile results reach an editor
    return request.param


async def wait_for_codes(s, uri, code, timeout=90.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        diags = await s.diagnostics(uri) if s.pulls else list(s.client.diagnostics.get(uri, []))
        if any(d.code == code for d in diags) or loop.time() > deadline:
            return diags
        await asyncio.sleep(0.1)


async def test_compile_errors_hints_and_hover(start):
    s = await start({"kernels.py": BROKEN}, options=OPTIONS)
    uri = s.open("kernels.py")
    diags = await wait_for_codes(s, uri, "KC001")
    kc = [d for d in diags if d.code == "KC001"]
    assert kc, [(d.code, d.message) for d in diags]
    assert kc[0].range.start.line == BROKEN_LINE and "sm_90" in kc[0].message
    assert not [d for d in diags if str(d.code).startswith("TR")]  # the static rules do not see this one

    hints = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(0, 0), types.Position(len(BROKEN.splitlines()), 0))))
    by_line = {h.position.line: h.label for h in hints}
    add_line = BROKEN.splitlines().index("def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):")
    assert "sm_90:" in by_line[add_line] and "regs" in by_line[add_line]
    shapes_line = BROKEN.splitlines().index("def shapes_kernel(x_ptr):")
    assert by_line[shapes_line] == "sm_90: compile failed"

    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(add_line, 6)))
    assert "| sm_90 |" in hover.contents.value and "regs" in hover.contents.value
    assert "Compiled assuming:" in hover.contents.value and "*fp32" in hover.contents.value
    # The pointer types were guessed: the user is told how to pin them, once.
    told = [m.message for m in s.client.messages if "assumed parameter types" in m.message]
    assert len(told) == 1 and "`pins` setting" in told[0] and "add_kernel" in told[0], told

    if s.pulls:
        assert s.client.inlay_hint_refreshes >= 1  # told to ask again once results arrived
    reports = [r for updates in s.client.progress_reports.values() for r in updates]
    messages = [getattr(r, "message", None) for r in reports]
    assert any(m and m.startswith("compiling ") for m in messages), messages
    assert type(reports[-1]).__name__ == "WorkDoneProgressEnd"
    status = await s.command("kernel-lsp.status")
    assert status["compile"]["compiles"] >= 2 and status["compile"]["targets"] == ["sm_90"]


async def test_an_edit_hides_results_of_the_old_text_until_recompiled(start):
    s = await start({"kernels.py": BROKEN}, options={**OPTIONS, "compileDebounceMs": 400})
    uri = s.open("kernels.py")
    assert any(d.code == "KC001" for d in await wait_for_codes(s, uri, "KC001"))
    fixed = BROKEN.replace("    b = tl.arange(0, 32)", "    b = tl.arange(0, 16)")
    s.set_text(uri, fixed)
    diags = await s.diagnostics(uri)
    assert not [d for d in diags if d.code == "KC001"]  # results of the old text are never shown for the new one
    await asyncio.sleep(3)
    assert not [d for d in await s.diagnostics(uri) if str(d.code).startswith("KC")]


async def test_pinned_types_reach_the_compile(start):
    pinned = {**OPTIONS, "pins": {"add_kernel": {"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16",
                                                 "BLOCK": 256}}}
    s = await start({"kernels.py": GOOD}, options=pinned)
    uri = s.open("kernels.py")
    add_line = GOOD.splitlines().index("def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 90
    while True:
        hover = await s.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(add_line, 6)))
        if hover is not None or loop.time() > deadline:
            break
        await asyncio.sleep(0.1)
    assert hover is not None and "| sm_90 |" in hover.contents.value
    assert "*fp32" not in hover.contents.value and "BLOCK = 256" not in hover.contents.value  # nothing guessed
    assert not [m for m in s.client.messages if "assumed parameter types" in m.message]
