"""Where jobs run: one interface over this machine's worker processes and a Ray cluster.

    outcome = await executor.run("package.module:function", arg, timeout=60.0, resources=CPU)

Every executor returns an `Outcome` (pool.py) and never raises for what a job or its worker did, so a caller
cannot tell where a job ran from what it means. A job is a function named by import path and a picklable
argument that carries everything it needs (the user's source text, the spec, the target): nothing depends on a
file system shared with the machine that submitted it.

- `WorkerPool` (pool.py): long-lived local worker processes; it ignores `resources` (the pool's size is the
  machine's capacity).
- `ThreadExecutor`: the function in a thread of this process, for jobs that start and watch a process of their
  own (a correctness check): a few at a time.
- `RayExecutor` (ray_executor.py): Ray tasks with resource requests; falls back to a local executor when the
  cluster cannot be reached or is lost.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import traceback
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .pool import Outcome, Status, _resolve

if TYPE_CHECKING:
    from .ray_executor import RayExecutor

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Resources:
    """What one job needs on the node that runs it. `gpus`: whole GPUs (timing needs a GPU alone);
    `accelerator`: Ray's accelerator type of that GPU ("H100", "A100", ...; None: any GPU)."""

    cpus: float = 1.0
    gpus: int = 0
    accelerator: str | None = None

    @property
    def shape(self) -> tuple:
        """Jobs of one shape compete for the same capacity."""
        return ("gpu", self.accelerator) if self.gpus else ("cpu",)


CPU = Resources()


def gpu(accelerator: str | None = None) -> Resources:
    return Resources(cpus=1.0, gpus=1, accelerator=accelerator)


class Executor(Protocol):
    async def run(self, fn_path: str, arg: Any, *, timeout: float, priority: int = 0, key: Hashable | None = None,
                  resources: Resources = CPU) -> Outcome: ...

    def stats(self) -> dict[str, Any]: ...

    async def close(self) -> None: ...


class ThreadExecutor:
    """`function(arg)` in a thread, at most `size` at once. For jobs that run their work in a process of their own
    with its own timeout and memory watch (`verify.run_checks`): `timeout` is not enforced here."""

    def __init__(self, size: int | None = None):
        self.size = size or max(1, (os.cpu_count() or 2) - 1)
        self._slots = asyncio.Semaphore(self.size)
        self._counts = dict.fromkeys(["completed", "errors", "cancelled"], 0)

    async def run(self, fn_path: str, arg: Any, *, timeout: float, priority: int = 0, key: Hashable | None = None,
                  resources: Resources = CPU) -> Outcome:
        async with self._slots:
            started = time.monotonic()
            try:
                fn = _resolve(fn_path)
                value = await asyncio.to_thread(fn, arg)
            except asyncio.CancelledError:
                self._counts["cancelled"] += 1
                raise
            except Exception:  # noqa: BLE001 - the job's error, reported like a worker's
                self._counts["errors"] += 1
                return Outcome(Status.ERROR, message="the job failed", traceback=traceback.format_exc(),
                               seconds=time.monotonic() - started)
            self._counts["completed"] += 1
            return Outcome(Status.OK, value, seconds=time.monotonic() - started)

    def stats(self) -> dict[str, Any]:
        return {"threads": self.size, **self._counts}

    async def close(self) -> None:
        return None


_Local = TypeVar("_Local", bound=Executor)


def make_executor(kind: str, local: Callable[[], _Local], *, address: str | None = None,
                  say: Callable[[str], None] | None = None) -> _Local | RayExecutor:
    """The executor a setting names: `local()` itself, or Ray at `address` (None: Ray's own resolution,
    RAY_ADDRESS or the cluster `ray start` began on this machine) that falls back to `local()`. `say` gets the
    messages a user should read (the cluster was not reachable, was lost, ...)."""
    if kind == "local":
        return local()
    if kind != "ray":
        raise ValueError(f"unknown executor {kind!r}: expected one of {', '.join(EXECUTORS)}")
    from .ray_executor import RayExecutor

    return RayExecutor(address, fallback=local, say=say)


class Messages:
    """Collects the executor's messages for a batch run (thread-safe; each said once)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            if line not in self.lines:
                self.lines.append(line)
