"""Property tests: random and mutated JSON-RPC against one long-lived `kernel-lsp serve` (restarted only when it dies,
which fails the example that killed it). After every example the server answers a request, publishes the right
diagnostics for a new text, and has printed no traceback without a message the user can see."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .kernels import GOOD, TYPO
from .test_protocol_robustness import TRACEBACK, Session, frame

FUZZ = settings(max_examples=30, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Live:
    """The module's server session; a new one replaces a dead one."""

    def __init__(self, root: Path):
        self.root = root
        self.current: Session | None = None

    def session(self) -> Session:
        s = self.current
        if s is None or s.server.closed or s.server.proc.poll() is not None:
            if s is not None:
                s.server.close()
            self.current = s = Session(self.root)
        return s

    def settle(self, s: Session) -> None:
        s.check_healthy()
        tracebacks = s.server.stderr_text().count(TRACEBACK)
        assert tracebacks <= visible_errors(s), s.server.stderr_text()[-4000:]


def visible_errors(s: Session) -> int:
    """Errors the user sees: internal-error answers, and error messages shown or logged in the editor."""
    answered = sum(1 for r in list(s.server.responses.values()) if (r.get("error") or {}).get("code") == -32603)
    shown = sum(1 for n in list(s.server.notifications)
                if n.get("method") in ("window/showMessage", "window/logMessage")
                and (n.get("params") or {}).get("type") == 1)
    return answered + shown


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    holder = Live(tmp_path_factory.mktemp("fuzz"))
    yield holder
    if holder.current is not None:
        holder.current.server.close()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

POSITION = {"line": 7, "character": 10}
RANGE = {"start": {"line": 0, "character": 0}, "end": {"line": 9, "character": 0}}


def template(method: str, uri: str) -> dict:
    """Valid params of a method, fresh each time (the tests mutate them)."""
    doc = {"uri": uri}
    return json.loads(json.dumps({
        "textDocument/hover": {"textDocument": doc, "position": POSITION},
        "textDocument/completion": {"textDocument": doc, "position": POSITION},
        "textDocument/definition": {"textDocument": doc, "position": POSITION},
        "textDocument/signatureHelp": {"textDocument": doc, "position": POSITION},
        "textDocument/references": {"textDocument": doc, "position": POSITION, "context": {"includeDeclaration": True}},
        "textDocument/prepareRename": {"textDocument": doc, "position": POSITION},
        "textDocument/rename": {"textDocument": doc, "position": POSITION, "newName": "renamed"},
        "textDocument/semanticTokens/full": {"textDocument": doc},
        "textDocument/documentSymbol": {"textDocument": doc},
        "textDocument/codeAction": {"textDocument": doc, "range": RANGE, "context": {"diagnostics": []}},
        "textDocument/inlayHint": {"textDocument": doc, "range": RANGE},
        "textDocument/codeLens": {"textDocument": doc},
        "textDocument/diagnostic": {"textDocument": doc},
        "workspace/symbol": {"query": "kernel"},
        # Only commands that run nothing: the real table also holds trust, checks and timing.
        "workspace/executeCommand": {"command": "kernel-lsp.status", "arguments": []},
    }[method]))


METHODS = ["textDocument/hover", "textDocument/completion", "textDocument/definition", "textDocument/documentSymbol",
           "textDocument/signatureHelp", "textDocument/references", "textDocument/prepareRename", "textDocument/rename",
           "textDocument/semanticTokens/full", "textDocument/codeAction", "textDocument/inlayHint", "textDocument/codeLens", "textDocument/diagnostic",
           "workspace/symbol", "workspace/executeCommand"]
KNOWN_CODES = {-32700, -32600, -32601, -32602, -32603, -32002, -32800, -32801}


def _slots(value, slots=None):
    """Every (container, key) of a JSON value, to replace or delete one."""
    slots = [] if slots is None else slots
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, child in items:
        slots.append((value, key))
        _slots(child, slots)
    return slots


@st.composite
def wrong_params(draw):
    method = draw(st.sampled_from(METHODS))
    params = template(method, "file:///placeholder.py")
    how = draw(st.sampled_from(["replace", "delete", "whole"]))
    slots = _slots(params)
    if how == "whole" or not slots:
        params = draw(json_values)
    else:
        container, key = draw(st.sampled_from(slots))
        if how == "delete" and isinstance(container, dict):
            del container[key]
        else:
            container[key] = draw(json_values)
    return method, params


