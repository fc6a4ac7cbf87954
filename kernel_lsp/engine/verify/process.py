"""The parent side of a check: one fresh checking process per request, watched for time, memory and cancel.

A process that crashes, hangs or grows past the memory limit is killed with its whole process group; the spec it
was checking gets the verdict (signal, seconds, megabytes, and the user's line from faulthandler's stack where
there is one), and a fresh process carries on with the specs after it.

A request that runs on a GPU is checked twice (`_guarded`): first on the CPU interpreter, whose bounds guard and
write-race detector the GPU lacks, then on the GPU for the specs that pass did not already decide.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..gpu import runs_on_gpu
from ..proc import killed_from_outside
from ..redact import user_code_env
from .results import CheckReport, CheckRequest, Verdict, verdict_from_dict

RUNNER = "kernel_lsp.engine.verify.runner"
POLL_S = 0.05
INTERPRETER = "CPU interpreter"  # the runner's device label for the interpreter
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding kernel_lsp/


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _stack_line(stderr: str, path: str) -> int | None:
    """0-based line of the user's file in the most recent faulthandler dump (most recent call first)."""
    dumps = stderr.split("most recent call first")
    if len(dumps) < 2:
        return None
    pattern = re.compile(r'File "(.+?)", line (\d+)')
    for match in pattern.finditer(dumps[-1]):
        if match.group(1) == path:
            return int(match.group(2)) - 1
    return None


_DUMP_HEADER = re.compile(r"^(Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):$")


def stderr_tail(stderr: str, lines: int = 4, chars: int = 600) -> str:
    """The last lines the process wrote to stderr, without faulthandler's stack dumps (their line is reported
    on its own): what a native library or an uncaught exception said before the process ended."""
    kept: list[str] = []
    in_dump = False
    for line in stderr.splitlines():
        if _DUMP_HEADER.match(line.strip()):
            in_dump = True
            continue
        if in_dump and (line.startswith("  ") or not line.strip()):
            continue
        in_dump = False
        if line.strip():
            kept.append(line.strip())
    text = " | ".join(kept[-lines:])
    return text if len(text) <= chars else "..." + text[-chars:]


def _with_tail(message: str, stderr: str) -> str:
    tail = stderr_tail(stderr)
    return f"{message}; its stderr ended with: {tail}" if tail else f"{message}; it wrote nothing to stderr"


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class _Run:
    """One checking process."""

    def __init__(self, request: CheckRequest, skip: list[str]):
        self.request = request
        self.nonce = secrets.token_hex(16)
        self.forged = 0  # lines in the pipe without the nonce: written by the user's code, ignored
        self.stderr = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - closed in close()
        read_fd, write_fd = os.pipe()
        env = user_code_env()  # the user's code runs here: no API key, no token (engine/redact.py)
        env.pop("TRITON_INTERPRET", None)  # the runner decides, before importing triton
        env["KERNEL_LSP_VERIFY_FD"] = str(write_fd)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        env.setdefault("PYTHONFAULTHANDLER", "1")
        payload = {
            "path": os.path.abspath(request.path), "source": request.source, "root": request.root,
            "kernels": list(request.kernels) if request.kernels is not None else None,
            "device": request.device, "skip": skip,
            # The runner decides whether an address-space cap is safe (it depends on the torch build it imports).
            "memory_mb": request.memory_mb,
            # Every event must carry it: a line the user's code writes into the pipe does not.
            "nonce": self.nonce,
        }
        cwd = request.root or os.path.dirname(request.path) or None
        if cwd and not os.path.isdir(cwd):
            cwd = None
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-B", "-m", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=self.stderr, env=env, pass_fds=(write_fd,), start_new_session=True, cwd=cwd)
        os.close(write_fd)
        self.fd = read_fd
        self.buffer = b""
        try:
            stdin = self.proc.stdin
            assert stdin is not None  # started with stdin=PIPE
            stdin.write(json.dumps(payload).encode())
            stdin.close()
        except OSError:
            pass

    def events(self, timeout: float) -> tuple[list[dict], bool]:
        """Events that arrived within `timeout` s; the flag is False once the pipe closed."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return [], True
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return self._lines(final=True), False
        self.buffer += chunk
        return self._lines(), True

    def _lines(self, final: bool = False) -> list[dict]:
        *lines, self.buffer = self.buffer.split(b"\n")
        if final and self.buffer:
            lines.append(self.buffer)
            self.buffer = b""
        out = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                self.forged += bool(line.strip())
                continue
            if isinstance(event, dict) and event.get("nonce") == self.nonce:
                out.append(event)
            else:
                self.forged += 1
        return out

    def dump_stacks(self) -> None:
        try:
            os.kill(self.proc.pid, signal.SIGUSR1)
        except OSError:
            return
        time.sleep(0.3)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def stderr_text(self) -> str:
        try:
            self.stderr.seek(0)
            return self.stderr.read()[-200_000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        self.kill()
        os.close(self.fd)
        self.stderr.close()


def check(request: CheckRequest, cancel: threading.Event | None = None) -> CheckReport:
    """The request's verdicts; on a GPU (device "cuda", or "auto" where one is present) after the guard pass."""
    if request.guard and runs_on_gpu(request.device):
        return _guarded(request, cancel)
    return _check_once(request, cancel)


