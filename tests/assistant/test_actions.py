"""The assistant end to end: a real client (pytest-lsp) drives `kernel-lsp serve`, whose model is a scripted fake
of the Messages API. Candidates go through the real pipeline: compiled (where it matters), checked on Triton's
interpreter against examples/vector_add.py's spec, and estimated (no GPU here)."""

from __future__ import annotations

import re

import asyncio
import json
from pathlib import Path
from typing import Union

import pytest
from lsprotocol import types
from pygls.uris import to_fs_path

from kernel_lsp.api import Workspace
from kernel_lsp.engine.assistant.code import extract_code, protected_names, splice
from kernel_lsp.settings import parse_settings
from tests.server.conftest import until, wait_for
from tests.slow import scaled

from . import candidates as c
from .conftest import EXAMPLE, KERNEL_LINE, KEY, TWICE, options
from .fake_api import answer, error

pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("anthropic")


def at(uri: str, line: int = KERNEL_LINE + 3, **extra) -> dict:
    return {"uri": uri, "line": line, "character": 4, **extra}


def apply(text: str, edit: dict) -> str:
    """What an editor does with the proposal's WorkspaceEdit once the user confirms it (ASCII text: columns are
    the same in every encoding)."""
    [change] = edit["documentChanges"]
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(p: dict) -> int:
        return offsets[min(p["line"], len(lines))] + (p["character"] if p["line"] < len(lines) else 0)

    for e in sorted(change["edits"], key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]),
                    reverse=True):
        text = text[:offset(e["range"]["start"])] + e["newText"] + text[offset(e["range"]["end"]):]
    return text


async def code_actions(s, uri: str, line: int, diagnostics=()) -> list[types.CodeAction]:
    # lsprotocol's client-side hook turns every code action that carries a command into a Command; editors
    # tell them apart by the type of `command`, as the protocol says.
    conv = s.client.protocol._converter
    union = Union[types.Command, types.CodeAction]  # noqa: UP007 - the very type lsprotocol keyed its hook on
    conv.register_structure_hook(union, lambda o, _: conv.structure(
        o, types.Command if isinstance(o.get("command"), str) else types.CodeAction))
    return await s.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri), range=types.Range(types.Position(line, 4),
                                                                           types.Position(line, 4)),
        context=types.CodeActionContext(diagnostics=list(diagnostics)))) or []


def assert_nothing_applied(s, name: str, text: str) -> None:
    # Whatever the server sent the editor is an edit to preview and confirm, never one to apply as it is ...
    for sent in s.client.applied_edits:
        annotations = sent.edit.change_annotations or {}
        assert annotations and all(a.needs_confirmation for a in annotations.values()), sent
        for change in sent.edit.document_changes:
            assert all(getattr(e, "annotation_id", None) in annotations for e in change.edits), change
    assert (s.root / name).read_text() == text  # ... and it never wrote the file


def session_file(s, kernel: str = "add_kernel", stem: str = "vector_add") -> dict:
    return json.loads((s.root / ".kernel-lsp" / "assistant" / f"{stem}.{kernel}.json").read_text())


def progress_messages(s) -> list[str]:
    out = []
    for reports in s.client.progress_reports.values():
        out += [getattr(r, "message", None) or "" for r in reports]
    return out


