"""`kernel-lsp check --fix` / `--diff`: the quick fixes the editor offers for a file's problems, applied to the file on
disk (or shown as a unified diff). A fix whose edits overlap one already taken waits for the next run."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from .api import FixInfo


@dataclass
class FixedText:
    text: str
    applied: list[str]  # the titles of the fixes applied, in file order
    skipped: list[str]  # fixes left because they overlap one applied (run again to apply them)


def _offset(starts: list[int], lines: list[str], line: int, column: int) -> int:
    """A 1-based (line, code-point column) as an offset into the text; past the end clamps to the end."""
    if line - 1 >= len(lines):
        return starts[-1] + len(lines[-1]) if lines else 0
    return starts[line - 1] + min(column - 1, len(lines[line - 1]))


def apply_fixes(text: str, fixes: list[FixInfo]) -> FixedText:
    lines = text.splitlines(keepends=True)
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line)
    if not lines:
        starts = [0]
    planned: list[tuple[int, int, str]] = []
    applied: list[str] = []
    skipped: list[str] = []
    ordered = sorted(fixes, key=lambda f: min(((e["line"], e["column"]) for e in f.edits), default=(0, 0)))
    for fix in ordered:
        edits = [(_offset(starts, lines, e["line"], e["column"]), _offset(starts, lines, e["end_line"], e["end_column"]),
                  e["text"]) for e in fix.edits]
        clash = any(a < d and c < b or a == b == c == d for a, b, _ in edits for c, d, _ in planned)
        if clash or not edits:
            skipped.append(fix.title)
            continue
        planned.extend(edits)
        applied.append(fix.title)
    for start, end, new in sorted(planned, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return FixedText(text, applied, skipped)


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))
