"""The transport: frames off the byte stream, and the JSON-RPC rules the protocol layer relies on.

pygls trusts each frame's Content-Length (a lying one desynchronises the stream for good, a huge one is
allocated), converts a message inside `json.loads` (a message whose params do not convert is dropped without an
answer, with tracebacks on stderr) and lets a second `initialize` replace the session. Here `FrameParser` splits the
stream without doing I/O, resynchronising on the next `Content-Length:` header after a bad frame, and
`KernelProtocol` answers every request it cannot run with a JSON-RPC error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
)
from pygls.protocol.json_rpc import RPCRequest

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32602, -32603
SERVER_NOT_INITIALIZED = -32002

# No editor sends a message anywhere near this; a larger Content-Length is refused rather than allocated.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_HEADER_LINE = 8192
CHUNK = 65536
# How far into a broken message its id is looked for (Neovim's encoder may put a large "params" first).
ID_SCAN_BYTES = 1024 * 1024

_HEADER_START = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_WHOLE_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.IGNORECASE)
_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]*:[ \t]*(.*?)[ \t]*")
_JSON_WS = b" \t\r\n"
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]')
_ID_VALUE = re.compile(r'[ \t\r\n]*(-?\d+)(?![\d.eE])|[ \t\r\n]*("[^"\\]*(?:\\.[^"\\]*)*")')
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Message:
    payload: Any  # the decoded JSON value of one frame


@dataclass(frozen=True)
class Problem:
    text: str  # one line for the log
    code: int | None = None  # the JSON-RPC error to answer with, when `msg_id` names the request it broke
    msg_id: int | str | None = None


_HEADERS, _BODY, _TAIL, _SKIP = "headers", "body", "tail", "skip"


class FrameParser:
    """Splits a byte stream into JSON-RPC messages and problems. No I/O: `feed` bytes, act on what it returns.

    A frame whose body is not one JSON value of the declared length is a problem; the parser then skips to the
    next `Content-Length:` header. A body that is a whole JSON value before its declared length is delivered at
    once (a client that overstates the length would otherwise wait for bytes that never come)."""

    def __init__(self, limit: int = MAX_MESSAGE_BYTES):
        self.limit = limit
        self._buf = bytearray()
        self._state = _HEADERS
        self._reset_headers()
        self._expected = 0  # the body length being read
        self._searched = 0  # how much of that body has been searched for a header
        self._tail = 0  # declared bytes still due after a body delivered early (whitespace in a valid frame)
        self._probe: str | None = None  # why the frame ahead is skipped, until its first bytes are seen

    def _reset_headers(self) -> None:
        self._headers_seen = False
        self._length: int | None = None
        self._length_text = b""
        self._bad_length: bytes | None = None

    def feed(self, data: bytes) -> list[Message | Problem]:
        self._buf += data
        out: list[Message | Problem] = []
        step = {_HEADERS: self._headers, _BODY: self._body, _TAIL: self._tail_bytes, _SKIP: self._skip}
        while step[self._state](out):
            pass
        return out

    def close(self) -> list[Problem]:
        """What the end of the stream leaves unfinished."""
        if self._state == _BODY and self._buf:
            return [Problem(f"the input ended {self._expected - len(self._buf)} bytes short of a message")]
        if self._probe is not None:
            return [Problem(self._probe)]
        return []

    # -- states: each returns whether it made progress --------------------------------------------------------

    def _headers(self, out: list) -> bool:
        buf = self._buf
        nl = buf.find(b"\n", 0, MAX_HEADER_LINE + 1)
        if nl < 0:
            if len(buf) > MAX_HEADER_LINE:
                self._garbage(out, "a header line longer than 8 KiB")
                return True
            return False
        line = bytes(buf[:nl])
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            del buf[:nl + 1]
            # Line breaks between messages are harmless; after headers they end the header block.
            return self._end_of_headers(out) if self._headers_seen else True
        inner = _HEADER_START.search(line, 1)
        if inner is not None:  # a broken header or a bare body ran into the next message's header: resume there
            broken = line[:inner.start()]
            what = ("a message without a Content-Length header" if broken.lstrip()[:1] in (b"{", b"[")
                    else f"a broken header ({_preview(broken)})")
            out.append(Problem(f"{what}; resuming at the next header", INVALID_REQUEST, _request_id(broken)))
            self._reset_headers()
            del buf[:inner.start()]
            return True
        header = _HEADER_LINE.fullmatch(line)
        if header is None:
            looks_like_body = line.lstrip()[:1] in (b"{", b"[")
            self._garbage(out, "a message without a Content-Length header" if looks_like_body
                          else f"bytes that are not a header ({_preview(line)})")
            return True
        if header[1].lower() == b"content-length" and (self._length is not None or self._bad_length is not None):
            # A second Content-Length: the block before lost its blank line, and this line begins the next message.
            out.append(Problem("a header block without the blank line that ends it; resuming at the next "
                               "Content-Length header", INVALID_REQUEST))
            self._reset_headers()
            return True
        del buf[:nl + 1]
        self._headers_seen = True
        if header[1].lower() == b"content-length":
            value = header[2]
            if not value.isdigit():
                self._bad_length = value
            else:
                # Beyond 18 digits the number only matters as "too large" (and int() of thousands of digits raises).
                length = int(value) if len(value) <= 18 else self.limit + 1
                self._length_text = value
                self._length = length
        return True

    def _end_of_headers(self, out: list) -> bool:
        length, bad, text = self._length, self._bad_length, self._length_text.decode()
        self._reset_headers()
        if bad is not None:
            self._start_skip(f"Content-Length {_preview(bad)} is not a byte count")
        elif length is None:
            self._start_skip("a header block without Content-Length")
        elif length > self.limit:
            size = text if len(text) <= 20 else text[:20] + "..."
            self._start_skip(f"refused a message of {size} bytes (over the {self.limit >> 20} MiB limit)")
        else:
            self._expected = length
            self._searched = 0
            self._state = _BODY
        return True

    def _body(self, out: list) -> bool:
        buf, n = self._buf, self._expected
        if len(buf) >= n:
            body = bytes(buf[:n])
            try:
                payload = json.loads(body)
            except (ValueError, RecursionError) as exc:
                early = _leading_value(body)
                if early is not None:  # a whole message, then the start of the next one: the length overstated it
                    out.append(Message(early[0]))
                    out.append(Problem(f"Content-Length was {n - early[1]} bytes more than its message"))
                    del buf[:early[1]]
                    self._state = _HEADERS
                    return True
                out.append(Problem(f"a message body that is not JSON ({_json_error(exc)}); skipping to the next "
                                   "Content-Length header", PARSE_ERROR, _request_id(body)))
                # A length that overstates a broken body may cover the next message's header, or its start only:
                # resume at a header that begins inside the length (at its first byte too: a header block with no
                # body at all, whose length then covers the next message).
                # Otherwise the skip searches these bytes too, as more arrive: a header may begin in them that is
                # not whole yet (a length shorter than the message, or than the next message's header).
                inside = _HEADER_START.search(buf)
                if inside is not None and inside.start() < n:
                    del buf[:inside.start()]
                    self._state = _HEADERS
                else:
                    self._state = _SKIP
                return True
            del buf[:n]
            out.append(Message(payload))
            self._state = _HEADERS
            return True
        # A header line (with a real line break, which no JSON string holds) inside a body still being read means
        # its length was overstated: the next message starts there. Only the new bytes are searched.
        header = _WHOLE_HEADER.search(buf, max(0, self._searched - 64))  # no JSON body starts with a header
        self._searched = len(buf)
        ahead = buf[:header.start()] if header is not None else buf
        # Otherwise only a body that ends with a closing bracket can already be whole.
        if header is None and buf.rstrip(_JSON_WS)[-1:] not in (b"}", b"]"):
            return False
        early = _leading_value(ahead)
        if early is None:
            if header is None:
                return False
            out.append(Problem("a message cut short before the next Content-Length header", PARSE_ERROR,
                               _request_id(ahead)))
            del buf[:header.start()]
            self._state = _HEADERS
            return True
        payload, end = early
        rest = bytes(buf[end:])
        out.append(Message(payload))
        del buf[:end]
        if rest.strip(_JSON_WS):
            out.append(Problem(f"Content-Length was {n - end} bytes more than its message"))
            self._state = _HEADERS
        else:
            self._tail = n - end
            self._state = _TAIL
        return True

    def _tail_bytes(self, out: list) -> bool:
        buf = self._buf
        head = buf[:self._tail]
        stripped = len(head) - len(head.lstrip(_JSON_WS))
        del buf[:stripped]
        self._tail -= stripped
        if self._tail == 0:
            self._state = _HEADERS
            return True
        if buf:
            out.append(Problem(f"Content-Length was {self._tail} bytes more than its message"))
            self._tail = 0
            self._state = _HEADERS
            return True
        return False

    def _skip(self, out: list) -> bool:
        buf = self._buf
        found = _HEADER_START.search(buf)
        if self._probe is not None:
            # The skipped message's id is read once it is all here (or the next one has begun).
            ahead = buf[:found.start()] if found is not None else buf
            if found is None and len(buf) < CHUNK and _leading_value(buf) is None:
                return False
            reason, self._probe = self._probe, None
            out.append(Problem(f"{reason}; skipping to the next Content-Length header", INVALID_REQUEST,
                               _request_id(ahead)))
        if found is not None:
            del buf[:found.start()]
            self._state = _HEADERS
            return True
        keep = 32  # a header split across reads
        if len(buf) > keep:
            del buf[:-keep]
        return False

    def _start_skip(self, reason: str) -> None:
        """Skip the frame whose body is ahead; its request, where its id can be read, is answered."""
        self._probe = reason
        self._state = _SKIP

    def _garbage(self, out: list, reason: str) -> None:
        out.append(Problem(f"{reason}; skipping to the next Content-Length header", INVALID_REQUEST,
                           _request_id(self._buf)))
        self._reset_headers()
        del self._buf[:1]  # so that the search does not find the same broken header again
        self._state = _SKIP


def _preview(data: bytes, size: int = 40) -> str:
    text = data[:size].decode("utf-8", "replace")
    return repr(text + ("..." if len(data) > size else ""))


def _json_error(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).split("\n")[0][:120]


def _leading_value(data: bytes | bytearray) -> tuple[Any, int] | None:
    """The JSON value at the start of `data` and the byte offset where it ends, or None."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        text = bytes(data[:exc.start]).decode("utf-8")
    start = len(text) - len(text.lstrip(" \t\r\n"))
    try:
        payload, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return payload, len(text[:end].encode("utf-8"))


