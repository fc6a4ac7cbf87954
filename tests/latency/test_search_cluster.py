"""A tiling search timed on a cluster's GPUs (engine/latency/cluster.py), through `search_tiling` with an in-process
stand-in for the cluster: two GPU nodes, the second twice as slow, tasks going to each in turn. Candidates timed on
the slow node must rank as if timed on the fast one (tests/scale/test_search_on_ray.py does this on a real Ray
cluster)."""

from __future__ import annotations

import pytest

from kernel_lsp.engine.executor import CPU, Resources
from kernel_lsp.engine.latency.cluster import ClusterTimer
from kernel_lsp.engine.latency.search import search_tiling
from kernel_lsp.engine.pool import Outcome, Status
from tests.scale.jobs import stand_in_us

from .test_search import _rows_file

SLOWDOWN = {"node-a": 1.0, "node-b": 2.0}


class TwoNodes:
    """An executor with the interface of RayExecutor: two one-GPU nodes, tasks placed on each in turn."""

    def __init__(self) -> None:
        self.info = {"address": "10.0.0.1:6379"}
        self.tasks: list[tuple[str, Resources, int]] = []
        self.in_flight = self.most_in_flight = 0

    async def capacity(self) -> dict:
        return {("cpu",): 2.0, ("gpu", None): 2.0}

    async def run(self, fn_path, arg, *, timeout, priority=0, key=None, resources: Resources = CPU, where=None):
        import asyncio

        node = "node-a" if len(self.tasks) % 2 == 0 else "node-b"
        self.tasks.append((node, resources, len(arg["points"])))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        where.append(node)
        us = [stand_in_us(p["overrides"]) * SLOWDOWN[node] for p in arg["points"]]
        return Outcome(Status.OK, {"us": us, "errors": [None] * len(us), "device": f"GPU x{SLOWDOWN[node]:g}",
                                   "error": None})

    def stats(self) -> dict:
        return {}

    async def close(self) -> None:
        return None


def test_candidates_timed_on_a_slower_node_rank_as_on_the_fast_one(tmp_path):
    path = _rows_file(tmp_path)
    cluster = TwoNodes()
    timer = ClusterTimer(lambda: cluster)  # type: ignore[arg-type, return-value]
    try:
        found = search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path), verify=False,
                              timer=timer)
    finally:
        timer.close()
    assert found.errors == [] and found.source == "measured", found.errors
    timed = [t for t in found.tried if t.measured_us is not None]
    assert {t.node for t in timed} == {"node-a", "node-b"}, [(t.label, t.node) for t in timed]
    # Every task asked for one GPU, no more ran at once than the two GPUs, and each timed the reference first and last.
    assert all(r.gpus == 1 for _, r, _ in cluster.tasks) and cluster.most_in_flight <= 2
    assert all(n >= 3 for _, _, n in cluster.tasks)
    # Each figure is the candidate's time on the base node (node-a), wherever it was timed...
    for t in timed:
        assert abs(t.measured_us - stand_in_us(t.overrides)) < 1e-6 * t.measured_us, (t.label, t.node)
    # ...where raw times would have ranked the node: a candidate timed on node-b is faster than one timed on
    # node-a, yet took longer there.
    assert any(stand_in_us(b.overrides) < stand_in_us(a.overrides)
               and stand_in_us(b.overrides) * SLOWDOWN["node-b"] > stand_in_us(a.overrides)
               for a in timed if a.node == "node-a" for b in timed if b.node == "node-b")
    best = min(timed, key=lambda t: stand_in_us(t.overrides))
    assert found.winner_overrides == best.overrides
    current = next(t for t in found.tried if t.label == found.current)
    assert found.speedup == pytest.approx(stand_in_us(current.overrides) / stand_in_us(best.overrides))
    # The spread between nodes: the reference timed on each.
    spreads = {n["node"]: n for n in found.nodes}
    assert set(spreads) == {"node-a", "node-b"}
    assert spreads["node-b"]["reference_median_us"] == pytest.approx(2 * spreads["node-a"]["reference_median_us"])
    assert "2.00x longer on the slowest node" in found.compared and "scaled to node-a" in found.compared
