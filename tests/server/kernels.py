"""Kernel sources shared by the server tests."""

GOOD = '''import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
'''

# Line 7 (0-based) misspells tl.arange: TR007 with a quick fix.
TYPO = GOOD.replace("tl.arange(0, BLOCK)", "tl.arrange(0, BLOCK)")
TYPO_LINE = 7

SECOND_KERNEL = '''

@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
'''

LAUNCHER = '''import torch
import triton

from kernels import add_kernel


def add(x, y):
    out = torch.empty_like(x)
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
'''