def _request_id(data: bytes | bytearray) -> int | str | None:
    """The id of the request a broken message was, where it can be read, so that the client gets its answer.

    Only a top-level "id" counts (params may hold ids of their own), and not in a response (it has "result" or
    "error"): answering a response would make a request of the client fail."""
    text = bytes(data[:ID_SCAN_BYTES]).decode("utf-8", "replace")
    if text.lstrip(" \t\r\n")[:1] != "{":
        return None
    depth, keys, found = 0, set(), None
    previous = None
    for token in _TOKEN.finditer(text):
        t = token.group()
        if t in "{[":
            depth += 1
        elif t in "}]":
            depth -= 1
            if depth <= 0:
                break
        elif t == ":" and depth == 1 and previous is not None and previous.startswith('"'):
            key = previous[1:-1]
            keys.add(key)
            if key == "id" and found is None:
                value = _ID_VALUE.match(text, token.end())
                if value is not None:
                    found = int(value[1]) if value[1] is not None else json.loads(value[2])
        previous = t
    if keys & {"result", "error"}:
        return None
    return found


# -- the protocol --------------------------------------------------------------------------------------------

class _Unconvertible(Exception):
    pass


_ENVELOPE = ("jsonrpc", "id", "method", "params", "result", "error")


class RequestTable(dict):
    """pygls' table of the requests in flight. At shutdown pygls cancels them while iterating over `items()`, and
    cancelling a request run in a thread calls back at once, which removes its entry: "dictionary changed size
    during iteration". Iterating over a snapshot lets shutdown cancel every one."""

    def items(self) -> list[tuple[Any, Any]]:  # type: ignore[override]  # a snapshot, not a live view
        return list(super().items())


