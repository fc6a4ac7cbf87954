"""The tiling search of a matmul timed through this machine's worker and through a one-node Ray cluster that the
script starts on this machine (its GPUs detected by Ray): candidates timed per second, per-job overhead, and the
winner of each. Needs a GPU and Ray; says so and exits 2 without them.

    python bench/ray_search.py [--shape 4096] [--overhead-jobs 20]

The kernel: examples/matmul_autotune.py with its config list cut to one poor configuration (64x64x32, 4 warps,
2 stages) and its bench shape set to SHAPE³, as docs/benchmarks.md's "product's search on the GPU". Both searches
count the work and rank by the model the same way (not timed here); "timing" is from the first timed round to the
end of the last, verification off. On one GPU the cluster runs one task at a time, as the local worker does: what
this compares is the cost of the Ray path, not a speed-up (that needs more GPUs). Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

POOR_CONFIG = ('MATMUL_CONFIGS = [\n    triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, '
               '"GROUP_SIZE_M": 8},\n                  num_warps=4, num_stages=2),\n]\n')


def kernel_file(folder: Path, shape: int) -> Path:
    text = (ROOT / "examples" / "matmul_autotune.py").read_text()
    text, configs = re.subn(r"MATMUL_CONFIGS = \[\n.*?\n\]\n", POOR_CONFIG, text, count=1, flags=re.S)
    text, shapes = re.subn(r"bench_shapes=\[\([^)]*\)\]", f"bench_shapes=[({shape}, {shape}, {shape})]", text)
    if configs != 1 or shapes != 1:
        sys.exit("bench/ray_search.py: examples/matmul_autotune.py changed shape; update kernel_file()")
    path = folder / "matmul_poor.py"
    path.write_text(text)
    return path


def search(path: Path, timer=None) -> tuple:
    """The search, and from its progress: seconds spent timing, configurations timed, rounds."""
    from kernel_lsp.engine.latency.search import search_tiling

    marks: list[tuple[float, str]] = []
    found = search_tiling(str(path), path.read_text(), "matmul_kernel", "H200", str(path.parent), verify=False,
                          cache=False, timer=timer, progress=lambda m, f: marks.append((time.perf_counter(), m)))
    rounds = [(t, m) for t, m in marks if m.startswith("timing ")]
    timed = sum(int(m.split()[1]) for _, m in rounds)
    seconds = marks[-1][0] - rounds[0][0] if rounds else 0.0
    return found, seconds, timed, len(rounds)


def show(label: str, found, seconds: float, timed: int, rounds: int) -> None:
    rate = f"{timed / seconds:.2f} candidates/s" if seconds else "nothing timed"
    print(f"{label}: {timed} timings in {rounds} round(s), {seconds:.1f} s = {rate}; "
          f"{found.measured_fraction:.0%} of {found.space_size} configurations measured")
    print(f"{label}: winner {found.winner} at {found.winner_us or 0:.1f} µs ({found.status}), "
          f"start {found.current} at {found.current_us or 0:.1f} µs"
          + (f", {found.speedup:.2f}x" if found.speedup else ""))
    for error in found.errors:
        print(f"{label}: error: {error}")
    if found.compared:
        print(f"{label}: {found.compared}")
    for node in found.nodes:
        print(f"{label}:   {node['node']}: {node['device']}, reference µs {node['reference_us']}, "
              f"{node['candidates']} candidates")


async def overhead(executor, jobs: int, resources) -> float:
    """Median seconds of a trivial job, one after the other, after a warming one."""
    await executor.run("tests.scale.jobs:where", 0.0, timeout=120, resources=resources)
    times = []
    for _ in range(jobs):
        started = time.perf_counter()
        outcome = await executor.run("tests.scale.jobs:where", 0.0, timeout=120, resources=resources)
        if not outcome.ok:
            raise RuntimeError(f"a trivial job failed: {outcome.message} {outcome.traceback[-500:]}")
        times.append(time.perf_counter() - started)
    await executor.close()
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", type=int, default=4096, help="M = N = K of the bench shape")
    parser.add_argument("--overhead-jobs", type=int, default=20)
    args = parser.parse_args()
    try:
        import ray
    except ImportError:
        print("bench/ray_search.py: Ray is not installed (pip install 'kernel-lsp[ray]', or put its unpacked wheel "
              "on PYTHONPATH)", file=sys.stderr)
        return 2
    from kernel_lsp.engine.gpu import gpu_present

    if not gpu_present():
        print("bench/ray_search.py: no GPU on this machine: the search's candidates are timed on a GPU",
              file=sys.stderr)
        return 2
    from kernel_lsp.engine.executor import ThreadExecutor, gpu, make_executor
    from kernel_lsp.engine.latency.cluster import ClusterTimer
    from kernel_lsp.engine.pool import WorkerPool
    from tests.scale.conftest import RayCluster

    print(f"ray {ray.__version__}, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} "
          f"({os.cpu_count()} cores)")
    folder = Path(tempfile.mkdtemp(prefix="bench-ray-search-"))
    path = kernel_file(folder, args.shape)
    print(f"kernel: matmul_kernel at {args.shape}^3, started from 64x64x32 / 4 warps / 2 stages")

    pool = WorkerPool(1, env={})
    local_overhead = asyncio.run(overhead(pool, args.overhead_jobs, gpu()))
    print(f"local pool: per-job overhead {1000 * local_overhead:.1f} ms (trivial job, median of "
          f"{args.overhead_jobs})")
    show("local", *search(path))

    started = time.perf_counter()
    try:
        cluster = RayCluster(folder, head=[f"--num-cpus={min(8, os.cpu_count() or 2)}"])
    except AssertionError as exc:
        print(f"bench/ray_search.py: the Ray cluster did not start: {exc}", file=sys.stderr)
        return 1
    try:
        said: list[str] = []
        print(f"ray: one-node cluster started in {time.perf_counter() - started:.1f} s at {cluster.address}")
        remote = make_executor("ray", ThreadExecutor, address=cluster.address, say=said.append)
        ray_overhead = asyncio.run(overhead(remote, args.overhead_jobs, gpu()))
        print(f"ray: per-job overhead {1000 * ray_overhead:.1f} ms (trivial one-GPU task, median of "
              f"{args.overhead_jobs})")
        timer = ClusterTimer(lambda: make_executor("ray", ThreadExecutor, address=cluster.address, say=said.append))
        try:
            if not timer.gpus_for("H200"):
                print(f"bench/ray_search.py: Ray sees no GPU on this machine ({timer.capacity})", file=sys.stderr)
                return 1
            print(f"ray: {timer.gpus_for('H200')} GPU(s), accelerator type {timer.accelerator or 'any'}")
            show("ray", *search(path, timer))
        finally:
            timer.close()
        for line in said:
            print(f"ray: {line}")
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
