"""`kernel-lsp.profileLines` through the language server, with the fake `ncu` first on the server's PATH: hints at
the end of hot lines, the stall breakdown on hover, ncu's advice as KP001 diagnostics; and the no-GPU answer."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pytest_lsp")  # the GPU machine has no LSP stack

from lsprotocol import types  # noqa: E402

pytest.importorskip("torch")
pytest.importorskip("triton")

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "fused_softmax.py").read_text()
LINES = EXAMPLE.splitlines()
KERNEL_LINE = LINES.index("def softmax_kernel(")
EXP_LINE = LINES.index("    numerator = tl.exp(x - row_max)")
STORE_LINE = next(i for i, ln in enumerate(LINES) if ln.strip().startswith("tl.store("))


@pytest.fixture(params=["neovim"])
def profile(request) -> str:
    return request.param


async def hints(s, uri) -> list[types.InlayHint]:
    return await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(0, 0), types.Position(len(LINES), 0)))) or []


async def hover(s, uri, line) -> types.Hover | None:
    return await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, 6)))


async def test_profile_lines_hints_hover_and_advice(fake_ncu, start):
    s = await start({"fused_softmax.py": EXAMPLE})
    uri = s.open("fused_softmax.py")
    assert await hover(s, uri, EXP_LINE) is None

    result = await s.command("kernel-lsp.profileLines", {"uri": uri, "line": EXP_LINE, "character": 4})
    assert "error" not in result, result
    by_line = {ln["line"]: ln for ln in result["lines"]}
    assert by_line[EXP_LINE]["stalls"][0]["reason"] == "long scoreboard"
    assert any(a["rule"] == "LaunchConfiguration" and a["type"] == "OPT" for a in result["advice"])

    shown = {h.position.line: h for h in await hints(s, uri)}
    exp = shown[EXP_LINE]
    assert exp.label == "73% · long scoreboard"
    assert exp.position.character == len(LINES[EXP_LINE])  # at the end of the line
    assert shown[STORE_LINE].label == "10% · LG throttle"
    assert KERNEL_LINE not in shown or "%" not in str(shown[KERNEL_LINE].label)  # no samples there

    text = (await hover(s, uri, EXP_LINE)).contents.value
    assert "72.9% of 96 samples of softmax_kernel (4096, 4096) float32 on NVIDIA H200" in text
    assert "| long scoreboard | 86% |" in text and "| math pipe throttle | 9% |" in text

    advice = [d for d in await s.diagnostics(uri) if d.code == "KP001"]
    assert advice and all(d.severity == types.DiagnosticSeverity.Information for d in advice)
    assert {d.range.start.line for d in advice} == {KERNEL_LINE}
    assert any("LaunchConfiguration" in d.message and "estimated speedup 99.24% global" in d.message for d in advice)
    assert not any(" INF " in d.message for d in advice)

    # An edit makes the profile stale: its hints, hover and advice go until the next profile.
    s.set_text(uri, EXAMPLE.replace("numerator = tl.exp", "numerator = tl.math.exp"))
    assert not [h for h in await hints(s, uri) if "%" in str(h.label)]
    assert await hover(s, uri, EXP_LINE) is None
    assert not [d for d in await s.diagnostics(uri) if d.code == "KP001"]


async def test_no_gpu_answer(fake_ncu, start):
    fake_ncu.mode("run-target")  # the real driver, on this machine without a GPU
    s = await start({"fused_softmax.py": EXAMPLE})
    uri = s.open("fused_softmax.py")
    result = await s.command("kernel-lsp.profileLines", {"uri": uri})
    assert result == {"error": "no GPU here: per-line profiles need an NVIDIA GPU and Nsight Compute"}
    assert not [h for h in await hints(s, uri) if "%" in str(h.label)]


async def test_kernel_without_spec(fake_ncu, start):
    text = EXAMPLE.split("from kernel_lsp.spec import spec")[0]
    s = await start({"plain.py": text})
    uri = s.open("plain.py")
    result = await s.command("kernel-lsp.profileLines", {"uri": uri, "line": KERNEL_LINE + 2, "character": 0})
    assert result["error"].startswith("softmax_kernel has no correctness spec")
    assert fake_ncu.calls() == []


async def test_nothing_is_profiled_while_checks_are_off(fake_ncu, start):
    # An untrusted workspace turns checks off: profiling would run the file's launcher just the same.
    s = await start({"fused_softmax.py": EXAMPLE}, options={"checks": "off"})
    uri = s.open("fused_softmax.py")
    result = await s.command("kernel-lsp.profileLines", {"uri": uri})
    assert "checks are off" in result["error"]
    assert fake_ncu.calls() == []
