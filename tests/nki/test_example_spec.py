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


@pytest.mark.gpu
def test_on_a_gpu_the_nki_example_gets_its_trainium_estimate_not_a_cuda_timing(tmp_path):
    # The check command times every spec on a GPU: an NKI kernel cannot run there, so its figure stays the NKI
    # model's estimate instead of a timing error.
    from kernel_lsp.engine.latency import measure_file

    path = tmp_path / "nki_matmul.py"
    shutil.copy(EXAMPLES / "nki_matmul.py", path)
    report = measure_file(str(path), path.read_text(), root=str(tmp_path), history=False)
    assert report.entries and not report.errors, report.errors
    for entry in report.entries:
        assert entry.error is None, entry.error
        assert entry.source == "estimate" and "Trainium2" in entry.label, entry
