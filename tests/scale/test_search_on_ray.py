"""The tiling search on a real Ray cluster: two nodes advertising one H200 each (Ray resources only: this machine has
no GPU), the second node twice as slow. The timing job is a CPU stand-in (tests/scale/jobs.py: a made-up time per
configuration times the node's slowdown), so what is tested is the spreading and the comparison, not a GPU. And
`kernel-lsp tune --executor ray` against a cluster without GPUs says that it ranked by the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp.engine.executor import ThreadExecutor, make_executor
from kernel_lsp.engine.latency.cluster import ClusterTimer
from kernel_lsp.engine.latency.search import search_tiling

from ..latency.test_search import ROWS
from .conftest import REPO, RayCluster, free_port
from .jobs import stand_in_us

pytestmark = pytest.mark.timeout(900)

GPU_NODE = ["--num-cpus=1", "--num-gpus=1", '--resources={"accelerator_type:H200": 1}']


@pytest.fixture(scope="module")
def two_gpu_nodes(tmp_path_factory):
    cluster = RayCluster(tmp_path_factory.mktemp("ray-search"), head=GPU_NODE, workers=[GPU_NODE],
                         node_env=[{"KLSP_TEST_SLOWDOWN": "1"}, {"KLSP_TEST_SLOWDOWN": "2"}])
    yield cluster
    cluster.stop()


def test_a_search_spread_over_two_nodes_ranks_as_if_on_one(two_gpu_nodes, tmp_path):
    path = tmp_path / "rows.py"
    path.write_text(ROWS)
    said: list[str] = []
    timer = ClusterTimer(lambda: make_executor("ray", ThreadExecutor, address=two_gpu_nodes.address,
                                               say=said.append), fn_path="tests.scale.jobs:stand_in_timing")
    try:
        assert timer.gpus_for("H200") == 2 and timer.accelerator == "H200"  # the cluster has the device searched for
        found = search_tiling(str(path), ROWS, "row_scale_kernel", "H200", str(tmp_path), verify=False, timer=timer)
    finally:
        timer.close()
    assert not said, said
    assert found.errors == [] and found.source == "measured", found.errors
    timed = [t for t in found.tried if t.measured_us is not None]
    assert len({t.node for t in timed}) == 2, [(t.label, t.node) for t in timed]
    # Every figure is the candidate's time on one node (the base node: slowdown 1 or 2), wherever it was timed:
    # one scale for all, so the ranking is the true one.
    scales = {round(t.measured_us / stand_in_us(t.overrides), 9) for t in timed}
    assert len(scales) == 1 and scales <= {1.0, 2.0}, scales
    best = min(timed, key=lambda t: stand_in_us(t.overrides))
    assert found.winner_overrides == best.overrides
    # The per-node spread: the reference, timed on both nodes, took twice as long on the slow one.
    devices = {n["device"]: n for n in found.nodes}
    assert set(devices) == {"stand-in GPU (x1)", "stand-in GPU (x2)"}, found.nodes
    assert devices["stand-in GPU (x2)"]["reference_median_us"] == pytest.approx(
        2 * devices["stand-in GPU (x1)"]["reference_median_us"])
    assert "2.00x longer on the slowest node" in found.compared


def test_tune_on_a_cluster_without_gpus_says_it_ranked_by_the_model(ray_cluster, tmp_path):
    (tmp_path / "rows.py").write_text(ROWS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "kernel_lsp", "tune", "rows.py::row_scale_kernel", "--no-verify",
                           "--executor", "ray", "--ray-address", ray_cluster.address], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"estimated; not measured (no GPU on the Ray cluster at {ray_cluster.address})" in done.stdout, done.stdout
    assert "instead" not in done.stderr  # connected: no fallback


def test_tune_falls_back_to_this_machine_when_the_cluster_cannot_be_reached(tmp_path):
    (tmp_path / "rows.py").write_text(ROWS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    address = f"127.0.0.1:{free_port()}"
    done = subprocess.run([sys.executable, "-m", "kernel_lsp", "tune", "rows.py::row_scale_kernel", "--no-verify",
                           "--executor", "ray", "--ray-address", address, "--format", "json"],
                          cwd=Path(tmp_path), env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"the Ray cluster ({address}) cannot be reached" in done.stderr
    assert "running on this machine instead" in done.stderr
    answer = json.loads(done.stdout)
    assert answer["winner"] and answer["status"] == "estimated; not measured" and answer["nodes"] == []
