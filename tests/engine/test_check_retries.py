"""A check whose result the infrastructure lost (its checking process or Ray worker killed from outside) runs
again; one lost on every try is reported as lost, never as the kernel's warning, and `check` exits 3 on it."""

from __future__ import annotations

import asyncio

from kernel_lsp.engine.batch import INFRASTRUCTURE_RETRIES, check_with, infrastructure_losses
from kernel_lsp.engine.pool import Outcome, Status
from kernel_lsp.engine.proc import killed_from_outside
from kernel_lsp.engine.verify import CheckReport, CheckRequest, Verdict

SOURCE = "from kernel_lsp.spec import spec\n"
KILLED = killed_from_outside(-9, "the checking process", "run the check again")


def verdict(status: str, message: str) -> Verdict:
    return Verdict("k", "k_inputs", 3, 1, status, "CPU interpreter", message)


class Scripted:
    """An executor whose check jobs answer in turn with the outcomes given (the last one repeats)."""

    def __init__(self, *outcomes: Outcome):
        self.outcomes, self.calls = list(outcomes), 0

    async def run(self, fn_path, arg, **kwargs) -> Outcome:
        self.calls += 1
        return self.outcomes[min(self.calls, len(self.outcomes)) - 1]


def report(*verdicts: Verdict) -> Outcome:
    return Outcome(Status.OK, CheckReport("f.py", verdicts))


def test_a_check_killed_from_outside_runs_again_and_its_result_stands():
    executor = Scripted(report(verdict("error", KILLED)), report(verdict("mismatch", "differs at shape (7,)")))
    got = asyncio.run(check_with(executor, CheckRequest("f.py", SOURCE), 60.0, retries=INFRASTRUCTURE_RETRIES))
    assert executor.calls == 2
    assert [v.status for v in got.verdicts] == ["mismatch"]  # the real finding, no longer hidden by the kill
    assert infrastructure_losses(got) == []


def test_a_ray_worker_that_died_every_time_is_a_loss_not_a_warning():
    died = Outcome(Status.CRASHED, None, "its Ray worker died 3 times (WorkerCrashedError); not retried again")
    executor = Scripted(died)
    got = asyncio.run(check_with(executor, CheckRequest("f.py", SOURCE), 60.0, retries=INFRASTRUCTURE_RETRIES))
    assert executor.calls == 1 + INFRASTRUCTURE_RETRIES
    [lost] = infrastructure_losses(got)
    assert "Ray worker died" in lost


def test_a_kernel_that_crashes_by_itself_is_not_run_again():
    executor = Scripted(report(verdict("crashed", "the checking process died from SIGSEGV at line 12")))
    got = asyncio.run(check_with(executor, CheckRequest("f.py", SOURCE), 60.0, retries=INFRASTRUCTURE_RETRIES))
    assert executor.calls == 1 and infrastructure_losses(got) == []


def test_check_exits_3_when_a_result_is_lost_on_every_try(tmp_path):
    """A checking process killed by SIGKILL each time (here it does it to itself) leaves no result: CI fails with
    exit code 3, which says the infrastructure lost it, and the file's own problems are still printed."""
    import subprocess
    import sys
    from pathlib import Path

    import pytest

    pytest.importorskip("torch")
    path = tmp_path / "killed.py"
    path.write_text((Path(__file__).resolve().parents[2] / "examples" / "vector_add.py").read_text().replace(
        '    assert x.shape == y.shape, f"shape mismatch',
        '    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n    assert x.shape == y.shape, f"shape mismatch',
        1))
    done = subprocess.run([sys.executable, "-m", "kernel_lsp.cli", "check", "--run-checks", str(path)],
                          capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 3, (done.stdout[-2000:], done.stderr[-2000:])
    assert "result lost, not checked" in done.stderr
