"""What a correctness check report means for the user's file: problems (KV001–KV007) and one-line summaries.

Pure: no torch, no processes. The checks themselves run in `run_checks`.
"""

from __future__ import annotations

from dataclasses import replace

from analyzers.model import Problem, Span
from analyzers.rules import make_problem
from analyzers.rules.verification import CORRECT_CODES, TOOL_NOTE, VERDICT_CODES

from .results import CheckReport, Verdict

def verdict_span(v: Verdict, lines: list[str]) -> Span:
    """Where a verdict's problem goes: its own line when known, else the kernel's def line."""
    line = v.line if v.line is not None else v.kernel_line
    line = min(max(line, 0), max(len(lines) - 1, 0))
    width = len(lines[line].rstrip("\r\n")) if line < len(lines) else 0
    if v.line is not None and v.column is not None:
        return Span(line, min(v.column, width), line, width)
    start = width - len(lines[line].lstrip()) if line < len(lines) else 0
    return Span(line, start, line, width)


def check_problems(report: CheckReport, text: str) -> list[Problem]:
    lines = text.splitlines()
    out: list[Problem] = []
    for v in report.verdicts:
        code = VERDICT_CODES.get(v.status) or (CORRECT_CODES.get(v.failed_check or "") if v.ok else None)
        if code is None:
            continue
        message = v.message
        if v.notes:
            message += " (" + "; ".join(v.notes) + ")"
        out.append(make_problem(code, verdict_span(v, lines), message, kernel=v.kernel))
    for v in report.verdicts:  # AWS's simulator and the NKI model disagree: information, never the kernel's fault
        for note in v.notes:
            if note.startswith(TOOL_NOTE):
                span = verdict_span(replace(v, line=None), lines)
                out.append(make_problem("KV007", span, note.removeprefix(TOOL_NOTE).strip(),
                                        kernel=v.kernel))
    for line, message in report.errors:
        at = min(max(line or 0, 0), max(len(lines) - 1, 0))
        width = len(lines[at].rstrip("\r\n")) if at < len(lines) else 0
        out.append(make_problem("KV005", Span(at, 0, at, width), message))
    return out


def summary(v: Verdict) -> str:
    """What a code lens shows for one verdict."""
    if v.ok:
        return f"✓ {v.message}"
    return f"✗ {v.message}"
