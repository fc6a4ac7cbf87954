"""`exit` ends the server process: with the code LSP asks for, and without waiting for work that cannot be
interrupted (a thread inside a library call). An editor that closes must not be left with a server behind it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.slow import scaled

from .test_protocol_robustness import RawServer

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
INIT = {"processId": None, "rootUri": None, "capabilities": {},
        "initializationOptions": {"compile": "off", "checks": "off", "latency": "off"}}


def started(tmp_path: Path, argv: list[str] | None = None) -> RawServer:
    server = RawServer(tmp_path, argv)
    assert "result" in server.request("initialize", INIT)
    server.notify("initialized", {})
    return server


def ended(server: RawServer) -> int:
    try:
        return server.proc.wait(timeout=scaled(120))
    except subprocess.TimeoutExpired:
        server.proc.kill()
        raise AssertionError("the server did not end after exit; stderr:\n" + server.stderr_text()[-3000:]) from None


def test_exit_after_shutdown_ends_the_process_with_code_0(tmp_path: Path):
    server = started(tmp_path)
    assert server.request("shutdown")["result"] is None
    server.notify("exit", None)
    assert ended(server) == 0


def test_exit_without_shutdown_ends_the_process_with_code_1(tmp_path: Path):
    server = started(tmp_path)
    server.notify("exit", None)
    assert ended(server) == 1


def test_exit_does_not_wait_for_a_thread_that_cannot_be_interrupted(tmp_path: Path):
    marker = tmp_path / "waiting"
    server = started(tmp_path, [sys.executable, str(HERE / "blocking_server.py"), str(marker)])
    try:
        server.send({"jsonrpc": "2.0", "id": 99, "method": "test/block", "params": None})
        server.wait(marker.exists, what="the blocking thread to start")
        assert server.request("shutdown")["result"] is None
        server.notify("exit", None)
        assert ended(server) == 0
        assert "background thread(s) still running" in server.stderr_text()
    finally:
        server.close()
