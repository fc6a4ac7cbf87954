"""Show IR through the language server: the IR of the kernel under the cursor, written, shown and mapped."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types


from .kernels import GOOD

pytest.importorskip("triton")

SHOW_IR = "kernel-lsp.showIR"
LOAD_LINE = GOOD.splitlines().index("    x = tl.load(x_ptr + offs, mask=mask)")
# GOOD launches nothing: BLOCK's value comes from a pin (the compile never makes one up).
OPTIONS = {"compile": "open", "compileDebounceMs": 0, "targets": ["sm_90", "gfx942"], "compileWorkers": 1,
           "pins": {"add_kernel": {"BLOCK": 256}}}


@pytest.fixture(params=["vscode", "neovim"])
def profile(request) -> str:  # VS Code supports window/showDocument; Neovim 0.11's recorded profile too
    return request.param


async def wait_compiled(s, timeout: float = 90.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (await s.command("kernel-lsp.status"))["compile"].get("filesCompiled", 0) < 1:
        assert loop.time() < deadline, "the kernel file was not compiled in time"
        await asyncio.sleep(0.1)


async def _definitions(s, ir_uri: str, lines: list[int]) -> set[tuple[str, int]]:
    """Where definition on each of these lines of an IR document goes: (uri, source line)."""
    out = set()
    for line in lines:
        found = await s.client.text_document_definition_async(types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=ir_uri), position=types.Position(line, 2)))
        out |= {(loc.uri, loc.range.start.line) for loc in found or []}
    return out


async def _check_ir_document(s, got: dict) -> None:
    """The IR file names the user's file and lines, and definition on the cursor's IR lines goes back to them."""
    text = Path(got["path"]).read_text()
    assert "kernel-lsp-" not in text and "kernels.py" in text
    source_uri = s.uri("kernels.py")
    assert await _definitions(s, got["uri"], got["lines"]) == {(source_uri, LOAD_LINE)}


async def test_show_ir_opens_the_ir_of_the_cursor_line(start):
    s = await start({"kernels.py": GOOD}, options=OPTIONS)
    uri = s.open("kernels.py")
    early = await s.command(SHOW_IR, uri, LOAD_LINE, 8)  # before the compile finished: an error, not an exception
    assert "lines" in early or "error" in early
    await wait_compiled(s)

    got = await s.command(SHOW_IR, uri, LOAD_LINE, 8)
    assert "error" not in got, got
    assert got["stage"] == "ttgir" and got["target"] == "sm_90" and got["config"]
    assert got["availableStages"] == ["ttir", "ttgir", "llir", "ptx", "sass"]
    path = Path(got["path"])
    assert path.is_file() and path.parent == s.root / ".kernel-lsp" / "ir"
    assert path.name.startswith("add_kernel.sm_90.") and path.suffix == ".ttgir"
    assert got["uri"] == path.as_uri()
    text = path.read_text()
    ir = text.splitlines()
    assert got["lines"] and any("tt.load" in ir[i] for i in got["lines"])
    assert any(f'kernels.py":{LOAD_LINE + 1}:' in line for line in ir)  # the user's file and line, 1-based
    await _check_ir_document(s, got)
    other_lines = [i for i in range(len(ir)) if i not in got["lines"] and "tt.store" in ir[i]]
    store_line = GOOD.splitlines().index("    tl.store(out_ptr + offs, x + y, mask=mask)")
    assert await _definitions(s, got["uri"], other_lines[:1]) == {(s.uri("kernels.py"), store_line)}

    shown = s.client.shown_documents
    caps = s.client.capabilities
    if caps.window and caps.window.show_document and caps.window.show_document.support:
        assert shown and shown[-1].uri == got["uri"] and shown[-1].take_focus
        assert shown[-1].selection.start.line == got["lines"][0]
    else:
        assert not shown

    ptx = await s.command(SHOW_IR, uri, LOAD_LINE, 0, "ptx")
    assert "error" not in ptx, ptx
    assert Path(ptx["path"]).suffix == ".ptx" and ptx["lines"]
    ptx_lines = Path(ptx["path"]).read_text().splitlines()
    assert any("ld.global" in ptx_lines[i] for i in ptx["lines"])
    await _check_ir_document(s, ptx)

    amd = await s.command(SHOW_IR, uri, LOAD_LINE, 0, "amdgcn", "gfx942")
    assert "error" not in amd and amd["target"] == "gfx942" and amd["lines"], amd
    assert "amdgcn" in amd["availableStages"] and "ptx" not in amd["availableStages"]
    await _check_ir_document(s, amd)

    sass = await s.command(SHOW_IR, uri, LOAD_LINE, 0, "sass")  # disassembled on request, with line info
    assert "error" not in sass and Path(sass["path"]).suffix == ".sass" and sass["lines"], sass
    sass_lines = Path(sass["path"]).read_text().splitlines()
    assert any("LDG" in sass_lines[i] for i in sass["lines"])
    await _check_ir_document(s, sass)
    missing = await s.command(SHOW_IR, uri, LOAD_LINE, 0, "amdgcn")  # sm_90 has no AMDGCN
    assert "error" in missing and set(missing["availableStages"]) == {"ttir", "ttgir", "llir", "ptx", "sass"}
    assert "ptx" in missing["error"] and "ttgir" in missing["error"]

    outside = await s.command(SHOW_IR, uri, 0, 0)  # the import line: no kernel there
    assert "error" in outside and "no Triton kernel" in outside["error"]
    other = await s.command(SHOW_IR, uri, LOAD_LINE, 0, None, "sm_80")
    assert "error" in other and "sm_80" in other["error"]


async def test_show_ir_when_compiling_is_off(start):
    s = await start({"kernels.py": GOOD}, options={"compile": "off"})
    uri = s.open("kernels.py")
    await s.diagnostics(uri)
    got = await s.command(SHOW_IR, uri, LOAD_LINE, 8)
    assert "error" in got and "compiling is off" in got["error"]
    assert not (s.root / ".kernel-lsp" / "ir").exists()


COMPARE_IR = "kernel-lsp.compareIR"


@pytest.mark.timeout(600)
async def test_compare_ir_writes_both_sides_with_the_source_mapping(start):
    s = await start({"kernels.py": GOOD}, options=OPTIONS)
    uri = s.open("kernels.py")
    await s.diagnostics(uri)
    got = await s.command(COMPARE_IR, {"uri": uri, "line": LOAD_LINE, "character": 8, "stage": "ptx",
                                       "a": "num_warps=4", "b": {"BLOCK": 1024, "num_warps": 8}})
    assert "error" not in got, got
    assert got["kernel"] == "add_kernel" and got["stage"] == "ptx" and got["target"] == "sm_90"
    assert got["identical"] is False
    a, b = got["a"], got["b"]
    assert a["constexprs"] == {"BLOCK": 256} and a["numWarps"] == 4  # BLOCK from the pins setting
    assert b["constexprs"] == {"BLOCK": 1024} and b["numWarps"] == 8
    assert "num_warps=4 (triton " in a["description"] and "BLOCK=1024, num_warps=8 (triton " in b["description"]
    texts = {}
    for side in (a, b):
        path = Path(side["path"])
        assert path.parent == s.root / ".kernel-lsp" / "ir" and path.suffix == ".ptx" and side["uri"] == path.as_uri()
        texts[path] = path.read_text().splitlines()
        assert side["lines"] and any("ld.global" in texts[path][i] for i in side["lines"])
        await _check_ir_document(s, side)  # definition on the cursor line's IR goes back to it
    assert ".reqntid 128" in texts[Path(a["path"])] and ".reqntid 256" in texts[Path(b["path"])]


BAD_COMPARISONS = [
    ({"b": "BLOCK 1"}, "expected NAME=VALUE"),
    ({"b": {"BLOK": 64}}, "has no parameter BLOK"),
    ({"b": 3}, "expected an object"),
    ({"bPython": "/nonexistent/python"}, "no Python interpreter at /nonexistent/python"),
    ({"stage": "nope"}, "unknown stage"),
    ({"line": 0}, "no Triton kernel"),
]


async def test_compare_ir_says_what_is_wrong(start):
    s = await start({"kernels.py": GOOD}, options=OPTIONS)
    uri = s.open("kernels.py")
    await s.diagnostics(uri)
    for given, message in BAD_COMPARISONS:
        got = await s.command(COMPARE_IR, {"uri": uri, "line": LOAD_LINE, "character": 0, **given})
        assert message in got.get("error", ""), (given, got)
    assert "compile" in await s.command("kernel-lsp.status")  # the server still answers


async def test_show_ir_right_after_typing_opens_when_the_compile_finishes(start):
    s = await start({"kernels.py": GOOD}, options={**OPTIONS, "compileDebounceMs": 300})
    uri = s.open("kernels.py")
    await wait_compiled(s)
    # An edit inside the kernel: the compile shown so far is of the old text, a new one is on its way.
    edited = GOOD.replace("    x = tl.load(x_ptr + offs, mask=mask)", "    x = tl.load(x_ptr + offs, mask=mask) * 2")
    s.set_text(uri, edited)
    got = await s.command(SHOW_IR, uri, LOAD_LINE, 8)
    assert "error" not in got, got
    assert got["lines"] and got["target"] == "sm_90"
    assert any("arith.mul" in line for line in Path(got["path"]).read_text().splitlines())  # the new text's IR
    caps = s.client.capabilities
    if caps.window and caps.window.show_document and caps.window.show_document.support:
        assert s.client.shown_documents[-1].uri == got["uri"]
