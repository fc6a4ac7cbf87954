"""One child process in its own process group, with a timeout and a cancel event: what the latency worker and
the profiler (and Nsight Compute under it) run through. A timeout or a cancel kills the whole group, so nothing the
child started outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


class Stopped(Exception):
    """The child was killed: `reason` is "cancelled" or "timeout"."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: bytes
    stderr: bytes  # empty when stderr was merged into stdout


def run_group(cmd: list[str], *, timeout: float, cancel: threading.Event | None = None, input: bytes | None = None,
              env: dict[str, str] | None = None, cwd: str | None = None, merge_stderr: bool = False) -> Finished:
    """Run `cmd` to its end, feeding it `input`; raise Stopped when `cancel` is set or `timeout` seconds pass."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                            env=env, cwd=cwd, start_new_session=True)
    out: dict[str, bytes | None] = {}

    def talk() -> None:  # communicate() in a thread: the loop below stays free to notice a cancel
        out["stdout"], out["stderr"] = proc.communicate(input)

    reader = threading.Thread(target=talk, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    ended_at: float | None = None
    while reader.is_alive():
        reader.join(0.05)
        reason = "cancelled" if cancel is not None and cancel.is_set() else (
            "timeout" if time.monotonic() > deadline else None)
        if reason:
            _kill_group(proc.pid)
            reader.join(5)
            raise Stopped(reason)
        # The child ended (killed from outside, say) but what it started still holds its pipes: without this the
        # answer would wait for those orphans, up to the timeout. They belong to the child's group: end them.
        if ended_at is None and proc.poll() is not None:
            ended_at = time.monotonic()
        elif ended_at is not None and time.monotonic() - ended_at > ORPHAN_GRACE_S:
            _kill_group(proc.pid)
            ended_at = float("inf")
    return Finished(proc.returncode, out.get("stdout") or b"", out.get("stderr") or b"")


ORPHAN_GRACE_S = 1.0


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def killed_from_outside(returncode: int | None, what: str, again: str) -> str | None:
    """What to tell the user about a child that SIGKILL ended, or None. run_group's own kills raise Stopped, so a
    SIGKILL seen in a return code came from elsewhere (the out-of-memory killer, a user's kill -9) and says
    nothing about the kernel: `what` names the process, `again` how to get the result."""
    if returncode != -signal.SIGKILL:
        return None
    return (f"{what} was killed by SIGKILL from outside kernel-lsp (perhaps the system ran out of memory); this is "
            f"not a problem in the kernel: {again}")


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from Linux's /proc (empty elsewhere): to account for each worker a process left."""
    def children(of: int) -> list[int]:
        try:
            tasks = os.listdir(f"/proc/{of}/task")
        except OSError:  # gone while we looked
            return []
        found = []
        for task in tasks:
            try:
                found += [int(c) for c in Path(f"/proc/{of}/task/{task}/children").read_text().split()]
            except OSError:
                pass
        return found

    out, todo = [], children(pid)
    while todo:
        child = todo.pop()
        out.append(child)
        todo += children(child)
    return out


def cmdline(pid: int) -> str:
    """The command line of a process, "" once it has gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
