"""The worker pool: outcomes, kills and replacements, priorities, superseding, clean shutdown.

Workers are real spawned processes; they import the test jobs from tests/engine/jobs_for_tests.py through the
sys.path they inherit from pytest (the repository root).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_lsp.engine.pool import Status, WorkerPool
from tests.procs import proc_state
from tests.slow import scaled

J = "tests.engine.jobs_for_tests:"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def pool():
    p = WorkerPool(1)
    yield p
    await p.close()


async def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    for _ in range(int(timeout / 0.01)):
        if path.exists():
            return path.read_text()
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


async def wait_until_running(pool: WorkerPool, n: int = 1) -> None:
    for _ in range(1000):
        if pool.stats()["running"] >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the job never started")


def children_of_this_process() -> dict[int, str]:
    """pid -> state of every child process, zombies included (which multiprocessing.active_children hides)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == os.getpid():
                found[int(entry)] = state
    return found


async def test_background_workers_run_at_a_lower_priority():
    """Compile workers yield the cores to the server that answers the editor (its nice value stays)."""
    pool = WorkerPool(1, niceness=5)
    try:
        outcome = await pool.run(J + "niceness", None, timeout=scaled(30))
        assert outcome.ok, outcome
        assert outcome.value == min(os.nice(0) + 5, 19)
    finally:
        await pool.close()


async def test_ok_lazily_started_with_env_and_initializer():
    pool = WorkerPool(2, initializer=J + "init", env={"KERNEL_LSP_TEST_VAR": "set", "KERNEL_LSP_TEST_GONE": None})
    os.environ["KERNEL_LSP_TEST_GONE"] = "inherited"
    try:
        assert pool.stats()["workersAlive"] == 0  # nothing started before the first job
        outcome = await pool.run(J + "describe", None, timeout=10)
        assert outcome.ok and outcome.status == "ok", outcome
        assert outcome.value["initialized"] and outcome.value["var"] == "set" and outcome.value["gone"] is None
        assert outcome.value["pid"] != os.getpid()
        assert (await pool.run(J + "echo", {"a": (1, 2)}, timeout=10)).value == {"a": (1, 2)}
        assert pool.stats()["workersAlive"] == 1  # one job at a time needs one worker
        assert pool.stats()["completed"] == 2
    finally:
        os.environ.pop("KERNEL_LSP_TEST_GONE")
        await pool.close()


async def test_exception_becomes_error_with_traceback_and_worker_survives(pool):
    pid = (await pool.run(J + "getpid", None, timeout=10)).value
    outcome = await pool.run(J + "fail", "bad kernel", timeout=10)
    assert outcome.status is Status.ERROR
    assert "ValueError: bad kernel" in outcome.traceback and "jobs_for_tests.py" in outcome.traceback
    assert "ValueError: bad kernel" in outcome.message
    result = await pool.run(J + "unpicklable", None, timeout=10)
    assert result.status is Status.ERROR and "pickle" in result.traceback.lower()
    missing = await pool.run("tests.engine.jobs_for_tests:no_such_function", None, timeout=10)
    assert missing.status is Status.ERROR and "AttributeError" in missing.traceback
    assert (await pool.run(J + "getpid", None, timeout=10)).value == pid  # same worker: an error is no crash
    assert pool.stats()["restarts"] == 0


async def test_timeout_kills_the_worker_and_the_next_job_gets_a_fresh_one(pool):
    pid = (await pool.run(J + "getpid", None, timeout=10)).value
    outcome = await pool.run(J + "sleep", 60, timeout=0.3)
    assert outcome.status is Status.TIMEOUT and "0.3 s" in outcome.message
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped
    after = await pool.run(J + "getpid", None, timeout=10)
    assert after.ok and after.value != pid
    stats = pool.stats()
    assert stats["timedOut"] == 1 and stats["restarts"] == 1


