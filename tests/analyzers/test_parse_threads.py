"""CPython 3.11 can fail with "SystemError: AST constructor recursion depth mismatch" when two threads parse at
once, or when a parse runs inside another on the same thread; the server parses from its analysis and
compile-planning threads, so every parse there is serialised, with the garbage collector paused."""

from __future__ import annotations

import ast
import gc
import re
import sys
import threading
import time
import traceback
from pathlib import Path

from analyzers import source
from analyzers.source import parse_python

ROOT = Path(__file__).resolve().parents[2]
# Modules that run only in a worker process of their own (one thread), where a parse cannot race; the server's
# one call into offline.py holds `parsing()`.
WORKER_ONLY = {"kernel_lsp/engine/compile/worker.py", "kernel_lsp/engine/compile/offline.py",
               "kernel_lsp/engine/verify/integrity.py"}


def test_parses_from_several_threads_run_one_at_a_time(monkeypatch):
    real = ast.parse
    state = {"active": 0, "peak": 0}
    lock = threading.Lock()

    def watched(text, *args, **kwargs):
        with lock:
            state["active"] += 1
            state["peak"] = max(state["peak"], state["active"])
        time.sleep(0.005)  # widen the window in which a second parse could start
        try:
            return real(text, *args, **kwargs)
        finally:
            with lock:
                state["active"] -= 1

    monkeypatch.setattr(source.ast, "parse", watched)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in range(10):
                assert isinstance(parse_python(f"x = {i}\n"), ast.Module)
                assert isinstance(parse_python("a + 1", mode="eval"), ast.Expression)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert state["peak"] == 1


class _FailsWhenCollected:
    """Garbage in a reference cycle whose finalizer fails: collected only by the cyclic collector."""

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        {}["missing"]["key"]


def test_a_finalizer_reporting_its_traceback_cannot_break_a_parse(monkeypatch):
    """A collection during a parse runs finalizers; where one fails, the unraisable hook formats its traceback
    (as pytest's and the server's logging do), and 3.11's traceback parses the failing line for its carets."""
    formatted: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: formatted.append(
        "".join(traceback.format_exception(u.exc_type, u.exc_value, u.exc_traceback))))
    text = (ROOT / "analyzers" / "rules" / "triton_kernel" / "facts.py").read_text()  # enough nodes to collect
    assert gc.isenabled()
    for _ in range(20):
        for _ in range(50):
            _FailsWhenCollected()
        assert isinstance(parse_python(text), ast.Module)
    gc.collect()
    assert formatted and "KeyError" in formatted[-1]  # the finalizers did run, after the parses
    assert gc.isenabled()


def test_the_server_side_code_parses_only_through_parse_python():
    bare = re.compile(r"\bast\.parse\(")
    found = []
    for path in sorted([*ROOT.glob("analyzers/**/*.py"), *ROOT.glob("kernel_lsp/**/*.py")]):
        rel = str(path.relative_to(ROOT))
        if rel == "analyzers/source.py" or rel in WORKER_ONLY:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if bare.search(line.split("#")[0]):
                found.append(f"{rel}:{number}")
    assert found == [], "use analyzers.source.parse_python (or hold analyzers.source.parsing())"
