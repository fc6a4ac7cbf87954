"""DELIBERATELY BROKEN kernels: open this file in an editor with kernel-lsp to see what its diagnostics look like.

Every bug is marked with a `# BUG:` comment on the line above (or at the end of) the offending line. The
correct versions of these kernels are in vector_add.py, fused_softmax.py and layernorm.py. Do not launch
anything from this file: several of these kernels read or write out of bounds.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, scale, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    # BUG: no mask: the last program reads and writes past n_elements when it is not a multiple of BLOCK_SIZE.
    x = tl.load(x_ptr + offsets)
    tl.store(out_ptr + offsets, x * scale)  # BUG: unmasked store through program-id offsets.


@triton.jit
def row_max_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    # BUG: pid * runtime stride in int32: overflows once the tensor passes 2**31 elements (cast row to tl.int64).
    row_start = x_ptr + row * row_stride
    # BUG: masked lanes default to 0.0 (no other=-float("inf")), so an all-negative row gets max 0.0.
    x = tl.load(row_start + cols, mask=cols < n_cols)
    tl.store(out_ptr + row, tl.max(x, axis=0))


@triton.jit
def softmax_rows_kernel(out_ptr, in_ptr, row_stride, n_cols):
    row = tl.program_id(0).to(tl.int64)
    # BUG: tl.arange needs a power-of-two extent; 100 does not compile (use 128 and mask cols < n_cols).
    cols = tl.arange(0, 100)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    # BUG: typo: triton.language has no `arrange`; this is tl.arange.
    lane = tl.arrange(0, 128)
    z = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * row_stride + cols, z / tl.sum(z, axis=0), mask=mask)


@triton.jit
def fill_kernel(out_ptr, value, n_elements, BLOCK):  # BUG: BLOCK is used as a tl.arange extent but not `: tl.constexpr`.
    pid = tl.program_id(0).to(tl.int64)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, value, mask=offsets < n_elements)


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, 1024),)
    # BUG: unknown keyword: the kernel's parameter is BLOCK_SIZE, not BLOCK.
    scale_kernel[grid](x, out, n, factor, BLOCK=1024)
    return out


def row_max(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    # BUG: wrong number of arguments: n_cols is missing (4 positional arguments given, the kernel takes 5).
    row_max_kernel[(x.shape[0],)](x, out, x.stride(0), BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return out


if __name__ == "__main__":
    print("buggy_kernels.py shows diagnostics; it is not meant to be run.")
