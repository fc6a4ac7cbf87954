"""The language server's checks on a Ray cluster, through a real LSP client (pytest-lsp): with `executor: ray` a
check runs as a Ray task; when the cluster goes away a window message says so and the next check runs on this
machine, with the same verdict."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.server.conftest import client, start, wait_for  # noqa: F401 - pytest fixtures

from .conftest import RayCluster

pytest.importorskip("torch")
pytest.importorskip("triton")
pytestmark = pytest.mark.timeout(900)

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "vector_add.py").read_text()
KERNEL_LINE = EXAMPLE.splitlines().index("def add_kernel(")


@pytest.fixture(params=["vscode"])
def profile(request) -> str:
    return request.param


async def test_server_checks_run_on_the_cluster_and_on_this_machine_once_it_is_lost(start, client,  # noqa: F811
                                                                                     tmp_path_factory):
    cluster = await asyncio.to_thread(RayCluster, tmp_path_factory.mktemp("ray-server"),
                                      head=["--num-cpus=1", "--num-gpus=0"])
    try:
        s = await start({"vector_add.py": EXAMPLE}, options={"checkDevice": "interpreter", "executor": "ray",
                                                             "rayAddress": cluster.address})
        uri = s.open("vector_add.py")
        where = {"uri": uri, "line": KERNEL_LINE, "character": 0}
        result = await s.command("kernel-lsp.runChecks", where)
        assert [(v["kernel"], v["status"]) for v in result["verdicts"]] == [("add_kernel", "correct")], result
        ran = (await s.command("kernel-lsp.status"))["checks"]["executor"]
        assert ran["executor"] == "ray" and ran["onRay"] == 1 and ran["cluster"]["address"] == cluster.address, ran

        # "Optimize tiling" times on the cluster's GPUs; this cluster has none, and the proposal says so.
        answer = await s.command("kernel-lsp.optimizeTiling", where)
        said = answer.get("proposal", {}).get("summary") or answer.get("error", "")
        assert f"no GPU on the Ray cluster at {cluster.address}: not measured" in said, answer

        await asyncio.to_thread(cluster.stop)
        await wait_for(lambda: any("stopped answering" in m.message for m in client.messages), timeout=60)
        [lost] = [m.message for m in client.messages if "stopped answering" in m.message]
        assert lost.startswith(f"kernel-lsp: checks: the Ray cluster at {cluster.address} stopped answering")
        assert "run on this machine instead" in lost

        again = await s.command("kernel-lsp.runChecks", where)
        assert [(v["kernel"], v["status"]) for v in again["verdicts"]] == [("add_kernel", "correct")], again
        ran = (await s.command("kernel-lsp.status"))["checks"]["executor"]
        assert ran["executor"] == "local (Ray fallback)" and ran["onLocal"] == 1, ran
    finally:
        await asyncio.to_thread(cluster.stop)
