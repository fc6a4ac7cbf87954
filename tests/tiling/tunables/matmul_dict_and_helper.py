# expect: BLOCK_M free "set by `cfg['BLOCK_M'] = 64`" site 28
# expect: BLOCK_N free "set by `cfg['BLOCK_N'] = 64`" site 28
# expect: BLOCK_K free "set by `block_k = 32`" site 28
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptr + k * BLOCK_K + tl.arange(0, BLOCK_M)[:, None] * K + tl.arange(0, BLOCK_K)[None, :])
        b = tl.load(b_ptr + k * BLOCK_K * N + tl.arange(0, BLOCK_K)[:, None] * N + tl.arange(0, BLOCK_N)[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + tl.arange(0, BLOCK_M)[:, None] * N + tl.arange(0, BLOCK_N)[None, :], acc)


def _launch(a, b, c, M, N, K, cfg, block_k):
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], BLOCK_K=block_k,
                        num_warps=4, num_stages=3)


def matmul(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    _launch(a, b, c, M, N, K, {"BLOCK_M": 64, "BLOCK_N": 64}, block_k=32)