def uris(root_uri: str):
    names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12)
    return st.one_of(
        st.just("__open__"),
        names.map(lambda n: f"{root_uri}/missing/{quote(n)}.py"),
        st.sampled_from(["", "untitled:Untitled-1", "not a uri", "file://", "file:///", "http://example.com/x.py"]),
    )


@FUZZ
@given(case=wrong_params())
def test_wrong_parameters_for_real_methods_are_answered(live: Live, case):
    s = live.session()
    method, params = case
    params = json.loads(json.dumps(params).replace("file:///placeholder.py", s.uri))
    reply = s.server.request(method, params)
    assert "result" in reply or reply["error"]["code"] in KNOWN_CODES, reply
    live.settle(s)


@st.composite
def mutated_frames(draw):
    """A request's frame with its framing damaged, or random bytes."""
    msg_id = draw(st.integers(10**6, 10**7))
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": draw(st.sampled_from(METHODS)),
                       "params": template("textDocument/documentSymbol", "file:///placeholder.py")}).encode()
    kind = draw(st.sampled_from(["length", "no header", "bad number", "huge", "cut", "flip", "prefix", "bytes",
                                 "lowercase", "extra header", "no blank line"]))
    if kind == "length":
        return frame(body, draw(st.integers(-30, 200).filter(lambda d: d != 0)))
    if kind == "no header":
        return body
    if kind == "bad number":
        number = draw(st.sampled_from([b"x", b"-3", b"1.5", b"", b"0x10", b"\xff"]))
        return b"Content-Length: " + number + b"\r\n\r\n" + body
    if kind == "huge":
        return b"Content-Length: " + str(draw(st.integers(64 * 2**20 + 1, 10**30))).encode() + b"\r\n\r\n" + body
    if kind == "cut":
        whole = frame(body)
        return whole[:draw(st.integers(0, len(whole) - 1))]
    if kind == "flip":
        whole = bytearray(frame(body))
        at = draw(st.integers(0, len(whole) - 1))
        whole[at] = draw(st.integers(0, 255))
        return bytes(whole)
    if kind == "prefix":
        return draw(st.binary(min_size=1, max_size=64)) + frame(body)
    if kind == "lowercase":
        return b"content-length:%d\r\n\r\n" % len(body) + body
    if kind == "extra header":
        return (b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" % len(body)
                + body)
    if kind == "no blank line":
        return b"Content-Length: %d\r\n" % len(body) + body
    return draw(st.binary(max_size=300))


@FUZZ
@given(frames=st.lists(mutated_frames(), min_size=1, max_size=3))
def test_bad_framing_never_loses_the_stream(live: Live, frames):
    s = live.session()
    s.server.write(b"".join(f.replace(b"file:///placeholder.py", s.uri.encode()) for f in frames))
    live.settle(s)


@FUZZ
@given(method=st.one_of(st.text(max_size=30), st.sampled_from(["$/unknown", "textDocument/unknown", "workspace/x"])),
       params=json_values, is_request=st.booleans())
def test_unknown_methods_are_answered_or_ignored(live: Live, method, params, is_request):
    s = live.session()
    if method in METHODS or method in ("initialize", "shutdown", "exit"):
        method = "x/" + method
    if is_request:
        reply = s.server.request(method, params)
        assert "result" in reply or reply["error"]["code"] in KNOWN_CODES, reply
    else:
        s.server.notify(method, params)
    live.settle(s)


@FUZZ
@given(method=st.sampled_from(METHODS), data=st.data())
def test_unknown_documents_are_answered(live: Live, method, data):
    s = live.session()
    uri = data.draw(uris(s.server.root.as_uri()))
    reply = s.server.request(method, template(method, s.uri if uri == "__open__" else uri))
    assert "result" in reply or reply["error"]["code"] in KNOWN_CODES, reply
    live.settle(s)


edits = st.fixed_dictionaries({
    "range": st.fixed_dictionaries({
        "start": st.fixed_dictionaries({"line": st.integers(-3, 10**6), "character": st.integers(-3, 10**6)}),
        "end": st.fixed_dictionaries({"line": st.integers(-3, 10**6), "character": st.integers(-3, 10**6)}),
    }),
    "text": st.text(max_size=20),
})


@FUZZ
@given(changes=st.lists(edits, min_size=1, max_size=4), unknown_document=st.booleans())
def test_out_of_range_edits_do_not_break_the_document(live: Live, changes, unknown_document):
    s = live.session()
    uri = s.server.root.as_uri() + "/never_opened.py" if unknown_document else s.uri
    s.version += 1
    s.server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": s.version},
                                               "contentChanges": changes})
    live.settle(s)  # a full text replaces whatever the edits made


