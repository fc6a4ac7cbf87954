"""`kernel-lsp serve --tcp` probed as a web page, a port scanner and a second program would: only an LSP client
that sends the session token from its first byte is served; every other connection is closed without touching the
session, the trust file or the server's lifetime."""

from __future__ import annotations

import json
import time

import pytest

from tests.slow import scaled

from .tcp_client import TOKEN, TcpServer, frame, initialize

TRUST_ME = {"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
            "params": {"command": "kernel-lsp.trust", "arguments": []}}


@pytest.fixture
def trust_file(tmp_path, monkeypatch):
    path = tmp_path / "trusted.json"
    path.write_text(json.dumps({"trusted": []}))
    monkeypatch.setenv("KERNEL_LSP_TRUST_FILE", str(path))
    return path


@pytest.fixture
def server(tmp_path, trust_file):
    s = TcpServer(tmp_path)
    yield s
    s.close()


def browser_post(port: int, body: bytes) -> bytes:
    """What Chromium sends for fetch("http://127.0.0.1:PORT/", {method: "POST", mode: "no-cors", body})."""
    return (b"POST / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: keep-alive\r\nContent-Length: %d\r\n"
            b"Content-Type: text/plain;charset=UTF-8\r\nOrigin: https://attacker.example\r\n"
            b"User-Agent: Mozilla/5.0\r\nAccept: */*\r\nSec-Fetch-Mode: no-cors\r\n\r\n" % (port, len(body)) + body)


def assert_serves_its_client(server: TcpServer, root=None) -> None:
    client = server.connect()
    client.send(initialize(root=root))
    reply = client.answer(1)
    assert reply is not None and reply["result"]["serverInfo"]["name"] == "kernel-lsp", reply
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    client.send({"jsonrpc": "2.0", "id": 7, "method": "workspace/executeCommand",
                 "params": {"command": "kernel-lsp.status", "arguments": []}})
    status = client.answer(7)
    assert status is not None and "version" in status["result"], status
    client.send({"jsonrpc": "2.0", "id": 8, "method": "shutdown"})
    assert client.answer(8) is not None
    client.send({"jsonrpc": "2.0", "method": "exit"})
    server.proc.wait(timeout=scaled(20))
    client.close()


def test_a_browser_post_is_closed_and_grants_nothing(server, tmp_path, trust_file):
    hostile = tmp_path / "page-chose-this"
    hostile.mkdir()
    body = frame(initialize(token=None, root=hostile)) + frame(TRUST_ME)
    page = server.connect()
    page.send(browser_post(server.port, body))
    assert page.receive() is None  # closed, nothing answered
    # Even a page that guesses the LSP framing cannot send the token it does not know.
    page = server.connect()
    page.send(browser_post(server.port, frame(initialize(token="guess-" * 4, root=hostile))))
    assert page.receive() is None
    assert server.alive()
    assert json.loads(trust_file.read_text()) == {"trusted": []}
    assert_serves_its_client(server)


def test_lsp_without_the_token_is_answered_and_closed(server):
    for token in (None, "wrong-token-0123456789abcdef"):
        conn = server.connect()
        conn.send(initialize(token=token))
        reply = conn.receive()
        assert reply is not None and "token" in reply["error"]["message"], reply
        assert conn.receive() is None
    # Any other first message closes the connection, and so does anything but an LSP header as the first bytes,
    # even with the token after it.
    conn = server.connect()
    conn.send(TRUST_ME)
    assert conn.receive() is None
    conn = server.connect()
    conn.send(b"Host: 127.0.0.1\r\n" + frame(initialize()))
    assert conn.receive() is None
    assert server.alive()
    assert_serves_its_client(server)


def test_stray_connections_do_not_end_the_server(server):
    for data in (b"", b"\r\n", b"GET / HTTP/1.0\r\n\r\n", b"Content-Length: 10\r\n\r\n", b"\x16\x03\x01\x02\x00"):
        conn = server.connect()
        if data:
            conn.send(data)
        conn.close()
    time.sleep(0.2)
    assert server.alive()
    assert_serves_its_client(server)