async def test_optimize_states_a_plan_then_proposes_a_verified_faster_kernel(start, fake):
    fake.script += [answer(c.PLAN, 900, 80), answer(c.GOOD, 2100, 400)]
    s = await start({"vector_add.py": TWICE}, options=options(fake))
    uri = s.open("vector_add.py")

    first = await s.command("kernel-lsp.assistantOptimize", at(uri))
    assert first["plan"] == c.PLAN and first["session"] == "vector_add.add_kernel", first
    [ask] = fake.requests
    assert ask.body["model"] == "claude-sonnet-4-5" and not ask.body.get("stream")
    assert KEY in ask.headers.get("x-api-key", "") + ask.headers.get("authorization", "")  # SDK 2.14: Bearer
    assert TWICE in ask.text and "≈118 µs H200 est." in ask.text  # the buffer and its latency went out
    assert "plan" in ask.text.lower()

    result = await s.command("kernel-lsp.refine", at(uri, instruction="go"))
    proposal = result["proposal"]
    assert len(fake.requests) == 2 and fake.requests[1].body.get("stream") is True
    assert c.PLAN in fake.requests[1].text  # the accepted plan steers the code
    summary = proposal["summary"]
    assert re.match(r"correct on \d+ cases \(CPU interpreter\)", summary), summary
    assert "not timed: no GPU; estimate ≈118 µs -> ≈59 µs H200 est. (-50%)" in summary
    assert "3,000 in / 480 out tokens (2 calls), ≈$0.0162" in summary  # 3000 * $3 + 480 * $15 per million
    assert proposal["table"][0] == ["#", "result", "latency", "details"]
    assert proposal["table"][1][:3] == ["1.1", "correct", "≈59 µs H200 est."]
    assert proposal["usage"]["costUsd"] == pytest.approx(0.0162)
    assert proposal["status"] == "correct" and proposal["verified"] is True  # shown faster, with its evidence
    assert proposal["title"] == "Optimize tiling (add_kernel)" and "1 attempt, 1 verified;" in summary

    edit = proposal["edit"]
    assert edit["documentChanges"][0]["textDocument"] == {"uri": uri, "version": 1}
    assert all(e["annotationId"] == "kernel-lsp.proposal" for e in edit["documentChanges"][0]["edits"])
    assert edit["changeAnnotations"]["kernel-lsp.proposal"]["needsConfirmation"] is True
    assert apply(TWICE, edit) == EXAMPLE  # confirmed, the edit removes exactly the second launch
    assert_nothing_applied(s, "vector_add.py", TWICE)

    assert any(m.startswith("candidate 1") for m in progress_messages(s))  # streamed text as progress
    turns = session_file(s)["turns"]
    assert [t["state"] for t in turns] == ["proposed"] and turns[0]["plan_accepted"] is True
    assert turns[0]["candidates"][0]["status"] == "correct"


async def test_optimize_without_speed_evidence_offers_the_candidate_only_as_not_shown_faster(start, fake):
    # At a bench shape of zero elements the launcher returns before launching: nothing can be timed or counted.
    no_bench = TWICE.replace("bench_shapes=[(1 << 24,)]", "bench_shapes=[(0,)]")
    fake.script += [answer(c.PLAN), answer(c.GOOD)]
    s = await start({"vector_add.py": no_bench}, options=options(fake))
    uri = s.open("vector_add.py")
    first = await s.command("kernel-lsp.assistantOptimize", at(uri))
    assert "Latency: not available (RuntimeError: the launcher did not launch the kernel)" in fake.requests[0].text
    proposal = (await s.command("kernel-lsp.refine", at(uri, instruction="go")))["proposal"]
    summary = proposal["summary"]
    assert first["plan"] == c.PLAN and re.match(r"correct on \d+ cases \(CPU interpreter\)", summary), summary
    assert "correct but not shown faster (timing failed: RuntimeError: the launcher did not launch the kernel)" \
        in summary and "%)" not in summary and "1 attempt, 1 verified" in summary
    assert proposal["title"] == "Optimize tiling (add_kernel), not shown faster"
    assert proposal["status"] == "correct, not shown faster" and proposal["verified"] is True
    assert proposal["table"][1][1] == "correct, not shown faster"
    assert apply(no_bench, proposal["edit"]) == EXAMPLE.replace("bench_shapes=[(1 << 24,)]", "bench_shapes=[(0,)]")


async def test_a_candidate_that_does_not_compile_goes_back_with_the_compiler_error(start, fake):
    fake.script += [answer(c.NOT_COMPILING), answer(c.GOOD)]
    s = await start({"vector_add.py": TWICE}, options=options(fake, compile="open", targets=["sm_90"]))
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.refine", at(uri, instruction="make it faster"))
    proposal = result["proposal"]
    retry = fake.requests[1].text
    assert "turned down: does not compile: KC001 at line" in retry and "tl.arange(0, 1000)" in retry
    assert [row[1] for row in proposal["table"][1:]] == ["does not compile", "correct"]
    assert "compiles for sm_90" in proposal["summary"] and "2 attempts, 1 verified" in proposal["summary"]
    assert apply(TWICE, proposal["edit"]) == EXAMPLE
    assert_nothing_applied(s, "vector_add.py", TWICE)


