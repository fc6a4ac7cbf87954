"""`# kernel-lsp: ignore[CODE, ...]` comments and rule selection."""

from __future__ import annotations

import re
from typing import Iterable

from .model import Problem

_COMMENT = re.compile(r"#\s*kernel-lsp:\s*(ignore-file|ignore)\b(?:\[([^\]]*)\])?")
FILE_WIDE = -1


def find_suppressions(lines: list[str]) -> dict[int, frozenset[str]]:
    """Line -> suppressed codes (empty set: every code). File-wide suppressions are stored under line -1."""
    found: dict[int, frozenset[str]] = {}
    for i, line in enumerate(lines):
        if "kernel-lsp" not in line:
            continue
        m = _COMMENT.search(line)
        if not m:
            continue
        codes = frozenset(c.strip().upper() for c in (m.group(2) or "").split(",") if c.strip())
        key = FILE_WIDE if m.group(1) == "ignore-file" else i
        previous = found.get(key)
        if previous is not None and (not previous or not codes):
            codes = frozenset()
        elif previous is not None:
            codes = previous | codes
        found[key] = codes
    return found


def _matches(code: str, patterns: Iterable[str]) -> bool:
    # A pattern is a code ("TR002") or a prefix ("TR", "NK0").
    return any(code.startswith(p) for p in patterns)


def is_suppressed(problem: Problem, suppressions: dict[int, frozenset[str]]) -> bool:
    for key in (problem.span.start_line, FILE_WIDE):
        codes = suppressions.get(key)
        if codes is not None and (not codes or problem.code in codes):
            return True
    return False


def select_problems(
    problems: Iterable[Problem],
    suppressions: dict[int, frozenset[str]],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
) -> list[Problem]:
    """Drop suppressed problems and those outside --select / inside --ignore. KL001 is never dropped by select."""
    select = [s.upper() for s in select]
    ignore = [s.upper() for s in ignore]
    out = []
    for p in problems:
        if select and not _matches(p.code, select) and p.code != "KL001":
            continue
        if ignore and _matches(p.code, ignore):
            continue
        if is_suppressed(p, suppressions):
            continue
        out.append(p)
    return out
