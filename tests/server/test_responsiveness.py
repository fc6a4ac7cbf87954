"""Compiling keeps the server responsive: other files are answered while a large file is planned and compiled, a
file's results are shown kernel by kernel as they come, and opening a file compiles it without the debounce."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from tests.slow import scaled

from .kernels import GOOD
from .test_compile import BROKEN, wait_for_codes

pytest.importorskip("triton")

OPTIONS = {"compile": "open", "targets": ["sm_90"], "compileWorkers": 1}
PADDING = "the same body as its neighbours, kept apart by its name " * 4
# Large enough to be planned in the planning process (PLAN_IN_PROCESS_BYTES), far too many kernels to compile
# within a test: the compile is still running when the test ends.
BIG = "import triton\nimport triton.language as tl\n" + "".join(f'''

@triton.jit
def add_kernel_{i}(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = 1024):
    """Copy {i}: {PADDING}"""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
''' for i in range(500))


@pytest.fixture
def profile() -> str:  # push: the compile results reach the client without asking
    return "vscode"


async def files_compiled(s) -> int:
    return (await s.command("kernel-lsp.status"))["compile"].get("filesCompiled", 0)


async def hint_on(s, uri: str, line: int) -> str | None:
    hints = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(0, 0), types.Position(line + 1, 0))))
    return next((h.label for h in hints or [] if h.position.line == line), None)


async def test_another_file_is_answered_while_a_large_file_compiles(start):
    from kernel_lsp.engine.compile.service import PLAN_IN_PROCESS_BYTES

    assert len(BIG) >= PLAN_IN_PROCESS_BYTES
    s = await start({"small.py": GOOD, "big.py": BIG}, options=OPTIONS)
    small = s.open("small.py")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + scaled(60)
    while await files_compiled(s) < 1:
        assert loop.time() < deadline, "the small file was not compiled in time"
        await asyncio.sleep(0.1)

    big = s.open("big.py")
    for _ in range(10):  # meanwhile the big file is analysed, planned and compiled
        symbols = await asyncio.wait_for(s.client.text_document_document_symbol_async(types.DocumentSymbolParams(
            text_document=types.TextDocumentIdentifier(uri=small))), scaled(20))
        assert [sym.name for sym in symbols] == ["add_kernel"]
        await asyncio.sleep(0.2)

    # The first kernel's facts are shown while the other kernels still compile.
    first_line = BIG.splitlines().index("def add_kernel_0(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = 1024):")
    deadline = loop.time() + scaled(60)
    while not ((label := await hint_on(s, big, first_line)) and "regs" in label):
        assert loop.time() < deadline, "no compile facts for the big file's first kernel"
        await asyncio.sleep(0.2)
    assert await files_compiled(s) == 1  # the big file's compile has not finished
    assert await hint_on(s, big, BIG.splitlines().index(
        "def add_kernel_499(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = 1024):")) is None


async def test_an_opened_file_compiles_without_waiting_for_the_debounce(start):
    s = await start({"kernels.py": BROKEN}, options={**OPTIONS, "compileDebounceMs": 60_000})
    uri = s.open("kernels.py")
    diags = await wait_for_codes(s, uri, "KC001", timeout=50)
    assert any(d.code == "KC001" for d in diags)  # well before the 60 s debounce
    s.set_text(uri, BROKEN + "\n# an edit\n")  # typing waits for the debounce, as before
    await asyncio.sleep(2)
    assert not [d for d in await s.diagnostics(uri) if str(d.code).startswith("KC")]
