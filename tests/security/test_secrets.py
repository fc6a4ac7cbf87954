"""The API key is not in the checking process's environment, and no output carries it, whole or in a simple
transform (reversed, halves, base64, hex): text, JSON, SARIF, HTML, MCP's results and proposal files."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp.engine.redact import forms, scrub, user_code_env
from tests.slow import scaled

KEY = "sk-ant-api03-" + "Zq8Xw2Lm4Np6Rt0Vb1Cd3Fg5Hj7Kk9Mm" + "-probeAA"
HALF = len(KEY) // 2
LEAKS = {
    "whole": KEY,
    "reversed": KEY[::-1],
    "first half": KEY[:HALF],
    "second half": KEY[HALF:],
    "base64": base64.b64encode(KEY.encode()).decode(),
    "urlsafe base64 unpadded": base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("="),
    "hex": KEY.encode().hex(),
    "HEX": KEY.encode().hex().upper(),
}

# A spec whose inputs print the key in every form, and report whether the key was in their environment. The key
# is in the file itself: code can learn a secret in other ways than the environment.
LEAKY = f'''
import base64
import os
import torch
import triton
import triton.language as tl
from kernel_lsp.spec import spec

KEY = {KEY!r}


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


def copy(x):
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


@spec(kernel=copy_kernel, launcher=copy, reference=lambda x: x.clone(), shapes=[(100,)], seeds=1)
def copy_inputs(shape, dtype, device):
    seen = os.environ.get("ANTHROPIC_API_KEY") or "absent"
    half = len(KEY) // 2
    leaks = [KEY, KEY[::-1], KEY[:half] + " / " + KEY[half:], base64.b64encode(KEY.encode()).decode(),
             base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("="), KEY.encode().hex(),
             KEY.encode().hex().upper()]
    print("stdout:", *leaks)
    raise RuntimeError("env key " + ("present" if seen != "absent" else "absent") + ": " + " ".join(leaks))
'''


def test_every_form_is_blanked():
    text = "before " + " | ".join(LEAKS.values()) + " after"
    out = scrub(text, [KEY])
    for what, leak in LEAKS.items():
        assert leak not in out, what
    assert out.startswith("before ") and out.endswith(" after")
    assert set(LEAKS.values()) <= set(forms(KEY))
    assert scrub("a short word", ["short"]) == "a short word"  # short values would blank common words


def test_the_checking_environment_has_no_secrets():
    env = user_code_env({"ANTHROPIC_API_KEY": KEY, "GITHUB_TOKEN": "x" * 20, "PATH": "/bin", "HOME": "/root"})
    assert env == {"PATH": "/bin", "HOME": "/root"}


@pytest.fixture
def leaky(tmp_path) -> tuple[Path, dict]:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    (tmp_path / "leaky.py").write_text(LEAKY)
    return tmp_path, {**os.environ, "ANTHROPIC_API_KEY": KEY}


def _assert_clean(text: str, where: str) -> None:
    for what, leak in LEAKS.items():
        assert leak not in text, f"{what} form of the key in {where}"


def test_cli_outputs_carry_no_form_of_the_key(leaky):
    ws, env = leaky
    outputs, stdout = {}, {}
    for fmt in ("text", "json", "sarif"):
        done = subprocess.run([sys.executable, "-P", "-m", "kernel_lsp", "check", "leaky.py", "--run-checks",
                               "--check-device", "interpreter", "--format", fmt, "-q"], cwd=ws, env=env,
                              capture_output=True, text=True, timeout=scaled(300), check=False)
        outputs[fmt], stdout[fmt] = done.stdout + done.stderr, done.stdout
    done = subprocess.run([sys.executable, "-P", "-m", "kernel_lsp", "report", "leaky.py", "--run-checks",
                           "--check-device", "interpreter", "-o", "page.html", "-q"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=scaled(300), check=False)
    outputs["html"] = (ws / "page.html").read_text() + done.stdout + done.stderr
    for fmt, text in outputs.items():
        _assert_clean(text, fmt)
    report = json.loads(stdout["json"])
    messages = json.dumps(report["checks"])
    assert "env key absent" in messages and "<redacted>" in messages, messages[:2000]


def test_api_results_and_proposal_files_carry_no_form_of_the_key(leaky, monkeypatch):
    from kernel_lsp.api import Workspace

    ws, env = leaky
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with Workspace(ws, allow_run=True) as workspace:
        checked = workspace.check(path="leaky.py")
        _assert_clean(repr(checked), "the API's check result (what MCP's check tool returns)")
        assert "env key absent" in repr(checked)
        proposal = workspace.propose_edit("leaky.py", LEAKY.replace("seeds=1", "seeds=2") + f"\n# {KEY[::-1]}\n")
        _assert_clean(repr(proposal), "the proposal result")
    for path in (ws / ".kernel-lsp" / "proposals").iterdir():
        _assert_clean(path.read_text(), path.name)
