"""A worker process killed from outside (SIGKILL: the out-of-memory killer, a user's `kill -9`) in the middle of a job,
for each kind of worker the server starts: the file whose job it was gets a message that says the worker died and
what to do (never a verdict on the user's kernel), the next job of that kind works, other files keep their results,
and no dead child is left unreaped.

Workers are found among the server's descendants (/proc/<pid>/task/*/children), by their command line. Timeouts
are generous: a busy 2-core machine starts torch and triton slowly. Nothing here needs a GPU: compiles run for
sm_90 without one, checks and latency estimates run on Triton's interpreter, and the profiler is the fake `ncu` of
tests/profile.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from lsprotocol import types

from kernel_lsp.engine.proc import descendants
from tests.procs import proc_state, running_below
from tests.slow import scaled

from .conftest import until, wait_for

pytest.importorskip("torch")
pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "examples" / "vector_add.py").read_text()
MATMUL = (REPO / "examples" / "matmul_autotune.py").read_text()
KERNEL_LINE = EXAMPLE.splitlines().index("def add_kernel(")
DOCSTRING = '    """x + y for two contiguous tensors of the same shape, dtype and device."""'
RUNNER = "kernel_lsp.engine.verify.runner"
LATENCY = "kernel_lsp.engine.latency.worker"


@pytest.fixture(params=["vscode"])
def profile(request) -> str:
    return request.param


# --- the server's processes ----------------------------------------------------------------------------------------


async def kill_when_running(server: int, marker: str, timeout: float = 120.0) -> int:
    """SIGKILL the first descendant of the server whose command line holds `marker`, as soon as one runs."""
    found: list[int] = []
    await wait_for(lambda: bool(found.extend(running_below(server, marker)) or found), timeout, interval=0.02)
    os.kill(found[0], signal.SIGKILL)
    return found[0]


async def no_zombies(server: int) -> None:
    """Every dead child gets reaped (a moment after its death: the loop notices it asynchronously)."""
    await until(lambda: asyncio.sleep(0, [p for p in descendants(server) if proc_state(p) == "Z"]),
                lambda zombies: not zombies, timeout=30)


async def server_pid(s) -> int:
    return (await s.command("kernel-lsp.status"))["pid"]


def said(s, *words: str) -> list[str]:
    return [m.message for m in s.client.messages if all(w in m.message for w in words)]


async def hints(s, uri, text) -> list[types.InlayHint]:
    return await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(0, 0), types.Position(len(text.splitlines()), 0)))) or []


def at(uri: str, **extra) -> dict:
    return {"uri": uri, "line": KERNEL_LINE + 3, "character": 0, **extra}


# --- compile: the worker pool ----------------------------------------------------------------------------------------


async def test_a_killed_compile_worker_is_replaced_and_the_file_told(start):
    from .kernels import GOOD

    s = await start({"good.py": GOOD, "matmul.py": MATMUL},
                    options={"compile": "open", "compileDebounceMs": 0, "targets": ["sm_90"], "compileWorkers": 1,
                             "pins": {"add_kernel": {"BLOCK": 256}}})  # GOOD launches nothing: BLOCK is pinned
    server = await server_pid(s)
    good = s.open("good.py")
    await until(lambda: hints(s, good, GOOD), lambda hs: any("regs" in str(h.label) for h in hs), timeout=180)
    status = await s.command("kernel-lsp.status")
    [worker] = status["compile"]["pool"]["pids"]  # warm now: the next job runs in it, past its start-up

    matmul = s.open("matmul.py")
    await until(lambda: s.command("kernel-lsp.status"), lambda st: st["compile"]["pool"]["running"] >= 1, timeout=60,
                interval=0.02)
    os.kill(worker, signal.SIGKILL)

    diags = await until(lambda: s.diagnostics(matmul), lambda ds: any(d.code == "KC006" for d in ds), timeout=300)
    [died] = [d for d in diags if d.code == "KC006"]
    assert "SIGKILL" in died.message and "not a problem in the kernel" in died.message and "runs again" in died.message, died.message
    assert "smaller configuration" not in died.message, died.message
    assert not [d for d in diags if d.code == "KC001"]
    status = await s.command("kernel-lsp.status")
    assert status["compile"]["pool"]["crashed"] == 1 and worker not in status["compile"]["pool"]["pids"]

    # Other files keep their results; the next compile of this file (after an edit) works in the new worker.
    assert any("regs" in str(h.label) for h in await hints(s, good, GOOD))
    s.set_text(matmul, MATMUL + "\n# edited\n")
    await until(lambda: s.diagnostics(matmul), lambda ds: not [d for d in ds if d.code == "KC006"], timeout=300)
    await until(lambda: s.command("kernel-lsp.status"), lambda st: st["compile"]["pool"]["running"] == 0, timeout=300)
    await no_zombies(server)


# --- checks: one process per request ---------------------------------------------------------------------------------


async def test_a_killed_checking_process_is_not_the_kernels_crash(start, tmp_path):
    # The launcher's first call writes a marker and sleeps: the test kills the checking process in the spec.
    marker = tmp_path / "in-launcher"
    slow = EXAMPLE.replace(DOCSTRING, f"{DOCSTRING}\n    import os, time\n    if not os.path.exists({str(marker)!r}):\n"
                           f"        open({str(marker)!r}, 'w').close()\n        time.sleep(60)")
    s = await start({"slow.py": slow, "other.py": EXAMPLE},
                    options={"checkDevice": "interpreter", "checkTimeoutS": 240, "latency": "off"})
    server = await server_pid(s)
    other = s.open("other.py")
    [verdict] = (await s.command("kernel-lsp.runChecks", {"uri": other}))["verdicts"]
    assert verdict["status"] == "correct"

    uri = s.open("slow.py")
    running = asyncio.ensure_future(s.command("kernel-lsp.runChecks", {"uri": uri}))
    await wait_for(marker.exists, timeout=180)
    await kill_when_running(server, RUNNER)
    result = await asyncio.wait_for(running, scaled(40))
    assert not [v for v in result["verdicts"] if v["status"] == "crashed"], result  # not the kernel's crash
    [error] = result["errors"]
    assert "SIGKILL" in error["message"] and "run the check again" in error["message"], error
    diags = await s.diagnostics(uri)
    assert not [d for d in diags if d.code == "KV004"]
    [kv] = [d for d in diags if str(d.code).startswith("KV")]
    assert kv.code == "KV005" and "SIGKILL" in kv.message

    # The next check of the file works (the marker is there: no sleep), and the other file kept its verdict.
    [verdict] = (await s.command("kernel-lsp.runChecks", {"uri": uri}))["verdicts"]
    assert verdict["status"] == "correct", verdict
    assert not [d for d in await s.diagnostics(uri) if str(d.code).startswith("KV")]
    [lens] = await s.lenses(other)
    assert lens.command.title.startswith("✓ correct")
    await no_zombies(server)


# --- latency: one process per estimate -------------------------------------------------------------------------------


async def test_a_killed_latency_worker_is_told_and_the_next_estimate_works(start):
    s = await start({"vector_add.py": EXAMPLE, "other.py": EXAMPLE},
                    options={"checkDevice": "interpreter", "checks": "request", "latency": "save"})
    server = await server_pid(s)
    other = s.open("other.py")
    await s.command("kernel-lsp.runChecks", {"uri": other})
    await until(lambda: s.lenses(other), lambda ls: any("est." in ln.command.title for ln in ls), timeout=240)

    uri = s.open("vector_add.py")
    check = asyncio.ensure_future(s.command("kernel-lsp.runChecks", {"uri": uri}))
    await kill_when_running(server, LATENCY, timeout=240)  # the estimate starts once the check passed
    [verdict] = (await asyncio.wait_for(check, scaled(40)))["verdicts"]
    assert verdict["status"] == "correct"
    await wait_for(lambda: bool(said(s, "latency", "SIGKILL")), timeout=60)
    [message] = said(s, "latency", "SIGKILL")
    assert "vector_add.py" in message and "run the check again" in message, message
    assert not any("est." in ln.command.title for ln in await s.lenses(uri))

    await s.command("kernel-lsp.runChecks", {"uri": uri})
    await until(lambda: s.lenses(uri), lambda ls: any("est." in ln.command.title for ln in ls), timeout=240)
    assert any("est." in ln.command.title for ln in await s.lenses(other))
    await no_zombies(server)


# --- profiles: the spec planner and Nsight Compute -------------------------------------------------------------------


@pytest.fixture
def fake_ncu(tmp_path_factory, monkeypatch):
    """tests/profile's fake `ncu` first on the PATH of the server started after it."""
    from tests.profile.conftest import FakeNcu

    return FakeNcu(tmp_path_factory.mktemp("ncu"), monkeypatch)


