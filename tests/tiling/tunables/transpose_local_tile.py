# expect: TILE free "set by `tile = 16`" site 21
import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, TILE: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * TILE + tl.arange(0, TILE)
    rn = pn * TILE + tl.arange(0, TILE)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(y_ptr + rn[None, :] * M + rm[:, None], x, mask=mask)


def transpose(x):
    M, N = x.shape
    y = torch.empty((N, M), dtype=x.dtype, device=x.device)
    tile = 16
    grid = (triton.cdiv(M, tile), triton.cdiv(N, tile))
    transpose_kernel[grid](x, y, M, N, TILE=tile, num_warps=4)
    return y
