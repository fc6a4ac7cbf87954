"""Runs jobs off the event loop, one pending job per key: a newer submission supersedes the older one."""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Hashable, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class Scheduler:
    def __init__(self, max_workers: int = 2):
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kernel-lsp")
        self._tasks: dict[Hashable, asyncio.Task] = {}
        self._cancels: dict[Hashable, threading.Event] = {}
        self.completed = 0
        self.superseded = 0
        self.stopped = 0  # superseded jobs told to stop through their cancel event

    def submit(
        self,
        key: Hashable,
        work: Callable[[], T],
        on_result: Callable[[T], Any],
        *,
        delay: float = 0.0,
        cancel: threading.Event | None = None,
    ) -> asyncio.Task:
        """Run work() in a thread after `delay` seconds, then on_result(result) on the loop.

        A later submission with the same key cancels this one if it has not delivered yet; a job whose work
        raises is logged and delivers nothing. Cancelling the asyncio task does not stop a thread that already
        runs: `cancel` is set too, for work that looks at it between steps and stops (cooperative cancellation),
        so a superseded job frees its thread for the newer one.
        """
        return self.submit_async(
            key, lambda: asyncio.get_running_loop().run_in_executor(self._executor, work), on_result, delay=delay,
            cancel=cancel)

    def submit_async(
        self,
        key: Hashable,
        work: Callable[[], Awaitable[T]],
        on_result: Callable[[T], Any],
        *,
        delay: float = 0.0,
        cancel: threading.Event | None = None,
    ) -> asyncio.Task:
        """Like submit, for work that is itself asynchronous (it awaits worker processes)."""
        previous = self._tasks.get(key)
        if previous is not None and not previous.done():
            self._stop(key, previous)
            self.superseded += 1
        task = asyncio.get_running_loop().create_task(self._run_async(key, work, on_result, delay))
        self._tasks[key] = task
        if cancel is not None:
            self._cancels[key] = cancel
        else:
            self._cancels.pop(key, None)
        return task

    def _stop(self, key: Hashable, task: asyncio.Task) -> None:
        task.cancel()
        event = self._cancels.pop(key, None)
        if event is not None:
            event.set()
            self.stopped += 1

    async def _run_async(self, key: Hashable, work, on_result, delay: float) -> None:
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            result = await work()
        except asyncio.CancelledError:
            return
        except Exception:  # noqa: BLE001
            log.exception("job %r failed", key)
            return
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]
                self._cancels.pop(key, None)
        self.completed += 1
        try:
            on_result(result)
        except Exception:  # noqa: BLE001
            log.exception("delivering the result of %r failed", key)

    def cancel(self, key: Hashable) -> bool:
        """Cancel the pending job with this key (it delivers nothing); False if there was none."""
        task = self._tasks.get(key)
        if task is None or task.done():
            return False
        self._stop(key, task)
        self.superseded += 1
        return True

    @property
    def queued(self) -> int:
        return sum(1 for t in self._tasks.values() if not t.done())

    async def drain(self) -> None:
        """Wait until no job is pending (jobs submitted meanwhile included)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    def shutdown(self) -> None:
        for key, task in list(self._tasks.items()):
            self._stop(key, task)
        self._executor.shutdown(wait=False, cancel_futures=True)
