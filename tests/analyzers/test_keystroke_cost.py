"""What one keystroke costs the analyzers, counted (never timed): an edit inside one kernel of a large file must
re-read that kernel only, not the module once per launch site (issue 29: 220,000 statements and 184 resolvers a
keystroke on the 30-kernel file)."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator

import pytest

import analyzers.source as source
import analyzers.values as values
from analyzers import analyze_source
from analyzers.source import ParseCache
from bench.common import big_kernel_file

MULTIPLE = 4  # statements visited per keystroke, at most, per statement of the edited top-level def


class Counts:
    def __init__(self) -> None:
        self.statements = 0
        self.resolvers = 0


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counts:
    """Counts every statement `source.statements` yields, in every analyzer module that uses it, and every
    Resolver made."""
    found = Counts()
    walk = source.statements

    def counting(body: list[ast.stmt]) -> Iterator[ast.AST]:
        for stmt in walk(body):
            found.statements += 1
            yield stmt

    for name, module in list(sys.modules.items()):
        if name.startswith("analyzers") and getattr(module, "statements", None) is walk:
            monkeypatch.setattr(module, "statements", counting)
    init = values.Resolver.__init__

    def counting_init(self, *args, **kwargs) -> None:
        found.resolvers += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(values.Resolver, "__init__", counting_init)
    return found


def _def(text: str, name: str) -> tuple[int, int]:
    """(0-based line of `def name(`, number of statements in it)."""
    node = next(s for s in ast.parse(text).body if isinstance(s, ast.FunctionDef) and s.name == name)
    return node.lineno - 1, len(list(source.statements([node])))


def _typing(lines: list[str], after: int, typed: str) -> Iterator[str]:
    """The file after each keystroke of typing `typed` on a new line after line `after` (half-typed states
    included)."""
    for n in range(len(typed) + 1):
        yield "\n".join(lines[:after + 1] + [typed[:n]] + lines[after + 1:])


def _keystrokes(text: str, first: int, typed: str, counts: Counts) -> list[tuple[int, int]]:
    lines = text.split("\n")
    anchor = next(i for i in range(first, len(lines)) if lines[i].startswith("    ") and "=" in lines[i])
    cache = ParseCache()
    analyze_source(text, "big.py", cache)
    out = []
    for edited in _typing(lines, anchor, typed):
        counts.statements = counts.resolvers = 0
        analyze_source(edited, "big.py", cache)
        out.append((counts.statements, counts.resolvers))
    return out


def test_typing_in_one_kernel_reads_that_kernel_only(counts: Counts) -> None:
    text, kernels = big_kernel_file(30, 2000)
    kernel = kernels[len(kernels) // 2]
    first, size = _def(text, kernel)
    module = len(list(source.statements(ast.parse(text).body)))
    assert module > 30 * size  # the bound below is far from a walk of the module
    per_key = _keystrokes(text, first, "    probe = tl.arange(0, 128)", counts)
    assert max(s for s, _ in per_key) <= MULTIPLE * (size + 1), per_key
    assert all(r == 0 for _, r in per_key), per_key  # the kernel holds no launch: no launch value is re-read


def test_typing_in_a_launcher_rereads_its_own_launches_only(counts: Counts) -> None:
    text, _ = big_kernel_file(30, 2000)
    tree = ast.parse(text)
    launches = {s.name: [c for c in ast.walk(s) if isinstance(c, ast.Call) and isinstance(c.func, ast.Subscript)]
                for s in tree.body if isinstance(s, ast.FunctionDef)}
    launchers = [name for name, calls in launches.items() if calls]
    assert len(launchers) >= 20
    launcher = launchers[len(launchers) // 2]
    first, size = _def(text, launcher)
    args = sum(len(c.args) + len(c.keywords) for c in launches[launcher])
    per_key = _keystrokes(text, first, "    probe = 1", counts)
    assert max(s for s, _ in per_key) <= MULTIPLE * (size + 1) * 3, per_key  # its resolvers walk it too
    # A resolver per argument read (launch values) and per launch (tensor sizes, each spec): this launcher's.
    assert max(r for _, r in per_key) <= 3 * args, per_key


LAUNCHER = '''import torch
import triton
import triton.language as tl

BLOCK = 128
{extra}

@triton.jit
def k(x_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def other():
    {other}


def launch(x):
    y = torch.empty(SIZE, 4)
    k[(1,)](y, x.numel(), BLOCK_SIZE=BLOCK)
'''


def _facts(analysis) -> tuple:
    return (sorted((p.code, p.span, p.message) for p in analysis.problems), analysis.launch_values,
            analysis.spec_values, analysis.tensor_sizes)


@pytest.mark.parametrize("extra, other", [
    ("SIZE = 1 << 20", "pass"),
    ("SIZE = 1 << 32", "pass"),
    ("SIZE = 1 << 32", "BLOCK = 64"),  # a second binding: the module's BLOCK is no longer known
    ("SIZE = 3\nBLOCK = 256", "pass"),
    ("class SIZE:\n    pass", "pass"),
    ("", "pass"),
])
def test_a_launch_value_follows_the_module_names_it_reads(extra: str, other: str) -> None:
    """The launcher's values are reused across edits elsewhere only while the module names they read keep their
    bindings: every edit gives what a fresh analysis gives."""
    cache = ParseCache()
    analyze_source(LAUNCHER.format(extra="SIZE = 16", other="pass"), "l.py", cache)
    text = LAUNCHER.format(extra=extra, other=other)
    assert _facts(analyze_source(text, "l.py", cache)) == _facts(analyze_source(text, "l.py"))


def _calls(text: str) -> int:
    """Python function calls (generator resumptions included) one analysis of the text makes."""
    count = 0

    def profile(frame, event, arg) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        analyze_source(text, "big.py")
    finally:
        sys.setprofile(None)
    return count


def test_analysis_work_is_linear_in_kernels_per_file() -> None:
    """Ten times the kernels, about ten times the work: no walk of the module per kernel or per launch (issue 29:
    a 1,000-kernel file took 80 times as long as a 100-kernel one). Counted in calls, against the growth of the
    syntax tree itself."""
    analyze_source(big_kernel_file(5, 0)[0], "warm.py")  # lazily loaded tables out of the count
    small, large = big_kernel_file(30, 0)[0], big_kernel_file(300, 0)[0]
    nodes = sum(1 for _ in ast.walk(ast.parse(large))) / sum(1 for _ in ast.walk(ast.parse(small)))
    work = _calls(large) / _calls(small)
    assert work <= 1.05 * nodes, (work, nodes)