async def test_wrong_results_and_a_torch_fallback_are_turned_down_and_nothing_is_proposed(start, fake):
    fake.script += [answer(c.WRONG_RESULT), answer(c.TORCH_FALLBACK)]
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake))
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.refine", at(uri, instruction="simplify the launcher"))
    assert "proposal" not in result
    assert [row[1] for row in result["table"][1:]] == ["mismatch", "rejected"], result["table"]
    assert "no candidate passed verification in 2 attempts" in result["error"]
    told = fake.requests[1].text
    assert "turned down: mismatch" in told and "elements differ" in told  # the model hears what was wrong
    assert any("no candidate passed verification" in m.message for m in s.client.messages)
    assert_nothing_applied(s, "vector_add.py", EXAMPLE)


async def test_a_fallback_gated_on_the_kernels_buffer_is_rejected(start, fake):
    fake.script += [answer(c.GATED_FALLBACK), answer(c.GATED_FALLBACK)]
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake))
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.refine", at(uri, instruction="make it faster"))
    assert "proposal" not in result
    assert [row[1] for row in result["table"][1:]] == ["rejected", "rejected"], result["table"]
    told = fake.requests[1].text
    assert "not computed by the kernel" in told and "0 * out" in told  # the line it returns from, quoted
    assert_nothing_applied(s, "vector_add.py", EXAMPLE)


async def test_a_candidate_may_not_edit_the_spec(start, fake):
    fake.script += [answer(c.SPEC_EDIT)]
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake, assistantMaxAttempts=1))
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.refine", at(uri, instruction="make the check pass"))
    assert "proposal" not in result and "add_inputs, part of the correctness spec" in result["error"]
    assert [row[1] for row in result["table"][1:]] == ["refused"]


async def test_candidates_that_patch_torch_are_refused_with_the_line_and_the_model_is_told(start, fake):
    fake.script += [answer(c.PATCHED_MODULE), answer(c.PATCHED_LAUNCHER)]
    s = await start({"vector_add.py": TWICE}, options=options(fake))
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.refine", at(uri, instruction="make it faster"))
    assert "proposal" not in result
    assert [row[1] for row in result["table"][1:]] == ["refused", "refused"], result["table"]
    spliced, _ = splice(TWICE, extract_code(c.PATCHED_MODULE), protected=protected_names(TWICE))
    line = next(i for i, text in enumerate(spliced.splitlines(), 1) if text.startswith("torch.randn ="))
    why = f"line {line} assigns torch.randn at module level: a candidate may change only the kernel, its " \
        "launcher and @triton.jit helpers"
    assert result["table"][1][3] == why
    assert f"turned down: {why}" in fake.requests[1].text  # fed back to the model
    assert "assigns torch.testing.assert_close in add: a candidate may not patch modules" in result["error"]
    assert [c["status"] for c in session_file(s)["turns"][0]["candidates"]] == ["refused", "refused"]
    assert_nothing_applied(s, "vector_add.py", TWICE)


async def test_write_a_spec_refuses_a_reference_that_runs_the_kernel(start, fake):
    fake.script += [answer(c.TAUTOLOGY), answer(c.TAUTOLOGY_LAMBDA)]
    s = await start({"vector_add.py": c.WITHOUT_SPEC}, options=options(fake))
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.writeSpec", at(uri))
    assert "proposal" not in result and [row[1] for row in result["table"][1:]] == ["refused", "refused"]
    certify = "a kernel cannot certify itself; write the reference in plain PyTorch"
    first = "the reference calls add, which launches add_kernel (add_reference -> add): " + certify
    assert result["table"][1][3] == first and f"turned down: {first}" in fake.requests[1].text
    assert result["error"].endswith("the reference calls add, which launches add_kernel: " + certify)
    assert_nothing_applied(s, "vector_add.py", c.WITHOUT_SPEC)


