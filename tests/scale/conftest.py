"""A real Ray cluster on this machine for the scale tests: a head and a worker process, 2 CPUs in all, no dashboard,
a small object store; started once per test session and stopped at its end (its processes by their ids)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_lsp.engine.proc import cmdline
from tests.slow import scaled

pytest.importorskip("ray", reason="the scale tests need Ray (pip install kernel-lsp[ray])")

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    """`ray start --block` processes, each in a session of its own so that stopping one ends all it started."""

    def __init__(self, tmp: Path, *, head: list[str], workers: list[list[str]] = (),
                 node_env: list[dict[str, str]] = ()):
        """`node_env`: extra environment of each node, head first (its Ray workers inherit it)."""
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp_dir = Path("/tmp") / f"klsp-ray-{os.getpid()}-{self.port}"  # short: Ray's socket paths are bounded
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0",
                        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
        self.env.pop("RAY_ADDRESS", None)
        self.logs = tmp
        script = Path(sys.executable).with_name("ray")  # absent where Ray was unpacked from a wheel onto the path
        ray = [str(script)] if script.exists() else [sys.executable, "-m", "ray.scripts.scripts"]
        common = ["--block", "--disable-usage-stats", "--object-store-memory=80000000"]
        self.procs: list[subprocess.Popen] = []
        self._start([*ray, "start", "--head", f"--port={self.port}", f"--temp-dir={self.temp_dir}",
                     "--include-dashboard=false", *common, *head],
                    "head", node_env[0] if node_env else None)
        deadline = time.monotonic() + scaled(40)
        while not _answers(self.address):
            assert time.monotonic() < deadline, "the Ray head did not start: " + self.log("head")
            time.sleep(0.2)
        for i, extra in enumerate(workers):
            self._start([*ray, "start", f"--address={self.address}", *common, *extra], f"worker{i}",
                        node_env[1 + i] if len(node_env) > 1 + i else None)
        for i in range(len(workers)):  # a job submitted before a node joined would never go there
            while "Ray runtime started" not in self.log(f"worker{i}"):
                assert self.procs[1 + i].poll() is None, f"Ray worker {i} did not start: " + self.log(f"worker{i}")
                assert time.monotonic() < deadline + scaled(40), (f"Ray worker {i} did not start: "
                                                                  + self.log(f"worker{i}"))
                time.sleep(0.2)

    def _start(self, argv: list[str], name: str, env: dict[str, str] | None = None) -> None:
        out = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self.procs.append(subprocess.Popen(argv, env={**self.env, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True, cwd=self.logs))

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]

    def ray_logs(self, chars: int = 2000) -> str:
        """The ends of the cluster's own logs (control store, raylets, Ray workers' errors): what a failing test
        says of a cluster that did not run what it was given. Read before `stop`, which removes them."""
        parts = []
        for path in sorted(self.temp_dir.glob("session_*/logs/*")):
            if path.name.startswith(("gcs_server", "raylet")) and path.suffix in (".out", ".err") or (
                    path.name.startswith("python-core-worker") and path.suffix == ".log"):
                text = path.read_text(errors="replace").strip()
                if text and (not path.name.startswith("python-core-worker") or " E " in text or " W " in text):
                    parts.append(f"--- {path.name}\n{text[-chars:]}")
        return "\n".join(parts)[-6 * chars:] or "(no Ray logs)"

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
                p.wait(10)
            except subprocess.TimeoutExpired:  # `ray start --block` does not always leave on SIGTERM
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
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


EXAMPLES = REPO / "examples"
ADVERSARIAL = [REPO / "tests/verify/fixtures/tricks.py",
               *sorted((REPO / "tests/verify/fixtures/tampering").glob("[!_]*.py"))]


def check_cli(paths, *extra: str, timeout: float = 900, env: dict | None = None, on_start=None):
    """`kernel-lsp check --run-checks --format json` as CI runs it: (report, stderr). `on_start(process)` is called
    while it runs (a fault to inject)."""
    argv = [sys.executable, "-m", "kernel_lsp", "check", *map(str, paths), "--run-checks", "--check-device",
            "interpreter", "--format", "json", "--exit-zero", *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    if on_start is not None:
        on_start(proc)
    out, err = proc.communicate(timeout=scaled(timeout))
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out), err


def comparable(report: dict, paths=None) -> dict:
    """What must not depend on where the checks ran: every problem, and each verdict's status, device, failed
    check, line and message (its numbers masked: each run draws fresh random inputs and unseen shapes)."""
    keep = (lambda p: True) if paths is None else (lambda p: any(p == str(x) or p.startswith(str(x) + "/")
                                                                  for x in paths))
    def mask(text):
        return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text or "")
    return {
        "problems": sorted((p["path"], p["code"], p["severity"], p["line"], p["column"], mask(p["message"]))
                           for p in report["problems"] if keep(p["path"])),
        "checks": sorted((c["path"], c["spec"], c["kernel"], c["status"], c["device"], c["failedCheck"] or "",
                          json.dumps(c["line"]), mask(c["message"])) for c in report["checks"] if keep(c["path"])),
    }


@pytest.fixture(scope="session")
def local_report():
    """The examples and the adversarial fixtures checked on this machine, the reference for every Ray run."""
    report, err = check_cli([EXAMPLES, *ADVERSARIAL])
    assert "Ray" not in err
    return report


def ray_titles(cluster: RayCluster) -> set[str]:
    """The titles of the cluster's Ray processes ("ray::IDLE", "ray::run_checks", ...): what a failing test says."""
    return {title for title in _titles(cluster).values() if title.startswith("ray::")}


def session_pids(cluster: RayCluster, title: str) -> list[int]:
    """The cluster's processes whose title starts with `title` (Ray names a worker after the task it runs)."""
    return [pid for pid, name in _titles(cluster).items() if name.startswith(title)]


def _titles(cluster: RayCluster) -> dict[int, str]:
    """pid -> the first word of the command line (a Ray worker's title), for every process of the cluster."""
    return {pid: line.split(" ", 1)[0] for pid in _pids_in_sessions({p.pid for p in cluster.procs})
            if (line := cmdline(pid))}
