"""Data-driven rule tests: fixture source in, expected diagnostics out.

A fixture marks each expected problem with a trailing `# expect: CODE[, CODE...]` comment on the line where the
problem starts; `CODE:severity` (`TR009:warning`) also expects that severity. Every problem must be expected and
every expectation met. A fixture `NAME.py` with a sibling
`NAME.fixed` must turn into that text when all offered quick fixes are applied.
Files under fixtures/correct/ are correct kernels: no problem above information level.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analyzers import RULES, Severity, check_source
from analyzers.model import apply_edits

FIXTURES = Path(__file__).parent / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*([A-Za-z0-9_,: ]+)")


def _fixtures(correct: bool) -> list[Path]:
    paths = sorted(p for p in FIXTURES.rglob("*.py") if (p.parent.name == "correct") == correct)
    return paths


def _expected(text: str) -> tuple[set[tuple[int, str]], dict[tuple[int, str], Severity]]:
    """(line, code) pairs expected, and the severities some of them must have."""
    out = set()
    severities = {}
    for i, line in enumerate(text.splitlines()):
        m = EXPECT.search(line)
        for item in m.group(1).split(",") if m else []:
            code, _, severity = item.strip().partition(":")
            if code:
                out.add((i + 1, code))
            if severity:
                severities[(i + 1, code)] = Severity.parse(severity)
    return out, severities


@pytest.mark.parametrize("path", _fixtures(correct=False), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_diagnostics(path: Path) -> None:
    text = path.read_text()
    result = check_source(text, str(path))
    actual = {(p.span.start_line + 1, p.code) for p in result.problems}
    expected, severities = _expected(text)
    listing = "\n".join(f"{p.span.start_line + 1}: {p.code} {p.severity.name} {p.message}" for p in result.problems)
    assert actual == expected, listing
    for p in result.problems:
        want = severities.get((p.span.start_line + 1, p.code))
        assert want is None or p.severity == want, listing
    for p in result.problems:
        assert p.code in RULES
        assert p.message, p
    fixed = path.with_suffix(".fixed")
    if fixed.exists():
        edits = [e for p in result.problems if p.fix for e in p.fix.edits]
        assert edits, "a .fixed file exists but no fix was offered"
        assert apply_edits(text, edits) == fixed.read_text()


@pytest.mark.parametrize("path", _fixtures(correct=True), ids=lambda p: p.name)
def test_correct_kernels_are_quiet(path: Path) -> None:
    result = check_source(path.read_text(), str(path))
    loud = [p for p in result.problems if p.severity <= Severity.WARNING]
    assert not loud, "\n".join(f"{p.span.start_line + 1}: {p.code} {p.message}" for p in loud)


def test_fixture_set_is_not_empty() -> None:
    assert len(_fixtures(correct=False)) >= 10
    assert len(_fixtures(correct=True)) >= 5


@pytest.mark.parametrize("code", sorted(c for c, r in RULES.items() if r.wrong), ids=str)
def test_rule_documentation_examples(code: str) -> None:
    rule = RULES[code]
    wrong = check_source(rule.wrong)
    assert code in {p.code for p in wrong.problems}, f"{code}'s wrong example does not trigger it"
    right = check_source(rule.right)
    assert code not in {p.code for p in right.problems}
    assert not [p for p in right.problems if p.severity <= Severity.WARNING], right.problems


def test_rule_counts() -> None:
    assert sum(r.language == "triton" for r in RULES.values()) >= 12
    assert sum(r.language == "nki" for r in RULES.values()) >= 5
    for rule in RULES.values():
        assert re.fullmatch(r"(KL|TR|NK|KC|KV|KP)\d{3}", rule.code)
        assert rule.summary and rule.name
        if rule.language in ("compile", "checks"):  # reported from real compiles and runs: no static examples
            assert rule.explanation, rule.code
        elif rule.language != "general":
            assert rule.wrong and rule.right and rule.explanation, rule.code
