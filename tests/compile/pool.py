"""Compiles a batch of jobs in worker processes (spawned, like the real pool) and reports the times."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

from kernel_lsp.engine.compile.jobs import CompileJob, CompileResult
from kernel_lsp.engine.compile.worker import run_job


def compile_all(jobs: dict[str, CompileJob], cache_dir: str, sass: tuple[str, ...] = (),
                workers: int = 2) -> tuple[dict[str, CompileResult], float]:
    """{name: job} -> ({name: result}, wall seconds). Jobs in `sass` also get their SASS disassembled."""
    started = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")  # no triton state inherited from the test process
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {name: pool.submit(run_job, job, cache_dir, sass=name in sass) for name, job in jobs.items()}
        results = {name: f.result() for name, f in futures.items()}
    return results, time.perf_counter() - started


def report(request, title: str, results: dict[str, CompileResult], wall: float) -> None:
    """Per-job compile seconds on the terminal (shown with -s or -v; always at the end of the run)."""
    lines = [f"{title}: {len(results)} jobs in {wall:.1f} s wall"]
    lines += [f"  {r.seconds:6.2f} s  {name}" for name, r in sorted(results.items(), key=lambda kv: -kv[1].seconds)]
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        request.config.add_cleanup(lambda: [reporter.write_line(line) for line in lines])
