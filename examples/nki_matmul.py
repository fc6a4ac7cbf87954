"""Tiled matrix multiplication for an AWS NeuronCore, written against the current NKI API (nki >= 0.4).

C[M, N] = A[M, K] @ B[K, N]. The Tensor Engine is a 128 x 128 systolic array that computes
`stationary.T @ moving` and accumulates into PSUM, which fixes the shape of every instruction:

  * K (contraction) per nc_matmul: at most 128, the number of SBUF partitions;
  * M (free size of the stationary operand): at most 128, the columns of the array;
  * N (free size of the moving operand): at most 512, so that one float32 result row fits one
    2 KiB PSUM bank.

So the kernel takes A already transposed (`a_t = A.T`, shape [K, M], K on the partitions), walks
128 x 512 output tiles, and for each one accumulates K / 128 partial products in a single PSUM tile
before copying it back to SBUF (casting to the output dtype) and out to HBM.

`matmul_kernel` is a plain function wrapped with `nki.jit` only where nki is there, so that this file still
imports (and lints) on machines without the nki package, which is published on AWS's own package index.
`kernel-lsp check --run-checks` checks it against its spec (at the end) in kernel-lsp's NKI model, which answers
`import nki` inside the check, and estimates its Trainium2 latency at the spec's bench shape.
"""

from __future__ import annotations

import numpy as np

try:
    import nki
    import nki.isa as nisa
    import nki.language as nl
except ImportError:  # PyPI only has a placeholder `nki`; the real one comes with the Neuron SDK
    nki = None

TILE_K = 128  # rows of the contraction per instruction (nl.tile_size.pmax)
TILE_M = 128  # stationary free size (nl.tile_size.gemm_stationary_fmax)
TILE_N = 512  # moving free size (nl.tile_size.gemm_moving_fmax): 512 float32 = one PSUM bank


def matmul_kernel(a_t, b):
    """a_t: [K, M] (A transposed), b: [K, N], in HBM. Returns A @ B as a new [M, N] HBM tensor."""
    K, M = a_t.shape
    K_b, N = b.shape
    assert K == K_b, f"contraction sizes differ: a_t has {K} rows, b has {K_b}"
    assert K % TILE_K == 0 and M % TILE_M == 0 and N % TILE_N == 0, "pad the operands to whole tiles"

    # The output lives in HBM and is allocated once, outside every loop; each tile below writes its slice.
    out = nl.ndarray((M, N), dtype=a_t.dtype, buffer=nl.shared_hbm)

    for m in nl.affine_range(M // TILE_M):
        # The stationary operand of one M block is reused for every N block: bring its K / 128 tiles
        # on-chip once. The block index sits in the free dimensions; partitions stay at 128.
        a_block = nl.ndarray((TILE_K, K // TILE_K, TILE_M), dtype=a_t.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TILE_K):
            nisa.dma_copy(dst=a_block[:, k, :],
                          src=a_t[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])

        for n in nl.affine_range(N // TILE_N):
            # One PSUM bank: 128 partitions x 512 float32. Successive nc_matmul calls into the same PSUM
            # tile accumulate, which is how K larger than 128 is handled.
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                b_tile = nl.ndarray((TILE_K, TILE_N), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b_tile, src=b[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                # stationary [128, 128] and moving [128, 512]: every Tensor Engine limit is met.
                nisa.nc_matmul(dst=acc, stationary=a_block[:, k, :], moving=b_tile)

            # Copy the float32 accumulator to SBUF (converting it to the output dtype on the way), then
            # DMA the tile to its place in the HBM output.
            c_tile = nl.ndarray((TILE_M, TILE_N), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=c_tile, src=acc)
            nisa.dma_copy(dst=out[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=c_tile)

    return out


# The spec's kernel: nki.jit's wrapper where nki is importable (AWS's package, or kernel-lsp's NKI model inside
# its check); the plain function elsewhere.
matmul_jit = nki.jit(matmul_kernel) if nki is not None else matmul_kernel


def matmul(a: np.ndarray, b: np.ndarray):
    """A @ B for NumPy operands whose sizes are whole tiles; the kernel receives A transposed."""
    return matmul_jit(np.ascontiguousarray(a.T), b)


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What the kernel computes, in NumPy: A @ B with float32 accumulation."""
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)


def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A @ B through the NKI CPU simulator; the kernel receives A transposed."""
    kernel = nki.jit(matmul_kernel)
    return nki.simulate(kernel)(np.ascontiguousarray(a.T), b)


def torch_reference(a, b):
    """The spec's reference, in PyTorch: A @ B with float32 accumulation."""
    return (a.float() @ b.float()).to(a.dtype)


from kernel_lsp.spec import spec  # beside the spec it serves: the kernel above needs none of it


# Correctness spec: `kernel-lsp check --run-checks` runs matmul_kernel on these shapes (M, K, N), each a whole
# number of 128 x 128 x 512 tiles as the kernel requires, and compares with torch_reference.
@spec(kernel=matmul_jit, launcher=matmul, reference=torch_reference,
      shapes=[(128, 128, 512), (256, 384, 1024)], dtypes=["float32"], bench_shapes=[(512, 1024, 1024)],
      atol=1e-3, rtol=1e-3)
def matmul_inputs(shape, dtype, device):
    import torch

    m, k, n = shape
    return (torch.randn((m, k), dtype=dtype, device=device), torch.randn((k, n), dtype=dtype, device=device))


if __name__ == "__main__":
    if nki is None or not hasattr(nki, "simulate"):
        print("nki (>= 0.4, with nki.simulate) is not installed here, so the kernel cannot run. It comes with the "
              "AWS Neuron SDK; the PyPI package named nki is only a placeholder.")
        raise SystemExit(0)
    rng = np.random.default_rng(0)
    for m, k, n in [(128, 128, 512), (256, 384, 1024), (128, 1024, 512)]:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        got, want = run(a, b), reference(a, b)
        err = float(np.max(np.abs(got - want)))
        assert np.allclose(got, want, rtol=1e-3, atol=1e-3), f"mismatch for M={m} K={k} N={n}: max error {err:.3e}"
        print(f"nki_matmul OK for M={m} K={k} N={n}; max error {err:.3e}")