class KernelProtocol(LanguageServerProtocol):
    """pygls' language server protocol, answering what it would drop and holding to one session."""

    def __init__(self, server: "LanguageServer", converter: cattrs.Converter):
        super().__init__(server, converter)
        self._request_futures = RequestTable()
        self.session_started = False  # an initialize was accepted (from its arrival: a second one is refused)
        self._initialize_id: int | str | None = None

    def receive(self, payload: Any) -> None:
        """Dispatch one decoded message; a request that cannot run is answered with an error, anything else that
        is wrong is logged."""
        if isinstance(payload, list):
            for item in payload or [None]:
                self._refuse(item, INVALID_REQUEST, "batched messages are not part of the Language Server Protocol")
            return
        if not isinstance(payload, dict):
            log.warning("ignored a message that is a JSON %s, not an object", type(payload).__name__)
            return
        problem = _envelope_problem(payload)
        if problem:
            self._refuse(payload, INVALID_REQUEST, problem)
            return
        try:
            message = self._structure(payload)
        except _Unconvertible as exc:
            self._refuse(payload, INVALID_PARAMS, f"invalid params for {payload.get('method')}: {exc}")
            return
        self.handle_message(message)

    def report(self, problem: Problem) -> None:
        """A frame the parser could not deliver."""
        log.warning("%s", problem.text)
        if problem.code is not None and problem.msg_id is not None:
            self.answer_error(problem.msg_id, problem.code, problem.text.split(";")[0])

    def answer_error(self, msg_id: int | str, code: int, message: str) -> None:
        self._send_response(msg_id, error=types.ResponseError(code=code, message=message))

    def _refuse(self, payload: Any, code: int, reason: str) -> None:
        msg_id = payload.get("id") if isinstance(payload, dict) else None
        method = payload.get("method") if isinstance(payload, dict) else None
        if method is None and isinstance(payload, dict) and ("result" in payload or "error" in payload):
            # A response of the client's that cannot be read: what waits for it fails instead of waiting forever.
            future = self._request_futures.pop(msg_id, None) if _is_id(msg_id) else None
            log.warning("ignored the client's response %r: %s", msg_id, reason)
            if future is not None and not future.done():
                future.set_exception(JsonRpcException(message=reason, code=code))
            return
        if _is_id(msg_id):
            log.warning("answered request %r with an error: %s", msg_id, reason)
            self.answer_error(msg_id, code, reason)
        else:
            log.warning("ignored a notification: %s", reason)

    def _handles(self, method: str) -> bool:
        return method in self.fm.builtin_features or method in self.fm.features or method == types.CANCEL_REQUEST

    def _structure(self, payload: dict) -> Any:
        data = {key: payload[key] for key in _ENVELOPE if key in payload}
        method = data.get("method")
        if method is None:
            if "error" in data:
                cls = types.ResponseErrorMessage
            else:
                cls = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
        else:
            data.setdefault("params", None)
            # A method without a handler gets MethodNotFound, whatever its params are.
            known = self.get_message_type(method) if self._handles(method) else None
            cls = known or (JsonRPCRequestMessage if "id" in data else JsonRPCNotification)
        try:
            return self._converter.structure(data, cls)
        except Exception as exc:  # noqa: BLE001 - cattrs raises many kinds; all mean the same to the client
            raise _Unconvertible(_describe(exc)) from None

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(message, RPCRequest):
            if self._shutdown:
                self._refuse_request(message, INVALID_REQUEST, "the server is shutting down: only exit is accepted")
                return
            if method == types.INITIALIZE:
                if self.session_started:
                    self._refuse_request(message, INVALID_REQUEST,
                                         "initialize was already received; the session keeps its first settings")
                    return
                self.session_started = True
                self._initialize_id = message.id
            elif not self.session_started:
                self._refuse_request(message, SERVER_NOT_INITIALIZED, f"{method} before initialize")
                return
        elif method is not None and method != types.EXIT and not self.session_started:
            log.warning("ignored %s before initialize", method)
            return
        super().handle_message(message)

    def _refuse_request(self, message: Any, code: int, reason: str) -> None:
        log.warning("answered %s %r with an error: %s", message.method, message.id, reason)
        self.answer_error(message.id, code, reason)

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        failed = future.cancelled() or future.exception() is not None
        if failed and msg_id == self._initialize_id:
            self.session_started = False  # a failed initialize leaves the client free to try again
        error = None if future.cancelled() else future.exception()
        if isinstance(error, JsonRpcException):
            # An error the handler chose to answer with: the answer says it all, no traceback is needed.
            self._request_futures.pop(msg_id, None)
            log.warning("answered request %r with error %s: %s", msg_id, error.code, error.message)
            self._send_response(msg_id, error=error.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)