async def test_a_killed_profiler_is_told_and_the_next_profile_works(fake_ncu, start):
    fake = fake_ncu
    softmax = (REPO / "examples" / "fused_softmax.py").read_text()
    s = await start({"fused_softmax.py": softmax, "other.py": softmax})
    server = await server_pid(s)
    other = s.open("other.py")
    first = await s.command("kernel-lsp.profileLines", {"uri": other})
    assert "error" not in first, first

    uri = s.open("fused_softmax.py")
    for marker, expected in (("kernel_lsp.engine.profile.plan", "reading the file's specs"),
                             ("fake_ncu/ncu", "Nsight Compute")):
        fake.mode("hang")  # the fake ncu would sleep for two minutes: only the kill ends it sooner
        running = asyncio.ensure_future(s.command("kernel-lsp.profileLines", {"uri": uri}))
        await kill_when_running(server, marker, timeout=180)
        answer = await asyncio.wait_for(running, scaled(40))
        message = answer.get("error") or "; ".join(answer.get("errors", []))
        assert "SIGKILL" in message and expected in message and "again" in message, answer

    fake.mode("")
    again = await s.command("kernel-lsp.profileLines", {"uri": uri})
    assert "error" not in again and again["lines"], again
    assert any("%" in str(h.label) for h in await hints(s, other, softmax))
    await no_zombies(server)


# --- the assistant: its model client runs in the server; its checks run in their own processes ------------------------


async def test_a_killed_check_of_an_assistant_candidate_is_not_the_candidates_fault(start, tmp_path):
    pytest.importorskip("anthropic")
    from tests.assistant import candidates as c
    from tests.assistant.conftest import TWICE, options
    from tests.assistant.fake_api import FakeMessagesAPI, answer

    fake = FakeMessagesAPI().start()
    try:
        fake.script += [answer(c.GOOD), answer(c.GOOD)]
        s = await start({"vector_add.py": TWICE}, options=options(fake, assistantMaxAttempts=1, latency="off"))
        server = await server_pid(s)
        uri = s.open("vector_add.py")
        running = asyncio.ensure_future(s.command("kernel-lsp.refine", at(uri, instruction="make it faster")))
        await kill_when_running(server, RUNNER, timeout=180)
        result = await asyncio.wait_for(running, scaled(60))
        assert "proposal" not in result, result
        assert "SIGKILL" in result["error"] and "crashed" not in result["error"], result

        result = await s.command("kernel-lsp.refine", at(uri, instruction="make it faster"))
        assert result.get("proposal"), result
        await no_zombies(server)
    finally:
        fake.stop()
