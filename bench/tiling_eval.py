"""The configuration model and the tiling search, judged against the exhaustive sweeps of bench/sweeps/ (measured
on an H200 by bench/sweep.py) without a GPU.

    python bench/tiling_eval.py                # model error on held-out configurations; search outcomes
    python bench/tiling_eval.py --fit          # refit the calibration on the fit half and print it
    python bench/tiling_eval.py --fit --loko   # also leave each kernel out of the fit (about a minute)

Model accuracy: the configurations of every sweep are split in two by a fixed hash of (case, configuration); the
calibration (analyzers/config_model.py) is fitted on one half (least squares on the log of estimate / measured,
scipy) and the error reported on the other, with the worst held-out points. Leave-one-kernel-out refits from the
priors on every configuration of the other kernels and reports on the one left out. Search: from a deliberately
poor start (the slowest configuration of the sweep), `analyzers.tiling.search_plan` picks what to measure;
"measuring" a configuration returns its sweep median perturbed by its own measured spread (seeded), so the search
meets the noise a GPU has. Prints, per kernel, the fraction of the exhaustive best it reaches, the share of the
space it measured, and the model-only pick.

What the model is told of a configuration (`launch_of`) is counted by hand from each kernel's source, the way
the interpreter counts a launch in the product (analyzers.config_model.launch_from_work); the compile facts
(registers, spills, shared memory) are the sweep's own.
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
                                   elements=2.0 * programs * math.ceil(K / bk) * (bm * bk + bk * bn) + M * N,
                                   iterations=math.ceil(K / bk), bytes_per_iteration=(bm * bk + bk * bn) * e,
                                   warp_tile=bm * bn / cfg["num_warps"], **res)
    if kernel == "transpose_kernel":
        M, N = shape
        bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
        programs = math.ceil(M / bm) * math.ceil(N / bn)
        # per element: two offsets, two compares and an and for the mask, two pointer adds, the load, the store
        return config_model.Launch(programs=programs, dram_bytes=2.0 * M * N * e, elements=9.0 * M * N,
                                   iterations=1, bytes_per_iteration=bm * bn * e, block_elements=bm * bn,
                                   contiguous_bytes=min(bm, bn) * e, **res)
    rows, cols = shape
    block = cfg["BLOCK"]
    trips = math.ceil(cols / block)
    data = rows * cols * e
    covered = rows * trips * block  # elements the blocks cover, masked tail included
    # Element operations per column of each kernel's source, counted as the interpreter counts them: the offsets,
    # the mask, loads, conversions, arithmetic and stores of each pass.
    if kernel == "row_sum_kernel":
        return config_model.Launch(programs=rows, dram_bytes=data, elements=5.0 * covered, iterations=trips,
                                   bytes_per_iteration=block * e, block_elements=block, **res)
    if kernel == "softmax_kernel":
        # pass 1: offsets, mask, load, convert, maximum, two subtractions, two exponentials, multiply, add (11);
        # pass 2: offsets, mask, load, convert, subtract, exponential, divide, convert, store (9).
        return config_model.Launch(programs=rows, dram_bytes=2.0 * data, l2_bytes=data, elements=20.0 * covered,
                                   iterations=2 * trips, bytes_per_iteration=block * e, block_elements=block,
                                   reread_bytes=data, program_bytes=cols * e, passes=2, **res)
    # layernorm: x read twice (the second from L2), w and b per row from L2, y written.
    # pass 1: offsets, mask, load, convert, add, multiply, add (7); pass 2: offsets, mask, three loads, convert,
    # subtract, two multiplies, add, convert, store (12).
    return config_model.Launch(programs=rows, dram_bytes=2.0 * data, l2_bytes=data + 2.0 * rows * cols * e,
                               elements=19.0 * covered, iterations=2 * trips, bytes_per_iteration=3 * block * e,
                               block_elements=block, reread_bytes=data, program_bytes=cols * e, passes=2, **res)


def load() -> list[tuple[dict, list[dict]]]:
    """Each sweep (a file of bench/sweeps/ that names its case; other measurements live there too) and its
    launchable, correct records."""
    out = []
    for path in sorted(SWEEPS.glob("*.json")):
        case = json.loads(path.read_text())
        if "case" in case:
            out.append((case, [r for r in case["records"] if "us" in r and r.get("correct")]))
    return out


def held_out(case: dict, rec: dict) -> bool:
    key = f"{case['case']}:{json.dumps(rec['config'], sort_keys=True)}"
    return hashlib.sha256(key.encode()).digest()[0] % 2 == 1


def case_of(cases, name: str) -> dict:
    return next(case for case, _ in cases if case["case"] == name)


def errors(cases, cal, hw, which: bool | None) -> list[float]:
    out = []
    for case, recs in cases:
        for r in recs:
            if which is not None and held_out(case, r) != which:
                continue
            est = config_model.estimate(launch_of(case, r), hw, cal).us
            out.append(abs(est - r["us"]) / r["us"])
    return out


# The constants fitted, each within physical bounds (a fraction stays a fraction, a latency stays within what
# GPUs show); the others (the clock, the L2 size, the datasheet bandwidths) come from analyzers/hardware.py.
BOUNDS = {"dram_efficiency": (0.5, 0.98), "l2_tbps": (3.0, 40.0), "latency_ns": (100.0, 3000.0),
          "dot_latency_ns": (50.0, 5000.0), "loop_overlap": (1.0, 16.0), "dependent_ns": (0.5, 40.0),
          "l2_usable": (0.05, 1.0), "instructions_per_element": (0.2, 20.0), "tensor_efficiency": (0.3, 1.0),
          "warp_tile_half": (10.0, 10000.0), "tail": (0.05, 1.0), "smooth": (1.5, 12.0),
          "spill_tbps": (0.5, 200.0), "program_ns": (1.0, 1000.0), "burst_bytes": (32.0, 256.0)}


def family(case: dict) -> str:
    """Leave-one-kernel-out holds out a kernel's code: the fp16 and bf16 matmuls are one kernel."""
    return case["kernel"]


