"""What a launcher and its spec show reaches `kernel-lsp check`: launch-site block sizes read from the launcher's
code, and size-dependent risks raised to warnings by the sizes a spec runs, also when the kernel lives in another
file of the workspace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KERNELS = """import triton
import triton.language as tl


@triton.jit
def rows_kernel(x_ptr, out_ptr, stride, N_COLS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < N_COLS)
    tl.store(out_ptr + row * stride + cols, x, mask=cols < N_COLS)
"""

LAUNCHER = """import torch
import triton
from kernel_lsp.spec import spec

from kernels import rows_kernel


def rows(x):
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    rows_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out


def rows_fixed(x):
    out = torch.empty_like(x)
    block_m, block_n = 16, 1000
    rows_kernel[(x.shape[0],)](x, out, x.stride(0), 1000, BLOCK=block_n)
    return out


@spec(kernel=rows_kernel, launcher=rows, reference=lambda x: x, shapes=[(3, 100), (5, 517)])
def rows_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)
"""


def _check(folder: Path) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "kernel_lsp", "check", str(folder), "--format", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)["problems"]


def test_launcher_values_and_spec_sizes_reach_the_check(tmp_path: Path) -> None:
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "launch.py").write_text(LAUNCHER)
    problems = _check(tmp_path)
    found = {(Path(p["path"]).name, p["line"], p["code"], p["severity"]) for p in problems}
    assert ("launch.py", 11, "TR012", "warning") in found, problems
    recompiles = next(p for p in problems if p["code"] == "TR012")
    assert "the spec `rows_inputs` runs it with 2 values (100, 517)" in recompiles["message"]
    assert ("launch.py", 18, "TR001", "error") in found, problems
    block = next(p for p in problems if p["code"] == "TR001")
    assert "`BLOCK` = 1000" in block["message"] and "block_n" in block["message"]
    # The kernel's own file shows no sizes: its offset risk stays information.
    assert {p["severity"] for p in problems if p["code"] == "TR009"} == {"info"}


def test_without_a_spec_the_recompile_risk_is_information(tmp_path: Path) -> None:
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "launch.py").write_text(LAUNCHER.split("@spec(")[0])
    problems = _check(tmp_path)
    assert [p["severity"] for p in problems if p["code"] == "TR012"] == ["info"], problems
