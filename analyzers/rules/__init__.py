"""The rule registry: every static rule's code, severity and documentation, and the checks that produce them.

A rule module registers its rules with `register(Rule(...))` and its checks with `@file_check` (run once per
file over a FileContext) or `@launch_check` (run per launch site against the kernel it launches).
docs/rules.md is generated from this registry; each rule's wrong/right examples are tested against the checks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable, Iterable

from ..model import Fix, LaunchSite, Problem, Related, Severity, ShownSizes, Span, TritonKernel, shift_problem
from ..source import ImportMap, SourceText, StatementMemo

if TYPE_CHECKING:  # discovery imports nothing of the rules; the rules are loaded by analyze.py
    from ..discovery import TritonDiscovery
    from ..nki_discovery import NkiDiscovery


@dataclass(frozen=True)
class Rule:
    code: str
    name: str  # kebab-case, stable
    summary: str  # one line: what is wrong
    severity: Severity
    language: str  # "general", "triton", "nki", "compile" or "checks" (reported by the compile service and checks)
    wrong: str  # a complete example that triggers the rule
    right: str  # the same example, fixed; triggers no rule above information level
    explanation: str = ""  # why it matters and how to fix it
    fixable: bool = False  # a quick fix is offered


RULES: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    if rule.code in RULES:
        raise ValueError(f"duplicate rule code {rule.code}")
    RULES[rule.code] = rule
    return rule


@dataclass
class FileContext:
    """What file checks see: the parsed file plus what discovery found."""

    path: str
    src: SourceText
    imports: ImportMap
    body: list[ast.stmt]
    triton: TritonDiscovery
    nki: NkiDiscovery
    problems: list[Problem] = field(default_factory=list)
    # Per-document memo of per-statement results (None when analysing a file once): see StatementMemo.
    memo: StatementMemo | None = None

    def walk_statements_containing(self, needle: str, decorators_only: bool = False):
        """ast.walk over the top-level statements whose text contains needle: skips most of a file cheaply.

        With decorators_only, a function is searched in its decorators only (not its body).
        """
        for stmt in self.body:
            if needle not in self.src.statement_text(stmt):
                continue
            if decorators_only and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in stmt.decorator_list:
                    yield from ast.walk(dec)
            else:
                yield from ast.walk(stmt)

    def memoized(self, kind: str, node: ast.AST, context: object, first: int, last: int,
                 check: Callable[[], None]) -> None:
        """Run check() (which reports problems about node, on 0-based lines first..last) unless the per-document
        memo holds what it reported for this node and context; then reuse that, moved with the node."""
        if self.memo is None:
            check()
            return
        done, moved = self.memo.get(kind, node, context)
        if isinstance(done, tuple):  # what an earlier run of this check reported (put below)
            self.problems.extend(shift_problem(p, moved, first - moved, last - moved) for p in done)
            return
        start = len(self.problems)
        check()
        self.memo.put(kind, node, context, tuple(self.problems[start:]))

    def report(
        self,
        code: str,
        where: ast.AST | Span,
        message: str,
        *,
        fix: Fix | None = None,
        kernel: str | None = None,
        related: tuple[Related, ...] = (),
        severity: Severity | None = None,
    ) -> None:
        span = where if isinstance(where, Span) else self.src.span(where)
        rule = RULES[code]
        self.problems.append(Problem(code, message, severity or rule.severity, span, fix, related, kernel))


FileCheck = Callable[[FileContext], None]
LaunchCheck = Callable[[LaunchSite, TritonKernel, "LaunchContext"], Iterable[Problem]]

FILE_CHECKS: list[FileCheck] = []
LAUNCH_CHECKS: list[LaunchCheck] = []


@dataclass(frozen=True)
class LaunchContext:
    """Where the launched kernel lives (for related information that points at its definition), and what the
    launching file shows of the arguments' values (analyzers/sizes.py)."""

    kernel_path: str | None  # None: same file as the launch site
    # argument span -> the value the launcher binds it to (not a literal at the launch)
    values: Mapping[Span, object] = field(default_factory=dict)
    # argument span -> the values a spec runs it with, where they differ
    spec_values: Mapping[Span, ShownSizes] = field(default_factory=dict)