async def test_crashes_are_reported_and_other_jobs_carry_on(tmp_path):
    pool = WorkerPool(2)
    try:
        pid_file = tmp_path / "pid"
        other = asyncio.create_task(pool.run(J + "sleep", 0.5, timeout=10))
        victim = asyncio.create_task(pool.run(J + "write_pid_and_sleep", str(pid_file), timeout=30))
        os.kill(int(await wait_for_file(pid_file)), signal.SIGKILL)
        crashed = await victim
        assert crashed.status is Status.CRASHED and crashed.exitcode == -signal.SIGKILL
        assert "SIGKILL" in crashed.message
        assert (await other).ok  # the other worker was not disturbed

        segv = await pool.run(J + "segfault", None, timeout=10)
        assert segv.status is Status.CRASHED and "SIGSEGV" in segv.message
        exited = await pool.run(J + "exit_code", 3, timeout=10)
        assert exited.status is Status.CRASHED and exited.exitcode == 3 and "code 3" in exited.message

        assert (await pool.run(J + "getpid", None, timeout=10)).ok  # recovered
        stats = pool.stats()
        assert stats["crashed"] == 3 and stats["restarts"] == 3 and stats["workersAlive"] == 2
    finally:
        await pool.close()


async def test_memory_limit_is_a_crash_that_says_memory():
    pool = WorkerPool(1, memory_limit_mb=1024)
    try:
        outcome = await pool.run(J + "hog_memory", None, timeout=20)
        assert outcome.status is Status.CRASHED, outcome
        assert "out of memory" in outcome.message and "1024 MB" in outcome.message
        assert (await pool.run(J + "echo", "fine", timeout=10)).value == "fine"
    finally:
        await pool.close()


async def test_priorities_order_queued_jobs(pool, tmp_path):
    release, log = tmp_path / "release", tmp_path / "log"
    blocker = asyncio.create_task(pool.run(J + "wait_for_file", str(release), timeout=30))
    await wait_until_running(pool)
    jobs = [
        asyncio.create_task(pool.run(J + "append_line", (str(log), label), timeout=10, priority=priority))
        for label, priority in [("p5", 5), ("p1-first", 1), ("p3", 3), ("p0", 0), ("p1-second", 1)]
    ]
    await asyncio.sleep(0.05)
    assert pool.stats()["queued"] == 5
    release.touch()
    assert (await blocker).value == "released"
    assert all(o.ok for o in await asyncio.gather(*jobs))
    assert log.read_text().split() == ["p0", "p1-first", "p1-second", "p3", "p5"]


async def test_a_hold_keeps_queued_jobs_waiting_until_it_ends(pool):
    """While someone types (hold), no queued job starts; when the hold ends they run, none lost."""
    pool.hold(scaled(1))
    job = asyncio.create_task(pool.run(J + "echo", "after the hold", timeout=scaled(30)))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert pool.stats()["queued"] == 1 and pool.stats()["running"] == 0
    outcome = await asyncio.wait_for(job, scaled(60))
    assert outcome.ok and outcome.value == "after the hold"


async def test_same_key_supersedes_a_queued_job_and_cancel_works(pool, tmp_path):
    release, log = tmp_path / "release", tmp_path / "log"
    blocker = asyncio.create_task(pool.run(J + "wait_for_file", str(release), timeout=30))
    await wait_until_running(pool)
    old = asyncio.create_task(pool.run(J + "append_line", (str(log), "old"), timeout=10, key="kernel.py:add"))
    await asyncio.sleep(0)
    new = asyncio.create_task(pool.run(J + "append_line", (str(log), "new"), timeout=10, key="kernel.py:add"))
    dropped = asyncio.create_task(pool.run(J + "append_line", (str(log), "dropped"), timeout=10, key="other"))
    awaited = asyncio.create_task(pool.run(J + "append_line", (str(log), "awaited"), timeout=10))
    await asyncio.sleep(0)
    assert pool.cancel("other") and not pool.cancel("no such key")
    awaited.cancel()  # the caller gives up: the queued job must not run either
    assert (await old).status is Status.CANCELLED
    assert (await dropped).status is Status.CANCELLED
    release.touch()
    await blocker
    assert (await new).ok
    with pytest.raises(asyncio.CancelledError):
        await awaited
    assert log.read_text().split() == ["new"]
    assert pool.stats()["cancelled"] == 3