def test_a_second_client_is_refused_while_one_is_served(server):
    first = server.connect()
    first.send(initialize())
    assert first.answer(1)["result"]["serverInfo"]["name"] == "kernel-lsp"
    second = server.connect()
    second.send(initialize(msg_id=5))
    reply = second.receive()
    assert reply is None or "error" in reply
    second.close()
    first.send({"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
                "params": {"command": "kernel-lsp.status", "arguments": []}})
    assert "version" in first.answer(2)["result"]
    # The session ends with its client, not with the stray one.
    first.close()
    server.proc.wait(timeout=scaled(30))


def test_a_header_without_a_body_loses_no_request(server):
    client = server.connect()
    client.send(initialize())
    assert client.answer(1) is not None
    client.send(b"Content-Length: 50\r\n\r\n")
    client.send({"jsonrpc": "2.0", "id": 3, "method": "workspace/executeCommand",
                 "params": {"command": "kernel-lsp.status", "arguments": []}})
    reply = client.answer(3)
    assert reply is not None and "version" in reply["result"], reply
    client.close()


def test_a_non_loopback_address_needs_allow_remote(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "kernel_lsp", "serve", "--tcp", "0.0.0.0:1"],
                          capture_output=True, text=True, timeout=scaled(60))
    assert proc.returncode == 2 and "--allow-remote" in proc.stderr


def test_the_token_file_is_written_owner_only(tmp_path):
    import os
    import subprocess
    import sys

    from .tcp_client import free_port

    port = free_port()
    token_file = tmp_path / "new.token"
    proc = subprocess.Popen([sys.executable, "-m", "kernel_lsp", "serve", "--tcp", str(port), "--token-file",
                             str(token_file)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + scaled(20)
        while not token_file.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        assert os.stat(token_file).st_mode & 0o077 == 0
        assert len(token_file.read_text().strip()) >= 32
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert TOKEN not in token_file.read_text()


def test_a_hostile_workspace_over_tcp_runs_nothing_untrusted(server, tmp_path):
    """The session's own client, on an untrusted folder: open, change, save and every command that would run code
    leave no mark, and the trust command without a person's answer grants nothing."""
    from tests.server.test_trust import HOSTILE

    ws = tmp_path / "hostile-ws"
    ws.mkdir()
    (ws / "hostile.py").write_text(HOSTILE)
    uri = (ws / "hostile.py").as_uri()
    client = server.connect()
    message = initialize(root=ws)
    message["params"]["initializationOptions"].update({"checks": "save", "latency": "save"})
    client.send(message)
    assert client.answer(1)["result"]["serverInfo"]["name"] == "kernel-lsp"
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": HOSTILE}}})
    client.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": HOSTILE + "\n"}]}})
    client.send({"jsonrpc": "2.0", "method": "textDocument/didSave", "params": {"textDocument": {"uri": uri}}})
    where = {"uri": uri, "line": 36, "character": 0}
    for n, command in enumerate(["kernel-lsp.runChecks", "kernel-lsp.profileLines", "kernel-lsp.optimizeTiling",
                                 "kernel-lsp.trust", "kernel-lsp.runChecks"], start=10):
        client.send({"jsonrpc": "2.0", "id": n, "method": "workspace/executeCommand",
                     "params": {"command": command, "arguments": [where]}})
        reply = client.answer(n)
        assert reply is not None and "error" in str(reply), (command, reply)
    client.send({"jsonrpc": "2.0", "id": 30, "method": "workspace/executeCommand",
                 "params": {"command": "kernel-lsp.status", "arguments": []}})
    assert client.answer(30)["result"]["trusted"] is False
    assert not (ws / "marks").exists()
    client.close()