def _guard_decided(v: Verdict) -> bool:
    """What only the interpreter sees: an access outside every tensor, a write race between programs, a
    `tl.device_assert` that fails (compiled out of GPU kernels unless triton's debug mode is on)."""
    return v.status == "out-of-bounds" or v.failed_check in ("race", "bounds", "device-assert")


def _status_and_message(v: Verdict) -> str:
    """"mismatch: ...", without repeating a status the message starts with ("timeout: the check ...")."""
    said = v.message.lower().startswith((v.status, v.status.replace("-", " ")))
    return v.message if said else f"{v.status}: {v.message}"


def _noted(v: Verdict, note: str) -> Verdict:
    return replace(v, notes=(*v.notes, note))


def _guard_note(v: Verdict, before: Verdict | None, unfinished: str) -> Verdict:
    """A GPU verdict with what the guard pass said about its spec (`before`; None: it did not get there)."""
    if v.device == INTERPRETER:  # "auto" fell back to the interpreter: the pass was guarded itself
        return v
    if before is not None and before.ok:
        return _noted(v, f"bounds and race guard: passed on the CPU interpreter before the GPU run "
                         f"({before.duration_s:.1f} s)")
    why = unfinished if before is None else _status_and_message(before)
    return _noted(v, f"bounds and race guard did not complete on the CPU interpreter: {why}")


def _guarded(request: CheckRequest, cancel: threading.Event | None) -> CheckReport:
    """The guard pass on the CPU interpreter, then the GPU pass for the specs it did not decide. A spec the guard
    decided keeps the interpreter's verdict; every other spec gets the GPU's verdict (an interpreter mismatch,
    error or timeout does not replace it: the interpreter has limits of its own) with a note on the guard. The
    errors are the GPU pass's; the timeout applies to each pass, `cancel` to both."""
    guard = _check_once(replace(request, device="interpreter"), cancel)
    decided = [v for v in guard.verdicts if _guard_decided(v)]
    if cancel is not None and cancel.is_set():
        gpu = CheckReport(request.path, (), ((None, "check cancelled"),))
    elif not guard.errors and len(decided) == len(guard.verdicts):  # every spec decided: nothing left to run
        gpu = CheckReport(request.path)
    else:
        gpu = _check_once(request, cancel, skip=[v.spec for v in decided])
    before = {v.spec: v for v in guard.verdicts}
    unfinished = guard.errors[-1][1] if guard.errors else "the guard pass did not reach this spec"
    verdicts = [_noted(v, "not run on the GPU: the bounds and race guard on the CPU interpreter found this first")
                for v in decided]
    verdicts += [_guard_note(v, before.get(v.spec), unfinished) for v in gpu.verdicts]
    return CheckReport(request.path, tuple(sorted(verdicts, key=lambda v: v.spec_line)), gpu.errors)