async def test_write_a_spec_after_a_rate_limit(start, fake):
    fake.script += [error(429, "rate_limit_error", "slow down"), answer(c.SPEC)]
    s = await start({"vector_add.py": c.WITHOUT_SPEC}, options=options(fake))
    uri = s.open("vector_add.py")
    by_title = {a.title: a for a in await code_actions(s, uri, KERNEL_LINE + 3)}
    spec_action = by_title["Write a correctness spec (assistant)"]
    assert spec_action.disabled is None and spec_action.command.command == "kernel-lsp.writeSpec"
    assert by_title["Optimize tiling (assistant)"].disabled.reason.endswith("has no correctness spec: write one first")
    assert fake.requests == []  # listing costs nothing

    result = await s.command(spec_action.command.command, *spec_action.command.arguments)
    proposal = result["proposal"]
    assert len(fake.requests) == 2  # the SDK retried after the 429
    assert proposal["summary"].startswith("correct on"), proposal["summary"]
    new_text = apply(c.WITHOUT_SPEC, proposal["edit"])
    assert "@spec(kernel=add_kernel, launcher=add, reference=add_reference" in new_text
    # The spec's import joins the imports, the rest comes after the launcher: the kernel and launcher are untouched.
    assert new_text.replace("from kernel_lsp.spec import spec\n", "", 1).startswith(c.WITHOUT_SPEC.rstrip())
    assert_nothing_applied(s, "vector_add.py", c.WITHOUT_SPEC)


async def test_port_to_nki_is_run_in_the_nki_model_and_a_wrong_one_is_fed_back(start, fake):
    fake.script += [answer(c.NKI_PLAN), answer(c.NKI_SUBTRACTS), answer(c.NKI_RIGHT)]
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake))
    uri = s.open("vector_add.py")
    plan = await s.command("kernel-lsp.portToNki", at(uri))
    assert plan["plan"] == c.NKI_PLAN
    result = await s.command("kernel-lsp.refine", at(uri, instruction="Use one row of 512-element tiles."))
    proposal = result["proposal"]
    assert "Use one row of 512-element tiles." in fake.requests[1].text  # the edited plan replaced the model's
    # The subtraction ran in the model and was turned down, at the store that wrote the wrong values.
    feedback = fake.requests[2].text
    assert "That candidate was turned down: differs from the reference at shape" in feedback
    assert "(kernel-lsp NKI model)" in feedback
    assert "nl.store(out_row[i_p, i_f], value=nl.subtract(a, b)" in feedback
    summary = proposal["summary"]
    assert summary.startswith("correct on 12 cases (kernel-lsp NKI model)") and "2 attempts, 1 verified" in summary
    assert [row[1] for row in proposal["table"][1:]] == ["mismatch", "correct"]
    assert proposal["status"] == "correct" and proposal["verified"] is True
    assert proposal["title"] == "Port to NKI (add_kernel)"
    assert [c["status"] for c in session_file(s)["turns"][0]["candidates"]] == ["mismatch", "correct"]
    assert "a new file, vector_add_nki.py: vector_add.py is left as it is" in summary

    # The port lands in a file of its own; the Triton file is not edited (it gains no `import nki`).
    created = create_files(s.root, proposal["edit"])
    assert created == ["vector_add_nki.py"] and proposal["creates"] == s.uri("vector_add_nki.py")
    # The proposal is also sent as a workspace/applyEdit, after the answer (and after the table's document).
    await wait_for(lambda: bool(s.client.applied_edits), timeout=30)
    assert [sent.edit for sent in s.client.applied_edits][-1].document_changes[0].kind == "create"
    assert (s.root / "vector_add.py").read_text() == EXAMPLE
    port = (s.root / "vector_add_nki.py").read_text()
    assert "import nki\nimport nki.language as nl\n" in port and "def add_kernel_nki(" in port
    assert "import triton" not in port and "def add_kernel(" not in port
    # ... with the Triton kernel's spec naming the port, which the lens then checks in that file.
    assert "kernel=add_kernel_nki,\n    launcher=add_kernel_nki,\n    reference=reference_add," in port
    uri_nki = s.open("vector_add_nki.py")
    line = port.splitlines().index("def add_kernel_nki(a_tensor, b_tensor):")
    checked = await s.command("kernel-lsp.runChecks", {"uri": uri_nki, "line": line + 1, "character": 0})
    [verdict] = checked["verdicts"]
    assert verdict["kernel"] == "add_kernel_nki" and verdict["status"] == "correct", checked
    assert verdict["message"] == "correct on 12 cases (kernel-lsp NKI model)"
    [lens] = await s.lenses(uri_nki)
    assert lens.command.title.startswith("✓ correct on 12 cases (kernel-lsp NKI model)"), lens.command.title


