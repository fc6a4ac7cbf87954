"""Correctness checks through the language server: on save and on request, verdicts as code lenses and KV
diagnostics, a starter spec as a code action. Checks run the real checker (Triton's interpreter on the CPU)."""

from __future__ import annotations

from pathlib import Path

import asyncio

import pytest
from lsprotocol import types

from kernel_lsp.engine.proc import cmdline, descendants
from tests.slow import scaled

from .conftest import until

pytest.importorskip("torch")
pytest.importorskip("triton")

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "vector_add.py").read_text()
# The classic bug: the mask dropped, so the last, partial block reads and writes past the end.
UNMASKED = EXAMPLE.replace("x = tl.load(x_ptr + offsets, mask=in_bounds)", "x = tl.load(x_ptr + offsets)")
UNMASKED_LINE = UNMASKED.splitlines().index("    x = tl.load(x_ptr + offsets)")
KERNEL_LINE = EXAMPLE.splitlines().index("def add_kernel(")
NO_SPEC = '''import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def scale(x):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out
'''


@pytest.fixture(params=["vscode"])
def profile(request) -> str:
    return request.param


async def test_check_on_request_and_on_save(start):
    s = await start({"vector_add.py": EXAMPLE}, options={"checkDevice": "interpreter"})
    uri = s.open("vector_add.py")
    [lens] = await s.lenses(uri)
    assert lens.range.start.line == KERNEL_LINE and lens.command.command == "kernel-lsp.runChecks"
    assert "check against the reference" in lens.command.title

    result = await s.command("kernel-lsp.runChecks", {"uri": uri, "line": KERNEL_LINE + 3, "character": 0})
    [verdict] = result["verdicts"]
    assert verdict["status"] == "correct" and verdict["kernel"] == "add_kernel", result
    assert "CPU interpreter" in verdict["message"]
    [lens] = await s.lenses(uri)
    assert lens.command.title.startswith("✓ correct on") and "CPU interpreter" in lens.command.title
    assert not [d for d in await s.diagnostics(uri) if str(d.code).startswith("KV")]

    # The user drops a mask and saves: the check runs by itself and points at the load.
    s.set_text(uri, UNMASKED)
    [lens] = await s.lenses(uri)
    assert "check against the reference" in lens.command.title  # the old verdict was for the old text
    s.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri)))
    diags = await until(lambda: s.diagnostics(uri), lambda d: any(str(x.code).startswith("KV") for x in d))
    [kv] = [d for d in diags if str(d.code).startswith("KV")]
    assert kv.code == "KV003" and kv.range.start.line == UNMASKED_LINE, kv
    assert "x_ptr" in kv.message and "program" in kv.message
    [lens] = await s.lenses(uri)
    assert lens.command.title.startswith("✗")
    status = await s.command("kernel-lsp.status")
    assert status["checks"]["run"] == 2 and status["mode"] in ("cpu", "gpu")
    assert s.client.code_lens_refreshes >= 2  # told to ask again when a check started and when it ended


async def test_starter_spec_code_action_and_a_kernel_without_spec(start):
    s = await start({"scale.py": NO_SPEC}, options={"checkDevice": "interpreter"})
    uri = s.open("scale.py")
    assert await s.lenses(uri) == []
    kernel_line = NO_SPEC.splitlines().index("def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):")
    answer = await s.command("kernel-lsp.runChecks", {"uri": uri, "line": kernel_line, "character": 0})
    assert "no correctness spec" in answer["error"]
    actions = await s.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(kernel_line, 4), types.Position(kernel_line, 4)),
        context=types.CodeActionContext(diagnostics=[])))
    [action] = [a for a in actions if a.title == "Write a correctness spec for scale_kernel"]
    assert action.kind == types.CodeActionKind.Refactor
    edits = action.edit.document_changes[0].edits
    [edit] = edits
    assert edit.range.start.line == len(NO_SPEC.splitlines())  # after the launcher `scale`, at the end
    assert "launcher=scale," in edit.new_text and "kernel=scale_kernel," in edit.new_text
    # Applied, the spec is found and its unfinished reference makes the check say so, not pass.
    lines = NO_SPEC + edit.new_text
    s.set_text(uri, lines)
    [lens] = await s.lenses(uri)
    result = await s.command("kernel-lsp.runChecks", {"uri": uri, "line": kernel_line, "character": 0})
    statuses = [v["status"] for v in result["verdicts"]]
    assert statuses and "correct" not in statuses, result
    assert any("reference" in v["message"] for v in result["verdicts"]) or result["errors"], result


async def test_a_cancelled_check_stops_its_process(start):
    # A launcher that takes 60 s: only a cancel that reaches the checking process ends it sooner.
    slow = EXAMPLE.replace('    """x + y for two contiguous tensors of the same shape, dtype and device."""',
                           '    """x + y for two contiguous tensors of the same shape, dtype and device."""\n'
                           '    import time\n    time.sleep(60)')
    s = await start({"slow.py": slow}, options={"checkDevice": "interpreter", "checkTimeoutS": 120})
    uri = s.open("slow.py")
    params = types.ExecuteCommandParams(command="kernel-lsp.runChecks", arguments=[{"uri": uri}])
    request = asyncio.ensure_future(s.client.protocol.send_request_async(
        types.WORKSPACE_EXECUTE_COMMAND, params, msg_id="check-1"))
    await until(lambda: s.command("kernel-lsp.status"), lambda st: st["checks"]["running"] == 1, timeout=20)

    server = (await s.command("kernel-lsp.status"))["pid"]

    def runners() -> list[int]:  # this server's checking processes still alive (the launcher sleeps for a minute)
        # Only this server's: other tests (or another suite) on the machine may be running checks of their own.
        return [p for p in descendants(server) if "kernel_lsp.engine.verify.runner" in cmdline(p)]

    # the check is running in its own process (counted as running just before that process starts)
    await until(lambda: asyncio.sleep(0, runners()), bool, timeout=20)
    s.client.cancel_request(types.CancelParams(id="check-1"))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wait_for(request, scaled(5))
    status = await until(lambda: s.command("kernel-lsp.status"), lambda st: st["checks"]["running"] == 0,
                         timeout=15)
    assert status["checks"]["run"] == 0  # nothing was published for the cancelled check

    await until(lambda: asyncio.sleep(0, runners()), lambda alive: not alive, timeout=15)