def _check_once(request: CheckRequest, cancel: threading.Event | None = None,
                skip: list[str] | None = None) -> CheckReport:
    """One pass over the request's specs on its device, one fresh process after each crash; `skip` names specs
    not to check."""
    verdicts: list[Verdict] = []
    errors: list[tuple[int | None, str]] = []
    done: list[str] = list(skip or ())
    device = INTERPRETER if request.device in ("interpreter", "cpu") else request.device
    path = os.path.abspath(request.path)
    while True:
        run = _Run(request, done)
        current: dict[str, Any] | None = None
        clock = time.monotonic()
        ended = False
        failure: tuple[str, str, str] | None = None  # status, message, why (for the stack line)
        try:
            while True:
                events, alive = run.events(POLL_S)
                for ev in events:
                    kind = ev.get("event")
                    if kind == "device":
                        device = ev["device"]
                    elif kind == "errors":
                        errors += [(e[0], e[1]) for e in ev["errors"]]
                    elif kind == "start":
                        current, clock = ev, time.monotonic()
                    elif kind == "verdict":
                        verdicts.append(verdict_from_dict(ev["verdict"]))
                        done.append(ev["verdict"]["spec"])
                        current, clock = None, time.monotonic()
                    elif kind == "oom":
                        failure = ("out-of-memory", (f"out of memory: {ev.get('message', '')} (limit "
                                   f"{request.memory_mb} MB)"), "oom")
                    elif kind == "done":
                        ended = True
                if ended or failure:
                    break
                if cancel is not None and cancel.is_set():
                    errors.append((None, "check cancelled"))
                    return CheckReport(request.path, tuple(verdicts), tuple(errors))
                rss = _rss_mb(run.proc.pid)
                if rss > request.memory_mb:
                    run.dump_stacks()
                    failure = ("out-of-memory", (f"out of memory: the check used more than {request.memory_mb} MB "
                               f"({rss:.0f} MB resident) and was stopped"), "memory")
                    break
                if time.monotonic() - clock > request.timeout_s:
                    run.dump_stacks()
                    what = "did not finish" if current else "did not import"
                    failure = ("timeout", (f"timeout: the check {what} within {request.timeout_s:g} s and was "
                               "stopped (an endless loop or a hang?)"), "timeout")
                    break
                if not alive:
                    code = run.proc.wait()
                    outside = killed_from_outside(code, "the checking process", "run the check again")
                    if outside:  # every kill of ours picks its failure first: this one is no verdict on the kernel
                        failure = ("killed", outside, "outside")
                    elif code < 0:
                        failure = ("crashed", f"crashed: the checking process died with {_signal_name(code)}"
                                   + (" (an out-of-bounds access or a native error)" if code in (-11, -6, -7)
                                      else ""), "crash")
                    else:
                        failure = ("crashed", f"crashed: the checking process exited with code {code}", "exit")
                    break
            if failure is None:
                break
            run.kill()
            stderr = run.stderr_text()
            line = _stack_line(stderr, path)
            status, message, why = failure
            if line is not None:
                message = f"{message.rstrip('.')}; last at line {line + 1}"
            if why == "exit" or (why == "crash" and current is None):
                message = _with_tail(message, stderr)
            if current is None:
                errors.append((line, message))
                break
            if why == "outside":  # its spec goes unchecked, said at the spec; the specs after it carry on
                errors.append((current["spec_line"], f"{current['spec']} was not checked: {message}"))
                done.append(current["spec"])
                continue
            verdicts.append(Verdict(
                kernel=current["kernel"], spec=current["spec"], spec_line=current["spec_line"],
                kernel_line=current["kernel_line"], status=status, device=device, message=message, line=line,
                notes=tuple(stderr.strip().splitlines()[-12:]) if status == "crashed" else (),
                duration_s=round(time.monotonic() - clock, 3)))
            done.append(current["spec"])
        finally:
            if run.forged:
                errors.append((None, (f"the checking process received {run.forged} line(s) on its result pipe that "
                                      "did not come from the checker (the file's code writing to it?); they were "
                                      "ignored")))
            run.close()
    return CheckReport(request.path, tuple(verdicts), tuple(errors))
