"""ptxas' performance notes for every configuration of the exhaustive sweeps, added to bench/sweeps/<case>.json.

    python bench/sweep_ptxas.py [--cases matmul_fp16,matmul_bf16] [--sweeps bench/sweeps] [--workers 14]

Run on the machine and triton version that produced the sweeps (bench/sweep.py): each configuration is compiled
again, in a fresh triton cache so ptxas really runs, with triton's ptxas log on; its "Potential Performance Loss"
notes (e.g. wgmma serialized for lack of registers) are stored in the record as `ptxas_notes`. The compile must be
the one that was timed: the registers of the new compile are compared with the sweep's, and a record whose
registers differ keeps no notes (the script says how many). The configuration model reads the notes as the
product's compile reports them (kernel_lsp.engine.compile.worker.parse_ptxas_notes).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def _notes(jobs: list[tuple[str, dict]]) -> list[tuple[int | None, list[str] | None, str | None]]:
    """(registers, notes, error) per configuration, each compiled in this process's own empty triton cache."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="sweep-ptxas-")
    import torch
    import triton

    import sweep_kernels
    from kernel_lsp.engine.compile.worker import parse_ptxas_log, parse_ptxas_notes

    triton.knobs.nvidia.dump_ptxas_log = True
    out = []
    for name, cfg in jobs:
        log = io.StringIO()
        try:
            fn, _ = sweep_kernels.launch(name, cfg, scale=8)
            with contextlib.redirect_stdout(log):
                fn()
            torch.cuda.synchronize()
            text = log.getvalue()
            regs = next((v.get("registers") for v in parse_ptxas_log(text).values()), None)
            out.append((regs, list(parse_ptxas_notes(text)), None))
        except Exception as exc:  # noqa: BLE001 - a configuration that does not fit has no notes: recorded
            out.append((None, None, f"{type(exc).__name__}"))
    return out


def main() -> None:
    import sweep_kernels

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(sweep_kernels.CASES))
    ap.add_argument("--sweeps", default=str(HERE / "sweeps"))
    ap.add_argument("--workers", type=int, default=14)
    args = ap.parse_args()
    cases = args.cases.split(",")
    data = {name: json.loads((Path(args.sweeps) / f"{name}.json").read_text()) for name in cases}
    jobs = [(name, rec["config"]) for name in cases for rec in data[name]["records"] if "us" in rec]
    start = time.perf_counter()
    chunks = [jobs[i::args.workers] for i in range(args.workers)]
    with mp.get_context("spawn").Pool(args.workers) as pool:
        results = pool.map(_notes, chunks)
    found = {}
    for chunk, res in zip(chunks, results):
        for (name, cfg), r in zip(chunk, res):
            found[(name, json.dumps(cfg, sort_keys=True))] = r
    import triton

    for name in cases:
        same = differ = noted = 0
        for rec in data[name]["records"]:
            r = found.get((name, json.dumps(rec["config"], sort_keys=True)))
            if r is None:
                continue
            regs, notes, _err = r
            if notes is None or regs != rec.get("registers"):
                differ += 1
                rec.pop("ptxas_notes", None)
                continue
            same += 1
            rec["ptxas_notes"] = notes
            noted += bool(notes)
        data[name]["ptxas_notes"] = (f"bench/sweep_ptxas.py, triton {triton.__version__}, "
                                     f"{time.strftime('%Y-%m-%d')}: {same} compiles matched the sweep's registers, "
                                     f"{differ} did not (no notes kept)")
        (Path(args.sweeps) / f"{name}.json").write_text(json.dumps(data[name], indent=1) + "\n")
        print(f"{name}: {same} configurations with the sweep's registers ({noted} with notes), {differ} differ",
              flush=True)
    print(f"{len(jobs)} compiles in {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