def create_files(root, edit: dict) -> list[str]:
    """What an editor does with a proposal that creates files, once the user confirms: each CreateFile (refused
    where the file exists, as its options ask), then the text edits of the new file."""
    created = []
    for change in edit["documentChanges"]:
        path = Path(to_fs_path(change.get("uri") or change["textDocument"]["uri"]))
        if change.get("kind") == "create":
            assert change["options"] == {"overwrite": False, "ignoreIfExists": False}
            assert not path.exists(), f"{path} exists: the editor would refuse the whole edit"
            path.write_text("")
            created.append(path.name)
        else:
            assert change["textDocument"]["version"] is None and path.name in created
            path.write_text(apply(path.read_text(), {"documentChanges": [change]}))
    return created


async def test_a_port_never_overwrites_an_existing_nki_file(start, fake):
    fake.script += [answer(c.NKI_PLAN), answer(c.NKI_RIGHT)]
    mine = "# my own NKI work\n"
    s = await start({"vector_add.py": EXAMPLE, "vector_add_nki.py": mine}, options=options(fake))
    uri = s.open("vector_add.py")
    await s.command("kernel-lsp.portToNki", at(uri))
    proposal = (await s.command("kernel-lsp.refine", at(uri, instruction="go")))["proposal"]
    assert create_files(s.root, proposal["edit"]) == ["vector_add_nki_2.py"]
    assert (s.root / "vector_add_nki.py").read_text() == mine
    assert "def add_kernel_nki(" in (s.root / "vector_add_nki_2.py").read_text()


async def test_an_editor_that_cannot_create_files_is_told_so_and_nothing_is_edited(start, fake, monkeypatch):
    from tests.server import conftest as server_conftest

    def without_create(profile: str) -> types.ClientCapabilities:
        caps = server_conftest.client_capabilities(server_conftest.PROFILES[profile])
        caps.workspace.workspace_edit.resource_operations = [types.ResourceOperationKind.Rename]
        return caps

    monkeypatch.setattr(server_conftest, "capabilities", without_create)
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake))
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.portToNki", at(uri))
    assert "cannot create files" in result["error"] and "resourceOperations" in result["error"]
    assert fake.requests == [] and s.client.applied_edits == []  # nothing asked of the model, nothing edited
    assert (s.root / "vector_add.py").read_text() == EXAMPLE


async def test_port_to_nki_that_breaks_a_neuroncore_rule_or_misses_the_tail_is_turned_down(start, fake):
    fake.script += [answer(c.NKI_PLAN), answer(c.NKI_TOO_WIDE), answer(c.NKI_PORT), answer(c.NKI_NO_TAIL)]
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake, assistantMaxAttempts=3))
    uri = s.open("vector_add.py")
    await s.command("kernel-lsp.portToNki", at(uri))
    result = await s.command("kernel-lsp.refine", at(uri, instruction="go"))
    assert "proposal" not in result
    # The static rules catch the literal 256 partitions; the model catches the 1000-element load while it runs.
    assert "NK001 at line" in fake.requests[2].text and "256 partitions" in fake.requests[2].text
    ran = fake.requests[3].text
    assert "breaks a NeuronCore rule at shape (1000,) float32" in ran and "1000 partitions" in ran
    assert "[NK001] at line" in ran and "a = nl.load(a_tensor)" in ran
    rows = [c["status"] for c in session_file(s)["turns"][0]["candidates"]]
    assert rows == ["NKI rules", "NKI rule", "mismatch"]
    assert "never written by the kernel" in session_file(s)["turns"][0]["candidates"][2]["reason"]


