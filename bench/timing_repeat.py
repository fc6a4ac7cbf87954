"""Timing repeatability: the same GPU measurements twice; prints the relative difference per point (target: within
5%). `--dry-run` (no GPU): the estimate path twice instead, which must agree exactly.

    python bench/timing_repeat.py [--dry-run]
"""

from __future__ import annotations

import math
import sys

from model_accuracy import REPO, estimates, points


def main() -> None:
    dry = "--dry-run" in sys.argv
    pts = points(quick=True)
    if dry:
        first, _ = estimates(pts)
        second, _ = estimates(pts)
        a, b = [e.us for e in first], [e.us for e in second]
        what = "estimate"
    else:
        from kernel_lsp.engine.latency import measure_file

        runs = [measure_file(__file__.replace("timing_repeat", "model_accuracy"), None, root=str(REPO), points=pts,
                             history=False, timeout=1800, repetitions=100) for _ in range(2)]
        a, b = ([e.us for e in r.entries] for r in runs)
        what = "measured"
    worst = 0.0
    for p, x, y in zip(pts, a, b):
        diff = abs(x - y) / x if x and y else float("nan")
        worst = max(worst, diff) if not math.isnan(diff) else worst
        print(f"{p['kernel']:<22} {p['shape']!s:<20} {p['dtype']:<8} {x or 0:>10.2f} {y or 0:>10.2f} us "
              f"{diff:>7.1%}")
    print(f"{what} twice: worst relative difference {worst:.1%} over {len(pts)} points (target: within 5%)")


if __name__ == "__main__":
    main()
