"""The search from poor starts on the recorded H200 sweeps: the start timed in the same run, a winner only where it
beats the start by more than the measured noise.

For each sweep in bench/sweeps/ (measured on an H200, one median and its 20th-80th percentile spread per
configuration): every configuration of the slowest quarter is a start; the search (analyzers.tiling.search_plan)
ranks by the calibrated model and "measures" by drawing from each configuration's recorded spread (seeded Gaussian,
sigma = (q80 - q20) / 2). Prints the share of the exhaustive best it reaches (median and worst), the largest share of
the space it measured, and how often it kept a poor start. Then the false-winner rate: a space where every
configuration is as fast as the start (each draw 100 us +- 2.5%), where any winner is noise.
No GPU: the timings are recorded, the noise simulated.

    python bench/search_start.py
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tiling_eval  # noqa: E402

from analyzers import config_model  # noqa: E402
from analyzers.hardware import get_device  # noqa: E402
from analyzers.tiling import config_key, search_plan  # noqa: E402


def main() -> None:
    hw = get_device("H200")
    for case, recs in tiling_eval.load():
        by_cfg = {json.dumps(r["config"], sort_keys=True): r for r in recs}
        space = [r["config"] for r in recs]
        est = {json.dumps(c, sort_keys=True): config_model.estimate(
            tiling_eval.launch_of(case, by_cfg[json.dumps(c, sort_keys=True)]), hw).us for c in space}
        best = min(r["us"] for r in recs)
        starts = sorted(recs, key=lambda r: -r["us"])[:max(1, len(recs) // 4)]
        reached, fractions, kept = [], [], 0
        for i, start in enumerate(starts):
            rng = random.Random(i)

            def measure(cfgs, rng=rng, by_cfg=by_cfg):
                out = []
                for c in cfgs:
                    r = by_cfg[json.dumps(c, sort_keys=True)]
                    out.append(r["us"] + rng.gauss(0.0, max(1e-9, (r["us_q80"] - r["us_q20"]) / 2)))
                return out

            plan = search_plan(space, lambda c, est=est: est[json.dumps(c, sort_keys=True)], measure,
                               current=start["config"])
            reached.append(best / by_cfg[json.dumps(plan.winner, sort_keys=True)]["us"])
            fractions.append(len(plan.measured) / len(space))
            kept += config_key(plan.winner) == config_key(start["config"])
        print(f"{case['case']:<28} {len(space):>4} configurations, {len(starts):>3} poor starts: reached "
              f"median {statistics.median(reached):.1%}, worst {min(reached):.1%} of the best; measured at most "
              f"{max(fractions):.0%} of the space; poor start kept {kept} times")
    trials, wrong = 300, 0
    space = [dict(BLOCK=b, num_warps=w, num_stages=s) for b in (64, 128, 256, 512, 1024) for w in (1, 2, 4, 8)
             for s in (1, 2, 3)]
    start = space[-1]
    for seed in range(trials):
        rng = random.Random(seed)
        plan = search_plan(space, lambda c: c["BLOCK"] / c["num_warps"],
                           lambda cfgs, rng=rng: [100 * (1 + rng.uniform(-0.025, 0.025)) for _ in cfgs],
                           current=start)
        wrong += plan.winner != start
    print(f"flat space (every configuration as fast as the start, +-2.5%): a winner proposed in {wrong} of "
          f"{trials} searches ({wrong / trials:.1%})")


if __name__ == "__main__":
    main()
