"""Layer normalisation forward over the last dimension, saving the per-row mean and 1/std.

    y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias

One program instance normalises one row held entirely in registers, so x is read once. The kernel also
writes each row's mean and reciprocal standard deviation (rstd): a backward pass needs them and would
otherwise recompute both.

Statistics are computed in fp32 whatever the storage type. Padding lanes are loaded as 0.0 so that they add
nothing to the sum, and are zeroed again after centring (0 - mean is not 0) before the variance is taken.

Run on CPU:  TRITON_INTERPRET=1 python examples/layernorm.py
Run on GPU:  python examples/layernorm.py
"""

import torch
import triton
import triton.language as tl


@triton.jit
def layernorm_fwd_kernel(
    x_ptr,
    y_ptr,
    w_ptr,
    b_ptr,
    mean_ptr,
    rstd_ptr,
    x_row_stride,
    y_row_stride,
    n_cols,
    eps,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    col_ok = cols < n_cols

    x = tl.load(x_ptr + row * x_row_stride + cols, mask=col_ok, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centred = tl.where(col_ok, x - mean, 0.0)
    var = tl.sum(centred * centred, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)

    # One scalar per row; row < n_rows because the grid has exactly n_rows programs.
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)

    w = tl.load(w_ptr + cols, mask=col_ok, other=1.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = centred * rstd * w + b
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=col_ok)


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LayerNorm over the last dimension of x. Returns (y, mean, rstd); mean and rstd are fp32, one per row."""
    n_cols = x.shape[-1]
    assert weight.shape == (n_cols,) and bias.shape == (n_cols,)
    x2d = x.reshape(-1, n_cols)
    if x2d.stride(-1) != 1:
        x2d = x2d.contiguous()
    n_rows = x2d.shape[0]
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    if n_rows == 0:
        return y.reshape(x.shape), mean, rstd

    block_size = triton.next_power_of_2(n_cols)
    max_block = 65536 // x.element_size()
    if block_size > max_block:
        raise ValueError(f"rows of {n_cols} features do not fit in one block (at most {max_block})")
    num_warps = min(max(block_size // 256, 1), 8)  # a power of two between 1 and 8
    layernorm_fwd_kernel[(n_rows,)](
        x2d,
        y,
        weight.contiguous(),
        bias.contiguous(),
        mean,
        rstd,
        x2d.stride(0),
        y.stride(0),
        n_cols,
        eps,
        BLOCK_SIZE=block_size,
        num_warps=num_warps,
    )
    return y.reshape(x.shape), mean, rstd


def reference_layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    xf = x.float().reshape(-1, x.shape[-1])
    mean = xf.mean(dim=-1)
    rstd = torch.rsqrt(xf.var(dim=-1, unbiased=False) + eps)
    y = torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), eps)
    return y.to(x.dtype), mean, rstd


from kernel_lsp.spec import spec  # beside the spec it serves: the kernels above need none of it


# Correctness spec: y, mean and rstd all compared; ragged feature counts and a 3-D input.
@spec(
    kernel=layernorm_fwd_kernel,
    launcher=layer_norm,
    reference=reference_layer_norm,
    shapes=[(5, 3), (9, 300), (2, 3, 129)],
    dtypes=["float32", "float16"],
    atol={"float32": 1e-4, "float16": 1e-2},
    rtol={"float32": 1e-4, "float16": 1e-2},
    bench_shapes=[(4096, 4096)],
)
def layernorm_inputs(shape, dtype, device):
    n_cols = shape[-1]
    x = (torch.randn(shape, device=device) * 3 + 1.5).to(dtype)
    return (x, torch.randn(n_cols, device=device).to(dtype), torch.randn(n_cols, device=device).to(dtype))


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    worst = 0.0
    # Ragged feature counts (not powers of two) and a 3-D input flattened to rows.
    shapes = [(1, 1), (5, 3), (64, 128), (33, 700), (4, 9, 1025), (16, 4096)]
    for shape in shapes:
        for dtype, tol in ((torch.float32, 1e-4), (torch.float16, 1e-2)):
            n_cols = shape[-1]
            x = (torch.randn(shape, device=device) * 3 + 1.5).to(dtype)
            w = torch.randn(n_cols, device=device).to(dtype)
            b = torch.randn(n_cols, device=device).to(dtype)
            y, mean, rstd = layer_norm(x, w, b)
            y_ref, mean_ref, rstd_ref = reference_layer_norm(x, w, b)
            err_y = (y.float() - y_ref.float()).abs().max().item()
            err_stats = max(
                (mean - mean_ref).abs().max().item(),
                ((rstd - rstd_ref).abs() / rstd_ref).max().item(),
            )
            worst = max(worst, err_y)
            assert err_y <= tol and err_stats <= 1e-4, f"{shape} {dtype}: y {err_y}, mean/rstd {err_stats}"
            print(f"{shape!s:>14} {dtype!s:>13}: max error y {err_y:.3e}, mean/rstd {err_stats:.3e}")
    print(f"layernorm OK on {device}; max error {worst:.3e}")
