import nki
import nki.isa as nisa
import nki.language as nl
import torch

from kernel_lsp.spec import spec


@nki.jit
def scale_rows(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range((n + 127) // 128):
        rows = min(128, n - t * 128)
        tile = nl.ndarray((rows, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * 128:t * 128 + rows, :])
        res = nl.ndarray((rows, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=res, data=tile, op0=nl.multiply, operand0=3.0)
        nisa.dma_copy(dst=out[t * 128:t * 128 + rows, :], src=res)
    return out


def scale_reference(x):
    return x * 3


@spec(kernel=scale_rows, launcher=scale_rows, reference=scale_reference, shapes=[(200, 64), (5, 7)],
      dtypes=["float32", "bfloat16"])
def scale_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)
