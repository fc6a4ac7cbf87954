"""Correctness-check time per example kernel: `run_checks` on each examples/*.py that has a spec.

For each example: the wall time of the whole check (a fresh checking process: Python, torch and triton imports,
the user's module, every case), the time of the spec's cases alone (Verdict.duration_s), the number of cases,
and the verdict. Device "auto": the CPU interpreter here, the GPU where torch sees one. Target on the CPU:
under 3 s of cases per example. Needs torch and triton, not pygls (it runs on the GPU machine too). On a GPU the
check first runs the bounds and race guard on the CPU interpreter; `--no-guard` leaves it out, to see its cost.

    python bench/check_time.py [--runs 3] [--device auto|interpreter|cuda] [--no-guard]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python bench/check_time.py` puts bench/ on sys.path, not the repository root
    sys.path.insert(0, str(REPO))

from kernel_lsp.engine.verify import CheckRequest, run_checks

EXAMPLES = ("vector_add", "fused_softmax", "layernorm", "matmul_autotune")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--no-guard", action="store_true", help="GPU checks without the interpreter's guard pass")
    args = parser.parse_args()
    rows = []
    for name in EXAMPLES:
        path = REPO / "examples" / f"{name}.py"
        walls, cases_s = [], []
        verdict = None
        for _ in range(args.runs):
            start = time.perf_counter()
            report = run_checks(CheckRequest(str(path), path.read_text(), device=args.device,
                                                 guard=not args.no_guard))
            walls.append(time.perf_counter() - start)
            if report.verdicts:
                verdict = report.verdicts[0]
                cases_s.append(verdict.duration_s)
        if verdict is None:
            rows.append((name, "-", "-", "-", "-", "; ".join(m for _, m in report.errors) or "no spec"))
            continue
        rows.append((name, f"{statistics.median(walls):.2f}", f"{statistics.median(cases_s):.2f}",
                     str(len(verdict.cases)), verdict.device, verdict.status))
    header = ("example", "wall s", "cases s", "cases", "device", "verdict")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    guard = " without the guard pass" if args.no_guard else ""
    print(f"correctness check time{guard}, median of {args.runs} runs (Python {sys.version.split()[0]})")
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
