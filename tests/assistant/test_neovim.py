"""The assistant's good path in a real, headless Neovim 0.11: the command through vim.lsp, the proposal back,
and the edit applied with vim.lsp.util.apply_workspace_edit only after a (simulated) confirmation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.neovim.test_neovim import HERE as NEOVIM_TESTS
from tests.neovim.test_neovim import find_nvim, workspace

from . import candidates as c
from .conftest import EXAMPLE, KERNEL_LINE, KEY, TWICE
from .fake_api import answer

pytestmark = pytest.mark.neovim
pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("anthropic")


def test_optimize_in_neovim(tmp_path, fake):
    nvim, why = find_nvim()
    if nvim is None:
        pytest.skip(why)
    fake.script += [answer(c.PLAN), answer(c.GOOD)]
    root = workspace(tmp_path, {"vector_add.py": TWICE})
    out, state = tmp_path / "result.json", tmp_path / "nvim-state"
    setup = {"cmd": [sys.executable, "-m", "kernel_lsp", "serve"],
             "settings": {"compile": "off", "checks": "request", "checkDevice": "interpreter",
                          "assistantBaseUrl": fake.url}}
    env = {**os.environ, "KERNEL_LSP_TEST_SETUP": json.dumps(setup), "KERNEL_LSP_TEST_RESULT": str(out),
           "KERNEL_LSP_TEST_LINE": str(KERNEL_LINE + 3), "ANTHROPIC_API_KEY": KEY,
           "XDG_CONFIG_HOME": str(state / "config"), "XDG_DATA_HOME": str(state / "data"),
           "XDG_STATE_HOME": str(state / "state"), "XDG_CACHE_HOME": str(state / "cache"),
           "NVIM_LOG_FILE": str(state / "nvim.log")}
    cmd = [nvim, "--headless", "-n", "-i", "NONE", "-u", str(NEOVIM_TESTS / "init.lua"),
           "-c", f"lua dofile({json.dumps(str(NEOVIM_TESTS.parent / 'assistant' / 'nvim_driver.lua'))})",
           str(root / "vector_add.py")]
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        _, stderr = proc.communicate() if proc.poll() is not None else ("", "")
        pytest.fail("nvim did not finish within 60 s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert out.exists(), stderr[-2000:]
    r = json.loads(out.read_text())
    assert "error" not in r, r["error"]
    lines = TWICE.splitlines()
    assert r["plan"] == c.PLAN
    assert r["lines_after_plan"] == r["lines_before_confirmation"] == lines  # nothing changed before "yes"
    assert r["modified_before_confirmation"] is False
    assert r["summary"].startswith("correct on 13 cases (CPU interpreter)")
    assert "≈106 µs -> ≈53 µs H200 est. (-50%)" in r["summary"]
    assert r["lines_after"] == EXAMPLE.splitlines() and r["modified_after"] is True
    assert (root / "vector_add.py").read_text() == TWICE  # applied to the buffer, not written to disk
    assert len(fake.requests) == 2
