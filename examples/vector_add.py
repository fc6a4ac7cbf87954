"""Element-wise addition of two 1-D tensors: the smallest complete Triton program.

Each program instance owns one contiguous BLOCK_SIZE slice of the output. The last slice is usually
partial, so every load and store is masked against `n_elements`.

Run on CPU:  TRITON_INTERPRET=1 python examples/vector_add.py
Run on GPU:  python examples/vector_add.py
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    # 64-bit block start: pid * BLOCK_SIZE overflows int32 once a tensor passes 2**31 elements.
    block_start = pid.to(tl.int64) * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    in_bounds = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=in_bounds)
    y = tl.load(y_ptr + offsets, mask=in_bounds)
    tl.store(out_ptr + offsets, x + y, mask=in_bounds)


def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    """x + y for two contiguous tensors of the same shape, dtype and device."""
    assert x.shape == y.shape, f"shape mismatch: {tuple(x.shape)} vs {tuple(y.shape)}"
    assert x.dtype == y.dtype and x.device == y.device
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = out.numel()
    if n == 0:
        return out
    grid = (triton.cdiv(n, block_size),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size, num_warps=4)
    return out


def reference_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


from kernel_lsp.spec import spec  # beside the spec it serves: the kernels above need none of it


# Correctness spec: `kernel-lsp` checks add_kernel against reference_add on these shapes (ragged ones included).
@spec(
    kernel=add_kernel,
    launcher=add,
    reference=reference_add,
    shapes=[(1,), (1000,), (4097,)],
    dtypes=["float32", "float16"],
    bench_shapes=[(1 << 24,)],
)
def add_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device), torch.randn(shape, dtype=dtype, device=device))


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    worst = 0.0
    # Sizes on both sides of the block size, including ragged tails (not multiples of 1024).
    for n in (1, 1000, 1024, 4097, 98_432):
        for dtype in (torch.float32, torch.float16):
            x = torch.randn(n, device=device, dtype=dtype)
            y = torch.randn(n, device=device, dtype=dtype)
            got = add(x, y)
            want = reference_add(x, y)
            err = (got.float() - want.float()).abs().max().item()
            worst = max(worst, err)
            assert err == 0.0, f"n={n} {dtype}: max error {err}"
            print(f"n={n:>6} {dtype!s:>13}: max error {err:.3e}")
    print(f"vector_add OK on {device}; max error {worst:.3e}")
