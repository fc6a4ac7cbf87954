"""`kernel-lsp mcp --http`: a web page (an Origin, or a DNS-rebinding Host) reaches no tool, a non-loopback address
needs --auth-token, and with a token every request must bear it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.slow import scaled

from .tcp_client import free_port

pytest.importorskip("mcp")

TOKEN = "mcp-probe-token-0123456789"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "0"}}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def serve(tmp_path, *args: str):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-P", "-m", "kernel_lsp", "mcp", "--root", str(tmp_path), "--http",
                             f"127.0.0.1:{port}", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "KERNEL_LSP_TRUST_FILE": str(tmp_path / "trusted.json")})
    deadline = time.monotonic() + scaled(60)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "the HTTP server did not start listening"
            time.sleep(0.2)


def stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stderr.close()


class Answer:
    def __init__(self, status_code: int):
        self.status_code = status_code


def post(port: int, **headers: str) -> Answer:
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=scaled(30))
    try:
        conn.putrequest("POST", "/mcp", skip_host=True)
        for name, value in {"Host": f"127.0.0.1:{port}", **ACCEPT, **headers}.items():
            conn.putheader(name, value)
        body = json.dumps(INITIALIZE).encode()
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        response.read()
        return Answer(response.status)
    finally:
        conn.close()


def test_a_non_loopback_address_needs_a_token(tmp_path):
    done = subprocess.run([sys.executable, "-P", "-m", "kernel_lsp", "mcp", "--root", str(tmp_path), "--http",
                           "0.0.0.0:1"], capture_output=True, text=True, timeout=scaled(60))
    assert done.returncode == 2 and "--auth-token" in done.stderr


def test_web_pages_reach_no_tool_on_loopback(tmp_path):
    proc, port = serve(tmp_path)
    try:
        assert post(port).status_code == 200  # an agent's request
        assert post(port, Origin="https://attacker.example").status_code == 403
        assert post(port, Host=f"attacker.example:{port}").status_code == 403  # DNS rebinding
    finally:
        stop(proc)


def test_the_token_is_required_when_given(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    proc, port = serve(tmp_path, "--auth-token", f"@{token_file}")
    try:
        assert post(port).status_code == 401
        assert post(port, Authorization="Bearer wrong-token-0123456789").status_code == 401
        assert post(port, Authorization=f"Bearer {TOKEN}").status_code == 200
        assert post(port, Authorization=f"Bearer {TOKEN}", Origin="https://attacker.example").status_code == 403
    finally:
        stop(proc)


async def test_an_untrusted_folder_over_http_runs_no_code(tmp_path):
    """The hostile-workspace probe over MCP's HTTP transport, with the token: every tool that would run the file's
    code answers "not trusted", and nothing runs."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from tests.mcp.conftest import error_text

    marker = tmp_path / "ran.txt"
    hostile = (Path(__file__).resolve().parents[2] / "examples" / "vector_add.py").read_text() + (
        f"\nopen({str(marker)!r}, 'w').write('ran')\n")
    (tmp_path / "k.py").write_text(hostile)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    proc, port = serve(tmp_path, "--auth-token", f"@{token_file}")
    try:
        import httpx2  # the SDK's own HTTP client, installed with it

        auth = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=scaled(120))
        async with auth, streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=auth) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            for tool, args in [("check", {"path": "k.py"}), ("measure", {"path": "k.py"}),
                               ("tune", {"path": "k.py", "kernel": "add_kernel"})]:
                assert "not trusted" in error_text(await session.call_tool(tool, args)), tool
    finally:
        stop(proc)
    assert not marker.exists()
