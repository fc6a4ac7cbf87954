"""A pool of long-lived worker processes for heavy jobs (compiles, runs), driven from the asyncio loop.

`await pool.run("package.module:function", arg, timeout=10.0, priority=0, key=...)` runs `function(arg)` in a
worker and always returns an `Outcome`; it never raises for anything the job or its worker did. A worker that
crashes, runs out of memory or overruns its timeout is killed and replaced; the other workers carry on.

POSIX only (Linux, macOS): waiting uses `loop.add_reader` on the worker's pipe and process sentinel, and kills
go to the worker's process group.
"""

from __future__ import annotations

import asyncio
import atexit
import enum
import heapq
import importlib
import itertools
import logging
import multiprocessing
import multiprocessing.util  # registers its atexit hook before ours, so ours runs first (LIFO)
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# spawn, not fork: the server process has threads (watchdog, executor) and an asyncio loop that a forked child
# would inherit half-locked. spawn is also the default on macOS. A spawned worker is ready in ~0.1 s plus
# whatever its initializer imports.
_CTX = multiprocessing.get_context("spawn")

MEMORY_EXIT_CODE = 86  # a worker whose job hit MemoryError exits with this: its state is not trustworthy after
_TIMEOUT = object()  # _receive: nothing arrived in time
_DIED = object()  # _receive: the worker's process ended (or closed its pipe)


class Status(enum.StrEnum):
    OK = "ok"  # value: what the function returned
    ERROR = "error"  # the function raised: traceback is the worker's
    TIMEOUT = "timeout"  # killed after `timeout` seconds
    CRASHED = "crashed"  # the worker died: signal, exit code, memory limit
    CANCELLED = "cancelled"  # superseded, cancelled, or the pool closed


@dataclass(frozen=True)
class Outcome:
    status: Status
    value: Any = None
    message: str = ""  # one line a diagnostic can show the user: what happened
    traceback: str = ""
    exitcode: int | None = None  # CRASHED: the exit code, or minus the signal number
    seconds: float = 0.0  # time from handing the job to the worker to its answer

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


# --- the worker process ------------------------------------------------------------------------------------------