async def test_superseding_a_running_job_drops_its_result_or_kills_it(pool, tmp_path):
    release, log = tmp_path / "release", tmp_path / "log"
    # Left to finish: the old caller hears CANCELLED at once, the worker finishes it, then runs the new job.
    old = asyncio.create_task(pool.run(J + "wait_for_file", str(release), timeout=30, key="k"))
    await wait_until_running(pool)
    pid = pool.stats()["pids"][0]
    new = asyncio.create_task(pool.run(J + "append_line", (str(log), "new"), timeout=10, key="k"))
    assert (await old).status is Status.CANCELLED
    release.touch()
    assert (await new).ok
    assert pool.stats()["pids"] == [pid] and pool.stats()["restarts"] == 0

    # kill_running: the hung worker is killed and replaced, the new job runs on the replacement.
    pid_file = tmp_path / "pid"
    hung = asyncio.create_task(pool.run(J + "write_pid_and_sleep", str(pid_file), timeout=30, key="k"))
    await wait_for_file(pid_file)
    newest = await pool.run(J + "getpid", None, timeout=10, key="k", kill_running=True)
    assert (await hung).status is Status.CANCELLED
    assert newest.ok and newest.value != pid
    stats = pool.stats()
    assert stats["restarts"] == 1 and stats["crashed"] == 0  # a kill we asked for is no crash


async def test_close_stops_every_worker_and_leaves_no_zombie(tmp_path):
    pool = WorkerPool(2)
    first = asyncio.gather(*(pool.run(J + "sleep", 0.2, timeout=10) for _ in range(2)))
    pids = {o.value for o in await first}
    assert len(pids) == 2
    pid_file = tmp_path / "pid"
    running = asyncio.create_task(pool.run(J + "write_pid_and_sleep", str(pid_file), timeout=30))
    queued = [asyncio.create_task(pool.run(J + "sleep", 5, timeout=10)) for _ in range(2)]
    pids.add(int(await wait_for_file(pid_file)))
    await asyncio.wait_for(pool.close(), 5)
    assert (await running).status is Status.CANCELLED
    assert [o.status for o in await asyncio.gather(*queued)] == [Status.CANCELLED] * 2
    assert not {p.pid for p in multiprocessing.active_children()} & pids
    children = children_of_this_process()
    assert not set(children) & pids, children
    assert "Z" not in children.values(), children
    assert pool.stats()["workersAlive"] == 0
    with pytest.raises(RuntimeError):
        await pool.run(J + "echo", 1, timeout=1)


async def test_a_failing_initializer_is_an_error_not_a_restart_loop():
    pool = WorkerPool(1, initializer=J + "broken_init")
    try:
        for _ in range(2):  # each job tries a new worker, and says why it could not start
            outcome = await pool.run(J + "echo", 1, timeout=10)
            assert outcome.status is Status.ERROR and "initializer" in outcome.message
            assert "ImportError: triton is not installed" in outcome.traceback
        stats = pool.stats()
        assert stats["restarts"] == 0 and stats["workersAlive"] == 0
    finally:
        await pool.close()


def test_workers_exit_when_the_server_is_killed_without_closing(tmp_path):
    pid_file = tmp_path / "pid"
    script = f"""
import asyncio
from kernel_lsp.engine.pool import WorkerPool
asyncio.run(WorkerPool(1).run({J + "write_pid_and_sleep"!r}, {str(pid_file)!r}, timeout=60))
"""
    server = subprocess.Popen([sys.executable, "-c", script], cwd=REPO)
    try:
        deadline = time.monotonic() + scaled(10)
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        worker = int(pid_file.read_text())
    finally:
        server.kill()
        server.wait()
    deadline = time.monotonic() + scaled(5)
    # Gone, or a zombie of whoever adopted it: either way no longer running the job.
    while proc_state(worker) not in (None, "Z"):
        assert time.monotonic() < deadline, f"worker {worker} outlived its server"
        time.sleep(0.01)
