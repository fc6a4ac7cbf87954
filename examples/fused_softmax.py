"""Row-wise softmax of a 2-D tensor in a single pass over memory.

One program instance handles one row: it loads the whole row into registers (BLOCK_SIZE is the row
length rounded up to a power of two), subtracts the row maximum for numerical stability, exponentiates,
normalises and writes the row back. The input is read once and the output written once, where an
unfused PyTorch softmax reads the data several times.

Padding lanes (columns >= n_cols) are loaded as -inf so that they neither win the max nor add to the
sum: exp(-inf - max) == 0.

Run on CPU:  TRITON_INTERPRET=1 python examples/fused_softmax.py
Run on GPU:  python examples/fused_softmax.py
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(
    out_ptr,
    in_ptr,
    in_row_stride,
    out_row_stride,
    n_cols,
    BLOCK_SIZE: tl.constexpr,
):
    # 64-bit row index: row * row_stride overflows int32 on tensors with more than 2**31 elements.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    col_ok = cols < n_cols

    x = tl.load(in_ptr + row * in_row_stride + cols, mask=col_ok, other=-float("inf"))
    x = x.to(tl.float32)  # accumulate in fp32 whatever the storage type
    row_max = tl.max(x, axis=0)
    numerator = tl.exp(x - row_max)
    denominator = tl.sum(numerator, axis=0)
    y = numerator / denominator

    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=col_ok)


def _num_warps_for(block_size: int) -> int:
    # More warps for longer rows, so that each thread holds a bounded number of elements.
    if block_size >= 8192:
        return 16
    if block_size >= 2048:
        return 8
    return 4


def softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax(x, dim=-1) for a 2-D tensor whose rows fit in one block (up to 64K columns)."""
    assert x.dim() == 2, "expected a 2-D tensor"
    n_rows, n_cols = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return out
    block_size = triton.next_power_of_2(n_cols)
    assert block_size <= 65536, f"rows of {n_cols} columns do not fit in one block"
    softmax_kernel[(n_rows,)](
        out,
        x,
        x.stride(0),
        out.stride(0),
        n_cols,
        BLOCK_SIZE=block_size,
        num_warps=_num_warps_for(block_size),
    )
    return out


def reference_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


from kernel_lsp.spec import spec  # beside the spec it serves: the kernels above need none of it


# Correctness spec: ragged column counts exercise the -inf padding; fp16 compared at 1e-3.
@spec(
    kernel=softmax_kernel,
    launcher=softmax,
    reference=reference_softmax,
    shapes=[(1, 1), (7, 33), (19, 300)],
    dtypes=["float32", "float16"],
    bench_shapes=[(4096, 4096)],
)
def softmax_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device) * 4,)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    worst = 0.0
    # Ragged column counts (not powers of two) exercise the -inf padding; 1 column is the degenerate row.
    shapes = [(1, 1), (7, 33), (64, 128), (37, 781), (128, 1000), (3, 4099)]
    for n_rows, n_cols in shapes:
        for dtype, tol in ((torch.float32, 1e-6), (torch.float16, 1e-3)):
            x = torch.randn(n_rows, n_cols, device=device, dtype=dtype) * 4
            got = softmax(x)
            want = reference_softmax(x)
            err = (got.float() - want.float()).abs().max().item()
            worst = max(worst, err)
            assert err <= tol, f"{n_rows}x{n_cols} {dtype}: max error {err}"
            print(f"{n_rows:>4}x{n_cols:<5} {dtype!s:>13}: max error {err:.3e}")
    # A non-contiguous view: every other row of a wider tensor (row stride != n_cols).
    base = torch.randn(20, 300, device=device)
    view = base[::2, :257]
    err = (softmax(view) - reference_softmax(view)).abs().max().item()
    worst = max(worst, err)
    assert err <= 1e-6, f"strided view: max error {err}"
    print(f"strided 10x257 view: max error {err:.3e}")
    print(f"fused_softmax OK on {device}; max error {worst:.3e}")
