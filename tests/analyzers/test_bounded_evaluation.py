"""The static evaluators are bounded by construction (issue 30): whatever constants a file writes, analysing it
costs at most its budget of steps and a bounded amount of memory, and a value it shows is the value Python
computes. Counted (steps, bytes), never timed. Deep syntax (an `elif` chain, a long sum) never ends in
RecursionError (KL900), and a superseded analysis stops at its next checkpoint."""

from __future__ import annotations

import ast
import threading
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analyzers.budget as budget
from analyzers import analyze_source, check_source
from analyzers.budget import MAX_INT_BITS, MAX_ITEMS, AnalysisCancelled, Budget, analysis_budget
from analyzers.source import ParseCache
from analyzers.values import UNKNOWN, evaluate

FIXTURES = Path(__file__).parent / "fixtures" / "correct"
MEMORY_LIMIT = 50 * 2**20

LAUNCH = '''import triton
import triton.language as tl

{module}


@triton.jit
def fill(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    big: tl.constexpr = {expr}
    tl.store(x_ptr + offs, 1.0, mask=offs < n)


def launch(x):
    fill[(1,)](x, {expr}, BLOCK=128)
'''

# Expressions of the kinds that blow up: nested powers, shifts, repetition of strings and tuples, deep nesting.
_leaves = st.one_of(
    st.integers(-3, 70).map(str),
    st.sampled_from(["10**64", "1 << 34", "(1 << 34)", "'a'", "'ab'", "(1,)", "(1, 2)", "2.5", "-1", "N", "M"]),
)


def _combine(children):
    binary = st.tuples(children, st.sampled_from(["**", "<<", ">>", "*", "+", "-", "//", "%", "&", "|"]), children)
    return st.one_of(
        binary.map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["len", "int", "max", "min", "abs", "triton.cdiv", "triton.next_power_of_2",
                                   "math.prod", "math.pow"]),
                  st.lists(children, min_size=1, max_size=2)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        children.map(lambda c: f"({c},) * {c}"),
        children.map(lambda c: f"-{c}"),
    )


expressions = st.recursive(_leaves, _combine, max_leaves=12)
modules = st.sampled_from([
    "N = 64\nM = 3",
    "N = 10**64\nM = N ** 64",
    "N = 'ab' * 2000\nM = N * N",
    "\n".join(["N = 3"] + [f"N{i + 1} = N{i} * N{i} + N{i}".replace("N0", "N") for i in range(40)] + ["M = N40"]),
])


def _size_ok(value: object) -> bool:
    return not budget.too_big(value)


class Recorder:
    """The budgets the analyses made, to read how many steps each one used."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[Budget] = []
        make = Budget.for_text.__func__  # type: ignore[attr-defined]

        def recording(cls, text: str, cancel=None) -> Budget:
            made = make(cls, text, cancel)
            self.made.append(made)
            return made

        monkeypatch.setattr(Budget, "for_text", classmethod(recording))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expr=expressions, module=modules)
def test_any_constant_is_analysed_within_its_budget(expr: str, module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(monkeypatch)
    text = LAUNCH.format(module=module, expr=expr)
    tracemalloc.start()
    try:
        result = check_source(text, "/t/runaway.py")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_LIMIT
    assert not [p for p in result.problems if p.code == "KL900"], result.problems
    assert [k.name for k in result.kernels] == ["fill"]
    (made,) = recorder.made
    # Each step costs at most one bounded operation; the budget may be overrun by one value's size at most.
    assert made.used <= made.steps + MAX_ITEMS
    for value in result.launch_values.values():
        assert _size_ok(value)


@settings(max_examples=300, deadline=None)
@given(expr=expressions)
def test_a_value_shown_is_the_value_python_computes(expr: str) -> None:
    """Never a wrong value: where the evaluator answers, Python (given the same names) agrees; every
    intermediate value was within the limits, so Python's own evaluation is cheap too."""
    import math

    import triton

    names = {"N": 64, "M": 3}
    node = ast.parse(expr, mode="eval").body

    def lookup(n: ast.AST) -> object:
        return names[n.id] if isinstance(n, ast.Name) and n.id in names else UNKNOWN

    with analysis_budget(Budget(10_000)) as b:
        value = evaluate(node, lookup)
    assert b.used <= 10_000 + MAX_ITEMS
    if value is UNKNOWN:
        return
    assert _size_ok(value)
    expected = eval(compile(ast.Expression(node), "<expr>", "eval"),  # noqa: S307 - bounded, see above
                    {"__builtins__": {"len": len, "int": int, "max": max, "min": min, "abs": abs},
                     "math": math, "triton": triton, **names})
    assert value == expected or (value != value and expected != expected), (expr, value, expected)


