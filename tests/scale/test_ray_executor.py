"""The Ray executor's promises, on a real two-node cluster: a worker killed mid-job is retried, a hung job is killed
at its timeout, a cancelled job's Ray worker is killed, and an unreachable cluster means running here, with a
message."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from kernel_lsp.engine.batch import CHECK_FN
from kernel_lsp.engine.executor import ThreadExecutor
from kernel_lsp.engine.pool import Status
from kernel_lsp.engine.ray_executor import RayExecutor
from kernel_lsp.engine.verify import CheckRequest
from kernel_lsp.engine.verify.process import RUNNER

import pytest

from tests.procs import alive, running_below
from tests.slow import scaled
from tests.verify.test_process import SPINS

from .conftest import free_port, session_pids

# Each test may start the session's cluster and run the local reference first: minutes on a busy 2-core machine.
pytestmark = pytest.mark.timeout(900)


async def _file_appears(folder: Path, pattern: str, timeout: float = 40) -> Path:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        found = sorted(folder.glob(pattern))
        if found and found[0].read_text():
            return found[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {pattern} in {folder} after {timeout} s")


async def _gone(pid: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.2)
    return False


def _executor(cluster, said: list[str], **kwargs) -> RayExecutor:
    return RayExecutor(cluster.address, fallback=ThreadExecutor, say=said.append, **kwargs)


async def test_a_worker_killed_mid_job_is_retried_and_the_job_answers(ray_cluster, tmp_path):
    said: list[str] = []
    executor = _executor(ray_cluster, said)
    try:
        job = asyncio.create_task(executor.run("tests.scale.jobs:dies_once", str(tmp_path), timeout=300))
        marker = await _file_appears(tmp_path, "first-attempt.pid")
        first = int(marker.read_text())
        os.kill(first, 9)  # the Ray worker process running the job
        outcome = await asyncio.wait_for(job, scaled(80))
        assert outcome.status is Status.OK, outcome
        assert outcome.value.endswith(f"after {first} was killed")
        assert executor.on_ray and not said
        assert executor.stats()["onRay"] == 1
    finally:
        await executor.close()
    assert executor.log_path and not os.path.exists(executor.log_path), "the Ray driver's log was left behind"


async def test_a_hung_job_is_killed_at_its_timeout(ray_cluster, tmp_path):
    said: list[str] = []
    # The allowance covers a Ray worker starting and importing the job: the hang must have begun (it writes its
    # pid) before the deadline kills it, also on a busy machine.
    executor = _executor(ray_cluster, said, start_allowance=scaled(5))
    try:
        outcome = await asyncio.wait_for(executor.run("tests.scale.jobs:hangs", str(tmp_path), timeout=3.0), scaled(80))
        assert outcome.status is Status.TIMEOUT, outcome
        assert "no answer within 3 s" in outcome.message and "Ray worker was killed" in outcome.message
        pid = int((await _file_appears(tmp_path, "hang-*.pid")).read_text())
        assert await _gone(pid), "the hung job's Ray worker is still running"
        assert not said
    finally:
        await executor.close()


async def test_cancelling_a_job_kills_its_ray_task(ray_cluster, tmp_path):
    executor = _executor(ray_cluster, [])
    try:
        job = asyncio.create_task(executor.run("tests.scale.jobs:hangs", str(tmp_path), timeout=600))
        pid = int((await _file_appears(tmp_path, "hang-*.pid")).read_text())
        job.cancel()
        try:
            await job
        except asyncio.CancelledError:
            pass
        assert await _gone(pid), "the cancelled job's Ray worker is still running"
        assert executor.stats()["cancelled"] == 1
    finally:
        await executor.close()


async def test_a_cancelled_check_leaves_no_checking_process_on_the_node(ray_cluster, tmp_path):
    """Ray kills the worker of a cancelled task; the check's own process, a child of that worker, must end too,
    though its time limit (an hour here) was enforced by the worker."""
    path = tmp_path / "spins.py"
    path.write_text(SPINS)
    executor = _executor(ray_cluster, [])
    checking: list[int] = []
    try:
        job = asyncio.create_task(executor.run(
            CHECK_FN, CheckRequest(str(path), SPINS, timeout_s=3600, device="interpreter"), timeout=3600))
        deadline = time.monotonic() + scaled(120)
        while not (Path(str(path) + ".spinning").exists() and (checking := [
                child for worker in session_pids(ray_cluster, "ray::run_checks")
                for child in running_below(worker, RUNNER)])):
            assert not job.done() and time.monotonic() < deadline, "the check did not reach its launcher on the node"
            await asyncio.sleep(0.2)
        job.cancel()
        try:
            await job
        except asyncio.CancelledError:
            pass
        assert await _gone(checking[0], 60), "the checking process outlived its cancelled Ray task"
    finally:
        await executor.close()
        for pid in checking:
            if alive(pid):
                os.kill(pid, 9)


async def test_an_unreachable_cluster_runs_the_jobs_here_and_says_so(tmp_path):
    said: list[str] = []
    port = free_port()
    executor = RayExecutor(f"127.0.0.1:{port}", fallback=ThreadExecutor, say=said.append)
    try:
        outcome = await executor.run("tests.scale.jobs:where", 0.0, timeout=30)
        assert outcome.status is Status.OK and outcome.value["pid"] == os.getpid()
        assert said == [f"the Ray cluster (127.0.0.1:{port}) cannot be reached: nothing answers at 127.0.0.1:{port}; "
                        "running on this machine instead"]
        assert not executor.on_ray and executor.stats()["onLocal"] == 1
    finally:
        await executor.close()
    assert not os.path.exists(executor.log_path), "the Ray driver's log was left behind"
