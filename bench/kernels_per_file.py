"""Static analysis time against the number of kernels in one file: `kernel-lsp check FILE` (static, no compile) on
bench/common.big_kernel_file(N) for each N, and analyze_source of the same text in this process (best of
--runs). The figure with a target is the ratio of the largest N's check time to the smallest's: linear analysis
gives about N_max / N_min plus less, a walk of the module per kernel or per launch gives its square.

    python bench/kernels_per_file.py [--kernels 100,1000] [--runs 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, Figure, big_kernel_file, common_args, load_line, print_table, write_json


def check_seconds(path: Path, config: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kernel_lsp", "check", "--quiet", "--exit-zero", "--config", str(config),
                    str(path)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def in_process_seconds(text: str) -> float:
    from analyzers import analyze_source

    gc.collect()
    t0 = time.perf_counter()
    analyze_source(text, "/bench/kernels.py")
    return time.perf_counter() - t0


def run(counts: list[int], runs: int) -> list[Figure]:
    checks: dict[int, float] = {}
    inproc: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="kl-bench-kernels-") as tmp:
        # The largest files are over the default maxFileBytes (2 MB), which would skip them unanalysed.
        config = Path(tmp) / "settings.json"
        config.write_text(json.dumps({"maxFileBytes": 1 << 28}), encoding="utf-8")
        files = {}
        for n in counts:
            text, _ = big_kernel_file(n, 0)
            files[n] = (Path(tmp) / f"kernels_{n}.py", text)
            files[n][0].write_text(text, encoding="utf-8")
        for _ in range(runs):  # rounds alternate the sizes, so that load on the machine falls on all of them
            for n in counts:
                path, text = files[n]
                checks[n] = min(checks.get(n, float("inf")), check_seconds(path, config))
                inproc[n] = min(inproc.get(n, float("inf")), in_process_seconds(text))
    figures = []
    for n in counts:
        lines = files[n][1].count("\n")
        figures += [Figure(f"kernel-lsp check, {n} kernels ({lines} lines), best of {runs}", checks[n], "s"),
                    Figure(f"analyze_source in process, {n} kernels, best of {runs}", inproc[n], "s")]
    lo, hi = counts[0], counts[-1]
    figures += [
        Figure(f"check time ratio {hi} / {lo} kernels", checks[hi] / checks[lo], "x", hi / lo,
               f"linear would be about {hi / lo:g}x or less (start-up is the same for both); {load_line()}"),
        Figure(f"analyze_source ratio {hi} / {lo} kernels", inproc[hi] / inproc[lo], "x"),
    ]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default="100,1000", help="comma-separated kernel counts, smallest first")
    parser.add_argument("--runs", type=int, default=3)
    common_args(parser)
    args = parser.parse_args(argv)
    counts = sorted(int(n) for n in args.kernels.split(","))
    figures = run(counts, args.runs)
    print_table("Static analysis time against kernels per file", figures)
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