@pytest.mark.parametrize("expr", [
    "((((10**64)**64)**64)**64)**64",
    "len('a' * (1 << 34))",
    "1 << (1 << 40)",
    "max((1,) * (1 << 40))",
    "int('%099999999d' % 1)",
    "math.prod((10**64,) * 4000)",
])
def test_runaway_constants_are_unknown_not_built(expr: str) -> None:
    tracemalloc.start()
    try:
        value = evaluate(ast.parse(expr, mode="eval").body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value is UNKNOWN
    assert peak < 2**20


def test_big_but_reasonable_constants_still_fold() -> None:
    assert evaluate(ast.parse("2 ** 64 - 1", mode="eval").body) == 2**64 - 1
    assert evaluate(ast.parse("1 << 40", mode="eval").body) == 1 << 40
    assert evaluate(ast.parse("(16, 32) * 4", mode="eval").body) == (16, 32) * 4
    assert evaluate(ast.parse(f"1 << {MAX_INT_BITS - 1}", mode="eval").body) == 1 << (MAX_INT_BITS - 1)


@pytest.mark.parametrize("names", [25, 40])
def test_names_that_double_each_other_stop_at_the_budget(names: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`x2 = x1 + x1` n times over is 2**n evaluations unbounded; the file's budget ends it (or, past
    MAX_NESTING names, the nesting limit does, before any doubling)."""
    recorder = Recorder(monkeypatch)
    module = "\n".join(["X0 = 1"] + [f"X{i + 1} = X{i} + X{i}" for i in range(names)])
    result = check_source(LAUNCH.format(module=module, expr=f"X{names}"), "/t/doubling.py")
    assert [k.name for k in result.kernels] == ["fill"]
    (made,) = recorder.made
    assert made.used <= made.steps + MAX_ITEMS
    assert made.exhausted == (2 * names < budget.MAX_NESTING)


@pytest.mark.parametrize("name", ["runaway_power_launch.py", "elif_chain_1500.py"])
def test_hostile_fixtures_are_analysed(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(monkeypatch)
    result = check_source((FIXTURES / name).read_text(), name)
    assert [k.name for k in result.kernels] == ["fill"]
    assert [s.target for s in result.launch_sites] == ["fill"]
    assert not [p for p in result.problems if p.code.startswith("KL")], result.problems
    assert all(b.used <= b.steps for b in recorder.made)


DEEP = {
    "module-level elif chain": ["MODE = 3", "if MODE == 0:", "    R = 0"]
    + [line for i in range(1, 1500) for line in (f"elif MODE == {i}:", f"    R = {i}")],
    "elif chain in a try": ["try:", "    if R == 0:", "        pass"]
    + [line for i in range(1, 1500) for line in (f"    elif R == {i}:", "        pass")]
    + ["except ImportError:", "    pass"],
}


@pytest.mark.parametrize("case", list(DEEP))
def test_deep_statements_keep_the_kernels(case: str) -> None:
    text = LAUNCH.format(module="R = 1\n" + "\n".join(DEEP[case]), expr="1")
    result = check_source(text, "/t/deep.py")
    assert [k.name for k in result.kernels] == ["fill"]
    assert not [p for p in result.problems if p.code.startswith("KL")], result.problems


def test_an_expression_too_deep_for_python_is_a_syntax_error_of_its_statement() -> None:
    """Python itself cannot compile a 5,000-term sum (RecursionError): the statement is reported, the rest of the
    file is analysed."""
    text = LAUNCH.format(module="TOTAL = " + " + ".join(["1"] * 5000), expr="1")
    result = check_source(text, "/t/long_sum.py")
    assert [k.name for k in result.kernels] == ["fill"]
    (problem,) = [p for p in result.problems if p.code.startswith("KL")]
    assert problem.code == "KL001" and "nests too deeply" in problem.message
    assert problem.span.start_line == 3


def test_a_cancelled_analysis_stops_at_its_next_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """The event is set while the analysis runs (here: at its third checkpoint); it raises AnalysisCancelled
    before reaching the launch values, and the document's next analysis is complete and the same as a fresh one."""
    from bench.common import big_kernel_file

    text, _ = big_kernel_file(30, 0)
    cancel = threading.Event()
    seen = {"checkpoints": 0, "launch_values": 0}
    checkpoint = Budget.checkpoint

    def counting(self: Budget) -> None:
        seen["checkpoints"] += 1
        if seen["checkpoints"] == 3:
            cancel.set()  # what the scheduler does when a newer version arrives
        checkpoint(self)

    import analyzers.analyze as analyze

    launch_values = analyze.launch_values

    def counting_values(*args, **kwargs):
        seen["launch_values"] += 1
        return launch_values(*args, **kwargs)

    monkeypatch.setattr(Budget, "checkpoint", counting)
    monkeypatch.setattr(analyze, "launch_values", counting_values)
    cache = ParseCache()
    with pytest.raises(AnalysisCancelled):
        analyze_source(text, "big.py", cache, cancel)
    assert seen == {"checkpoints": 3, "launch_values": 0}
    again = analyze_source(text, "big.py", cache, threading.Event())
    fresh = analyze_source(text, "big.py")
    assert sorted((p.code, p.span) for p in again.problems) == sorted((p.code, p.span) for p in fresh.problems)
    assert again.launch_values == fresh.launch_values
