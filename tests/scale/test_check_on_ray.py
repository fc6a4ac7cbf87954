"""`kernel-lsp check --run-checks --executor ray` on a real two-node cluster gives what the local run gives: the
examples and the adversarial fixtures, and again with a Ray worker killed in the middle of a check."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest

from .conftest import ADVERSARIAL, EXAMPLES, check_cli, comparable, session_pids

# Each test may start the session's cluster and run the local reference first: minutes on a busy 2-core machine.
pytestmark = pytest.mark.timeout(900)


def _ran_on_ray(err: str, cluster) -> int:
    found = re.search(r"(\d+) check job\(s\) ran on the Ray cluster at (\S+) ", err)
    assert found, err[-2000:]
    assert found.group(2) == cluster.address
    return int(found.group(1))


def test_checks_on_ray_equal_the_local_run(ray_cluster, local_report):
    report, err = check_cli([EXAMPLES, *ADVERSARIAL], "--executor", "ray", "--ray-address", ray_cluster.address)
    files_with_specs = {c["path"] for c in local_report["checks"]}
    assert _ran_on_ray(err, ray_cluster) == len(files_with_specs)
    assert "instead" not in err  # no fallback
    assert comparable(report) == comparable(local_report)
    assert len(report["checks"]) >= 25 and {c["status"] for c in report["checks"]} >= {"correct", "rejected"}


def test_a_ray_worker_killed_during_a_check_is_retried(ray_cluster, local_report):
    killed: list[int] = []

    def kill_first_check(proc):
        def watch():
            # As long as the command runs: on a busy machine its first check can start minutes after it does.
            while not killed and proc.poll() is None:
                pids = session_pids(ray_cluster, "ray::run_checks")
                if pids:
                    time.sleep(1.0)  # inside the check, not before it
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
                time.sleep(0.1)

        threading.Thread(target=watch, daemon=True).start()

    files = [EXAMPLES / "vector_add.py", EXAMPLES / "fused_softmax.py"]
    report, err = check_cli(files, "--executor", "ray", "--ray-address", ray_cluster.address,
                            on_start=kill_first_check)
    assert killed, "no Ray worker ran a check"
    assert "instead" not in err
    assert _ran_on_ray(err, ray_cluster) == 2
    assert comparable(report) == comparable(local_report, files)


def test_an_unreachable_cluster_checks_here_and_says_so(local_report):
    from .conftest import free_port

    port = free_port()
    files = [EXAMPLES / "vector_add.py"]
    report, err = check_cli(files, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}")
    assert (f"kernel-lsp: the Ray cluster (127.0.0.1:{port}) cannot be reached: nothing answers at 127.0.0.1:{port}; "
            "running on this machine instead") in err
    assert comparable(report) == comparable(local_report, files)
