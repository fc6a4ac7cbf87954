"""The Scheduler on its own: one pending job per key, a newer submission supersedes the older, a failing job
delivers nothing and the others carry on. Each case is a script of submissions and the results it must deliver.
Waits are on events, never on wall-clock time (tests/slow.py scales the limits)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kernel_lsp.engine.scheduler import Scheduler
from tests.slow import scaled


@pytest.fixture
async def scheduler():
    s = Scheduler(max_workers=2)
    yield s
    s.shutdown()


# (case, submissions as (key, value, delay in seconds), the results delivered, how many were superseded)
SCRIPTS = [
    ("different keys all deliver", [("a", 1, 0), ("b", 2, 0), ("c", 3, 0)], [("a", 1), ("b", 2), ("c", 3)], 0),
    ("a newer submission supersedes a delayed one", [("a", 1, 30), ("a", 2, 0)], [("a", 2)], 1),
    ("only the last of a burst delivers", [("a", i, 30) for i in range(5)] + [("a", 5, 0)], [("a", 5)], 5),
    ("superseding one key leaves the others", [("a", 1, 30), ("b", 2, 0), ("a", 3, 0)], [("a", 3), ("b", 2)], 1),
]


@pytest.mark.parametrize("case,submissions,delivered,superseded", SCRIPTS, ids=[s[0] for s in SCRIPTS])
async def test_scripts(scheduler, case, submissions, delivered, superseded):
    results: list[tuple[str, int]] = []
    for key, value, delay in submissions:
        scheduler.submit(key, lambda value=value: value, lambda r, key=key: results.append((key, r)), delay=delay)
    await asyncio.wait_for(scheduler.drain(), scaled(30))
    assert sorted(results) == sorted(delivered)
    assert scheduler.superseded == superseded
    assert scheduler.completed == len(delivered)
    assert scheduler.queued == 0


async def test_a_failing_job_delivers_nothing_and_the_next_one_runs(scheduler):
    results = []

    def fail() -> int:
        raise ValueError("the work failed")

    scheduler.submit("a", fail, results.append)
    await asyncio.wait_for(scheduler.drain(), scaled(30))
    scheduler.submit("a", lambda: 7, results.append)
    await asyncio.wait_for(scheduler.drain(), scaled(30))
    assert results == [7]


async def test_a_failing_delivery_does_not_stop_the_others(scheduler):
    results = []

    def deliver_badly(_):
        raise RuntimeError("the delivery failed")

    scheduler.submit("a", lambda: 1, deliver_badly)
    scheduler.submit("b", lambda: 2, results.append)
    await asyncio.wait_for(scheduler.drain(), scaled(30))
    assert results == [2] and scheduler.completed == 2


async def test_cancel_drops_a_running_jobs_result(scheduler):
    started, release = threading.Event(), threading.Event()
    results = []

    def slow() -> int:
        started.set()
        release.wait(scaled(30))
        return 1

    scheduler.submit("a", slow, results.append)
    assert await asyncio.to_thread(started.wait, scaled(30))
    assert scheduler.queued == 1
    assert scheduler.cancel("a") is True
    release.set()
    await asyncio.wait_for(scheduler.drain(), scaled(30))
    assert results == [] and scheduler.superseded == 1


async def test_async_work_is_superseded_too(scheduler):
    results = []
    gate = asyncio.Event()

    async def first() -> str:
        await gate.wait()
        return "first"

    async def second() -> str:
        return "second"

    scheduler.submit_async("k", first, results.append)
    await asyncio.sleep(0)
    scheduler.submit_async("k", second, results.append)
    gate.set()
    await asyncio.wait_for(scheduler.drain(), scaled(30))
    assert results == ["second"]


async def test_a_superseded_running_job_is_told_to_stop_and_frees_its_thread():
    """Cancelling a task leaves its thread running; the job's cancel event stops it, so with one thread the
    newer job runs at once instead of after the old one's end (which, here, never comes unless it stops)."""
    scheduler = Scheduler(max_workers=1)
    started = threading.Event()
    stopped_early: list[bool] = []
    results = []
    first_cancel = threading.Event()

    def superseded() -> str:
        started.set()
        stopped_early.append(first_cancel.wait(scaled(60)))  # a checkpoint that looks at the event
        return "old"

    try:
        scheduler.submit("a", superseded, results.append, cancel=first_cancel)
        assert await asyncio.to_thread(started.wait, scaled(30))
        scheduler.submit("a", lambda: "new", results.append, cancel=threading.Event())
        await asyncio.wait_for(scheduler.drain(), scaled(30))
        assert results == ["new"]
        assert stopped_early == [True] and scheduler.stopped == 1 and scheduler.superseded == 1
    finally:
        scheduler.shutdown()


async def test_a_superseded_analysis_stops_inside_the_analyzers():
    """The server's analysis job: a newer version's submission sets the older one's event, and analyze_source
    raises AnalysisCancelled at its next checkpoint instead of finishing the whole file."""
    from analyzers import analyze_source
    from analyzers.budget import AnalysisCancelled, Budget
    from bench.common import big_kernel_file

    text, _ = big_kernel_file(30, 0)
    scheduler = Scheduler(max_workers=1)
    reached, outcome, results = threading.Event(), [], []
    first_cancel = threading.Event()
    checkpoint = Budget.checkpoint

    def analysis() -> str:
        def hold(self: Budget) -> None:  # wait at the first checkpoint until the newer version arrives
            reached.set()
            first_cancel.wait(scaled(60))
            checkpoint(self)

        Budget.checkpoint = hold  # type: ignore[method-assign]
        try:
            analyze_source(text, "big.py", None, first_cancel)
            outcome.append("finished")
        except AnalysisCancelled:
            outcome.append("stopped")
        finally:
            Budget.checkpoint = checkpoint  # type: ignore[method-assign]
        return "old"

    try:
        scheduler.submit("analyze", analysis, results.append, cancel=first_cancel)
        assert await asyncio.to_thread(reached.wait, scaled(30))
        scheduler.submit("analyze", lambda: "new", results.append, cancel=threading.Event())
        await asyncio.wait_for(scheduler.drain(), scaled(60))
        assert outcome == ["stopped"] and results == ["new"]
    finally:
        scheduler.shutdown()
