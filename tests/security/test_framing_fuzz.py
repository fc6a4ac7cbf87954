"""The framing fuzz: one bad frame (a header with no body, a length shorter or longer than its message, garbage,
an HTTP request, a body without a header, a body that is not JSON) among good requests, the stream cut into
arbitrary reads. Every good request, before the bad frame and after it, comes out whole and in order."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_lsp.transport import FrameParser, Message

FUZZ = settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def frame(body: bytes, length: int | None = None) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body


def request(i: int, text: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "textDocument/hover",
                       "params": {"text": text}}).encode()


# Text a good request carries: header-looking words and line breaks included (escaped inside the JSON string).
texts = st.text(st.sampled_from("ab{}[]:\" \n\r\tContent-Length:0123456789é"), max_size=40)
# Garbage that does not itself hold a header (which would make it a frame, not garbage).
garbage = st.binary(min_size=1, max_size=120).filter(lambda b: b"content-length" not in b.lower())
json_body = st.builds(lambda i, t: request(i, t), st.integers(1000, 2000), texts)


@st.composite
def bad_frames(draw) -> bytes:
    kind = draw(st.sampled_from(["no body", "short", "long", "garbage", "http", "bare body", "not json",
                                 "bad length", "huge"]))
    if kind == "no body":
        return frame(b"", draw(st.integers(1, 400)))
    if kind == "short":
        body = draw(json_body)
        return frame(body, draw(st.integers(1, len(body) - 1)))
    if kind == "long":
        body = draw(json_body)
        return frame(body, len(body) + draw(st.integers(1, 400)))
    if kind == "garbage":
        return draw(garbage)
    if kind == "http":
        body = draw(json_body)
        return (b"POST / HTTP/1.1\r\nHost: 127.0.0.1:2087\r\nContent-Type: text/plain;charset=UTF-8\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body)
    if kind == "bare body":
        return draw(json_body) + b"\r\n"
    if kind == "bad length":
        return b"Content-Length: " + draw(st.sampled_from([b"-1", b"abc", b"1e3", b""])) + b"\r\n\r\n" + draw(json_body)
    if kind == "huge":
        return frame(b"", 10**30)
    return frame(draw(garbage))


@st.composite
def streams(draw) -> tuple[bytes, list[int], list[int]]:
    before = draw(st.lists(texts, max_size=3))
    after = draw(st.lists(texts, min_size=1, max_size=3))
    ids_before = list(range(1, len(before) + 1))
    ids_after = list(range(100, 100 + len(after)))
    data = b"".join(frame(request(i, t)) for i, t in zip(ids_before, before))
    data += draw(bad_frames())
    data += b"".join(frame(request(i, t)) for i, t in zip(ids_after, after))
    return data, ids_before, ids_after


@FUZZ
@given(streams(), st.lists(st.integers(1, 97), min_size=1, max_size=8))
def test_no_request_after_a_bad_frame_is_lost(stream, cuts):
    data, ids_before, ids_after = stream
    parser = FrameParser()
    events = []
    at, i = 0, 0
    while at < len(data):
        step = cuts[i % len(cuts)]
        events += parser.feed(data[at:at + step])
        at += step
        i += 1
    ids = [e.payload.get("id") for e in events if isinstance(e, Message) and isinstance(e.payload, dict)]
    good = [x for x in ids if x in ids_before or x in ids_after]
    assert good == ids_before + ids_after, (data, ids)


def test_a_header_with_no_body_loses_nothing():
    """`Content-Length: 50` and no body, then the next request: answered, in one read or byte by byte."""
    data = frame(b"", 50) + frame(request(1, "x")) + frame(request(2, "y"))
    for step in (len(data), 1, 7):
        parser = FrameParser()
        events = [e for k in range(0, len(data), step) for e in parser.feed(data[k:k + step])]
        assert [e.payload["id"] for e in events if isinstance(e, Message)] == [1, 2]
