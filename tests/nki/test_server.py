"""NKI specs through the language server: the verdict of the NKI model as a code lens and KV diagnostics."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.server.conftest import until

pytest.importorskip("torch")

TEXT = (Path(__file__).parent / "specs" / "scale_rows_nki.py").read_text()
KERNEL_LINE = TEXT.splitlines().index("def scale_rows(x):")
WRONG = TEXT.replace("operand0=3.0", "operand0=2.0")
STORE_LINE = next(i for i, line in enumerate(TEXT.splitlines()) if "nisa.dma_copy(dst=out[" in line)


@pytest.fixture(params=["vscode"])
def profile(request) -> str:
    return request.param


async def test_an_nki_spec_is_checked_in_the_model_and_shown_in_the_lens(start):
    s = await start({"scale_rows_nki.py": TEXT}, options={"checkDevice": "interpreter"})
    uri = s.open("scale_rows_nki.py")
    result = await s.command("kernel-lsp.runChecks", {"uri": uri, "line": KERNEL_LINE + 2, "character": 0})
    [verdict] = result["verdicts"]
    assert verdict["status"] == "correct" and verdict["kernel"] == "scale_rows", result
    assert verdict["message"] == "correct on 8 cases (kernel-lsp NKI model)"
    [lens] = await s.lenses(uri)
    assert lens.command.title.startswith("✓ correct on 8 cases (kernel-lsp NKI model)"), lens.command.title

    # A wrong scale, saved: the check runs by itself and points at the DMA that stored the wrong values.
    s.set_text(uri, WRONG)
    s.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri)))
    diags = await until(lambda: s.diagnostics(uri), lambda d: any(str(x.code).startswith("KV") for x in d))
    [kv] = [d for d in diags if str(d.code).startswith("KV")]
    assert kv.range.start.line == STORE_LINE and "kernel-lsp NKI model" in kv.message, kv
    [lens] = await s.lenses(uri)
    assert lens.command.title.startswith("✗")
