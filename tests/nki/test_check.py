"""`kernel-lsp check --run-checks` on files whose specs name NKI kernels: run in the NKI model, with its label."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SPEC_FILE = Path(__file__).parent / "specs" / "scale_rows_nki.py"
REPO = Path(__file__).resolve().parents[2]


def check(tmp_path, text: str) -> dict:
    path = tmp_path / "kernel_nki.py"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "kernel_lsp.cli", "check", "--run-checks", "--format", "json",
                           str(path)], check=False, capture_output=True, text=True, timeout=300, cwd=REPO)
    return json.loads(done.stdout)


def verdicts(report: dict) -> list[dict]:
    found = []
    for f in report.get("files", []):
        found += f.get("checks", []) or f.get("verdicts", [])
    return found or report.get("checks", []) or report.get("verdicts", [])


def test_a_right_nki_kernel_is_correct_in_the_model(tmp_path):
    report = check(tmp_path, SPEC_FILE.read_text())
    (v,) = verdicts(report)
    assert v["status"] == "correct" and v["message"] == "correct on 8 cases (kernel-lsp NKI model)", v


def test_a_wrong_nki_kernel_is_a_mismatch_at_the_store(tmp_path):
    text = SPEC_FILE.read_text().replace("operand0=3.0", "operand0=2.0")
    (v,) = verdicts(check(tmp_path, text))
    lines = text.splitlines()
    assert v["status"] == "mismatch" and "(kernel-lsp NKI model)" in v["message"]
    assert lines[v["line"]].strip().startswith("nisa.dma_copy(dst=out[")


def test_a_rule_broken_while_running_is_an_error_at_its_line(tmp_path):
    text = SPEC_FILE.read_text().replace("rows = min(128, n - t * 128)", "rows = min(256, n - t * 128)")
    (v,) = verdicts(check(tmp_path, text))
    lines = text.splitlines()
    assert v["status"] == "error" and "[NK001]" in v["message"], v
    assert lines[v["line"]].strip().startswith("tile = nl.ndarray((rows, d)")


def test_an_nki_call_the_model_lacks_is_not_checked_not_failed(tmp_path):
    text = SPEC_FILE.read_text().replace("nisa.tensor_scalar(dst=res,", "nisa.dropout(dst=res,")
    (v,) = verdicts(check(tmp_path, text))
    assert v["status"] == "not-checked", v
    assert "the NKI model does not implement nki.isa.dropout" in v["message"]


def test_a_launcher_may_return_a_view_of_the_kernels_output_but_not_its_own_array(tmp_path):
    text = SPEC_FILE.read_text()
    text += '''

def flat(x):
    return scale_rows(x).reshape(-1)


def numpy_instead(x):
    scale_rows(x)
    return x * 3  # computed by the launcher, not by the kernel


@spec(kernel=scale_rows, launcher=flat, reference=lambda x: (x * 3).reshape(-1), shapes=[(5, 7)])
def flat_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)


@spec(kernel=scale_rows, launcher=numpy_instead, reference=scale_reference, shapes=[(5, 7)])
def numpy_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)
'''
    by_spec = {v["spec"]: v for v in verdicts(check(tmp_path, text))}
    assert by_spec["flat_inputs"]["status"] == "correct", by_spec["flat_inputs"]
    assert by_spec["numpy_inputs"]["status"] == "rejected"
    assert "not an output of the NKI kernel" in by_spec["numpy_inputs"]["message"]
