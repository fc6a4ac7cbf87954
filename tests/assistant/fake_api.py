"""A fake of the Anthropic Messages API on loopback: POST /v1/messages answered from a script.

Each request takes the next scripted reply: a text answer (served as plain JSON, or as server-sent events when
the request asks to stream: message_start, content_block_start/delta/stop, message_delta, message_stop), an
HTTP error with the API's error body, or a stall (no answer until the client gives up). Every request is
recorded (headers and JSON body) so that tests can assert on exactly what was sent.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    error_type: str = ""
    stall_s: float = 0.0
    input_tokens: int = 1200
    output_tokens: int = 300
    retry_after_ms: int = 10


def answer(text: str, input_tokens: int = 1200, output_tokens: int = 300) -> Reply:
    return Reply(text=text, input_tokens=input_tokens, output_tokens=output_tokens)


def error(status: int, error_type: str, message: str = "scripted failure") -> Reply:
    return Reply(text=message, status=status, error_type=error_type)


def stall(seconds: float) -> Reply:
    return Reply(stall_s=seconds)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict

    @property
    def text(self) -> str:
        """Everything the request carried as text: system prompt and messages."""
        parts = [self.body.get("system") or ""]
        for m in self.body.get("messages", []):
            content = m.get("content")
            parts.append(content if isinstance(content, str) else json.dumps(content))
        return "\n".join(parts)


@dataclass
class FakeMessagesAPI:
    script: list[Reply] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._closing = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode(errors="replace")}
                with fake._lock:
                    fake.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    reply = fake.script.pop(0) if fake.script else error(500, "api_error", "no scripted reply left")
                if self.path.split("?")[0] != "/v1/messages":
                    return self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                       "message": self.path}})
                if reply.stall_s:
                    fake._closing.wait(reply.stall_s)
                    self.close_connection = True
                    return
                if reply.status != 200:
                    return self._json(reply.status, {"type": "error", "error": {"type": reply.error_type,
                                                                                "message": reply.text}},
                                      {"retry-after-ms": str(reply.retry_after_ms)})
                message = {"id": f"msg_{len(fake.requests)}", "type": "message", "role": "assistant",
                           "model": body.get("model", "?"), "content": [{"type": "text", "text": reply.text}],
                           "stop_reason": "end_turn", "stop_sequence": None,
                           "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens}}
                if body.get("stream"):
                    return self._sse(message, reply)
                return self._json(200, message)

            def _json(self, status: int, data: dict, headers: dict | None = None) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _sse(self, message: dict, reply: Reply) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                start = {**message, "content": [], "stop_reason": None,
                         "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1}}
                events = [("message_start", {"type": "message_start", "message": start}),
                          ("content_block_start", {"type": "content_block_start", "index": 0,
                                                   "content_block": {"type": "text", "text": ""}})]
                text = reply.text
                for i in range(0, len(text), 40):  # pieces, as the API streams them
                    events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                           "delta": {"type": "text_delta", "text": text[i:i + 40]}}))
                events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                           ("message_delta", {"type": "message_delta",
                                              "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                              "usage": {"output_tokens": reply.output_tokens}}),
                           ("message_stop", {"type": "message_stop"})]
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeMessagesAPI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
