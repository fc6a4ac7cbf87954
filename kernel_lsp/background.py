"""Background work of the features: one way to run it with progress, cancellation and supersession.

Checks, timing, profiling, the tiling search and the assistant all run long work off the event loop for one
document. `background_job` is the one place that decides what happens around it:
- a work-done progress titled for the work, ended whatever happens (the editor's spinner must stop);
- a cancel event handed to the work, which stops its process: it is set when the awaiting task is cancelled (a
  `$/cancelRequest`, a newer keystroke) and when a newer job for the same key supersedes this one;
- the key's slot in a `running` table (what the status command and the lenses read) freed when the job ends,
  unless a newer job already holds it;
- `still_current()`, the version check a job makes before it shows what it computed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .server import KernelLanguageServer

T = TypeVar("T")
log = logging.getLogger(__name__)


def log_task_failure(task: asyncio.Task) -> None:
    """A done callback for work nobody awaits (a check started on save, timing after a check): logs its failure."""
    if not task.cancelled() and task.exception() is not None:
        log.error("background work failed", exc_info=task.exception())


@dataclass
class Job:
    """One piece of background work in flight; see `background_job`."""

    ls: KernelLanguageServer
    token: str | None  # the work-done progress token (None where the client shows no progress)
    cancel: threading.Event = field(default_factory=threading.Event)
    current: Callable[[], bool] | None = None
    end_message: str | None = None  # what the progress says when it ends

    @property
    def cancelled(self) -> bool:
        """Superseded by a newer job for the same key, or cancelled."""
        return self.cancel.is_set()

    def still_current(self) -> bool:
        """Not cancelled, and the text or version the job was made for is still the one the user has."""
        return not self.cancel.is_set() and (self.current is None or self.current())

    def report(self, message: str, percentage: int | None = None) -> None:
        """Report progress from the event loop."""
        self.ls.report_progress(self.token, message, percentage)

    def thread_progress(self) -> Callable[[str, float], None]:
        """A `progress(message, fraction)` callback for the work's thread: reports on the event loop."""
        return self.ls.thread_progress(self.token)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking `fn(*args, **kwargs)` in a worker thread (pass it `cancel=job.cancel` to make it stop)."""
        return await asyncio.to_thread(fn, *args, **kwargs)


@asynccontextmanager
async def background_job(ls: KernelLanguageServer, title: str, *, running: dict[Any, threading.Event] | None = None,
                         key: Any = None, cancel: threading.Event | None = None,
                         current: Callable[[], bool] | None = None,
                         started: Callable[[], None] | None = None) -> AsyncIterator[Job]:
    """Run the body as one background job titled `title` (the progress message).

    running/key: a table of the jobs in flight; a job already there for `key` is superseded (its cancel event is
    set, which kills its process). cancel: an event the work already holds (a new one otherwise). current: the
    version check behind `Job.still_current`. started: called once the job holds its slot, before the progress
    is created (which waits for the client). Cancelling the task that runs the body sets the cancel event and
    lets CancelledError through.
    """
    job = Job(ls, None, cancel if cancel is not None else threading.Event(), current)
    if running is not None:
        previous = running.get(key)
        if previous is not None:
            previous.set()
        running[key] = job.cancel
    try:
        if started is not None:
            started()
        job.token = await ls.begin_progress(title)
        yield job
    except asyncio.CancelledError:
        job.cancel.set()
        raise
    finally:
        ls.end_progress(job.token, job.end_message)
        if running is not None and running.get(key) is job.cancel:
            del running[key]