async def test_explain_answers_with_text_and_no_edit(start, fake):
    fake.script += [answer(c.EXPLANATION)]
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake))
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.explainTime", at(uri))
    assert "proposal" not in result and c.EXPLANATION in result["markdown"]
    assert result["markdown"].startswith("**add_kernel**: ≈59 µs H200 est. (estimated (no GPU))")
    sent = fake.requests[0].text
    assert '"bound": "memory"' in sent and "Latency report" in sent  # the figures were what it explained
    assert any(c.EXPLANATION in m.message for m in s.client.messages)


async def test_explain_states_the_figures_of_the_settings_hardware_table(start, fake, tmp_path):
    # The candidates' checks and figures are the API's editor calls, with the settings' targets and hardware
    # table: a hardware override moves the assistant's figure exactly as it moves the editor's.
    override = {"H200": {"hbm_tbps": 1.2}}
    fake.script += [answer(c.EXPLANATION)]
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake, hardware=override))
    uri = s.open("vector_add.py")
    result = await s.command("kernel-lsp.explainTime", at(uri))
    settings, messages = parse_settings({"hardware": override, "targets": ["sm_90"]})
    assert not messages
    with Workspace(tmp_path, settings=settings, allow_run=True) as ws:
        expected = await ws.measure_buffer(tmp_path / "vector_add.py", EXAMPLE, kernels=["add_kernel"], gpu=False,
                                           history=False)
    figures = ", ".join(e.label for e in expected.entries if e.us is not None and e.chosen)
    assert figures and not figures.startswith("≈59 µs")  # the override slows the memory-bound kernel
    assert result["markdown"].startswith(f"**add_kernel**: {figures} (estimated (no GPU))"), result["markdown"]


async def test_cancel_stops_the_model_call(start, fake):
    from .fake_api import stall

    fake.script += [stall(30), stall(30)]
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake))
    uri = s.open("vector_add.py")

    running = asyncio.ensure_future(s.command("kernel-lsp.refine", at(uri, instruction="anything")))
    await wait_for(lambda: len(fake.requests) == 1, timeout=10)
    assert await s.command("kernel-lsp.cancelAssistant") == {"cancelled": 1}
    assert (await asyncio.wait_for(running, scaled(5)))["cancelled"] is True

    # The editor cancels the request itself ($/cancelRequest): the work stops too.
    params = types.ExecuteCommandParams(command="kernel-lsp.refine", arguments=[at(uri, instruction="again")])
    request = asyncio.ensure_future(s.client.protocol.send_request_async(
        types.WORKSPACE_EXECUTE_COMMAND, params, msg_id="assist-1"))
    await wait_for(lambda: len(fake.requests) == 2, timeout=10)
    s.client.cancel_request(types.CancelParams(id="assist-1"))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wait_for(request, scaled(5))
    # The assistant stops working after $/cancelRequest (10 s: a loaded 2-core machine may take a while to reap it).
    await until(lambda: s.command("kernel-lsp.cancelAssistant"), lambda running: running == {"cancelled": 0},
                timeout=10, interval=0.05)
    assert [t["state"] for t in session_file(s)["turns"]] == ["cancelled", "cancelled"]


async def test_fix_this_on_a_rule_diagnostic_sends_the_message_and_verifies_the_fix(start, fake):
    typo = EXAMPLE.replace("tl.arange(0, BLOCK_SIZE)", "tl.arrange(0, BLOCK_SIZE)")
    fake.script += [answer("Typo.\n\n```python\n" + c.KERNEL + "```\n")]
    s = await start({"vector_add.py": typo}, options=options(fake))
    uri = s.open("vector_add.py")
    [diag] = [d for d in await s.diagnostics(uri) if d.code == "TR007"]
    actions = await code_actions(s, uri, diag.range.start.line, [diag])
    [fix] = [a for a in actions if a.title == "Fix this (assistant): TR007"]
    assert fix.kind == types.CodeActionKind.QuickFix and fix.diagnostics[0].code == "TR007"
    result = await s.command(fix.command.command, *fix.command.arguments)
    assert "tl.arrange does not exist" in fake.requests[0].text  # the diagnostic's message went to the model
    proposal = result["proposal"]
    assert re.match(r"correct on \d+ cases \(CPU interpreter\)", proposal["summary"])
    assert apply(typo, proposal["edit"]) == EXAMPLE
    assert_nothing_applied(s, "vector_add.py", typo)
