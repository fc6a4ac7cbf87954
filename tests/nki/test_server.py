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
    # Once correct, the kernel is timed as Triton kernels are: estimated, here on Trainium2 from the model's counts.
    lenses = await until(lambda: s.lenses(uri), lambda ls: any("Trainium2 est." in (x.command.title or "")
                                                                  for x in ls))
    titles = " | ".join(x.command.title for x in lenses)
    assert "(200, 64) float32: ≈" in titles and "µs Trainium2 est." in titles, titles
    hints = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri), range=types.Range(types.Position(0, 0),
                                                                            types.Position(len(TEXT.splitlines()), 0))))
    labels = [h.label if isinstance(h.label, str) else "".join(p.value for p in h.label) for h in hints or []]
    assert any("Trainium2 est." in label for label in labels), labels

    # A wrong scale, saved: the check runs by itself and points at the DMA that stored the wrong values.
    s.set_text(uri, WRONG)
    s.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri)))
    diags = await until(lambda: s.diagnostics(uri), lambda d: any(str(x.code).startswith("KV") for x in d))
    [kv] = [d for d in diags if str(d.code).startswith("KV")]
    assert kv.range.start.line == STORE_LINE and "kernel-lsp NKI model" in kv.message, kv
    [lens] = await s.lenses(uri)
    assert lens.command.title.startswith("✗")
