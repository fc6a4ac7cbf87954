"""CUDA C++ files through `kernel-lsp check --target`: nvcc errors at their lines and each kernel's resources."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernel_lsp.engine.cuda import _source_name, find_nvcc

KERNELS = """#include <cstdio>

__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

namespace ops {
__global__ void tile_sum(const float *x, float *out) {
    __shared__ float tile[256];
    tile[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) { float s = 0; for (int i = 0; i < 256; ++i) s += tile[i]; *out = s; }
}
}
"""


def test_mangled_names():
    assert _source_name("_Z5scalePffi") == "scale"
    assert _source_name("_ZN3ops8tile_sumEPKfPf") == "tile_sum"
    assert _source_name("plain") == "plain"


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "kernel_lsp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc (CUDA toolkit) is not installed")
def test_cuda_errors_and_resources(tmp_path):
    (tmp_path / "kernels.cu").write_text(KERNELS)
    (tmp_path / "broken.cu").write_text(KERNELS.replace("x[i] *= a;", "x[i] *= b;"))
    proc = run("check", ".", "--target", "sm_90", "--format", "json", cwd=tmp_path)
    doc = json.loads(proc.stdout)
    errors = [p for p in doc["problems"] if p["code"] == "KC001"]
    assert proc.returncode == 1 and len(errors) == 1
    assert errors[0]["path"].endswith("broken.cu") and errors[0]["line"] == 5 and '"b"' in errors[0]["message"]
    by_name = {(k["path"].rsplit("/", 1)[-1], k["name"]): k for k in doc["cuda"]}
    scale = by_name[("kernels.cu", "scale")]
    assert scale["line"] == 3 and scale["registers"] > 0 and scale["target"] == "sm_90"
    tile = by_name[("kernels.cu", "tile_sum")]
    assert tile["line"] == 9 and tile["sharedBytes"] == 1024


def test_cuda_files_are_not_compiled_without_a_target(tmp_path):
    (tmp_path / "broken.cu").write_text("__global__ void k() { y = 1; }\n")
    proc = run("check", ".", cwd=tmp_path)
    assert proc.returncode == 0 and "KC001" not in proc.stdout
