"""TR002's advice names the user's offsets and the size of their dimension, or stays general: never a pointer
compared with a size, never the size of another dimension."""

from __future__ import annotations

from analyzers import check_source

GEMM = '''
import triton
import triton.language as tl


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        b = tl.load(b_ptr + (k + offs_k[:, None]) * stride_bk + offs_bn[None, :])
        acc += b
    tl.store(c_ptr + offs_am[:, None] * stride_cm + offs_bn[None, :], acc)
'''

MOVING_POINTER = '''
import triton
import triton.language as tl


@triton.jit
def scale(A, B, M, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    A = A + pid * BLOCK + tl.arange(0, BLOCK)
    B = B + pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(B, tl.load(A) * 2)
'''


def _tr002(text: str) -> list[str]:
    return [p.message for p in check_source(text, "k.py").problems if p.code == "TR002"]


def test_the_size_named_is_the_one_of_the_offsets_dimension() -> None:
    messages = _tr002(GEMM)
    assert any("mask=offs_bn < N" in m for m in messages), messages
    assert not any("offs_bn < M" in m or "offs_bn < K" in m for m in messages), messages


def test_a_pointer_is_never_offered_as_the_offsets() -> None:
    messages = _tr002(MOVING_POINTER)
    assert messages, "the unmasked load and store are reported"
    assert not any("mask=A" in m or "mask=B" in m for m in messages), messages
    assert all("add a mask comparing the offsets with the size" in m for m in messages), messages


def test_accesses_with_one_cause_are_one_finding_that_lists_the_others() -> None:
    text = GEMM.replace("        acc += b\n", "        c = tl.load(b_ptr + (k + offs_k[:, None]) * stride_bk + offs_bn[None, :] + 1)\n"
                                         "        acc += b + c\n")
    problems = [p for p in check_source(text, "k.py").problems if p.code == "TR002" and "reads" in p.message]
    assert len(problems) == 1, [p.message for p in problems]
    assert "the same at line 17" in problems[0].message
    assert [r.span.start_line for r in problems[0].related] == [16]
