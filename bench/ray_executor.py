"""The Ray executor against the local pool on this machine: per-job overhead, and the throughput of interpreter
checks and of compiles with 1 and 2 workers, local and on a local two-node Ray cluster (one CPU per node).

    python bench/ray_executor.py [--jobs 30]

Starts its own cluster (a head and a worker process, `ray start --block`) and stops it at the end. Prints one line
per figure; asserts nothing. The figures are only as good as the machine is idle: it prints the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernel_lsp.engine.executor import CPU, ThreadExecutor  # noqa: E402
from kernel_lsp.engine.pool import WorkerPool  # noqa: E402
from kernel_lsp.engine.ray_executor import RayExecutor  # noqa: E402
from tests.scale.conftest import RayCluster  # noqa: E402

EXAMPLES = ["vector_add.py", "fused_softmax.py", "layernorm.py", "matmul_autotune.py"]


async def overhead(executor, jobs: int) -> float:
    """Median seconds per trivial job, one after the other, after a first (warming) one."""
    await executor.run("tests.scale.jobs:where", 0.0, timeout=120)
    times = []
    for _ in range(jobs):
        started = time.perf_counter()
        outcome = await executor.run("tests.scale.jobs:where", 0.0, timeout=120)
        assert outcome.ok, outcome
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def checks(executor, repeat: int) -> tuple[float, int]:
    """Wall seconds to check every example's specs `repeat` times, all submitted at once."""
    from kernel_lsp.engine.verify import CheckRequest

    requests = [CheckRequest(str(ROOT / "examples" / name), (ROOT / "examples" / name).read_text(),
                             device="interpreter", root=str(ROOT)) for name in EXAMPLES] * repeat
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(executor.run("kernel_lsp.engine.verify:run_checks", r, timeout=600,
                                                   resources=CPU) for r in requests))
    assert all(o.ok and o.value.verdicts for o in outcomes), [o.message for o in outcomes]
    return time.perf_counter() - started, len(requests)


async def compiles(executor, jobs: list) -> float:
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(executor.run("kernel_lsp.engine.compile.service:compile_job", j,
                                                   timeout=600) for j in jobs))
    assert all(o.ok and o.value.ok for o in outcomes), [o.message or o.traceback[-300:] for o in outcomes]
    return time.perf_counter() - started


def compile_jobs() -> list:
    from kernel_lsp.engine.compile.specialize import make_target, plan_jobs

    from analyzers.analyze import analyze_source

    jobs = []
    for name in EXAMPLES:
        path = ROOT / "examples" / name
        text = path.read_text()
        analysis = analyze_source(text, str(path))
        sites = [(s, text, str(path)) for s in analysis.launch_sites]
        for kernel in analysis.kernels:
            try:
                jobs += plan_jobs(text, kernel.name, [make_target("sm_90")], path=str(path), launch_sites=sites)
            except ValueError:  # a block size computed at run time: not compiled offline (KC009)
                continue
    return jobs


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=2, help="how many times each example's specs are checked")
    parser.add_argument("--ray-only", action="store_true", help="skip the local figures")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    jobs = compile_jobs()
    print(f"compile jobs: {len(jobs)} (examples, sm_90, every configuration), each in a fresh triton cache")

    def fresh_cache_env() -> dict:
        folder = tempfile.mkdtemp(prefix="bench-triton-")
        return {"TRITON_CACHE_DIR": folder, "KERNEL_LSP_TRITON_CACHE_DIR": folder, "TRITON_INTERPRET": None}

    for size in () if args.ray_only else (1, 2):
        pool = WorkerPool(size, env={})
        print(f"local pool, {size} worker(s): per-job overhead {1000 * await overhead(pool, args.jobs):.1f} ms")
        await pool.close()
        seconds, n = await checks(ThreadExecutor(size), args.repeat)
        print(f"local, {size} check(s) at once: {n} interpreter checks in {seconds:.1f} s = {n / seconds:.2f}/s")
        pool = WorkerPool(size, env=fresh_cache_env(), initializer="kernel_lsp.engine.compile.service:warm_worker")
        pool.prestart()
        seconds = await compiles(pool, jobs)
        print(f"local, {size} compile worker(s): {len(jobs)} compiles in {seconds:.1f} s = {len(jobs) / seconds:.2f}/s")
        await pool.close()

    logs = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    started = time.perf_counter()
    os.environ["KERNEL_LSP_TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-triton-")  # inherited by the nodes
    cluster = RayCluster(logs, head=["--num-cpus=1", "--num-gpus=0"], workers=[["--num-cpus=1", "--num-gpus=0"]])
    try:
        executor = RayExecutor(cluster.address, fallback=ThreadExecutor)
        await executor.capacity()
        print(f"ray: cluster started and connected in {time.perf_counter() - started:.1f} s")
        print(f"ray, 2 nodes x 1 CPU: per-job overhead {1000 * await overhead(executor, args.jobs):.1f} ms")
        seconds, n = await checks(executor, args.repeat)
        print(f"ray, 2 nodes x 1 CPU: {n} interpreter checks in {seconds:.1f} s = {n / seconds:.2f}/s")
        seconds = await compiles(executor, jobs)
        print(f"ray, 2 nodes x 1 CPU: {len(jobs)} compiles in {seconds:.1f} s = {len(jobs) / seconds:.2f}/s")
        print("ray:", executor.stats())
        await executor.close()
    finally:
        cluster.stop()
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
