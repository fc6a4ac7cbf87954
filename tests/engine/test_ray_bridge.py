"""How the Ray driver process (the bridge) reports the ways a Ray task can end that are not the job's own doing,
without a cluster: Ray's errors are raised by a stand-in for `ray.get`."""

from __future__ import annotations

import multiprocessing
import socket
from types import SimpleNamespace

import pytest

from kernel_lsp.engine.executor import CPU
from kernel_lsp.engine.pool import Status
from kernel_lsp.engine.ray_executor import LOST_AFTER, _Bridge, _Task

ray_exceptions = pytest.importorskip("ray.exceptions", reason="the bridge runs with Ray installed")


class Exited(Exception):
    pass


def _finish(monkeypatch, error: Exception, watched: tuple[str, int]) -> tuple:
    """What the bridge sends to the front end when the task's result is `error`: a job's reply, or ("lost", why)
    followed by the bridge process ending."""
    def end(code):
        raise Exited(code)

    monkeypatch.setattr("kernel_lsp.engine.ray_executor.os._exit", end)

    def get(_ref):
        raise error

    ray = SimpleNamespace(exceptions=ray_exceptions, get=get)
    ours, theirs = multiprocessing.Pipe()
    bridge = _Bridge(theirs, ray, None, {("cpu",): 2.0}, watched, max_retries=2, start_allowance=30.0)
    task = _Task(7, "tests.scale.jobs:where", b"", 60.0, CPU, 0, ref=object())
    bridge.tasks[task.id] = task
    try:
        bridge._finish(task)
        ended = False
    except Exited:
        ended = True
    return ours.recv(), ended


def _silent_address() -> tuple[str, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()


def test_the_local_raylet_dying_with_the_cluster_means_running_here_not_a_crashed_job(monkeypatch):
    host, port = _silent_address()  # the cluster has stopped: nothing answers at its address
    reply, ended = _finish(monkeypatch, ray_exceptions.LocalRayletDiedError(), (host, port))
    assert reply == ("lost", f"the Ray cluster at {host}:{port} stopped answering")
    assert ended


def test_the_local_raylet_dying_alone_also_means_running_here(monkeypatch):
    with socket.socket() as listening:  # the cluster's address still answers
        listening.bind(("127.0.0.1", 0))
        listening.listen(LOST_AFTER * 8)
        reply, ended = _finish(monkeypatch, ray_exceptions.LocalRayletDiedError(), listening.getsockname())
    assert reply == ("lost", "the Ray node on this machine that the driver goes through ended")
    assert ended


def test_a_worker_that_kept_dying_is_a_crashed_job(monkeypatch):
    reply, ended = _finish(monkeypatch, ray_exceptions.WorkerCrashedError(), _silent_address())
    assert reply[:5] == ("done", 7, Status.CRASHED.value, None,
                         "its Ray worker died 3 times (WorkerCrashedError); not retried again")
    assert not ended


def test_any_other_ray_error_is_named_not_called_a_crash_of_the_worker(monkeypatch):
    reply, ended = _finish(monkeypatch, ray_exceptions.OutOfMemoryError("the node ran out of memory"),
                           _silent_address())
    assert reply[:5] == ("done", 7, Status.CRASHED.value, None,
                         "Ray did not run it: OutOfMemoryError: the node ran out of memory")
    assert not ended
