"""One estimate per configuration and device: `check` (and so the lens and the report, which read the same
latency report) and `tune` give the same figure for the same configuration, through the command line."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.slow import scaled
from tests.test_cli import run

pytest.importorskip("triton")
pytest.importorskip("torch")

SOURCE = '''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=2),
                          triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3)],
                 key=["M", "N", "K"])
@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def mm(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    mm_kernel[grid](a, b, c, M, N, K)
    return c


def reference(a, b):
    return a.float() @ b.float()


from kernel_lsp.spec import spec


@spec(kernel=mm_kernel, launcher=mm, reference=reference, shapes=[(32, 32, 32)], dtypes=["float16"],
      bench_shapes=[(512, 512, 512)], atol=1e-2, rtol=1e-2)
def mm_inputs(shape, dtype, device):
    m, n, k = shape
    return (torch.randn((m, k), dtype=dtype, device=device), torch.randn((k, n), dtype=dtype, device=device))
'''


def test_check_and_tune_show_one_estimate_for_the_first_config(tmp_path):
    (tmp_path / "mm.py").write_text(SOURCE)
    check = run("check", "mm.py", "--run-checks", "--target", "sm_90", "--format", "json", cwd=tmp_path,
                timeout=scaled(300))
    assert check.returncode == 0, check.stdout + check.stderr
    shutil.rmtree(tmp_path / ".kernel-lsp", ignore_errors=True)  # tune starts from nothing the check left
    tune = run("tune", "mm.py::mm_kernel", "--estimate-only", "--no-verify", "--compile-budget", "1", "--format",
               "json", cwd=tmp_path, timeout=scaled(300))
    assert tune.returncode == 0, tune.stdout + tune.stderr
    entries = [e for e in json.loads(check.stdout)["latency"] if e["device"] == "H200"]
    first = next(e for e in entries if e["config"].startswith("BLOCK_M=32, BLOCK_N=32, BLOCK_K=32"))
    table = json.loads(tune.stdout)
    current = next(t for t in table["table"] if t["config"] == table["current"])
    assert current["config"] == {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
    assert current["resources"] is not None  # compiled, as check compiled it for sm_90
    assert current["estimated_us"] == pytest.approx(first["us"], rel=1e-9)
    assert current["label"] == first["config"]  # the same words for the same configuration
    # ... and the words the user wrote, in the kernel's parameter order, not triton's Config repr.
    assert first["config"] == "BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=2"
    assert "num_ctas" not in check.stdout and "maxnreg" not in check.stdout
