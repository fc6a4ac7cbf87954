"""The NKI example carries a spec: `make demo`'s command prints its verdict from kernel-lsp's NKI model and its
Trainium2 estimate, beside the Triton examples'."""

from __future__ import annotations

import shutil

import pytest

from tests.slow import scaled
from tests.test_cli import EXAMPLES, run

pytest.importorskip("torch")


def test_the_nki_example_is_checked_in_the_nki_model(tmp_path):
    shutil.copy(EXAMPLES / "nki_matmul.py", tmp_path / "nki_matmul.py")
    proc = run("check", "nki_matmul.py", "--run-checks", "--exit-zero", cwd=tmp_path, timeout=scaled(300))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("nki_matmul.py:") and "matmul_kernel: correct on" in line
               and line.endswith("(kernel-lsp NKI model)") for line in lines), lines
    assert any("matmul_kernel (512, 1024, 1024) float32: ≈" in line and "Trainium2 est." in line for line in lines)
    assert "1 spec checked (1 correct)" in lines[-1]
