"""A tiling search's timings spread over a Ray cluster's GPUs (docs/scale.md).

Each round of the search (analyzers.tiling.search_plan) becomes at most one Ray task per GPU, each asking for one
GPU, so no GPU times two things at once. A task times a reference configuration (the current one) before and after
its share of the round's candidates, in one process on one GPU; a candidate's figure is its time relative to that
reference. Nodes differ (another GPU model, clocks, a busy neighbour), and comparing raw microseconds from two nodes
would rank the node, not the configuration: relative to a reference timed beside it, a candidate measured on a
node twice as slow compares the same as one measured on the fastest. The relative figures are scaled by the
reference's time on one node (the base node, named in the report) to read as microseconds.

The search calls this synchronously from its own thread; the executor lives on an event loop of its own thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..executor import Executor, gpu
from ..pool import Outcome, Status

class Cancelled(Exception):
    pass


TIME_FN = "kernel_lsp.engine.latency.cluster:time_on_node"
TASK_TIMEOUT_S = 300.0


def time_on_node(job: dict) -> dict:
    """On a node, with the one GPU Ray gave the task: time `job["points"]` (the reference first and last) in one
    latency worker. Returns {"us": [...], "errors": [...], "device": name, "error": whole-run error or None}."""
    from . import measure_file

    root = job.get("root")
    if not (root and os.path.isdir(root)):  # the node need not have the workspace: the source travels in the job
        root = None
    report = measure_file(job["path"], job["source"], root=root, points=job["points"], history=False,
                          repetitions=job.get("repetitions"), timeout=float(job.get("timeout") or TASK_TIMEOUT_S))
    entries = list(report.entries) + [None] * (len(job["points"]) - len(report.entries))
    return {"us": [e.us if e is not None else None for e in entries],
            "errors": [(e.error if e is not None else "not timed") for e in entries],
            "device": next((e.device for e in report.entries if e.device and e.us), None),
            "error": "; ".join(report.errors) or None}


@dataclass
class Timed:
    """One candidate's timing: `us` scaled to the base node (None: not timed), where, and the raw figures."""

    us: float | None
    node: str | None = None
    raw_us: float | None = None
    relative: float | None = None  # to the reference timed in the same process
    error: str | None = None


@dataclass
class NodeSpread:
    node: str
    device: str | None = None
    reference_us: list[float] = field(default_factory=list)  # one per task: mean of its first and last timing
    candidates: int = 0

    def to_json(self) -> dict:
        refs = self.reference_us
        return {"node": self.node, "device": self.device, "reference_us": list(refs),
                "reference_median_us": statistics.median(refs) if refs else None, "candidates": self.candidates}


