"""`kernel-lsp mcp` end to end over stdio, driven by the MCP SDK's own client: every tool on the examples, bad input
answered with a clear error while the server stays up, and nothing of an untrusted folder's code run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import EXAMPLES, error_text, mcp_session, resource_json, structured

pytestmark = pytest.mark.timeout(300)

TOOLS = {"analyze", "compile", "check", "measure", "tune", "compare", "submit", "poll", "cancel_batch", "propose_edit"}


async def test_tools_resources_and_prompts_are_listed_with_schemas(workspace: Path):
    async with mcp_session(workspace) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.output_schema and tool.output_schema.get("type") == "object", tool.name
            assert tool.description
        assert "findings" in tools["analyze"].output_schema["properties"]
        assert "ranking" in tools["compare"].output_schema["properties"]
        # A latency says how close it came to the roofline, and whether the work it is set against was estimated.
        latency = tools["measure"].output_schema["$defs"]["LatencyEntry"]["properties"]
        assert {"fraction_of_roofline", "achieved_tflops", "achieved_tbps", "peak_tflops", "peak_tbps",
                "roofline_us", "work_estimated", "work_note"} <= set(latency)
        candidate = tools["compare"].output_schema["$defs"]["CandidateResult"]["properties"]
        assert "fraction_of_roofline" in candidate
        assert {"reward", "advantage", "tied_with", "latency_low_us", "latency_high_us"} <= set(candidate)
        # Every output property says what it is (from the result types), closed vocabularies are enums.
        for tool in tools.values():
            schema = tool.output_schema
            for name, sub in [(schema.get("title"), schema), *schema.get("$defs", {}).items()]:
                for prop, value in sub.get("properties", {}).items():
                    assert value.get("description"), f"{tool.name}: {name}.{prop} has no description"
        status = tools["check"].output_schema["$defs"]["VerdictInfo"]["properties"]["status"]
        assert {"correct", "mismatch", "rejected", "rule-broken", "not-checked"} <= set(status["enum"])
        assert tools["poll"].output_schema["$defs"]["CandidateState"]["properties"]["state"]["enum"] == [
            "queued", "running", "done", "cancelled"]
        compile_args = tools["compile"].input_schema["properties"]
        assert compile_args["ir"]["items"]["enum"] == ["ttir", "ttgir", "llir", "ptx", "amdgcn"]
        assert {"sm_80", "sm_90", "gfx942"} <= set(compile_args["targets"]["items"]["enum"])
        assert "H200" in tools["measure"].input_schema["properties"]["targets"]["items"]["enum"]
        uris = {str(r.uri) for r in (await session.list_resources()).resources}
        assert {"kernel-lsp://rules", "kernel-lsp://hardware"} <= uris
        templates = {t.uri_template for t in (await session.list_resource_templates()).resource_templates}
        assert "kernel-lsp://report/{kernel}" in templates
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        assert prompts == {"optimize_kernel", "port_to_nki"}

        rules = resource_json(await session.read_resource("kernel-lsp://rules"))
        assert any(r["code"] == "TR002" and r["severity"] == "warning" for r in rules)
        hardware = resource_json(await session.read_resource("kernel-lsp://hardware"))
        assert hardware["H200"]["hbm_tbps"] == pytest.approx(4.8)
        prompt = await session.get_prompt("optimize_kernel", {"path": "vector_add.py", "kernel": "add_kernel"})
        text = prompt.messages[0].content.text
        assert "add_kernel" in text and "`compare`" in text and "`propose_edit`" in text


async def test_analyze_and_compile_the_examples(workspace: Path):
    pytest.importorskip("triton")
    async with mcp_session(workspace) as session:
        found = structured(await session.call_tool("analyze", {"path": "buggy_kernels.py"}))
        codes = {f["code"] for f in found["findings"]}
        assert "TR002" in codes
        first = next(f for f in found["findings"] if f["code"] == "TR002")
        assert first["line"] >= 1 and first["severity"] == "warning" and "mask" in first["message"]
        # The same text given as a source, not a path.
        again = structured(await session.call_tool(
            "analyze", {"source": (workspace / "buggy_kernels.py").read_text(encoding="utf-8")}))
        assert {f["code"] for f in again["findings"]} == codes

        built = structured(await session.call_tool("compile", {"path": "vector_add.py", "targets": ["sm_90"],
                                                               "ir": ["ttir"]}))
        config = built["configs"][0]
        assert config["kernel"] == "add_kernel" and config["target"] == "sm_90" and config["ok"]
        assert config["registers"] and config["registers"] > 0 and config["spill_bytes"] == 0
        assert config["constexprs"] == {"BLOCK_SIZE": 1024}
        assert "tt.func" in config["ir"]["ttir"]
        cached = structured(await session.call_tool("compile", {"path": "vector_add.py", "targets": ["sm_90"]}))
        assert cached["configs"][0]["cached"] and cached["configs"][0]["ir"] == {}

        # A compile error comes back at the user's line.
        broken = (workspace / "vector_add.py").read_text(encoding="utf-8").replace(
            "x = tl.load(x_ptr + offsets, mask=in_bounds)", "x = tl.load(x_ptr + offsets, mask=in_bounds, bogus=1)")
        failed = structured(await session.call_tool("compile", {"source": broken, "kernel": "add_kernel"}))
        assert not failed["configs"][0]["ok"]
        line = broken.splitlines().index("    x = tl.load(x_ptr + offsets, mask=in_bounds, bogus=1)") + 1
        assert failed["configs"][0]["error_line"] == line
        assert any(f["code"] == "KC001" and f["line"] == line for f in failed["findings"])

        report = resource_json(await session.read_resource("kernel-lsp://report/add_kernel"))
        assert report["compile"]["configs"][0]["kernel"] == "add_kernel"


async def test_bad_input_gets_a_clear_error_and_the_server_stays_up(workspace: Path):
    (workspace / "latin1.py").write_bytes("# caf\xe9\nx = 1\n".encode("latin-1"))
    (workspace.parent / "outside.py").write_text("x = 1\n", encoding="utf-8")
    async with mcp_session(workspace) as session:
        assert "path" in error_text(await session.call_tool("analyze", {"path": 5}))
        assert "targets" in error_text(await session.call_tool("compile", {"path": "vector_add.py", "targets": 7}))
        assert "no Triton kernel named 'nope'" in error_text(
            await session.call_tool("compile", {"path": "vector_add.py", "kernel": "nope"}))
        unknown = error_text(await session.call_tool("compile", {"path": "vector_add.py", "targets": ["sm_1"]}))
        assert "targets" in unknown and "'sm_90'" in unknown  # the schema's enum names the targets there are
        stage = error_text(await session.call_tool("compile", {"path": "vector_add.py", "ir": ["sass"]}))
        assert "ir" in stage and "'ptx'" in stage
        big = "x = 1\n" * (5 * 2**20 // 6)
        assert "limit is 2.0 MB" in error_text(await session.call_tool("analyze", {"source": big}))
        assert "UTF-8" in error_text(await session.call_tool("analyze", {"path": "latin1.py"}))
        assert "no such file" in error_text(await session.call_tool("analyze", {"path": "missing.py"}))
        assert "outside the workspace" in error_text(await session.call_tool("analyze", {"path": "../outside.py"}))
        assert "give a path or a source" in error_text(await session.call_tool("analyze", {}))
        assert "no report for nope" in str(await _read_error(session, "kernel-lsp://report/nope"))
        # Still answering, with the right answer.
        found = structured(await session.call_tool("analyze", {"path": "buggy_kernels.py"}))
        assert found["findings"]


@pytest.mark.timeout(120)
def test_invalid_utf8_on_the_wire_is_answered_and_the_server_stays_up(workspace: Path):
    """Bytes no client library would send: a message that is not UTF-8 (the SDK's reader replaces the bad bytes,
    and the analysis names the replacement character), and a source with an unpaired surrogate escape (the SDK's
    JSON reader drops that message). Either way the next call is answered."""
    import json
    import subprocess
    import sys

    from .conftest import server_env

    env = {**os.environ, **server_env(workspace.parent / "trusted.json")}
    proc = subprocess.Popen([sys.executable, "-P", "-m", "kernel_lsp", "mcp", "--root", str(workspace)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def send(obj_or_bytes) -> None:
        data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else json.dumps(obj_or_bytes).encode()
        proc.stdin.write(data + b"\n")
        proc.stdin.flush()

    def answer(ident: int) -> dict:
        while True:
            line = proc.stdout.readline()
            assert line, "the server closed its output"
            message = json.loads(line)
            if message.get("id") == ident:
                return message

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        assert "result" in answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "analyze", '
             b'"arguments": {"source": "x = \xff\xfe"}}}')
        send(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "analyze", '
             b'"arguments": {"source": "x = \'\\udcff\'"}}}')
        replaced = answer(2)["result"]
        assert "U+FFFD" in json.dumps(replaced["structuredContent"], ensure_ascii=False)
        send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
              "params": {"name": "analyze", "arguments": {"path": "buggy_kernels.py"}}})
        fine = answer(4)
        assert not fine["result"]["isError"] and fine["result"]["structuredContent"]["findings"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


async def _read_error(session, uri: str) -> Exception | None:
    try:
        await session.read_resource(uri)
    except Exception as exc:  # noqa: BLE001 - the SDK raises its error type for a failed read
        return exc
    return None


async def test_untrusted_folder_runs_no_code(workspace: Path):
    marker = workspace / "ran.txt"
    hostile = (workspace / "vector_add.py").read_text(encoding="utf-8") + (
        f"\nopen({str(marker)!r}, 'w').write('ran')\n")
    async with mcp_session(workspace) as session:
        for tool, args in [("check", {"source": hostile}), ("measure", {"source": hostile}),
                           ("tune", {"source": hostile, "kernel": "add_kernel"}),
                           ("compare", {"candidates": [{"name": "a", "source": hostile}]})]:
            message = error_text(await session.call_tool(tool, args))
            assert "not trusted" in message and "nothing was run" in message, tool
        # A proposal is still written, verified statically only, and says so.
        proposal = structured(await session.call_tool("propose_edit", {"path": "vector_add.py",
                                                                       "new_source": hostile}))
        assert not proposal["verified"]
        assert any("checks not run" in n for n in proposal["notes"])
    assert not marker.exists()
    assert (workspace / "vector_add.py").read_text(encoding="utf-8") == (EXAMPLES / "vector_add.py").read_text(
        encoding="utf-8")


async def test_check_and_proposal_in_a_trusted_run(workspace: Path):
    pytest.importorskip("torch")
    original = (workspace / "vector_add.py").read_text(encoding="utf-8")
    async with mcp_session(workspace, "--allow-run") as session:
        verdict = structured(await session.call_tool("check", {"path": "vector_add.py"}))
        assert verdict["ok"] and verdict["errors"] == []
        (v,) = verdict["verdicts"]
        assert v["status"] == "correct" and v["kernel"] == "add_kernel"
        assert {tuple(c["shape"]) for c in v["cases"]} >= {(1,), (1000,), (4097,)}

        wrong = original.replace("tl.store(out_ptr + offsets, x + y, mask=in_bounds)",
                                 "tl.store(out_ptr + offsets, x - y, mask=in_bounds)")
        bad = structured(await session.call_tool("check", {"source": wrong}))
        assert not bad["ok"] and bad["verdicts"][0]["status"] == "mismatch"

        better = original.replace("block_size: int = 1024", "block_size: int = 2048")
        proposal = structured(await session.call_tool("propose_edit", {"path": "vector_add.py",
                                                                       "new_source": better}))
        assert proposal["verified"] and proposal["verdicts"][0]["status"] == "correct"
        written = Path(proposal["proposal_path"])
        assert written.parent == workspace / ".kernel-lsp" / "proposals"
        assert "+def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 2048)" in written.read_text()
        rejected = structured(await session.call_tool("propose_edit", {"path": "vector_add.py",
                                                                       "new_source": wrong}))
        assert not rejected["verified"] and rejected["verdicts"][0]["status"] == "mismatch"
        report = resource_json(await session.read_resource("kernel-lsp://report/add_kernel"))
        assert report["check"]["verdicts"][0]["status"] == "mismatch"  # the last check of the kernel
    assert (workspace / "vector_add.py").read_text(encoding="utf-8") == original


@pytest.mark.timeout(600)
async def test_measure_and_tune_the_example(workspace: Path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    async with mcp_session(workspace, "--allow-run") as session:
        timed = structured(await session.call_tool("measure", {"path": "vector_add.py", "targets": ["H100", "sm_90"]}))
        assert timed["errors"] == []
        entries = [e for e in timed["entries"] if e["kernel"] == "add_kernel"]
        assert entries and all(e["shape"] == [1 << 24] for e in entries)
        if timed["source"] == "estimate":  # no GPU: the model's figure, labelled, per device
            assert {e["device"] for e in entries} == {"H100", "H200"}
            for e in entries:
                assert e["source"] == "estimate" and "est." in e["label"] and e["us"] > 0
                assert 0 < e["fraction_of_roofline"] <= 1 and e["bound"]
                assert e["roofline_us"] == pytest.approx(e["fraction_of_roofline"] * e["us"])
                assert e["work_estimated"] and "estimate" in e["work_note"]
        else:  # on a GPU: the measured time against the device's roofs, for the counted work
            for e in entries:
                assert e["source"] == "measured" and e["us"] > 0
                assert 0 < e["fraction_of_roofline"] < 1.5 and e["achieved_tbps"] > 0 and e["peak_tbps"] > 0
                assert "counted under Triton's interpreter" in e["work_note"]

        tuned = structured(await session.call_tool("tune", {"path": "vector_add.py", "kernel": "add_kernel",
                                                            "budget": 8}))
        assert tuned["kernel"] == "add_kernel" and tuned["device"] == "H200"
        assert tuned["current"] and 1 <= len(tuned["table"]) <= 8
        assert tuned["winner"] and tuned["source"] in ("estimated", "measured")
        if tuned["winner"] != tuned["current"]:
            assert tuned["edits"] and tuned["verified"] is not None
        report = resource_json(await session.read_resource("kernel-lsp://report/add_kernel"))
        assert {"measure", "tune"} <= set(report)
    assert (workspace / "vector_add.py").read_text(encoding="utf-8") == (EXAMPLES / "vector_add.py").read_text(
        encoding="utf-8")


async def test_the_port_to_nki_prompt_says_what_the_tools_do(workspace: Path):
    """The prompt's steps hold: an NKI port is checked here (in the NKI model), and propose_edit refuses a new
    file, so the prompt asks for the text instead."""
    pytest.importorskip("torch")
    port = (Path(__file__).resolve().parents[1] / "nki" / "specs" / "scale_rows_nki.py").read_text(encoding="utf-8")
    async with mcp_session(workspace, "--allow-run") as session:
        prompt = await session.get_prompt("port_to_nki", {"path": "vector_add.py", "kernel": "add_kernel"})
        text = prompt.messages[0].content.text
        assert "kernel-lsp NKI model" in text and "cannot create the new file" in text
        assert "run only where the Neuron tools are installed" not in text
        verdict = structured(await session.call_tool("check", {"source": port}))
        assert verdict["ok"] and "(kernel-lsp NKI model)" in verdict["verdicts"][0]["message"], verdict
        refused = await session.call_tool("propose_edit", {"path": "add_kernel_nki.py", "new_source": port})
        assert "no such file" in error_text(refused)
