"""Autotuned tiled matrix multiplication C = A @ B with fp32 accumulation.

Each program instance computes one BLOCK_SIZE_M x BLOCK_SIZE_N tile of C by walking the K dimension in
BLOCK_SIZE_K steps. Tiles are visited in groups of GROUP_SIZE_M tile-rows ("swizzled" order), so programs
that run at the same time share rows of A and columns of B in L2 instead of streaming all of B per row.

`@triton.autotune` times every config the first time it sees a new (M, N, K) and caches the winner;
a config's tile sizes are constexprs, so each one is a separately compiled kernel.

The K loop masks the tail (K need not be a multiple of BLOCK_SIZE_K); M and N edges are masked too.

Run on CPU:  TRITON_INTERPRET=1 python examples/matmul_autotune.py
    (the autotuner benchmarks on a GPU, so without one each config is launched directly through
    `matmul_kernel.fn`, the undecorated jit function)
Run on GPU:  python examples/matmul_autotune.py
"""

import os

import torch
import triton
import triton.language as tl

# Tile shapes that do well on recent NVIDIA parts with fp16/bf16 inputs, from large tiles (large
# problems, more reuse per program) down to small ones (small or skinny problems, more programs).
MATMUL_CONFIGS = [
    triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
                  num_warps=8, num_stages=3),
    triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
                  num_warps=4, num_stages=4),
    triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
                  num_warps=4, num_stages=4),
    triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
                  num_warps=4, num_stages=4),
    triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 4},
                  num_warps=4, num_stages=3),
    triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4},
                  num_warps=2, num_stages=5),
]


@triton.autotune(configs=MATMUL_CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # Map the 1-D program id to a (pid_m, pid_n) tile, GROUP_SIZE_M tile-rows at a time.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    tiles_per_group = GROUP_SIZE_M * num_pid_n
    group = pid // tiles_per_group
    first_pid_m = group * GROUP_SIZE_M
    rows_in_group = min(num_pid_m - first_pid_m, GROUP_SIZE_M)  # the last group may be short
    pid_in_group = pid % tiles_per_group
    pid_m = first_pid_m + pid_in_group % rows_in_group
    pid_n = pid_in_group // rows_in_group

    # 64-bit row/column indices: offs * stride overflows int32 once an operand passes 2**31 elements.
    offs_m = pid_m.to(tl.int64) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = pid_n.to(tl.int64) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_SIZE_K):
        # K tail: lanes past K load 0.0, which adds nothing to the dot product.
        k_ok = offs_k < K - k_start
        a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=m_ok[:, None] & n_ok[None, :])


def matmul(a: torch.Tensor, b: torch.Tensor, config: triton.Config | None = None) -> torch.Tensor:
    """a @ b for 2-D tensors of the same dtype. With `config`, launch that config directly (no autotuning)."""
    assert a.dim() == 2 and b.dim() == 2, "expected 2-D operands"
    assert a.shape[1] == b.shape[0], f"inner dimensions differ: {tuple(a.shape)} @ {tuple(b.shape)}"
    assert a.dtype == b.dtype and a.device == b.device
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)

    args = (
        a, b, c,
        M, N, K,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
    )
    if config is None:
        matmul_kernel[grid](*args)
    else:
        # The undecorated jit function: the autotuner is bypassed and the config's constexprs passed as keywords.
        matmul_kernel.fn[grid(config.kwargs)](
            *args, num_warps=config.num_warps, num_stages=config.num_stages, **config.kwargs
        )
    return c


def reference_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


from kernel_lsp.spec import spec  # beside the spec it serves: the kernels above need none of it


# Correctness spec: every autotune config on a ragged (M, N, K); tolerances cover tf32 / fp16 rounding.
@spec(
    kernel=matmul_kernel,
    launcher=matmul,
    reference=reference_matmul,
    shapes=[(33, 20, 70)],
    dtypes=["float16", "float32"],
    seeds=1,
    atol={"float16": 1e-2, "float32": 1e-2},
    rtol={"float16": 1e-2, "float32": 1e-2},
    bench_shapes=[(2048, 2048, 2048)],
)
def matmul_inputs(shape, dtype, device):
    M, N, K = shape
    return (torch.randn(M, K, dtype=dtype, device=device), torch.randn(K, N, dtype=dtype, device=device))


def _check(a: torch.Tensor, b: torch.Tensor, config: triton.Config | None, label: str) -> float:
    got = matmul(a, b, config).float()
    want = reference_matmul(a, b).float()
    err = (got - want).abs().max().item()
    # fp16 output: compare relative to the result's magnitude (one fp16 ulp is ~1e-3 of it).
    scale = want.abs().max().item() or 1.0
    tol = 1e-2 * scale if a.dtype == torch.float16 else 1e-4 * scale
    assert err <= tol, f"{label}: max error {err} > {tol}"
    print(f"{label}: max error {err:.3e}")
    return err


if __name__ == "__main__":
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    on_gpu = torch.cuda.is_available() and not interpreted
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    worst = 0.0
    # Ragged shapes: none of M, N, K a multiple of the tile sizes; one skinny, one with K < BLOCK_SIZE_K.
    shapes = [(64, 64, 64), (100, 72, 130), (17, 300, 45), (257, 129, 7)]
    if on_gpu:
        shapes += [(1000, 1000, 1000), (4096, 2048, 1537)]
        for M, N, K in shapes:
            a = torch.randn(M, K, device=device, dtype=torch.float16)
            b = torch.randn(K, N, device=device, dtype=torch.float16)
            worst = max(worst, _check(a, b, None, f"autotuned {M}x{N}x{K} fp16"))
            print(f"    chosen config: {matmul_kernel.best_config}")
    else:
        # No GPU to benchmark on: run every config through the jit function, on small shapes only.
        for config in MATMUL_CONFIGS:
            kw = config.kwargs
            tag = f"{kw['BLOCK_SIZE_M']}x{kw['BLOCK_SIZE_N']}x{kw['BLOCK_SIZE_K']} g{kw['GROUP_SIZE_M']}"
            for M, N, K in shapes:
                a = torch.randn(M, K, device=device, dtype=torch.float16)
                b = torch.randn(K, N, device=device, dtype=torch.float16)
                worst = max(worst, _check(a, b, config, f"[{tag:>16}] {M}x{N}x{K} fp16"))
    print(f"matmul_autotune OK on {device}; max error {worst:.3e}")
