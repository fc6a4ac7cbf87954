"""Correctness checks: each Triton kernel against its PyTorch reference, as declared by a `kernel_lsp.spec` spec.

    report = run_checks(CheckRequest(path, source))          # synchronous, thread-safe
    for v in report.verdicts: v.status, v.message, v.line    # "correct", "mismatch", "rejected", ...

Each request runs in one fresh process (`runner.py`): on the CPU through triton's interpreter with a bounds
guard, on a GPU when torch sees one, after a guard pass on the interpreter in a process of its own (process.py).
The server never imports torch or triton through this package: only `loading`, `hooks`, `compare` and `runner`
do, inside the checking process. docs/specs.md describes the checks.
"""

from __future__ import annotations

import threading

from .results import STATUSES, CaseResult, CheckReport, CheckRequest, Verdict, from_json, to_json


def run_checks(request: CheckRequest, cancel: threading.Event | None = None) -> CheckReport:
    """Check every spec in `request.source` (or those of `request.kernels`). Never raises for anything the user's
    code does: import and spec problems are in `errors`, the rest in one verdict per spec. `cancel` stops the
    checking process at once; the report then has the verdicts finished so far and a "check cancelled" error."""
    from .process import check

    if not isinstance(request, CheckRequest):
        raise TypeError(f"run_checks expects a CheckRequest, got {type(request).__name__}")
    try:
        return check(request, cancel)
    except OSError as exc:  # could not start the process: no verdicts, one clear error
        return CheckReport(request.path, (), ((None, f"could not start the checking process: {exc}"),))


__all__ = ["STATUSES", "CaseResult", "CheckReport", "CheckRequest", "Verdict", "from_json", "run_checks", "to_json"]