def _resolve(path: str) -> Callable:
    module, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _call(functions: dict[str, Callable], job_id: int, fn_path: str, payload: bytes) -> tuple:
    """One job, as the reply to send. Arguments and results are (un)pickled here, inside the try, so that a bad
    one is that job's error; returning drops the job's objects before the worker waits for the next one."""
    try:
        if fn_path not in functions:
            functions[fn_path] = _resolve(fn_path)
        value = functions[fn_path](pickle.loads(payload))
        return (job_id, "ok", pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    except MemoryError:
        raise
    except BaseException:  # noqa: BLE001 - SystemExit from a job is the job's error, not the worker's end
        return (job_id, "error", traceback.format_exc())


def _worker_main(conn, env: dict[str, str | None], memory_limit_mb: int | None, initializer: str | None,
                 niceness: int = 0) -> None:
    # The server's stdout may be the LSP stream: whatever a job prints (triton, LLVM, print debugging) goes to stderr.
    os.dup2(2, 1)
    if niceness:  # background work yields the cores to the process answering the editor (and ptxas inherits it)
        try:
            os.nice(niceness)
        except OSError:
            pass
    # Own process group: killing the worker also kills what its job started (ptxas, ...), and a Ctrl-C in the
    # server's terminal reaches the server only, which then stops its workers itself.
    os.setpgrp()
    parent = multiprocessing.parent_process()
    if parent is not None:  # the server was SIGKILLed without closing the pool: do not linger with a hung job
        def exit_with_parent() -> None:
            parent.join()
            os._exit(1)

        threading.Thread(target=exit_with_parent, daemon=True).start()
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    python_path = env.get("PYTHONPATH")
    if python_path:  # read only at interpreter start-up, which is over: apply it by hand
        sys.path[:0] = [p for p in python_path.split(os.pathsep) if p]
    try:
        if memory_limit_mb:
            import resource

            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            limit = memory_limit_mb * 2**20
            if hard != resource.RLIM_INFINITY:
                limit = min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        try:
            if initializer:
                _resolve(initializer)()
        except Exception:  # noqa: BLE001 - reported to the pool, which tells the job's caller
            conn.send(("init_error", traceback.format_exc()))
            return
        conn.send(("ready", os.getpid()))
        functions: dict[str, Callable] = {}
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the pool closed its end
                return
            if message is None:  # orderly shutdown
                return
            conn.send(_call(functions, *message))
    except MemoryError:
        # Under RLIMIT_AS a large allocation fails with MemoryError rather than a kill; the process may be left
        # without room to do anything sensible, so leave with a code the pool reports as "out of memory".
        os._exit(MEMORY_EXIT_CODE)


# --- the pool ----------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Job:
    id: int
    fn_path: str
    payload: bytes
    timeout: float
    key: Hashable | None
    future: asyncio.Future
    sent: bool = False  # handed to a worker: cancelling it now means discarding (or killing), not dequeuing


@dataclass(eq=False)
class _Worker:
    process: Any
    conn: Any
    pid: int
    ready: bool = False  # sent "ready": its initializer finished
    job: _Job | None = None


_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """A server that exits without `await pool.close()` still leaves no workers behind."""
    for pool in list(_pools):
        for worker in list(pool._workers):
            pool._kill(worker)
            worker.process.join(1.0)


class WorkerPool:
    def __init__(
        self,
        size: int | None = None,
        *,
        initializer: str | None = None,
        env: dict[str, str | None] | None = None,
        memory_limit_mb: int | None = None,
        start_timeout: float = 60.0,
        niceness: int = 0,
    ):
        """`size`: at most this many workers (default: one per core but one). `initializer`: "module:function"
        run once in each new worker (heavy imports belong there: its time does not count against job timeouts).
        `env`: variables set (None: removed) in each worker before the initializer and the jobs' modules are
        imported; PYTHONPATH entries go onto sys.path. `memory_limit_mb`: RLIMIT_AS of each worker (address
        space, so leave headroom above the resident size you expect). `niceness`: added to each worker's nice
        value (background work that must not slow down the server's answers). Workers inherit the server's
        sys.path and working directory."""
        self.niceness = niceness
        self.size = size or max(1, (os.cpu_count() or 2) - 1)
        self.initializer = initializer
        self.env = dict(env or {})
        self.memory_limit_mb = memory_limit_mb
        self.start_timeout = start_timeout
        self._workers: list[_Worker] = []  # started lazily, on demand, at most `size`
        self._queue: list[tuple[int, int, _Job]] = []  # heap of (priority, submission order, job)
        self._by_key: dict[Hashable, _Job] = {}
        self._tasks: set[asyncio.Task] = set()
        self._ids = itertools.count()
        self._closed = False
        self._held_until = 0.0  # loop time before which queued jobs wait (hold)
        self._resume: asyncio.TimerHandle | None = None
        self._counts = dict.fromkeys(["completed", "errors", "crashed", "timedOut", "cancelled", "restarts"], 0)
        _pools.add(self)

    # --- public API ---

    def prestart(self) -> None:
        """Start one worker now, if none runs, so that its start-up (the initializer's imports, about a second
        for triton) overlaps with the caller's own work before the first job."""
        if not self._closed and not self._workers:
            self._spawn()

    async def run(
        self,
        fn_path: str,
        arg: Any,
        *,
        timeout: float,
        priority: int = 0,
        key: Hashable | None = None,
        kill_running: bool = False,
        resources: Any = None,
    ) -> Outcome:
        """Run `fn_path` ("module:function") on `arg` in a worker. `resources` (executor.Resources) is accepted
        for the executor interface and ignored: one machine's capacity is the pool's size. Lower `priority` runs first. A job with the same
        `key` as an earlier one supersedes it: see `cancel`. Cancelling the awaiting task cancels the job the
        same way (a running job is left to finish and its result dropped). `timeout` counts from the moment a
        ready worker receives the job: neither queueing nor the worker's start-up is included."""
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        if ":" not in fn_path:
            raise ValueError(f"expected 'module:function', got {fn_path!r}")
        try:  # pickled here so that an unpicklable argument is reported before it occupies a worker
            payload = pickle.dumps(arg, pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001
            return self._count(
                Outcome(Status.ERROR, message="the job's argument cannot be pickled", traceback=traceback.format_exc())
            )
        if key is not None:
            self.cancel(key, kill_running=kill_running)
        job = _Job(next(self._ids), fn_path, payload, timeout, key, asyncio.get_running_loop().create_future())
        if key is not None:
            self._by_key[key] = job
        heapq.heappush(self._queue, (priority, job.id, job))
        self._dispatch()
        try:
            return await job.future
        except asyncio.CancelledError:
            if job.future.cancelled():  # the queue skips it; a worker running it drops the result
                self._counts["cancelled"] += 1
            raise
        finally:
            if key is not None and self._by_key.get(key) is job:
                del self._by_key[key]

    def cancel(self, key: Hashable, *, kill_running: bool = False) -> bool:
        """Cancel the pending job with this key: a queued one never runs; a running one is left to finish and its
        result dropped, or, with `kill_running`, its worker is killed and replaced. Its caller gets CANCELLED at
        once. False if there was none."""
        job = self._by_key.pop(key, None)
        if job is None or not self._resolve(job, Outcome(Status.CANCELLED, message="superseded by a newer job")):
            return False
        if kill_running and job.sent:
            for worker in self._workers:
                if worker.job is job:
                    self._kill(worker)  # its _execute sees the death, reaps it and starts a replacement
        return True

    def stats(self) -> dict[str, Any]:
        """For the status command."""
        alive = [w for w in self._workers if w.process.exitcode is None]
        return {
            "workers": self.size,
            "workersAlive": len(alive),
            "pids": [w.pid for w in alive],
            "queued": sum(1 for *_, job in self._queue if not job.future.done()),
            "running": sum(1 for w in self._workers if w.job is not None),  # includes results about to be dropped
            **self._counts,
        }

    async def close(self, grace: float = 1.0) -> None:
        """Cancel every job and stop every worker: idle ones are asked to exit (then killed after `grace`
        seconds), busy ones are killed. All are reaped: no zombies."""
        if self._closed:
            return
        self._closed = True
        closed = Outcome(Status.CANCELLED, message="the worker pool was closed")
        for *_, job in self._queue:
            self._resolve(job, closed)
        self._queue.clear()
        for worker in list(self._workers):
            if worker.job is not None:
                self._resolve(worker.job, closed)
                self._kill(worker)
            else:
                try:
                    worker.conn.send(None)
                except OSError:
                    pass
        await asyncio.gather(*self._tasks, return_exceptions=True)  # busy workers: they reap their own
        await asyncio.gather(*(self._stop(w, grace) for w in list(self._workers)))
        for worker in list(self._workers):
            self._discard(worker, replace=False)
        _pools.discard(self)

    def hold(self, seconds: float) -> None:
        """Start no queued job for `seconds` from now (someone is typing: background work waits for a pause);
        running jobs carry on. Each call extends the hold."""
        loop = asyncio.get_running_loop()
        self._held_until = max(self._held_until, loop.time() + seconds)
        if self._resume is not None:
            self._resume.cancel()
        self._resume = loop.call_at(self._held_until, self._dispatch)

    # --- scheduling ---

    def _dispatch(self) -> None:
        """Hand queued jobs to idle workers, best priority first."""
        loop = asyncio.get_running_loop()
        while not self._closed:
            while self._queue and self._queue[0][2].future.done():  # cancelled while queued
                heapq.heappop(self._queue)
            if not self._queue:
                return
            if loop.time() < self._held_until:
                return  # hold(): the timer it set dispatches then
            worker = self._idle_worker()
            if worker is None:
                return
            job = heapq.heappop(self._queue)[2]
            worker.job = job
            task = loop.create_task(self._execute(worker, job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _idle_worker(self) -> _Worker | None:
        for worker in list(self._workers):
            if worker.job is None and worker.process.exitcode is not None:  # died while idle (OOM killer, ...)
                self._discard(worker, replace=True)
        for worker in self._workers:
            if worker.job is None:
                return worker
        if len(self._workers) < self.size:
            return self._spawn()
        return None

    async def _execute(self, worker: _Worker, job: _Job) -> None:
        outcome: Outcome | None = None
        try:
            if not worker.ready:
                reply = await self._receive(worker, self.start_timeout)
                if not (isinstance(reply, tuple) and reply[0] == "ready"):
                    outcome = await self._start_failed(worker, reply)
                    return
                worker.ready = True
            if job.future.done():  # cancelled while its worker started: keep the worker for the next job
                return
            job.sent = True
            started = time.monotonic()
            try:
                worker.conn.send((job.id, job.fn_path, job.payload))
                reply = await self._receive(worker, job.timeout)
            except OSError:
                reply = _DIED
            seconds = time.monotonic() - started
            if reply is _TIMEOUT:
                self._kill(worker)
                await self._retire(worker)
                outcome = Outcome(
                    Status.TIMEOUT,
                    seconds=seconds,
                    message=(
                        f"{job.fn_path} did not finish within {job.timeout:g} s; its worker was killed and replaced"
                    ),
                )
            elif reply is _DIED:
                exitcode = await self._retire(worker)
                outcome = Outcome(
                    Status.CRASHED,
                    seconds=seconds,
                    exitcode=exitcode,
                    message=f"{self._death(exitcode)} while running {job.fn_path}; it was replaced"
                    + ("; this is not a problem in the kernel: it runs again when the file changes"
                       if exitcode == -signal.SIGKILL else ""),
                )
            elif reply[1] == "ok":
                try:
                    outcome = Outcome(Status.OK, pickle.loads(reply[2]), seconds=seconds)
                except Exception:  # noqa: BLE001 - e.g. a class the server cannot import
                    outcome = Outcome(
                        Status.ERROR,
                        message=f"the result of {job.fn_path} cannot be unpickled",
                        traceback=traceback.format_exc(),
                        seconds=seconds,
                    )
            else:
                tb = reply[2]
                last = tb.strip().splitlines()[-1] if tb.strip() else "an exception"
                outcome = Outcome(Status.ERROR, message=f"{job.fn_path} raised {last}", traceback=tb, seconds=seconds)
        except Exception:  # a bug here must not leave the caller waiting forever
            log.exception("worker pool: running %s failed", job.fn_path)
            outcome = Outcome(
                Status.ERROR, message="internal error in the worker pool", traceback=traceback.format_exc()
            )
            if worker in self._workers:  # its state is unknown: replace it
                self._kill(worker)
                await self._retire(worker)
        finally:
            worker.job = None
            if outcome is not None:
                self._resolve(job, outcome)
            if not self._closed:
                self._dispatch()

    async def _start_failed(self, worker: _Worker, reply: Any) -> Outcome:
        # Not replaced: a worker that cannot start would crash again at once. The next job starts a new one.
        if reply is _TIMEOUT:
            self._kill(worker)
        exitcode = await self._retire(worker, replace=False)
        if isinstance(reply, tuple) and reply[0] == "init_error":
            return Outcome(
                Status.ERROR, message=f"the worker initializer {self.initializer} raised", traceback=reply[1]
            )
        if reply is _TIMEOUT:
            return Outcome(
                Status.CRASHED, exitcode=exitcode, message=f"the worker did not start within {self.start_timeout:g} s"
            )
        return Outcome(Status.CRASHED, exitcode=exitcode, message=f"{self._death(exitcode)} while starting")

    def _death(self, exitcode: int | None) -> str:
        """What killed a worker, in words."""
        if exitcode == MEMORY_EXIT_CODE:
            return (
                f"the worker ran out of memory (limit {self.memory_limit_mb} MB)"
                if self.memory_limit_mb
                else "the worker ran out of memory"
            )
        if exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = f"signal {-exitcode}"
            text = f"the worker was killed by {name}"
            if -exitcode == signal.SIGKILL:
                # The pool's own kills (timeouts, supersession, close) never reach the caller as CRASHED: this one
                # came from outside, so it says nothing about the job's input. Say so, and what brings it back.
                return text + " from outside kernel-lsp (perhaps the system ran out of memory)"
            if self.memory_limit_mb and -exitcode in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS):
                return text + f" (perhaps at its memory limit of {self.memory_limit_mb} MB)"
            return text
        return f"the worker exited with code {exitcode}"

    def _resolve(self, job: _Job, outcome: Outcome) -> bool:
        """Deliver an outcome unless the job already has one (cancelled, superseded): then it is dropped."""
        if job.future.done():
            return False
        job.future.set_result(self._count(outcome))
        return True

    def _count(self, outcome: Outcome) -> Outcome:
        name = {
            Status.OK: "completed",
            Status.ERROR: "errors",
            Status.TIMEOUT: "timedOut",
            Status.CRASHED: "crashed",
            Status.CANCELLED: "cancelled",
        }[outcome.status]
        self._counts[name] += 1
        if outcome.status is Status.ERROR:
            self._counts["completed"] += 1  # it ran to an answer
        return outcome

    # --- worker processes ---

    def _spawn(self) -> _Worker:
        ours, theirs = _CTX.Pipe()
        process = _CTX.Process(
            target=_worker_main,
            args=(theirs, self.env, self.memory_limit_mb, self.initializer, self.niceness),
            name="kernel-lsp-worker",
            # Not daemonic: a job may itself need multiprocessing (torch does); _kill_leftovers covers exit.
            daemon=False,
        )
        process.start()  # fork+exec only; the child imports in the background
        theirs.close()  # so that the worker's death reads as EOF here
        assert process.pid is not None  # start() has run
        worker = _Worker(process, ours, process.pid)
        self._workers.append(worker)
        return worker

    def _kill(self, worker: _Worker) -> None:
        if worker.process.exitcode is not None:  # already reaped: its pid may belong to someone else now
            return
        try:
            os.killpg(worker.pid, signal.SIGKILL)  # the job's own children too
        except OSError:  # not yet its own group leader (still starting)
            worker.process.kill()

    async def _retire(self, worker: _Worker, *, replace: bool = True) -> int | None:
        """Reap a dead (or dying) worker, forget it and start a replacement; its exit code."""
        exitcode = await self._stop(worker, grace=2.0)
        self._discard(worker, replace=replace)
        return exitcode

    async def _stop(self, worker: _Worker, grace: float) -> int | None:
        """Wait up to `grace` s for the process to end, then SIGKILL it; reap it either way."""
        if worker.process.exitcode is None and not await self._wait(worker, grace, sentinel_only=True):
            self._kill(worker)
            await self._wait(worker, 5.0, sentinel_only=True)
        worker.process.join(1.0)  # the sentinel fired: this reaps at once
        return worker.process.exitcode

    def _discard(self, worker: _Worker, *, replace: bool) -> None:
        if worker not in self._workers:
            return
        self._workers.remove(worker)
        worker.conn.close()
        if worker.process.exitcode is not None:
            worker.process.close()
        if replace and not self._closed:  # eagerly, so that the next job finds it warm
            self._counts["restarts"] += 1
            self._spawn()

    async def _receive(self, worker: _Worker, timeout: float) -> Any:
        """The worker's next message, or _TIMEOUT, or _DIED."""
        if not await self._wait(worker, timeout):
            return _TIMEOUT
        try:
            if worker.conn.poll():
                return worker.conn.recv()  # a message is read whole; the sender is writing it now
        except (EOFError, OSError):
            pass
        return _DIED

    async def _wait(self, worker: _Worker, timeout: float, *, sentinel_only: bool = False) -> bool:
        """Until the worker's pipe is readable or its process ended; False on timeout. One waiter per worker at a
        time (add_reader keeps one callback per fd), which the pool guarantees: a worker is only awaited by the
        task running its job, or by close() once those tasks are done."""
        loop = asyncio.get_running_loop()
        woken = loop.create_future()
        fds = [worker.process.sentinel] + ([] if sentinel_only else [worker.conn.fileno()])

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        for fd in fds:
            loop.add_reader(fd, wake)
        try:
            await asyncio.wait_for(woken, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for fd in fds:
                loop.remove_reader(fd)
