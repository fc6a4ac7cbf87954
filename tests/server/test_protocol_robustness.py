"""Bad protocol input against a real `kernel-lsp serve`, written as raw bytes: every request is answered, the stream
resynchronises after a bad frame, and the session's diagnostics keep flowing."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.slow import scaled

from .kernels import GOOD, TYPO, TYPO_LINE

TIMEOUT = scaled(20)  # seconds for one answer: generous, the CI machine is small and busy
TRACEBACK = "Traceback (most recent call last)"


def frame(message: Any, length_delta: int = 0) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % (len(body) + length_delta) + body


class RawServer:
    """`kernel-lsp serve` (or `argv`) on pipes, written to byte by byte; what it sends back is collected by a reader thread."""

    def __init__(self, root: Path, argv: list[str] | None = None):
        self.root = root
        self.proc = subprocess.Popen(argv or [sys.executable, "-m", "kernel_lsp", "serve"], cwd=root,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.responses: dict[Any, dict] = {}
        self.notifications: list[dict] = []
        self.stderr: list[str] = []
        self.closed = False
        self._changed = threading.Condition()
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # -- reading ----------------------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        out = self.proc.stdout
        try:
            while True:
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        return
                    if not line.strip():
                        break
                    name, _, value = line.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                message = json.loads(out.read(length))
                self._receive(message)
        finally:
            with self._changed:
                self.closed = True
                self._changed.notify_all()

    def _receive(self, message: dict) -> None:
        if "method" in message and "id" in message:  # a request of the server's: answer as a plain client would
            items = (message.get("params") or {}).get("items")
            result = [None] * len(items) if message["method"] == "workspace/configuration" else None
            self.write(frame({"jsonrpc": "2.0", "id": message["id"], "result": result}))
            return
        with self._changed:
            if "id" in message:
                self.responses[message["id"]] = message
            else:
                self.notifications.append(message)
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def wait(self, condition: Callable[[], Any], timeout: float = TIMEOUT, what: str = "an answer") -> Any:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = condition()
                if value:
                    return value
                if self.closed:
                    raise AssertionError(f"the server ended while waiting for {what}; stderr:\n{self.stderr_text()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} in {timeout} s; stderr:\n{self.stderr_text()[-3000:]}")
                self._changed.wait(min(left, 0.5))

    def response(self, msg_id: Any, timeout: float = TIMEOUT) -> dict:
        return self.wait(lambda: self.responses.get(msg_id), timeout, f"response to request {msg_id!r}")

    def stderr_text(self) -> str:
        return "".join(self.stderr)

    # -- writing ----------------------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        with self._write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, message: dict) -> None:
        self.write(frame(message))

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any = None, timeout: float = TIMEOUT) -> dict:
        msg_id = self.next_id()
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return self.response(msg_id, timeout)

    def close(self) -> None:
        try:
            if self.proc.poll() is None and not self.closed:
                self.request("shutdown", None, timeout=20)
                self.notify("exit", None)
                self.proc.wait(timeout=20)
        except Exception:  # noqa: BLE001 - tearing down: the process is killed below anyway
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    stream.close()
                except OSError:
                    pass


class Session:
    """One initialized server with one open Triton file whose diagnostics are checked after each bad input."""

    def __init__(self, root: Path):
        self.server = RawServer(root)
        (root / "kernels.py").write_text(TYPO)
        self.uri = (root / "kernels.py").as_uri()
        self.version = 1
        self.typo = True
        self.initialize_params = {
            "processId": None, "rootUri": root.as_uri(), "capabilities": {},
            "workspaceFolders": [{"uri": root.as_uri(), "name": "ws"}],
            "initializationOptions": {"compile": "off", "checks": "off", "latency": "off"},
        }
        reply = self.server.request("initialize", self.initialize_params)
        assert "result" in reply, reply
        self.server.notify("initialized", {})
        self.server.notify("textDocument/didOpen", {"textDocument": {
            "uri": self.uri, "languageId": "python", "version": 1, "text": TYPO}})
        self.expect_diagnostics()

    def diagnostics(self, version: int) -> list[dict]:
        def pushed():
            for note in reversed(self.server.notifications):
                params = note.get("params") or {}
                if (note.get("method") == "textDocument/publishDiagnostics" and params.get("uri") == self.uri
                        and params.get("version") == version):
                    return [params["diagnostics"]]
            return None
        return self.server.wait(pushed, what=f"diagnostics of version {version}")[0]

    def expect_diagnostics(self) -> None:
        found = self.diagnostics(self.version)
        if self.typo:
            assert any(d.get("code") == "TR007" and d["range"]["start"]["line"] == TYPO_LINE for d in found), found
        else:
            assert found == [], found

    def check_healthy(self) -> None:
        """A new text of the open file gets its diagnostics, and a request about it is answered."""
        self.version += 1
        self.typo = not self.typo
        self.server.notify("textDocument/didChange", {
            "textDocument": {"uri": self.uri, "version": self.version},
            "contentChanges": [{"text": TYPO if self.typo else GOOD}]})
        self.expect_diagnostics()
        reply = self.server.request("textDocument/documentSymbol", {"textDocument": {"uri": self.uri}})
        assert any(s["name"] == "add_kernel" for s in reply["result"]), reply

    def symbols_request(self, msg_id: Any) -> dict:
        return {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/documentSymbol",
                "params": {"textDocument": {"uri": self.uri}}}

    def assert_no_traceback(self) -> None:
        assert TRACEBACK not in self.server.stderr_text(), self.server.stderr_text()


@pytest.fixture
def session(tmp_path: Path):
    s = Session(tmp_path)
    yield s
    s.server.close()


def error_code(reply: dict) -> int | None:
    return (reply.get("error") or {}).get("code")


WRONG_PARAMS = [
    ("textDocument/hover", {"textDocument": {"uri": "file:///x.py"}, "position": {"line": "one", "character": 0}}),
    ("textDocument/hover", "not an object"),
    ("textDocument/documentSymbol", {"textDocument": 42}),
    ("textDocument/documentSymbol", [1, 2, 3]),
    ("textDocument/codeAction", {"textDocument": {"uri": "file:///x.py"}, "range": None, "context": {}}),
    ("textDocument/inlayHint", {"textDocument": {"uri": "file:///x.py"}, "range": {"start": 1, "end": 2}}),
    ("textDocument/diagnostic", {"textDocument": None}),
    ("workspace/executeCommand", {"command": 5, "arguments": "x"}),
    ("textDocument/completion", {"textDocument": {"uri": "file:///x.py"}, "position": [0, 0]}),
]


def test_wrong_parameter_types_are_answered_with_invalid_params(session: Session):
    ids = []
    for method, params in WRONG_PARAMS:
        msg_id = session.server.next_id()
        ids.append((msg_id, method))
        session.server.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    for msg_id, method in ids:
        reply = session.server.response(msg_id)
        # A method the server does not offer may say so instead.
        assert error_code(reply) in (-32602, -32601), (method, reply)
        assert reply["error"]["message"], reply
    # Notifications with wrong types have no answer; they must not break the document either.
    session.server.notify("textDocument/didChange", {"textDocument": {"uri": session.uri, "version": "x"},
                                                     "contentChanges": 7})
    session.server.notify("textDocument/didOpen", {"textDocument": 3})
    session.check_healthy()
    session.assert_no_traceback()


def test_malformed_json_with_an_id_gets_a_parse_error(session: Session):
    session.server.write(frame(b'{"jsonrpc": "2.0", "id": 77, "method": "textDocument/hover", "params": {"te'))
    reply = session.server.response(77)
    assert error_code(reply) == -32700, reply
    session.check_healthy()
    session.assert_no_traceback()


@pytest.mark.parametrize("delta", [-10, 40])
def test_a_lying_content_length_does_not_desynchronise_the_stream(session: Session, delta: int):
    first = session.server.next_id()
    later = [session.server.next_id() for _ in range(20)]
    data = frame(session.symbols_request(first), delta) + b"".join(frame(session.symbols_request(i)) for i in later)
    session.server.write(data)
    reply = session.server.response(first)
    # Too short: the body is cut, a parse error; too long: the whole message came first, so it was answered.
    assert error_code(reply) == -32700 if delta < 0 else "result" in reply, reply
    for msg_id in later:
        assert "result" in session.server.response(msg_id)
    assert "more than its message" in session.server.stderr_text() or delta < 0
    session.check_healthy()
    session.assert_no_traceback()


def test_an_overstated_length_with_nothing_after_it_is_still_answered(session: Session):
    msg_id = session.server.next_id()
    session.server.write(frame(session.symbols_request(msg_id), 40))
    assert "result" in session.server.response(msg_id)
    session.check_healthy()


def test_an_absurd_content_length_is_refused_not_allocated(session: Session):
    msg_id = session.server.next_id()
    body = json.dumps(session.symbols_request(msg_id)).encode()
    session.server.write(b"Content-Length: 99999999999\r\n\r\n" + body)
    reply = session.server.response(msg_id)
    assert error_code(reply) == -32600 and "99999999999" in reply["error"]["message"], reply
    assert session.server.proc.poll() is None
    assert "refused a message of 99999999999 bytes (over the 64 MiB limit)" in session.server.stderr_text()
    session.check_healthy()
    session.assert_no_traceback()


@pytest.mark.parametrize("header", [
    b"Content-Length: twelve\r\n\r\n",  # not a number
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n",  # no length at all
    b"",  # no header: the body alone
    b"Content-Length: -5\r\n\r\n",
])
def test_a_frame_without_a_usable_length_is_answered_and_skipped(session: Session, header: bytes):
    msg_id = session.server.next_id()
    after = session.server.next_id()
    session.server.write(header + json.dumps(session.symbols_request(msg_id)).encode()
                         + frame(session.symbols_request(after)))
    assert error_code(session.server.response(msg_id)) == -32600
    assert "result" in session.server.response(after)
    session.check_healthy()
    session.assert_no_traceback()


@pytest.mark.parametrize("garbage", [
    b"\x00\xff\xfe garbage\r\n\r\n",
    b"hello\n",
    b"x" * 20000,  # a line longer than any header
    b"Content-Length: 5\r\n\r\n{}}}}",  # a body that is not one value
    b"Content-Length: 2\r\n\r\n[]",  # a batch (not part of the protocol)
    b"Content-Length: 4\r\n\r\nnull",
])
def test_garbage_between_messages_is_skipped(session: Session, garbage: bytes):
    session.server.write(garbage)
    session.check_healthy()
    session.assert_no_traceback()


def test_a_second_initialize_is_refused_and_the_session_goes_on(session: Session):
    reply = session.server.request("initialize", {**session.initialize_params, "capabilities": {
        "textDocument": {"diagnostic": {}}}, "rootUri": None, "workspaceFolders": []})
    assert error_code(reply) == -32600, reply
    # Still the first session: the open document is known and its diagnostics are still pushed.
    session.check_healthy()
    session.check_healthy()
    session.assert_no_traceback()


def test_requests_outside_the_session_are_answered(tmp_path: Path):
    server = RawServer(tmp_path)
    try:
        reply = server.request("textDocument/documentSymbol", {"textDocument": {"uri": "file:///x.py"}})
        assert error_code(reply) == -32002, reply
        assert "result" in server.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        assert server.request("shutdown")["result"] is None
        after = server.request("textDocument/documentSymbol", {"textDocument": {"uri": "file:///x.py"}})
        assert error_code(after) == -32600, after
        server.notify("exit", None)
        server.proc.wait(timeout=TIMEOUT)
        assert TRACEBACK not in server.stderr_text(), server.stderr_text()
    finally:
        server.close()