def test_many_rapid_changes_then_a_request(live: Live):
    s = live.session()
    lines = (TYPO if s.typo else GOOD).count("\n")
    burst = []
    for i in range(500):  # append a comment line, then take it out again: the text ends as it began
        s.version += 1
        change = ({"range": {"start": {"line": lines, "character": 0}, "end": {"line": lines, "character": 0}},
                   "text": f"# {i}\n"} if i % 2 == 0 else
                  {"range": {"start": {"line": lines, "character": 0}, "end": {"line": lines + 1, "character": 0}},
                   "text": ""})
        burst.append(frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": s.uri, "version": s.version}, "contentChanges": [change]}}))
    s.server.write(b"".join(burst))
    reply = s.server.request("textDocument/documentSymbol", {"textDocument": {"uri": s.uri}})
    assert any(sym["name"] == "add_kernel" for sym in reply["result"]), reply
    live.settle(s)


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))


@st.composite
def edited_kernels(draw):
    """A real kernel file with a few random cuts, copies and insertions: what half-typed code looks like."""
    text = draw(st.sampled_from(EXAMPLES)).read_text()
    for _ in range(draw(st.integers(1, 4))):
        a = draw(st.integers(0, len(text)))
        b = draw(st.integers(a, min(len(text), a + 200)))
        how = draw(st.sampled_from(["cut", "copy", "insert"]))
        if how == "cut":
            text = text[:a] + text[b:]
        elif how == "copy":
            text = text[:b] + text[a:b] + text[b:]
        else:
            text = text[:a] + draw(st.text(st.sampled_from(list("()[]:,.=+*\n \t#'\"\\xytlBLOCK_0123")), max_size=30)) \
                + text[a:]
    return text


@FUZZ
@given(text=edited_kernels())
def test_random_edits_of_real_kernels(live: Live, text):
    s = live.session()
    uri = s.server.root.as_uri() + "/edited.py"
    if not getattr(s, "edited_open", False):
        s.server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                  "text": ""}})
        s.edited_open, s.edited_version = True, 1
    s.edited_version += 1
    s.server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": s.edited_version},
                                               "contentChanges": [{"text": text}]})
    reply = s.server.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert "result" in reply or reply.get("error", {}).get("code") in KNOWN_CODES, reply
    live.settle(s)


@FUZZ
@given(steps=st.lists(st.sampled_from(["write", "delete", "binary", "directory", "huge", "open", "close"]),
                      min_size=1, max_size=6))
def test_files_deleted_or_rewritten_during_analysis(live: Live, steps):
    """A workspace file changes on disk under the server while it analyses it: written, deleted, replaced by binary
    data, by a folder or by a large file, opened and closed in between, with the watcher's notices arriving late."""
    import shutil

    s = live.session()
    path = s.server.root / "churn.py"
    uri = path.as_uri()
    for step in steps:
        if path.is_dir():
            shutil.rmtree(path)
        if step == "write":
            path.write_text(GOOD)
        elif step == "delete":
            path.unlink(missing_ok=True)
        elif step == "binary":
            path.write_bytes(b"\x00\xff\xfe" * 1000)
        elif step == "directory":
            path.unlink(missing_ok=True)
            path.mkdir()
        elif step == "huge":
            path.write_text(GOOD * 4000)
        elif step == "open":
            s.server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                                      "version": 1, "text": TYPO}})
        else:
            s.server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        kind = 3 if not path.exists() else 2
        s.server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": uri, "type": kind}]})
    s.server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    if path.is_dir():
        shutil.rmtree(path)
    path.unlink(missing_ok=True)
    s.server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": uri, "type": 3}]})
    live.settle(s)


@settings(max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(frames=st.lists(mutated_frames(), min_size=1, max_size=3), chunk=st.integers(1, 70000))
def test_the_frame_after_damaged_ones_is_read_as_soon_as_it_arrives(frames, chunk):
    """The reader alone, fed the damage in pieces of any size, then one valid message and nothing after it (as an
    editor that waits for an answer): that message must come out at once, not when a later one arrives."""
    from kernel_lsp.transport import FrameParser, Message

    parser, out = FrameParser(), []
    damage = b"".join(frames)
    for i in range(0, len(damage), chunk):
        out += parser.feed(damage[i:i + chunk])
    out += parser.feed(frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"marker": 1}}))
    assert [e for e in out if isinstance(e, Message) and isinstance(e.payload, dict)
            and e.payload.get("params") == {"marker": 1}], (frames, out[-3:])
