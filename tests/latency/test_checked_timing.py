"""Timing that checks what it times (timing.time_checked, audit_launches): fresh inputs for every call, every timed
output verified, and the CUDA profiler's kernel records deciding what a timed call launched."""

import pytest

from kernel_lsp.engine.latency import measured_entry
from kernel_lsp.engine.latency.timing import NotVerified, audit_launches, time_checked

def _fresh(n=1 << 20):
    import torch

    return lambda: (torch.randn(n, device="cuda"), torch.randn(n, device="cuda"))


def _verify(args, out):
    import torch

    return None if torch.allclose(out, args[0] + args[1]) else "differs from x + y"


@pytest.mark.gpu
def test_an_honest_call_gets_a_figure_on_fresh_inputs():
    import torch

    seen = []

    def add(x, y):
        seen.append(x.data_ptr())
        return torch.add(x, y)

    t = time_checked(add, _fresh(), _verify, repetitions=20)
    assert t.median_us > 0 and t.repetitions == 20
    assert len(seen) == 25  # five warm-up calls and twenty timed ones, each on inputs of its own


@pytest.mark.gpu
def test_a_memo_between_repetitions_gives_no_figure():

    memo = []

    def memoised(x, y):
        if not memo:
            memo.append(x + y)
        return memo[0]

    with pytest.raises(NotVerified, match="wrong on its own inputs"):
        time_checked(memoised, _fresh(), _verify, repetitions=20)


@pytest.mark.gpu
def test_a_launcher_that_turns_wrong_after_some_calls_gives_no_figure():

    calls = [0]

    def drifting(x, y):
        calls[0] += 1
        return x + y if calls[0] < 12 else x - y

    with pytest.raises(NotVerified, match="timed repetition"):
        time_checked(drifting, _fresh(), _verify, repetitions=20)


@pytest.mark.gpu
def test_the_profiler_sees_a_private_stream_and_a_call_with_no_kernel():
    import torch

    x, y = _fresh()()
    side = torch.cuda.Stream()

    def on_side_stream(a, b):
        with torch.cuda.stream(side):
            return a + b

    assert "stream the timer does not cover" in audit_launches(on_side_stream, (x, y), set())
    assert "launched no kernel" in audit_launches(lambda a, b: None, (x, y), set())
    assert audit_launches(lambda a, b: a + b, (x, y), set()) is not None  # PyTorch's own elementwise kernel


@pytest.mark.gpu
def test_a_triton_kernel_on_the_timed_stream_passes_the_audit():
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    def add(a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), BLOCK=1024)
        return out

    x, y = _fresh()()
    add(x, y)
    assert audit_launches(add, (x, y), {"add_kernel"}) is None


def test_an_audit_finding_is_the_entrys_suspicious_reason():
    point = {"kernel": "add_kernel", "spec": "s", "shape": [1024], "dtype": "float32", "device_name": "NVIDIA H200",
             "kernel_timing": {"median_us": 10.0, "q1_us": 9.0, "q3_us": 11.0, "min_us": 8.0, "repetitions": 5},
             "audit": "the call launched kernels on a stream the timer does not cover"}
    assert "stream" in measured_entry(point, None).suspicious