def file_check(fn: FileCheck) -> FileCheck:
    FILE_CHECKS.append(fn)
    return fn


def launch_check(fn: LaunchCheck) -> LaunchCheck:
    LAUNCH_CHECKS.append(fn)
    return fn


def make_problem(
    code: str, span: Span, message: str, *, fix: Fix | None = None, kernel: str | None = None,
    related: tuple[Related, ...] = (),
) -> Problem:
    return Problem(code, message, RULES[code].severity, span, fix, related, kernel)


register(Rule(
    code="KL001", name="syntax-error", language="general", severity=Severity.ERROR,
    summary="The file does not parse; kernels outside the broken statement are still analysed.",
    wrong="def f(:\n    pass\n", right="def f():\n    pass\n",
    explanation="Fix the syntax error. While it is present, top-level statements that parse on their own keep "
    "their diagnostics, so one half-typed function does not hide the rest of the file.",
))
register(Rule(
    code="KL002", name="not-utf8", language="general", severity=Severity.WARNING,
    summary="The file is not UTF-8 text and was not analysed.",
    wrong="", right="",
    explanation="Python source is UTF-8 by default (PEP 3120). Re-save the file as UTF-8.",
))
register(Rule(
    code="KL003", name="file-too-large", language="general", severity=Severity.INFO,
    summary="The file is larger than the `maxFileBytes` setting and was not analysed.",
    wrong="", right="",
    explanation="Raise `maxFileBytes` if the file really holds kernels; generated files are usually best left out.",
))
register(Rule(
    code="KL900", name="internal-error", language="general", severity=Severity.INFO,
    summary="A rule failed on this file; the other rules' results stand.",
    wrong="", right="",
    explanation="An analyzer bug, reported so that it is visible instead of silent. The server log has the traceback.",
))


def load_rule_modules() -> None:
    """Import every rule module so that its rules and checks register themselves."""
    from . import compile, nki, profile, triton_kernel, triton_launch, verification  # noqa: F401


def merge_identical(problems: list[Problem], src: SourceText) -> list[Problem]:
    """Triton findings of one file with the same code, severity and message on the same text (one construct
    repeated through the file, such as a helper call pasted into every kernel) become one finding that counts
    the others and points at them; their quick fixes become one."""

    def key(p: Problem) -> tuple:
        s = p.span
        if not p.code.startswith("TR") or s.start_line != s.end_line:
            return (id(p),)
        return (p.code, p.severity, p.kernel, p.message, src.line(s.start_line)[s.start_col:s.end_col])

    groups: dict[tuple, list[Problem]] = {}
    for p in problems:
        groups.setdefault(key(p), []).append(p)
    out = []
    for p in problems:
        group = groups[key(p)]
        if len(group) == 1:
            out.append(p)
            continue
        if group[0] is not p:
            continue
        rest = group[1:]
        lines = sorted({q.span.start_line + 1 for q in rest})
        shown = ", ".join(map(str, lines[:8])) + (", ..." if len(lines) > 8 else "")
        message = f"{p.message} ({len(rest)} more identical finding{'s' * (len(rest) > 1)}: line" \
                  f"{'s' * (len(lines) > 1)} {shown})"
        edits = [e for q in group if q.fix for e in q.fix.edits]
        fix = Fix(p.fix.title, tuple(dict.fromkeys(edits))) if p.fix and all(q.fix for q in group) else p.fix
        related = (*p.related, *(Related(q.span, "the same finding") for q in rest))
        out.append(Problem(p.code, message, p.severity, p.span, fix, related, p.kernel))
    return out
