"""The output comparison on every device the checker can meet: CUDA outputs were once compared through a tensor
made on the CPU. Under torch's default device "meta" any tensor the checker makes without naming the data's
device lands on a third device and the comparison fails loudly, so that mistake shows on a machine without a GPU.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernel_lsp.engine.verify.compare import bitwise_equal, compare, never_written, prefill  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=["data's device", "stray default device"])
def default_device(request):
    if request.param == "data's device":
        yield
        return
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


@pytest.mark.parametrize("device", DEVICES)
def test_mismatches_in_the_flattened_tail_and_elsewhere(device, default_device):
    ref = torch.zeros(3, 5, device=device)
    tail = ref.clone()
    tail[2, 3] = 1.0  # flat index 13: past the last full block of 4 (12), inside the last row's full block
    cmp = compare(tail, ref, 1e-5, 1e-5, [4])
    assert not cmp.ok and cmp.mismatched == 1 and cmp.first_index == (2, 3) and cmp.tail_only is True
    inner = ref.clone()
    inner[0, 1] = float("nan")
    cmp = compare(inner, ref, 1e-5, 1e-5, [4])
    assert not cmp.ok and cmp.tail_only is False and cmp.max_abs == float("inf")


@pytest.mark.parametrize("device", DEVICES)
def test_never_written_outputs_casts_and_bitwise_equality(device, default_device):
    out = prefill(torch.empty(2, 8, dtype=torch.float16, device=device))
    ref = torch.ones(2, 8, dtype=torch.float16, device=device)
    assert int(never_written(out).sum()) == 16
    out[0] = 1.0
    cmp = compare(out, ref, 1e-3, 1e-3, [8])
    assert not cmp.ok and cmp.never_written == 8 and cmp.mismatched == 8
    as_fp32 = torch.ones(2, 8, dtype=torch.float32, device=device)
    assert compare(as_fp32, ref.to(torch.bfloat16), 1e-2, 1e-2, [8], cast_to=torch.bfloat16).ok
    assert bitwise_equal(ref, ref.clone()) and not bitwise_equal(ref, out)


def test_reference_on_another_device_than_the_output(default_device):
    out = torch.zeros(4, device=DEVICES[-1])
    ref = torch.zeros(4, device="cpu")
    assert compare(out, ref, 1e-5, 1e-5, []).ok
    assert bitwise_equal(out, ref)
