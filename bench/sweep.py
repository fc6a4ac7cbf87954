"""Exhaustive configuration sweeps on the GPU: every configuration of each kernel of bench/sweep_kernels.py is
compiled, checked against PyTorch and timed; the figures go to bench/sweeps/<case>.json, the data the tiling
search and the latency model are judged against (bench/tiling_eval.py) without a GPU.

    python bench/sweep.py [--cases matmul_fp16,softmax] [--out bench/sweeps] [--workers 14]

Compiles run first in `--workers` processes (small problem sizes with the same specialization, so the full-size
launches hit triton's cache); then one process times each configuration at full size with short bursts
(triton.testing.do_bench, 10 ms warm-up, 50 ms of repetitions, L2 flushed between runs: long runs heat the card
and lower its clock). Each record: the configuration, median and 20/80% quantiles in microseconds, registers,
spills and shared memory of the compiled kernel, and whether the result matched PyTorch; a configuration that
does not fit the GPU (shared memory, registers) is recorded with its error. The SM clock is read before and
after each case.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _clock() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.mem,temperature.gpu",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30).stdout
        name, sm, mem, temp = [x.strip() for x in out.splitlines()[0].split(",")]
        return {"gpu": name, "sm_mhz": int(sm), "mem_mhz": int(mem), "temp_c": int(temp)}
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return {}


def _resources(compiled) -> dict:
    out = {}
    for key, attr in (("registers", "n_regs"), ("spills", "n_spills")):
        value = getattr(compiled, attr, None)
        out[key] = int(value) if isinstance(value, int) else None
    meta = getattr(compiled, "metadata", None)
    shared = getattr(meta, "shared", None) if meta is not None else None
    out["shared_bytes"] = int(shared) if isinstance(shared, int) else None
    return out


def _warm(jobs: list[tuple[str, dict]]) -> list[str | None]:
    """Compile (and run once, small) each configuration; the error text of those that fail."""
    import torch

    import sweep_kernels

    errors = []
    for name, cfg in jobs:
        try:
            fn, _ = sweep_kernels.launch(name, cfg, scale=8)
            fn()
            torch.cuda.synchronize()
            errors.append(None)
        except Exception as exc:  # noqa: BLE001 - a configuration that does not fit is data, not a failure
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
    return errors


def main() -> None:
    import sweep_kernels

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(sweep_kernels.CASES))
    ap.add_argument("--out", default=str(HERE / "sweeps"))
    ap.add_argument("--workers", type=int, default=14)
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = args.cases.split(",")

    jobs = [(name, cfg) for name in cases for cfg in sweep_kernels.space(name)]
    start = time.perf_counter()
    chunks = [jobs[i::args.workers] for i in range(args.workers)]
    with mp.get_context("spawn").Pool(args.workers) as pool:
        results = pool.map(_warm, chunks)
    warm_errors = {}
    for chunk, errs in zip(chunks, results):
        for (name, cfg), err in zip(chunk, errs):
            warm_errors[(name, json.dumps(cfg, sort_keys=True))] = err
    print(f"compiled {len(jobs)} configurations in {time.perf_counter() - start:.0f} s", flush=True)

    import torch
    import triton
    from triton.testing import do_bench

    for name in cases:
        kernel, shape, dtype = sweep_kernels.CASES[name]
        before = _clock()
        records = []
        t0 = time.perf_counter()
        for cfg in sweep_kernels.space(name):
            rec = {"config": cfg}
            err = warm_errors.get((name, json.dumps(cfg, sort_keys=True)))
            try:
                fn, check = sweep_kernels.launch(name, cfg)
                compiled = fn()
                torch.cuda.synchronize()
                rec.update(_resources(compiled))
                rec["correct"] = bool(check())
                q20, q50, q80 = do_bench(fn, warmup=10, rep=50, quantiles=[0.2, 0.5, 0.8])
                rec.update(us=round(q50 * 1000, 3), us_q20=round(q20 * 1000, 3), us_q80=round(q80 * 1000, 3))
            except Exception as exc:  # noqa: BLE001 - recorded with the configuration
                rec["error"] = err or f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            records.append(rec)
        after = _clock()
        ok = [r for r in records if "us" in r]
        best = min(ok, key=lambda r: r["us"]) if ok else None
        data = {
            "case": name, "kernel": kernel, "shape": shape, "dtype": dtype,
            "device": before.get("gpu"), "clock_before": before, "clock_after": after,
            "triton": triton.__version__, "torch": torch.__version__, "python": platform.python_version(),
            "timing": "triton.testing.do_bench(warmup=10 ms, rep=50 ms), median and 20/80% quantiles, L2 flushed",
            "date": time.strftime("%Y-%m-%d"), "records": records,
        }
        (out_dir / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
        print(f"{name}: {len(ok)}/{len(records)} timed in {time.perf_counter() - t0:.0f} s, best "
              f"{best['us'] if best else None} us {best['config'] if best else ''}, "
              f"clock {before.get('sm_mhz')}->{after.get('sm_mhz')} MHz", flush=True)


if __name__ == "__main__":
    main()
