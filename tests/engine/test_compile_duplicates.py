"""A compile error on a line that a rule already reports as an error is not shown twice."""

from __future__ import annotations

from analyzers.model import Problem, Severity, Span
from kernel_lsp.engine.index import WorkspaceIndex

SOURCE = '''import triton
import triton.language as tl


@triton.jit
def show(x_ptr):
    value = tl.load(x_ptr)
    tl.device_print("value", str(value))
'''


def _kc001(line: int) -> Problem:
    return Problem("KC001", "show does not compile on sm_90: NameError: str is not defined", Severity.ERROR,
                   Span.point(line, 4), None, (), "show")


def test_the_rule_speaks_and_the_compilers_echo_is_dropped() -> None:
    index = WorkspaceIndex()
    index.set_text("/w/k.py", SOURCE)
    static = [p for p in index.problems("/w/k.py") if p.severity == Severity.ERROR]
    assert [(p.code, p.span.start_line) for p in static] == [("TR006", 7)]
    shown = index.problems("/w/k.py", [_kc001(7), _kc001(6)])
    assert [(p.code, p.span.start_line) for p in shown if p.severity == Severity.ERROR] == [("KC001", 6), ("TR006", 7)]
