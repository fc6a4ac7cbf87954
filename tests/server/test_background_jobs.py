"""Background work (checks, timing, profiling, the tiling search, the assistant) goes through one helper: its
progress always ends, a newer job for the same file supersedes the older, and cancelling the request stops the
worker's process (the work sees its cancel event set)."""

from __future__ import annotations

import asyncio
import threading

import pytest

import kernel_lsp.engine.latency as latency
from kernel_lsp.background import background_job
from kernel_lsp.server import KernelLanguageServer

WAIT = 60.0  # seconds: generous, the machine running the suite may be busy


class FakeProgress:
    """The server's progress calls, recorded (the helper needs nothing else of the server)."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.count = 0

    async def begin_progress(self, message: str) -> str:
        self.count += 1
        token = f"t{self.count}"
        self.events.append(("begin", token, message))
        return token

    def end_progress(self, token, message=None) -> None:
        self.events.append(("end", token, message))

    def report_progress(self, token, message, percentage=None) -> None:
        self.events.append(("report", token, message))

    def thread_progress(self, token):
        loop = asyncio.get_running_loop()
        return lambda message, fraction: loop.call_soon_threadsafe(self.report_progress, token, message)


async def test_a_newer_job_supersedes_the_older_and_each_frees_only_its_own_slot():
    ls = FakeProgress()
    running: dict = {}
    older_started = asyncio.Event()
    release = asyncio.Event()

    async def older():
        async with background_job(ls, "checking a", running=running, key="a.py") as job:
            older_started.set()
            await release.wait()
        return job

    first = asyncio.ensure_future(older())
    await asyncio.wait_for(older_started.wait(), WAIT)
    async with background_job(ls, "checking a again", running=running, key="a.py") as newer:
        assert running["a.py"] is newer.cancel
        release.set()
        old_job = await asyncio.wait_for(first, WAIT)
        assert old_job.cancelled and not old_job.still_current()
        assert running["a.py"] is newer.cancel  # the older job ended without freeing the newer one's slot
    assert not newer.cancelled and running == {}
    assert [e[0] for e in ls.events] == ["begin", "begin", "end", "end"]


async def test_progress_ends_when_the_work_fails_and_when_it_is_cancelled():
    ls = FakeProgress()
    with pytest.raises(ZeroDivisionError):
        async with background_job(ls, "failing") as job:
            job.end_message = "failed"
            raise ZeroDivisionError("the work failed")
    assert ls.events[-1] == ("end", "t1", "failed")

    inside = asyncio.Event()
    seen: list[threading.Event] = []

    async def cancelled():
        async with background_job(ls, "cancelled") as job:
            seen.append(job.cancel)
            inside.set()
            await asyncio.sleep(WAIT)

    task = asyncio.ensure_future(cancelled())
    await asyncio.wait_for(inside.wait(), WAIT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen[0].is_set()  # what the work's process watches
    assert ls.events[-1][0] == "end"


async def test_a_job_is_current_only_while_its_text_is():
    ls = FakeProgress()
    text = {"now": "v1"}
    async with background_job(ls, "timing", current=lambda: text["now"] == "v1") as job:
        assert job.still_current()
        text["now"] = "v2"
        assert not job.still_current()


async def test_progress_from_the_worker_thread_arrives_on_the_loop():
    ls = FakeProgress()
    async with background_job(ls, "searching") as job:
        await job.run(job.thread_progress(), "3 of 10", 0.3)
        await asyncio.sleep(0)  # the report was scheduled on the loop
    assert ("report", "t1", "3 of 10") in ls.events


async def test_cancelling_a_latency_run_stops_its_worker(monkeypatch, tmp_path):
    """A latency run hands its worker a cancel event: cancelling the task (a superseding check, a cancelled request)
    must set it, or the worker's process runs on."""
    started, stopped = threading.Event(), threading.Event()

    def estimate_file(path, text, targets, kernels, root, *, hardware=None, resources=None, cancel=None):
        started.set()
        if cancel is not None and cancel.wait(WAIT):
            stopped.set()
        raise AssertionError("the estimate was never cancelled")

    monkeypatch.setattr(latency, "estimate_file", estimate_file)
    ls = KernelLanguageServer()
    ls.state.client_trusted = True  # timing runs the file's code: the API refuses it in an untrusted folder
    path = str(tmp_path / "k.py")
    task = asyncio.ensure_future(ls.latency.run(path, "text", ("k",), gpu=False))
    assert await asyncio.to_thread(started.wait, WAIT)
    assert path in ls.latency.running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(stopped.wait, WAIT), "the worker was left running"
    assert path not in ls.latency.running
