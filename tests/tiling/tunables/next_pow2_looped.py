# expect: BLOCK_SIZE free "a loop of the kernel steps by it"
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


def row_sum(x, y):
    n_rows, n_cols = x.shape
    block = min(1024, triton.next_power_of_2(n_cols))
    row_sum_kernel[(n_rows,)](x, y, n_cols, BLOCK_SIZE=block)
