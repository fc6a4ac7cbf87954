"""The kernels of the exhaustive configuration sweeps (bench/sweep.py): every tunable is a constexpr or a launch
option, and every grid follows the block sizes, so any configuration of the space computes the same result."""

from __future__ import annotations

import itertools

import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    first_m = group * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    """Online softmax over one row per program, BLOCK columns at a time (one pass when BLOCK covers the row)."""
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, x)
        s = s * tl.exp(m - new_m) + tl.exp(x - new_m)
        m = new_m
    row_max = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(y_row + cols, (tl.exp(x - row_max) / total).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    acc = tl.zeros((BLOCK,), tl.float32)
    acc2 = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x
        acc2 += x * x
    mean = tl.sum(acc, 0) / n_cols
    rstd = 1 / tl.sqrt(tl.sum(acc2, 0) / n_cols - mean * mean + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(y_ptr + row * stride + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :], mask=mask)
    tl.store(y_ptr + rn[None, :] * stride_ym + rm[:, None], tile, mask=mask)


def _rows(kernel):
    """A row-wise kernel's space: BLOCK, num_warps, num_stages."""
    return [dict(BLOCK=b, num_warps=w, num_stages=s)
            for b, w, s in itertools.product([256, 512, 1024, 2048, 4096], [1, 2, 4, 8, 16], [1, 2, 3])]


# name -> (kernel, shape, dtype, the space as a list of configurations)
CASES = {
    "matmul_fp16": ("matmul_kernel", [4096, 4096, 4096], "float16"),
    "matmul_bf16": ("matmul_kernel", [4096, 4096, 4096], "bfloat16"),
    "softmax": ("softmax_kernel", [8192, 4096], "float32"),
    "layernorm": ("layernorm_kernel", [8192, 4096], "float32"),
    "row_sum": ("row_sum_kernel", [8192, 8192], "float32"),
    "transpose": ("transpose_kernel", [8192, 8192], "float16"),
}


def space(name: str) -> list[dict]:
    kernel = CASES[name][0]
    if kernel == "matmul_kernel":
        return [dict(BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, GROUP_M=8, num_warps=w, num_stages=s)
                for m, n, k, w, s in itertools.product([64, 128, 256], [64, 128, 256], [32, 64, 128], [4, 8],
                                                       [2, 3, 4, 5])]
    if kernel == "transpose_kernel":
        return [dict(BLOCK_M=m, BLOCK_N=n, num_warps=w, num_stages=1)
                for m, n, w in itertools.product([16, 32, 64, 128], [16, 32, 64, 128], [1, 2, 4, 8])]
    return _rows(kernel)


def launch(name: str, cfg: dict, device: str = "cuda", scale: int = 1):
    """(fn, check) for one configuration: fn() runs the kernel once (and returns triton's compiled kernel); check() compares with PyTorch.
    `scale` divides every size (small runs for a quick test)."""
    import torch

    kernel_name, shape, dtype = CASES[name]
    dt = getattr(torch, dtype)
    shape = [max(16, s // scale) for s in shape]
    kernel = globals()[kernel_name]
    meta = {k: v for k, v in cfg.items() if k not in ("num_warps", "num_stages")}
    opts = {"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
    gen = torch.Generator(device=device).manual_seed(0)
    if kernel_name == "matmul_kernel":
        M, N, K = shape
        a = torch.randn((M, K), device=device, dtype=dt, generator=gen)
        b = torch.randn((K, N), device=device, dtype=dt, generator=gen)
        c = torch.empty((M, N), device=device, dtype=dt)
        grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)

        def fn():
            return kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                         c.stride(1), **meta, **opts)
        return fn, lambda: torch.allclose(c.float(), (a.float() @ b.float()), atol=0.5, rtol=0.05)
    if kernel_name == "transpose_kernel":
        M, N = shape
        x = torch.randn((M, N), device=device, dtype=dt, generator=gen)
        y = torch.empty((N, M), device=device, dtype=dt)
        grid = (triton.cdiv(M, cfg["BLOCK_M"]), triton.cdiv(N, cfg["BLOCK_N"]))

        def fn():
            return kernel[grid](x, y, M, N, x.stride(0), y.stride(0), **meta, **opts)
        return fn, lambda: torch.equal(y, x.t())
    rows, cols = shape
    x = torch.randn((rows, cols), device=device, dtype=dt, generator=gen)
    if kernel_name == "row_sum_kernel":
        out = torch.empty((rows,), device=device, dtype=torch.float32)

        def fn():
            return kernel[(rows,)](x, out, cols, x.stride(0), **meta, **opts)
        return fn, lambda: torch.allclose(out, x.float().sum(-1), atol=1e-2, rtol=1e-4)
    y = torch.empty_like(x)
    if kernel_name == "softmax_kernel":
        def fn():
            return kernel[(rows,)](x, y, cols, x.stride(0), **meta, **opts)
        return fn, lambda: torch.allclose(y, torch.softmax(x, -1), atol=1e-5, rtol=1e-3)
    w = torch.randn((cols,), device=device, dtype=dt, generator=gen)
    b = torch.randn((cols,), device=device, dtype=dt, generator=gen)

    def fn():
        return kernel[(rows,)](x, w, b, y, cols, x.stride(0), 1e-5, **meta, **opts)
    return fn, lambda: torch.allclose(y, torch.nn.functional.layer_norm(x, (cols,), w, b, 1e-5), atol=1e-3, rtol=1e-3)
