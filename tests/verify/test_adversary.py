"""Verdicts against a candidate written to game them (fixtures/adversary.py), through `kernel-lsp check` as CI runs
it: PyTorch's work relayed by the kernel, specs that cannot tell right from wrong, references that certify the
kernel, kernels right only on the listed shapes; and honest pre- and post-steps that must stay accepted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .test_fixtures import _expectations

FIXTURE = Path(__file__).parent / "fixtures" / "adversary.py"
CASES = _expectations(FIXTURE)
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def report() -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "check", str(FIXTURE), "--run-checks", "--check-device",
         "interpreter", "--format", "json", "--exit-zero"], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(("spec_name", "expect"), [(n, e) for n, e, _ in CASES], ids=[n for n, _, _ in CASES])
def test_verdict(report, spec_name, expect):
    verdict = next(c for c in report["checks"] if c["spec"] == spec_name)
    status, *words = expect.split()
    assert verdict["status"] == status, verdict["message"]
    assert " ".join(words) in verdict["message"], verdict["message"]
    codes = {p["code"] for p in report["problems"] if verdict["message"][:50] in p["message"]}
    if status == "not-checked":
        assert codes == {"KV006"} and verdict["failedCheck"], verdict
    if status == "rejected":
        assert codes == {"KV002"} and verdict["failedCheck"], verdict
    if spec_name.startswith("h_"):
        assert not codes and verdict["failedCheck"] is None, verdict


def test_a_loose_tolerance_is_a_warning_not_plain_green(report):
    verdict = next(c for c in report["checks"] if c["spec"] == "g_loose_tolerance")
    assert verdict["failedCheck"] == "loose-tolerance"
    [problem] = [p for p in report["problems"] if p["code"] == "KV009"]
    assert problem["severity"] == "warning" and "float16 passes it" in problem["message"]


def test_shapes_kernel_lsp_chose_are_named(report):
    verdict = next(c for c in report["checks"] if c["spec"] == "h_same_allocator")
    chosen = [n for n in verdict["notes"] if n.startswith("also checked shapes kernel-lsp chose")]
    assert chosen, verdict["notes"]
    listed = {(300,), (1024,)}
    assert any(tuple(c["shape"]) not in listed and c["shape"][0] > 1024 for c in verdict["cases"])
    assert any(tuple(c["shape"]) not in listed and c["shape"][0] < 1024 and c["shape"][0] % 128
               for c in verdict["cases"])
    assert len({c["seed"] for c in verdict["cases"]}) == len(verdict["cases"])  # a seed per case
    assert all(c["seed"] >= 0 for c in verdict["cases"])


SEEDLESS = """
import torch
import triton
import triton.language as tl

from kernel_lsp.spec import spec


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
    return out


@spec(kernel=add_kernel, launcher=add, reference=torch.add, shapes=[(300,)], seeds=1)
def add_inputs(shape, dtype, device):
    return torch.ones(shape, dtype=dtype, device=device), torch.arange(shape[0], dtype=dtype, device=device)
"""


def test_a_spec_that_cannot_be_checked_fails_ci(tmp_path):
    """Not checked is an error: `check` exits 1 at the default --fail-on, as for a wrong kernel."""
    path = tmp_path / "seedless.py"
    path.write_text(SEEDLESS)
    done = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "check", str(path), "--run-checks", "--check-device", "interpreter"],
        capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "KV006" in done.stdout and "the same values for every seed" in done.stdout
