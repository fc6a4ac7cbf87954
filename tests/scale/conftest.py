"""A real Ray cluster on this machine for the scale tests: a head and a worker process, 2 CPUs in all, no dashboard,
a small object store; started once per test session and stopped at its end (its processes by their ids)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the scale tests need Ray (pip install kernel-lsp[ray])")

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    """`ray start --block` processes, each in a session of its own so that stopping one ends all it started."""

    def __init__(self, tmp: Path, *, head: list[str], workers: list[list[str]] = ()):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp_dir = Path("/tmp") / f"klsp-ray-{os.getpid()}-{self.port}"  # short: Ray's socket paths are bounded
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0",
                        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
        self.env.pop("RAY_ADDRESS", None)
        self.logs = tmp
        ray = str(Path(sys.executable).with_name("ray"))
        common = ["--block", "--include-dashboard=false", "--disable-usage-stats", "--object-store-memory=80000000"]
        self.procs: list[subprocess.Popen] = []
        self._start([ray, "start", "--head", f"--port={self.port}", f"--temp-dir={self.temp_dir}", *common, *head],
                    "head")
        deadline = time.monotonic() + 120
        while not _answers(self.address):
            assert time.monotonic() < deadline, "the Ray head did not start: " + self.log("head")
            time.sleep(0.2)
        for i, extra in enumerate(workers):
            self._start([ray, "start", f"--address={self.address}", *common, *extra], f"worker{i}")

    def _start(self, argv: list[str], name: str) -> None:
        out = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self.procs.append(subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True, cwd=self.logs))

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        """Every process of the cluster's sessions (head, raylets, Ray workers), by id."""
        sessions = {p.pid for p in self.procs}
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        time.sleep(1)
        for pid in _pids_in_sessions(sessions):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def _pids_in_sessions(sessions: set[int]) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) in sessions:
                    found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """CPU only, like CI: the head and one worker node, one CPU each."""
    cluster = RayCluster(tmp_path_factory.mktemp("ray"), head=["--num-cpus=1", "--num-gpus=0"],
                         workers=[["--num-cpus=1", "--num-gpus=0"]])
    yield cluster
    cluster.stop()