def _is_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _envelope_problem(payload: dict) -> str | None:
    if payload.get("jsonrpc") != "2.0":
        return 'its "jsonrpc" member is not "2.0"'
    if "id" in payload and not _is_id(payload["id"]):
        return "its id is neither a number nor a string"
    if "method" in payload:
        if not isinstance(payload["method"], str):
            return "its method is not a string"
    elif "result" not in payload and "error" not in payload:
        return "it has neither a method nor a result"
    elif "id" not in payload:
        return "a response without an id"
    return None


def _describe(exc: Exception) -> str:
    try:
        lines = cattrs.transform_error(exc, path="$")
    except Exception:  # noqa: BLE001 - not a cattrs validation error
        lines = [f"{type(exc).__name__}: {exc}"]
    text = "; ".join(lines[:3]) + ("; ..." if len(lines) > 3 else "")
    return text[:500]


# -- serving -------------------------------------------------------------------------------------------------

async def run(server: "LanguageServer", read: Callable[[], Awaitable[bytes]],
              parser: FrameParser | None = None) -> None:
    """Read until the input ends or the server stops, handing each message to the protocol."""
    protocol = server.protocol
    assert isinstance(protocol, KernelProtocol), "build the server with protocol_cls=KernelProtocol"
    parser = parser or FrameParser()
    stop = server._stop_event
    while stop is None or not stop.is_set():
        data = await read()
        if not data:
            break
        for event in parser.feed(data):
            _deliver(server, protocol, event)
            await asyncio.sleep(0)  # let the handlers of one message start before the next (as pygls reads them)
    for problem in parser.close():
        log.warning("%s", problem.text)
    log.info("the client closed the connection")


