"""Latency through the language server without a GPU: estimates after a check (inlay hint, code lens, hover),
and "Optimize tiling" proposing a verified edit that the editor must confirm."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest
from lsprotocol import types

from .conftest import until

pytest.importorskip("torch")
pytest.importorskip("triton")

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "vector_add.py").read_text()
KERNEL_LINE = EXAMPLE.splitlines().index("def add_kernel(")
OPTIONS = {"checkDevice": "interpreter", "targets": ["sm_90"]}


@pytest.fixture(params=["vscode"])
def profile(request) -> str:
    return request.param


async def test_estimates_after_a_check_and_an_optimize_tiling_proposal(start):
    s = await start({"vector_add.py": EXAMPLE}, options=OPTIONS)
    uri = s.open("vector_add.py")
    where = {"uri": uri, "line": KERNEL_LINE, "character": 0}
    result = await s.command("kernel-lsp.runChecks", where)
    assert [v["status"] for v in result["verdicts"]] == ["correct"], result

    async def hints():
        found = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(0, 0), types.Position(len(EXAMPLE.splitlines()), 0))))
        return {h.position.line: h.label for h in found or []}

    by_line = await until(hints, lambda h: KERNEL_LINE in h)
    # The largest bench shape, 2**24 fp32 elements: labelled an estimate for sm_90's device, memory-bound.
    assert "H200 est." in by_line[KERNEL_LINE] and "HBM roofline" in by_line[KERNEL_LINE], by_line
    assert by_line[KERNEL_LINE].startswith("≈")
    lenses = await s.client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    titles = [lens.command.title for lens in lenses]
    assert any("(16777216,) float32: ≈" in t for t in titles), titles
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(KERNEL_LINE, 6)))
    assert "**Latency** (estimated by the latency model, no GPU)" in hover.contents.value
    assert "| (16777216,) | float32 | H200 |" in hover.contents.value

    actions = await s.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(KERNEL_LINE + 5, 0), types.Position(KERNEL_LINE + 5, 0)),
        context=types.CodeActionContext(diagnostics=[])))
    [optimize] = [a for a in actions if a.title == "Optimize tiling of add_kernel"]
    # lsprotocol's converter reads a CodeAction that carries a Command as a Command whose `command` is the repr of
    # the nested one; editors read it correctly.
    inner = optimize.command
    inner = ast.literal_eval(inner) if isinstance(inner, str) else {"command": inner.command,
                                                                     "arguments": inner.arguments}
    assert inner["command"] == "kernel-lsp.optimizeTiling"
    answer = await s.command(inner["command"], *inner["arguments"])
    if "error" in answer:  # the model may find the current configuration best: then it says so, with the table
        assert "no tiling change proposed" in answer["error"] and len(answer["table"]) > 1, answer
        return
    proposal = answer["proposal"]
    assert "ranked by the latency model for H200 (no GPU: not measured)" in proposal["summary"], proposal
    assert "correct on" in proposal["summary"]  # the winner passed the spec's check
    edit = proposal["edit"]
    assert edit["changeAnnotations"]["kernel-lsp.proposal"]["needsConfirmation"] is True
    [change] = edit["documentChanges"]
    assert change["textDocument"]["version"] == s.versions[uri]
    assert all(e["annotationId"] == "kernel-lsp.proposal" for e in change["edits"])
    # VS Code previews edits whose annotations need confirmation: the server sends it as workspace/applyEdit.
    assert answer["delivered"] == "applyEdit"
    await until(lambda: asyncio.sleep(0, s.client.applied_edits), lambda edits: edits)
    sent = s.client.applied_edits[-1].edit
    assert sent.change_annotations["kernel-lsp.proposal"].needs_confirmation


async def test_nothing_runs_while_checks_are_off(start):
    s = await start({"vector_add.py": EXAMPLE}, options={**OPTIONS, "checks": "off"})
    uri = s.open("vector_add.py")
    answer = await s.command("kernel-lsp.optimizeTiling", {"uri": uri, "line": KERNEL_LINE, "character": 0})
    assert "checks are off" in answer["error"]
    assert "checks are off" in (await s.command("kernel-lsp.runChecks", {"uri": uri}))["error"]


async def test_hover_history_keeps_devices_apart(start):
    """Estimates for two targets' devices are two histories: an A100 figure after an H200 one is no regression."""
    import json

    history = [{"time": 1.0, "source": "estimate", "shape": [16777216], "dtype": "float32", "device": device,
                "us": us, "config": "BLOCK_SIZE=512, num_warps=4, num_stages=3"}
               for device, us in (("H200", 61.5), ("A100", 201.5))]
    s = await start({"vector_add.py": EXAMPLE, ".kernel-lsp/history/vector_add.add_kernel.json": json.dumps(history)},
                    options={**OPTIONS, "targets": ["sm_90", "sm_80"]})
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.runChecks", {"uri": uri, "line": KERNEL_LINE, "character": 0})
    assert [v["status"] for v in result["verdicts"]] == ["correct"], result

    async def hover():
        found = await s.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(KERNEL_LINE, 6)))
        return found.contents.value if found else ""

    text = await until(hover, lambda t: "History on A100" in t and "History on H200" in t)
    lines = {line.split(" at ")[0]: line for line in text.splitlines() if line.startswith("History on ")}
    assert lines["History on H200"].split(": ")[1].startswith("61.5 µs → ") and "201.5" not in lines["History on H200"]
    assert lines["History on A100"].split(": ")[1].startswith("201.5 µs → ") and "61.5" not in lines["History on A100"]