class ClusterTimer:
    """Times tiling candidates as GPU tasks on a Ray cluster; see the module's docstring. `executor()` makes the
    executor (a RayExecutor, created and run on this timer's own event loop); `fn_path` is the job that times."""

    def __init__(self, executor: Callable[[], Executor], *, fn_path: str = TIME_FN,
                 timeout: float = TASK_TIMEOUT_S, repetitions: int = 20):
        self.fn_path, self.timeout, self.repetitions = fn_path, timeout, repetitions
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kernel-lsp-cluster-timer", daemon=True)
        self._thread.start()
        self.executor = self._call(self._make(executor))
        self.capacity: dict[tuple, float] | None = self._call(self._capacity())
        self.accelerator: str | None = None
        self.spreads: dict[str, NodeSpread] = {}
        self.base: str | None = None  # the node whose reference time scales the relative figures
        self.base_us: float | None = None

    @staticmethod
    async def _make(factory: Callable[[], Executor]) -> Executor:
        return factory()

    async def _capacity(self) -> dict[tuple, float] | None:
        capacity = getattr(self.executor, "capacity", None)
        return await capacity() if capacity is not None else None

    def _call(self, coro, cancel: threading.Event | None = None):
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        while True:
            try:
                return future.result(timeout=0.2)
            except TimeoutError:
                if cancel is not None and cancel.is_set():
                    future.cancel()  # cancels the Ray tasks in flight
                    raise Cancelled from None

    @property
    def on_cluster(self) -> bool:
        """Connected to the cluster (False: it could not be reached, the jobs would run on this machine)."""
        return self.capacity is not None

    @property
    def address(self) -> str:
        info = getattr(self.executor, "info", None) or {}
        return str(info.get("address") or getattr(self.executor, "address", None) or "RAY_ADDRESS")

    def gpus_for(self, device: str) -> int:
        """How many GPUs the search may time on at once: those of type `device` where the cluster advertises that
        accelerator type, else any GPU. 0: the cluster has none (or is not reachable)."""
        if not self.capacity:
            return 0
        typed = int(self.capacity.get(("gpu", device), 0))
        self.accelerator = device if typed else None
        return typed or int(self.capacity.get(("gpu", None), 0))

    def time_round(self, path: str, source: str, root: str | None, reference: dict, points: list[dict],
                   device: str, cancel: threading.Event | None = None) -> list[Timed]:
        """Time `points` (the search's point dicts) spread over the GPUs, each task with `reference` first and last."""
        if not points:
            return []
        tasks = max(1, min(len(points), self.gpus_for(device)))
        chunks = [list(range(i, len(points), tasks)) for i in range(tasks)]
        try:
            answers = self._call(self._gather(path, source, root, reference, points, chunks), cancel)
        except Cancelled:
            return [Timed(None, error="cancelled") for _ in points]
        out: list[Timed] = [Timed(None, error="not timed") for _ in points]
        results = [(chunk, outcome, node) for chunk, (outcome, node) in zip(chunks, answers)]
        for _, outcome, node in results:  # the base node first: the node of the first task that timed
            if self.base is None and outcome.ok and isinstance(outcome.value, dict):
                ref = _reference(outcome.value)
                if ref is not None:
                    self.base, self.base_us = node, ref
        for chunk, outcome, node in results:
            for i, timed in zip(chunk, self._read(outcome, node, len(chunk))):
                out[i] = timed
        return out

    async def _gather(self, path, source, root, reference, points, chunks) -> list[tuple[Outcome, str]]:
        async def one(chunk: list[int]) -> tuple[Outcome, str]:
            job = {"path": path, "source": source, "root": root, "repetitions": self.repetitions,
                   "timeout": self.timeout, "points": [reference, *(points[i] for i in chunk), reference]}
            where: list[str] = []
            outcome = await self.executor.run(self.fn_path, job, timeout=self.timeout, resources=gpu(self.accelerator),
                                              where=where)  # type: ignore[call-arg]
            return outcome, where[0] if where else "unknown node"

        return list(await asyncio.gather(*(one(c) for c in chunks)))

    def _read(self, outcome: Outcome, node: str, n: int) -> list[Timed]:
        if not outcome.ok or not isinstance(outcome.value, dict):
            why = outcome.message or outcome.status.value
            if outcome.status is Status.ERROR and outcome.traceback:
                why += ": " + outcome.traceback.strip().splitlines()[-1]
            return [Timed(None, node, error=f"timing on the cluster failed ({node}): {why}") for _ in range(n)]
        value = outcome.value
        spread = self.spreads.setdefault(node, NodeSpread(node))
        spread.device = spread.device or value.get("device")
        ref = _reference(value)
        if ref is None:
            why = value.get("error") or next((e for e in (value.get("errors") or []) if e), None) or "no figure"
            return [Timed(None, node, error=f"the reference configuration did not time on {node}: {why}")
                    for _ in range(n)]
        spread.reference_us.append(ref)
        spread.candidates += n
        us, errors = value["us"][1:-1], (value.get("errors") or [None] * (n + 2))[1:-1]
        out = []
        for raw, error in zip(us, errors):
            if raw is None or not raw > 0:
                out.append(Timed(None, node, error=error or "not timed"))
                continue
            relative = raw / ref
            out.append(Timed(relative * (self.base_us or ref), node, raw, relative))
        return out

    def report(self) -> list[dict]:
        """Per node: its device, the reference's timings (the spread between nodes), how many candidates it timed."""
        return [s.to_json() for s in sorted(self.spreads.values(), key=lambda s: s.node)]

    def basis(self) -> str | None:
        """How the figures compare, for the search's report."""
        if self.base is None:
            return None
        medians = {n: statistics.median(s.reference_us) for n, s in self.spreads.items() if s.reference_us}
        line = (f"timed on {len(medians)} node(s) of the Ray cluster at {self.address}; each candidate against the "
                f"current configuration timed in the same process, figures scaled to {self.base}")
        if len(medians) > 1:
            slow, fast = max(medians.values()), min(medians.values())
            line += f"; the reference took {slow / fast:.2f}x longer on the slowest node than on the fastest"
        return line

    def close(self) -> None:
        try:
            self._call(self.executor.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


def _reference(value: dict) -> float | None:
    """The reference's time in one task: the mean of its first and last timing (the GPU's clock drifts while it
    works), or the one that timed."""
    us = value.get("us") or []
    refs = [u for u in (us[0] if us else None, us[-1] if len(us) > 1 else None) if u and u > 0]
    return sum(refs) / len(refs) if refs else None


@contextlib.contextmanager
def cluster_timer(address: str | None, say: Callable[[str], None], *,
                  wanted: bool = True) -> Iterator["ClusterTimer | None"]:
    """A timer on the Ray cluster at `address` (None: Ray's own resolution, RAY_ADDRESS) for the block, closed
    after it; None where it is not `wanted` or cannot be reached (`say` hears why, and the search then times on
    this machine's GPU if it has one)."""
    timer = None
    if wanted:
        from ..executor import ThreadExecutor, make_executor

        timer = ClusterTimer(lambda: make_executor("ray", ThreadExecutor, address=address, say=say))
        if not timer.on_cluster:
            timer.close()
            timer = None
    try:
        yield timer
    finally:
        if timer is not None:
            timer.close()
