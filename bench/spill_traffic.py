"""What a register spill costs, measured with Nsight Compute on the GPU machine: the local-memory traffic of each
spilling configuration of the matmul sweep (bench/sweeps/matmul_fp16.json), and where it was served.

    python bench/spill_traffic.py [--out bench/sweeps/spill_traffic.json]

The configuration model (analyzers/config_model.py) charges spilled registers once per iteration of the main
loop. On the H200 sweep that cost per byte and iteration agrees within about 2x across the spilling tiles, except
256x128x128 on 4 warps, which is 3 to 5x dearer than its mirror 128x256x128. This run answers two questions:
- Does local traffic grow with loop iterations, or with the MMA steps along K (BLOCK_K / 16 per iteration)?
- How much of it hits L1?

For each spilling configuration and its 8-warp twin (same tile, no spills), one launch at 4096^3 fp16 runs under
`ncu`. The local load and store bytes and sectors are collected, with the L1 hit rate of local loads, the L2 and
DRAM bytes, and the duration at the base clock ncu locks. The metric names come from `ncu --query-metrics`
(every metric whose name holds "mem_local_op"), so a renamed counter is not silently missed. Prints a table, and
writes the raw figures as JSON.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

BASE_METRICS = ["gpu__time_duration.sum", "lts__t_bytes.sum", "dram__bytes.sum", "launch__registers_per_thread",
                "launch__occupancy_limit_registers", "sm__warps_active.avg.pct_of_peak_sustained_active"]


def configurations(every_stage: bool = False) -> list[dict]:
    sweep = json.loads((HERE / "sweeps" / "matmul_fp16.json").read_text())
    spilling = [r["config"] for r in sweep["records"] if r.get("spills") and "us" in r
                and (every_stage or r["config"]["num_stages"] == 2)]
    twins = []
    for cfg in spilling:
        twin = {**cfg, "num_warps": 8}
        match = next((r for r in sweep["records"] if r["config"] == twin and "us" in r), None)
        if match is not None and not match.get("spills") and twin not in twins:
            twins.append(twin)
    return spilling + twins


def local_metrics(ncu: str) -> list[str]:
    out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=300).stdout
    names = {line.split()[0] for line in out.splitlines() if line.strip() and "mem_local_op" in line.split()[0]}
    chosen = []
    for name in sorted(names):
        if name.startswith("l1tex__t_"):
            chosen.append(name + (".pct" if "hit_rate" in name else ".sum"))
    return chosen


def child(index: int, every_stage: bool) -> None:
    """Under ncu: launch configuration `index` once (after a warm-up launch that compiles it)."""
    import torch

    import sweep_kernels

    cfg = configurations(every_stage)[index]
    fn, _ = sweep_kernels.launch("matmul_fp16", cfg)
    fn()
    torch.cuda.synchronize()
    fn()
    torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE / "sweeps" / "spill_traffic.json"))
    ap.add_argument("--every-stage", action="store_true",
                    help="every spilling configuration (44 runs), not only those with 2 stages (16 runs)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.every_stage)
        return
    ncu = shutil.which("ncu")
    if ncu is None:
        sys.exit("ncu (Nsight Compute) is not on PATH: this measurement needs the GPU machine")
    metrics = BASE_METRICS + local_metrics(ncu)
    print("metrics:", ", ".join(metrics))
    sweep = {json.dumps(r["config"], sort_keys=True): r
             for r in json.loads((HERE / "sweeps" / "matmul_fp16.json").read_text())["records"]}
    rows: list[dict] = []
    for i, cfg in enumerate(configurations(args.every_stage)):
        # --launch-skip 1: the first launch compiles and warms up; the second is the one measured.
        cmd = [ncu, "--csv", "--page", "raw", "-k", "regex:matmul_kernel", "--launch-skip", "1", "-c", "1",
               "--metrics", ",".join(metrics), sys.executable, __file__, "--child", str(i)]
        cmd += ["--every-stage"] if args.every_stage else []
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=os.environ.copy())
        except subprocess.TimeoutExpired:
            rows.append({"config": cfg, "error": "ncu took more than 240 s"})
            continue
        text = proc.stdout[proc.stdout.find('"ID"'):] if '"ID"' in proc.stdout else ""
        table = list(csv.DictReader(io.StringIO(text)))
        record: dict = {"config": cfg, "sweep": {k: sweep[json.dumps(cfg, sort_keys=True)].get(k)
                                           for k in ("us", "registers", "spills", "shared_bytes")}}
        if not table or proc.returncode != 0:
            record["error"] = (proc.stderr or proc.stdout)[-2000:]
        else:
            row = table[-1]
            record["metrics"] = {m: row.get(m) for m in metrics}
        rows.append(record)
        m = record.get("metrics", {})
        local = [v for k, v in m.items() if "mem_local_op" in k and k.endswith(".sum") and "bytes" in k]
        print(f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} w{cfg['num_warps']} s{cfg['num_stages']}: "
              f"spills {record['sweep']['spills']}, swept {record['sweep']['us']} us; local bytes {local}; "
              f"{'error' if 'error' in record else m.get('gpu__time_duration.sum')}")
    Path(args.out).write_text(json.dumps({"ncu_metrics": metrics, "records": rows}, indent=1))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
