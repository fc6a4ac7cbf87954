"""A cluster whose head advertises two GPUs of type H200 (Ray resources only: this machine has no GPU). What the
scheduling promises: a GPU job gets one GPU to itself, no more GPU jobs run at once than the cluster has GPUs, a job
for a GPU type the cluster lacks is refused with a message; and when the cluster stops in the middle of
`kernel-lsp check --executor ray`, the checks finish on this machine with a message and the same results."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kernel_lsp.engine.executor import ThreadExecutor, gpu
from kernel_lsp.engine.pool import Status
from kernel_lsp.engine.ray_executor import RayExecutor

from .conftest import EXAMPLES, RayCluster, check_cli, comparable, ray_titles, session_pids

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory):
    cluster = RayCluster(tmp_path_factory.mktemp("ray-gpu"),
                         head=["--num-cpus=2", "--num-gpus=2", '--resources={"accelerator_type:H200": 1}'])
    yield cluster
    cluster.stop()


async def test_gpu_jobs_get_a_gpu_each_and_never_more_at_once_than_the_cluster_has(gpu_cluster):
    said: list[str] = []
    executor = RayExecutor(gpu_cluster.address, fallback=ThreadExecutor, say=said.append)
    try:
        assert (await executor.capacity())[("gpu", "H200")] == 2
        outcomes = await asyncio.gather(*(executor.run("tests.scale.jobs:where", 1.0, timeout=120,
                                                       resources=gpu("H200")) for _ in range(5)))
        assert all(o.status is Status.OK for o in outcomes), outcomes
        runs = [o.value for o in outcomes]
        assert all(r["gpus"] in ("0", "1") for r in runs), runs  # one GPU each, named by Ray
        for r in runs:  # when each one started, at most two ran (it included), on different GPUs
            running = [o for o in runs if o["start"] <= r["start"] < o["end"]]
            assert len(running) <= 2, runs
            assert len({o["gpus"] for o in running}) == len(running), runs
        other = await executor.run("tests.scale.jobs:where", 0.0, timeout=60, resources=gpu("A100"))
        assert other.status is Status.ERROR
        assert other.message == "the Ray cluster has no node with a GPU of type A100: not run"
        assert not said
    finally:
        await executor.close()


def test_a_cluster_stopped_mid_run_leaves_complete_local_results(gpu_cluster, local_report):
    stopped: list[bool] = []
    titles: set[str] = set()  # what the cluster's Ray processes were called while the command ran

    def stop_during_first_check(proc):
        def watch():
            # As long as the command runs: on a busy machine its first check can start minutes after it does.
            while proc.poll() is None:
                titles.update(ray_titles(gpu_cluster))
                if session_pids(gpu_cluster, "ray::run_checks"):
                    stopped.append(True)  # before stopping, which takes seconds: the command may end first
                    gpu_cluster.stop()
                    return
                time.sleep(0.1)

        threading.Thread(target=watch, daemon=True).start()

    files = [EXAMPLES / "vector_add.py", EXAMPLES / "fused_softmax.py", EXAMPLES / "layernorm.py"]
    report, err = check_cli(files, "--executor", "ray", "--ray-address", gpu_cluster.address,
                            on_start=stop_during_first_check)
    assert stopped, (f"no check started on the cluster; its Ray processes were {sorted(titles)}; the checks were "
                     f"{[(c['spec'], c['status'], c.get('device')) for c in report.get('checks', [])]}; what the "
                     f"report says of checks not run: "
                     f"{[p['message'] for p in report['problems'] if 'not run' in p['message']]}; the command said:\n"
                     + err[-3000:] + "\nthe cluster's logs:\n" + gpu_cluster.ray_logs())
    assert f"the Ray cluster at {gpu_cluster.address} stopped answering" in err, err[-2000:]
    assert "run on this machine instead" in err
    assert comparable(report) == comparable(local_report, files)
    assert len(report["checks"]) == 3