def _deliver(server: "LanguageServer", protocol: KernelProtocol, event: Message | Problem) -> None:
    try:
        if isinstance(event, Message):
            protocol.receive(event.payload)
        else:
            protocol.report(event)
    except BrokenPipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - one message must never end the server
        log.exception("could not handle a message")
        payload = event.payload if isinstance(event, Message) else None
        msg_id = payload.get("id") if isinstance(payload, dict) and "method" in payload else None
        try:
            if _is_id(msg_id):
                protocol.answer_error(msg_id, INTERNAL_ERROR, f"internal error: {exc}")
            else:
                server.window_log_message(types.LogMessageParams(
                    type=types.MessageType.Error, message=f"kernel-lsp: could not handle a message: {exc}"))
        except Exception:  # noqa: BLE001 - the client may be gone
            log.debug("could not report the failure", exc_info=True)


class _StdinChunks:
    """Reads stdin in a daemon thread: a blocked read must not keep the process alive after `exit`, as a thread
    of an executor would (they are joined at interpreter exit)."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop, pending: int = 8):
        self._fd, self._loop = fd, loop
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._room = threading.Semaphore(pending)  # a slow server holds the client back instead of buffering
        threading.Thread(target=self._pump, name="kernel-lsp-stdin", daemon=True).start()

    def _pump(self) -> None:
        while True:
            self._room.acquire()
            try:
                data = os.read(self._fd, CHUNK)
            except OSError as exc:
                log.error("cannot read the client's input: %s", exc)
                data = b""
            try:
                self._loop.call_soon_threadsafe(self._chunks.put_nowait, data)
            except RuntimeError:  # the loop has closed
                return
            if not data:
                return

    async def read(self) -> bytes:
        data = await self._chunks.get()
        self._room.release()
        return data


def start_io(server: "LanguageServer") -> int:
    """Serve one client over stdin/stdout; the exit code (LSP: 0 after `shutdown`, 1 without)."""
    server._stop_event = threading.Event()
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))

    async def main() -> None:
        chunks = _StdinChunks(sys.stdin.fileno(), asyncio.get_running_loop())
        await run(server, chunks.read)

    try:
        code = _run_loop(main)
    except BrokenPipeError:
        log.error("the connection to the client is lost; shutting down")
        code = 1
    server.shutdown()
    return _leave(code)


# -- TCP ------------------------------------------------------------------------------------------------------
#
# A TCP port on this machine can be reached by every local program, and by every web page the user opens: a
# browser's no-preflight POST to 127.0.0.1:PORT arrives as an HTTP request line, headers and a body of the page's
# choosing. So a connection is served only once its first bytes are an LSP frame holding `initialize` with the
# session's token (docs/editors.md, "Connecting over TCP"); anything else closes that connection and nothing else.
# One client is served; its session is the server's, and the server ends when that client leaves.

TOKEN_ENV = "KERNEL_LSP_TOKEN"
TOKEN_OPTION = "token"  # initializationOptions.token
MIN_TOKEN_CHARS = 16
AUTH_TIMEOUT_S = 10.0  # how long a new connection may take to send its initialize
MAX_WAITING = 8  # connections not yet authenticated at once; more are closed at once
FIRST_FRAME_LIMIT = 1024 * 1024  # an initialize is a few KiB; a larger first frame is not an editor's
_LSP_HEADERS = (b"content-length:", b"content-type:")  # what the first bytes of an LSP client are


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_matches(given: Any, token: str) -> bool:
    import hmac

    return isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())


def _frame(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class _Refused(Exception):
    """Why a connection is closed before it is served; `answer` is written to it first where it is an LSP client."""

    def __init__(self, why: str, answer: bytes = b""):
        super().__init__(why)
        self.answer = answer


async def _authenticate(reader: asyncio.StreamReader, token: str) -> tuple[FrameParser, dict, list[Message | Problem]]:
    """Read the connection's first frame: an `initialize` request with the session's token, or `_Refused`.
    Returns the parser (holding what arrived after it), the initialize message without its token, and the
    events that came with it."""
    parser = FrameParser(limit=FIRST_FRAME_LIMIT)
    head = b""  # the connection's first bytes
    loop = asyncio.get_running_loop()
    deadline = loop.time() + AUTH_TIMEOUT_S
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise _Refused("sent no initialize within %g s" % AUTH_TIMEOUT_S)
        try:
            data = await asyncio.wait_for(reader.read(CHUNK), left)
        except asyncio.TimeoutError:
            raise _Refused("sent no initialize within %g s" % AUTH_TIMEOUT_S) from None
        if not data:
            raise _Refused("closed before initialize")
        head += data[:len(_LSP_HEADERS[0]) - len(head)] if len(head) < len(_LSP_HEADERS[0]) else b""
        if not any(h.startswith(head.lower()) or head.lower().startswith(h) for h in _LSP_HEADERS):
            # Not a header of LSP's own from the first byte: an HTTP request line, a TLS hello, a scanner.
            raise _Refused(f"did not speak LSP (it began with {_preview(head, 20)})")
        events = parser.feed(data)
        if not events:
            continue
        first, rest = events[0], events[1:]
        if isinstance(first, Problem):  # not LSP from its first byte (an HTTP request, a port scan, garbage)
            raise _Refused(f"did not speak LSP ({first.text.split(';')[0]})")
        payload = first.payload
        if not (isinstance(payload, dict) and payload.get("method") == types.INITIALIZE and _is_id(payload.get("id"))):
            raise _Refused("sent something other than initialize first")
        params = payload.get("params")
        options = params.get("initializationOptions") if isinstance(params, dict) else None
        given = options.pop(TOKEN_OPTION, None) if isinstance(options, dict) else None
        if not token_matches(given, token):
            why = "sent no session token" if given is None else "sent a wrong session token"
            answer = _frame({"jsonrpc": "2.0", "id": payload["id"], "error": {
                "code": INVALID_REQUEST,
                "message": f"kernel-lsp: this connection {why}: pass the token that `kernel-lsp serve --tcp` wrote "
                           "as initializationOptions.token (docs/editors.md, \"Connecting over TCP\")"}})
            raise _Refused(why, answer)
        parser.limit = MAX_MESSAGE_BYTES
        return parser, payload, rest


@dataclass
class _Connections:
    client: str | None = None  # the peer being served
    waiting: int = 0  # connections not yet authenticated


def start_tcp(server: "LanguageServer", host: str, port: int, token: str, on_listen: Callable[[int], None] | None = None,
              ) -> int:
    """Serve one authenticated client on a TCP address (see above); the exit code."""
    server._stop_event = stop = threading.Event()
    state = _Connections()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = str(writer.get_extra_info("peername"))
        if state.client is not None or state.waiting >= MAX_WAITING:
            log.warning("closed a connection from %s: %s", peer,
                        "a client is already connected" if state.client else "too many connections waiting")
            writer.close()
            return
        state.waiting += 1
        try:
            parser, initialize, rest = await _authenticate(reader, token)
        except _Refused as refused:
            log.warning("closed a connection from %s: it %s", peer, refused)
            try:
                if refused.answer:
                    writer.write(refused.answer)
                    await asyncio.wait_for(writer.drain(), 2)
            except (OSError, asyncio.TimeoutError):
                pass
            writer.close()
            return
        except OSError as exc:
            log.warning("closed a connection from %s: %s", peer, exc)
            writer.close()
            return
        finally:
            state.waiting -= 1
        if state.client is not None:  # another one got in while this one was read
            writer.write(_frame({"jsonrpc": "2.0", "id": initialize["id"], "error": {
                "code": INVALID_REQUEST, "message": "kernel-lsp: another client is connected to this server"}}))
            writer.close()
            return
        state.client = peer
        log.info("serving %s", peer)
        protocol = server.protocol
        assert isinstance(protocol, KernelProtocol), "build the server with protocol_cls=KernelProtocol"
        protocol.set_writer(writer)  # type: ignore[arg-type]
        for event in [Message(initialize), *rest]:
            _deliver(server, protocol, event)
            await asyncio.sleep(0)
        await run(server, lambda: reader.read(CHUNK), parser)
        # The session was this client's: the server ends with it (a stray connection never gets this far).
        server.shutdown()
        if server._server is not None:
            server._server.close()

    async def listen() -> None:
        server._server = await asyncio.start_server(connection, host, port)
        addresses = [s.getsockname() for s in server._server.sockets]
        log.info("serving on %s", ", ".join(str(a) for a in addresses))
        if on_listen is not None:
            on_listen(addresses[0][1])
        async with server._server:
            try:
                await server._server.serve_forever()
            except asyncio.CancelledError:
                pass

    try:
        code = _run_loop(listen)
    except asyncio.CancelledError:
        code = 0
    stop.set()
    return _leave(code)


# After `exit` (or the end of the input), how long work still running may take to end before the process ends
# anyway. A thread inside a library call cannot be interrupted, and the interpreter would wait for it at exit: an
# editor would be left with a server that does not go away. Child processes end with their parent (engine/pool.py,
# engine/ray_executor.py, engine/verify/runner.py), and the disk cache is written by rename, so nothing is lost.
EXIT_GRACE_S = 10.0


def _run_loop(main: Callable[[], Awaitable[None]]) -> int:
    """Run `main` on a new event loop until it returns or `exit` arrives; then cancel the tasks still running and
    give them EXIT_GRACE_S. Unlike asyncio.run, never waits without limit for the loop's worker threads."""
    loop = asyncio.new_event_loop()
    threads = ThreadPoolExecutor(thread_name_prefix="kernel-lsp-io")
    loop.set_default_executor(threads)
    code = 0
    try:
        loop.run_until_complete(main())
    except SystemExit as exc:  # pygls' `exit` handler
        code = exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        code = 130
    finally:
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.wait(tasks, timeout=EXIT_GRACE_S))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except (Exception, SystemExit, KeyboardInterrupt):  # noqa: BLE001 - ending anyway
            log.debug("while stopping the event loop", exc_info=True)
        threads.shutdown(wait=False, cancel_futures=True)
        loop.close()
    return code


def _leave(code: int, grace_s: float = EXIT_GRACE_S) -> int:
    """`code`, with a watchdog: the interpreter's exit waits for the threads still running (those of thread pools
    included), and if they have not ended within `grace_s`, the watchdog ends the process."""

    def end_now() -> None:
        try:
            names = [t.name for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
            log.warning("exiting: %d background thread(s) still running after %g s are not waited for (%s)",
                        len(names), grace_s, ", ".join(names))
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
        finally:
            os._exit(code)

    watchdog = threading.Timer(grace_s, end_now)
    watchdog.daemon = True  # it must not be one of the threads the exit waits for
    watchdog.start()
    return code
