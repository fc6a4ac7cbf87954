"""What an agent harness meets on a bad day, through the server: lines that are not messages, a check that hangs
and is cancelled, long calls that must show progress, a batch stopped half-way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.procs import running_below

from .conftest import REPO, mcp_session, server_env, structured

pytestmark = pytest.mark.timeout(600)

RUNNER = "kernel_lsp.engine.verify.runner"


def test_every_line_that_is_not_a_message_gets_a_json_rpc_error(workspace: Path):
    proc = subprocess.Popen([sys.executable, "-P", "-m", "kernel_lsp", "mcp", "--root", str(workspace)], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, **server_env(workspace.parent / "trusted.json")})

    def send(data: bytes) -> None:
        proc.stdin.write(data + b"\n")
        proc.stdin.flush()

    def reply() -> dict:
        line = proc.stdout.readline()
        assert line, "the server closed its output"
        return json.loads(line)

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
        ).encode())
        assert "result" in reply()
        send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        # A lone surrogate escape is valid JSON syntax but no Unicode text: the request is answered by its id.
        send(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "analyze", '
             b'"arguments": {"source": "x = 1  # \\ud800"}}}')
        answer = reply()
        assert answer["id"] == 2 and answer["error"]["code"] == -32600, answer
        assert "surrogate" in answer["error"]["message"]
        for line in (b"{not json", b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list"', b"\xff\xfe", b""):
            if not line:
                continue
            answer = reply() if send(line) is None else None
            assert answer["id"] is None and answer["error"]["code"] == -32700, (line, answer)
        for line, ident in ((b"[1, 2]", None), (b'"hello"', None), (b'{"jsonrpc": "2.0", "id": 7}', 7),
                            (b'{"jsonrpc": "1.0", "id": 8, "method": "tools/list"}', 8)):
            send(line)
            answer = reply()
            assert answer["id"] == ident and answer["error"]["code"] == -32600, (line, answer)
        # The session is unharmed.
        send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                         "params": {"name": "analyze", "arguments": {"path": "buggy_kernels.py"}}}).encode())
        answer = reply()
        assert answer["id"] == 9 and answer["result"]["structuredContent"]["findings"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def spinning(marker: Path) -> str:
    """vector_add whose launcher says it started, then spins (the check's own limit is a minute away)."""
    text = (REPO / "examples" / "vector_add.py").read_text(encoding="utf-8")
    return text.replace('    assert x.shape == y.shape, f"shape mismatch',
                        f"    open({str(marker)!r}, 'w').close()\n    while True:\n        pass\n"
                        '    assert x.shape == y.shape, f"shape mismatch', 1)


async def _until(predicate, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, what
        await anyio.sleep(0.2)


def _server_pid() -> int:
    """The MCP server started by the current test (the newest `kernel_lsp mcp` below this process)."""
    from kernel_lsp.engine.proc import cmdline, descendants

    found = [p for p in descendants(os.getpid()) if "kernel_lsp mcp" in cmdline(p).replace("\0", " ")]
    assert found, "no server process"
    return max(found)


async def test_a_cancelled_hung_check_is_killed_and_frees_its_slot(workspace: Path):
    if not os.path.isdir("/proc"):
        pytest.skip("finds processes through /proc")
    pytest.importorskip("torch")
    marker = workspace.parent / "spinning"
    async with mcp_session(workspace, "--allow-run", "--max-parallel", "1") as session:
        server = _server_pid()
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call_tool, "check", {"source": spinning(marker)})
            await _until(lambda: marker.exists() and running_below(server, RUNNER), "the check never started")
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the abandoned call
        # The checking process goes at once, not when its minute is up ...
        await _until(lambda: not running_below(server, RUNNER), "the cancelled check's process is still running",
                     limit=30)
        # ... and the only slot is free for the next call.
        verdict = structured(await session.call_tool("check", {"path": "vector_add.py"}))
        assert verdict["ok"], verdict


async def test_long_calls_send_progress_notifications(workspace: Path):
    pytest.importorskip("torch")
    heard: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append((done, total, message))

    source = (workspace / "vector_add.py").read_text(encoding="utf-8")
    async with mcp_session(workspace, "--allow-run") as session:
        structured(await session.call_tool("check", {"path": "vector_add.py"}, progress_callback=progress))
        assert heard and all(m and m.startswith("checking:") for _, _, m in heard), heard
        heard.clear()
        ranked = structured(await session.call_tool("compare", {"candidates": [
            {"name": "a", "source": source}, {"name": "b", "source": source.replace("x + y, mask", "x - y, mask")}]},
            progress_callback=progress))
    assert sorted(h[0] for h in heard) == [1.0, 2.0] and {h[1] for h in heard} == {2.0}, heard
    assert {h[2] for h in heard} == {"a", "b"}
    assert [c["name"] for c in ranked["ranking"]] == ["a", "b"]


async def test_the_tiling_search_sends_its_steps_as_progress(workspace: Path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    heard: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append((done, total, message))

    async with mcp_session(workspace, "--allow-run") as session:
        structured(await session.call_tool("tune", {"path": "vector_add.py", "kernel": "add_kernel", "budget": 4},
                                           progress_callback=progress))
    assert heard and all(total == 100.0 and 0 <= done <= 100 and message for done, total, message in heard), heard
    assert [h[0] for h in heard] == sorted(h[0] for h in heard)  # steps in order


async def test_a_cancelled_batch_kills_every_running_check(workspace: Path):
    if not os.path.isdir("/proc"):
        pytest.skip("finds processes through /proc")
    pytest.importorskip("torch")
    markers = [workspace.parent / f"spinning{i}" for i in range(3)]
    candidates = [{"name": f"spin{i}", "source": spinning(m), "timeout_s": 3600} for i, m in enumerate(markers)]
    async with mcp_session(workspace, "--allow-run", "--max-parallel", "2") as session:
        server = _server_pid()
        batch = structured(await session.call_tool("submit", {"candidates": candidates}))["batch"]
        await _until(lambda: len(running_below(server, RUNNER)) == 2, "two checks never ran at once")
        status = structured(await session.call_tool("poll", {"batch": batch}))
        assert sorted(c["state"] for c in status["candidates"]) == ["queued", "running", "running"], status
        stopped = structured(await session.call_tool("cancel_batch", {"batch": batch}))
        assert stopped["cancelled"] and stopped["result"] is None
        await _until(lambda: not running_below(server, RUNNER), "a cancelled batch's check is still running",
                     limit=30)
        final = structured(await session.call_tool("poll", {"batch": batch}))
        assert {c["state"] for c in final["candidates"]} == {"cancelled"}, final
        assert not markers[2].exists()  # the queued one never started
