"""The configuration model and the tiling search, judged against the exhaustive sweeps of bench/sweeps/ (measured
on an H200 by bench/sweep.py) without a GPU.

    python bench/tiling_eval.py          # model error on held-out configurations; search outcomes
    python bench/tiling_eval.py --fit    # refit the calibration on the fit half and print it

Model accuracy: the configurations of every sweep are split in two by a fixed hash of (case, configuration); the
calibration (analyzers/config_model.py) is fitted on one half and the error reported on the other. Search: from a
deliberately poor start (the slowest configuration of the sweep), `analyzers.tiling.search_plan` picks what to
measure; "measuring" a configuration returns its sweep
median perturbed by its own measured spread (seeded), so the search meets the noise a GPU has. Prints, per kernel,
the fraction of the exhaustive best it reaches, the share of the space it measured, and the model-only pick.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import statistics
import sys
from dataclasses import fields, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzers import config_model  # noqa: E402
from analyzers.hardware import get_device  # noqa: E402
from analyzers.tiling import search_plan  # noqa: E402

SWEEPS = Path(__file__).resolve().parent / "sweeps"
ELEM = {"float16": 2, "bfloat16": 2, "float32": 4}


def launch_of(case: dict, rec: dict) -> config_model.Launch:
    """What the model is told of one configuration: work of the launch (counted by hand for these kernels) and
    the compile facts the sweep recorded."""
    cfg, shape, kernel = rec["config"], case["shape"], case["kernel"]
    e = ELEM[case["dtype"]]
    res = dict(registers=rec.get("registers"), shared_bytes=rec.get("shared_bytes"),
               spill_bytes=(rec.get("spills") or 0) * 4, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if kernel == "matmul_kernel":
        M, N, K = shape
        bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
        programs = math.ceil(M / bm) * math.ceil(N / bn)
        footprint = (M * K + K * N + M * N) * e
        requested = (M * K * math.ceil(N / bn) + K * N * math.ceil(M / bm) + M * N) * e
        return config_model.Launch(programs=programs, dram_bytes=footprint, l2_bytes=requested - footprint,
                                   tensor_flops=2.0 * M * N * K, tensor_dtype=case["dtype"],
                                   elements=programs * math.ceil(K / bk) * (bm * bk + bk * bn) + M * N,
                                   iterations=math.ceil(K / bk), bytes_per_iteration=(bm * bk + bk * bn) * e,
                                   warp_tile=bm * bn / cfg["num_warps"], **res)
    if kernel == "transpose_kernel":
        M, N = shape
        programs = math.ceil(M / cfg["BLOCK_M"]) * math.ceil(N / cfg["BLOCK_N"])
        return config_model.Launch(programs=programs, dram_bytes=2.0 * M * N * e, elements=2.0 * M * N,
                                   iterations=1, bytes_per_iteration=cfg["BLOCK_M"] * cfg["BLOCK_N"] * e,
                                   contiguous_bytes=min(cfg["BLOCK_M"], cfg["BLOCK_N"]) * e, **res)
    rows, cols = shape
    block = cfg["BLOCK"]
    trips = math.ceil(cols / block)
    data = rows * cols * e
    if kernel == "row_sum_kernel":
        return config_model.Launch(programs=rows, dram_bytes=data, elements=rows * trips * block, iterations=trips,
                                   bytes_per_iteration=block * e, **res)
    if kernel == "softmax_kernel":
        return config_model.Launch(programs=rows, dram_bytes=2.0 * data, l2_bytes=data,
                                   elements=3.0 * rows * trips * block, iterations=2 * trips,
                                   bytes_per_iteration=block * e, **res)
    # layernorm: x read twice (the second from L2), w and b per row from L2, y written
    return config_model.Launch(programs=rows, dram_bytes=2.0 * data, l2_bytes=data + 2.0 * rows * cols * e,
                               elements=5.0 * rows * trips * block, iterations=2 * trips,
                               bytes_per_iteration=3 * block * e, **res)


def load() -> list[tuple[dict, list[dict]]]:
    out = []
    for path in sorted(SWEEPS.glob("*.json")):
        case = json.loads(path.read_text())
        out.append((case, [r for r in case["records"] if "us" in r and r.get("correct")]))
    return out


def held_out(case: dict, rec: dict) -> bool:
    key = f"{case['case']}:{json.dumps(rec['config'], sort_keys=True)}"
    return hashlib.sha256(key.encode()).digest()[0] % 2 == 1


def errors(cases, cal, hw, which: bool | None) -> list[float]:
    out = []
    for case, recs in cases:
        for r in recs:
            if which is not None and held_out(case, r) != which:
                continue
            est = config_model.estimate(launch_of(case, r), hw, cal).us
            out.append(abs(est - r["us"]) / r["us"])
    return out


def fit(cases, hw, seed: int = 0) -> config_model.Calibration:
    """Coordinate search in log space on the fit half, minimising the mean of log errors (then its worst)."""
    rng = random.Random(seed)
    names = [f.name for f in fields(config_model.Calibration) if f.name != "provenance"]
    bounds = {"dram_efficiency": (0.5, 0.95), "tail": (0.0, 1.0), "overlap": (0.0, 1.0), "stage_overlap": (0.0, 2.0),
              "tensor_efficiency": (0.3, 1.0)}

    def loss(c) -> float:
        errs = []
        for case, recs in cases:
            for r in recs:
                if held_out(case, r):
                    continue
                est = config_model.estimate(launch_of(case, r), hw, c).us
                errs.append(abs(math.log(est / r["us"])))
        return statistics.fmean(errs) + 0.25 * max(errs)

    best = config_model.Calibration()
    best_loss = loss(best)
    step = 0.5
    for _ in range(14):
        improved = False
        for name in names:
            for direction in (1, -1):
                value = getattr(best, name)
                new = value * math.exp(direction * step * (0.5 + rng.random()))
                lo, hi = bounds.get(name, (1e-6, 1e9))
                new = min(hi, max(lo, new))
                cand = replace(best, **{name: new})
                cl = loss(cand)
                if cl < best_loss:
                    best, best_loss, improved = cand, cl, True
        if not improved:
            step /= 2
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", action="store_true", help="refit the calibration on the fit half and print it")
    args = ap.parse_args()
    hw = get_device("H200")
    cases = load()
    cal = fit(cases, hw) if args.fit else config_model.calibration(hw)[0]
    if args.fit:
        print("calibration:", {f.name: round(getattr(cal, f.name), 4) for f in fields(cal) if f.name != "provenance"})
    for which, label in ((False, "fit half"), (True, "held-out half")):
        errs = errors(cases, cal, hw, which)
        print(f"model error, {label}: median {statistics.median(errs):.1%}, worst {max(errs):.1%}, "
              f"{len(errs)} configurations")
    for case, recs in cases:
        errs = errors([(case, recs)], cal, hw, True)
        print(f"  {case['case']:12} held-out median {statistics.median(errs):.1%}, worst {max(errs):.1%}")

    print()
    for case, recs in cases:
        best = min(r["us"] for r in recs)
        space = [r["config"] for r in recs]
        by_cfg = {json.dumps(r["config"], sort_keys=True): r for r in recs}
        est = {key: config_model.estimate(launch_of(case, rec), hw, cal).us for key, rec in by_cfg.items()}
        start = max(recs, key=lambda r: r["us"])["config"]
        reached, measured = [], []
        for seed in range(1, 6):  # five noise draws: the worst is reported
            rng = random.Random(seed)

            def measure(cfg: dict, by_cfg=by_cfg, rng=rng) -> float:
                r = by_cfg[json.dumps(cfg, sort_keys=True)]
                half = max(1e-9, (r["us_q80"] - r["us_q20"]) / 2)
                return r["us"] + rng.gauss(0.0, half)

            plan = search_plan(space, lambda c, est=est: est[json.dumps(c, sort_keys=True)],
                           lambda cfgs, measure=measure: [measure(c) for c in cfgs],
                                   current=start)
            reached.append(best / by_cfg[json.dumps(plan.winner, sort_keys=True)]["us"])
            measured.append(len(plan.measured))
        model_pick = by_cfg[min(est, key=est.get)]["us"]
        print(f"{case['case']:12} {len(space):4} configs: search reaches {min(reached):.1%} of the best (worst of 5 "
              f"noise draws) measuring at most {max(measured)} ({max(measured) / len(space):.0%}); "
              f"model-only pick {best / model_pick:.1%}")


if __name__ == "__main__":
    main()