def fit(points: list[tuple[dict, dict]], hw, start: config_model.Calibration | None = None
        ) -> config_model.Calibration:
    """Least squares on the log of estimate / measurement over `points` ((case, record) pairs), within BOUNDS."""
    import numpy as np
    from scipy.optimize import least_squares

    names = list(BOUNDS)
    base = start or config_model.Calibration()
    launches = [(launch_of(case, r), r["us"]) for case, r in points]

    def cal_of(x) -> config_model.Calibration:
        return replace(base, **{n: float(math.exp(v)) for n, v in zip(names, x)})

    def residuals(x):
        c = cal_of(x)
        return np.array([math.log(config_model.estimate(launch, hw, c).us / us) for launch, us in launches])

    lo = np.log([BOUNDS[n][0] for n in names])
    hi = np.log([BOUNDS[n][1] for n in names])
    x0 = np.clip(np.log([getattr(base, n) for n in names]), lo + 1e-9, hi - 1e-9)
    result = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-3, max_nfev=3000)
    return cal_of(result.x)


def summary(errs: list[float]) -> str:
    return f"median {statistics.median(errs):.1%}, worst {max(errs):.1%}, {len(errs)} configurations"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", action="store_true", help="refit the calibration on the fit half and print it")
    ap.add_argument("--loko", action="store_true",
                    help="also leave each kernel out: fit on the other kernels' configurations, report on it")
    args = ap.parse_args()
    hw = get_device("H200")
    cases = load()
    fit_points = [(case, r) for case, recs in cases for r in recs if not held_out(case, r)]
    cal = fit(fit_points, hw) if args.fit else config_model.calibration(hw)[0]
    if args.fit:
        print("calibration:", {f.name: round(getattr(cal, f.name), 4) for f in fields(cal) if f.name != "provenance"})
    for which, label in ((False, "fit half"), (True, "held-out half")):
        print(f"model error, {label}: {summary(errors(cases, cal, hw, which))}")
    for case, recs in cases:
        print(f"  {case['case']:12} held-out {summary(errors([(case, recs)], cal, hw, True))}")
    worst = sorted(((abs(config_model.estimate(launch_of(case, r), hw, cal).us / r["us"] - 1), case["case"], r)
                    for case, recs in cases for r in recs if held_out(case, r)), key=lambda t: -t[0])[:8]
    print("worst held-out points:")
    for err, name, r in worst:
        est = config_model.estimate(launch_of(case_of(cases, name), r), hw, cal)
        print(f"  {err:6.1%} {name:12} {r['config']} measured {r['us']:.1f} us, estimated {est.us:.1f} us; "
              f"registers {r.get('registers')}, spills {r.get('spills')}, shared {r.get('shared_bytes')}")
    if args.loko:
        for kernel in sorted({family(case) for case, _ in cases}):
            train = [(case, r) for case, recs in cases if family(case) != kernel for r in recs]
            left = [(case, recs) for case, recs in cases if family(case) == kernel]
            print(f"leave {kernel} out: {summary(errors(left, fit(train, hw), hw, None))}")

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
