"""`kernel-lsp mcp --http HOST:PORT`: the same tools over streamable HTTP, with the SDK's HTTP client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import server_env, structured

pytestmark = pytest.mark.timeout(180)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_port(workspace: Path):
    """`kernel-lsp mcp --http 127.0.0.1:PORT` on the workspace, listening; stopped afterwards."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-P", "-m", "kernel_lsp", "mcp", "--root", str(workspace), "--http",
                             f"127.0.0.1:{port}"], env={**os.environ, **server_env(workspace.parent / "trusted.json")},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-2000:]
                assert time.monotonic() < deadline, "the HTTP server did not start listening"
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_tools_over_streamable_http(http_port: int):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(f"http://127.0.0.1:{http_port}/mcp") as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        assert {t.name for t in (await session.list_tools()).tools} >= {"analyze", "compare", "propose_edit"}
        found = structured(await session.call_tool("analyze", {"path": "buggy_kernels.py"}))
        assert any(f["code"] == "TR002" for f in found["findings"])
        bad = await session.call_tool("analyze", {"path": "../elsewhere.py"})
        assert bad.is_error and "outside the workspace" in bad.content[0].text
        again = structured(await session.call_tool("analyze", {"path": "vector_add.py"}))
        assert again["kernels"][0]["name"] == "add_kernel"


def test_every_body_that_is_not_a_message_gets_a_json_rpc_error_over_http(http_port: int):
    import json
    import urllib.error
    import urllib.request

    url = f"http://127.0.0.1:{http_port}/mcp"
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def post(body: bytes, extra: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(url, data=body, headers={**headers, **extra}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    status, answer_headers, _ = post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode(),
        {})
    assert status == 200
    session_id = next(v for k, v in answer_headers.items() if k.lower() == "mcp-session-id")
    session = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-06-18"}
    for body in (b"{not json", b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": '
                 b'"analyze", "arguments": {"source": "\\ud800"}}}', b"[1, 2]", b"\xff\xfe"):
        status, _, data = post(body, session)
        assert status == 400, (body, data)
        error = json.loads(data)
        assert error["jsonrpc"] == "2.0" and error["error"]["code"] in (-32700, -32600, -32602), (body, error)
