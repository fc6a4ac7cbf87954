"""A bare LSP client over a socket, and a `kernel-lsp serve --tcp` to point it at, for the transport probes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.slow import scaled

TOKEN = "probe-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def frame(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def initialize(msg_id: int = 1, token: str | None = TOKEN, root: Path | None = None) -> dict:
    options = {} if token is None else {"token": token}
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize",
            "params": {"processId": None, "rootUri": root.as_uri() if root else None, "capabilities": {},
                       "initializationOptions": options}}


class Connection:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=scaled(10))
        self.buf = b""

    def send(self, data: bytes | dict) -> None:
        self.sock.sendall(data if isinstance(data, bytes) else frame(data))

    def receive(self) -> dict | None:
        """The next message, or None when the server closed the connection."""
        while True:
            head, sep, rest = self.buf.partition(b"\r\n\r\n")
            if sep:
                fields = dict(line.split(b":", 1) for line in head.split(b"\r\n"))
                length = int({k.strip().lower(): v for k, v in fields.items()}[b"content-length"])
                if len(rest) >= length:
                    self.buf = rest[length:]
                    return json.loads(rest[:length])
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buf += chunk

    def answer(self, msg_id: int) -> dict | None:
        """The response to request `msg_id` (server requests are answered with null on the way)."""
        while True:
            message = self.receive()
            if message is None or (message.get("id") == msg_id and "method" not in message):
                return message
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})

    def closed_by_server(self) -> bool:
        try:
            return self.sock.recv(65536) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


class TcpServer:
    def __init__(self, tmp: Path, env: dict | None = None, *extra: str):
        self.port = free_port()
        token_file = tmp / "token"
        token_file.write_text(TOKEN + "\n")
        token_file.chmod(0o600)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernel_lsp", "serve", "--tcp", str(self.port), "--token-file", str(token_file),
             *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
        deadline = time.monotonic() + scaled(20)
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()  # a stray connection, too
                break
            except OSError:
                assert time.monotonic() < deadline and self.proc.poll() is None, self.stderr()
                time.sleep(0.05)

    def connect(self) -> Connection:
        return Connection(self.port)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        return self.proc.stderr.read().decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()
