"""An autotune config that cannot launch on the device (triton's OutOfResources: too much shared memory for this
GPU) is skipped with a note, as the autotuner skips it; the other configs still decide the verdict."""

from __future__ import annotations

import pytest

from kernel_lsp.engine.verify import CheckRequest, run_checks

pytest.importorskip("torch")
pytest.importorskip("triton")

SOURCE = '''import torch
import triton
import triton.language as tl

from kernel_lsp.spec import spec


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 4096})], key=["n"])
@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


class OutOfResources(Exception):
    """Stands in for triton.runtime.errors.OutOfResources, which a GPU raises at launch."""


def double(x):
    if double_kernel.configs[0].kwargs["BLOCK"] == 4096:  # the checker launches one config at a time
        raise OutOfResources("out of resource: shared memory, Required: 294912, Hardware limit: 232448")
    out = torch.empty_like(x)
    double_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out


@spec(kernel=double_kernel, launcher=double, reference=lambda x: x * 2, shapes=[(100,)], seeds=1)
def inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)
'''


def test_a_config_that_cannot_launch_is_skipped_with_a_note(tmp_path):
    path = tmp_path / "double.py"
    path.write_text(SOURCE)
    [verdict] = run_checks(CheckRequest(str(path), SOURCE, device="interpreter")).verdicts
    assert verdict.status == "correct", verdict.message
    assert ", 1 config (" in verdict.message
    [note] = [n for n in verdict.notes if "skipped" in n]
    assert "BLOCK=4096" in note and "for float32" in note and "shared memory" in note
    assert "autotuner skips it too" in note


def test_shapes_kernel_lsp_chooses_use_only_dtypes_the_config_launches_with(tmp_path):
    # As on a GPU: the largest config fits float16's shared memory and not float32's. The shapes the checker
    # derives itself must not turn that into an error the autotuner would never meet.
    source = SOURCE.replace(
        'if double_kernel.configs[0].kwargs["BLOCK"] == 4096:',
        'if double_kernel.configs[0].kwargs["BLOCK"] == 4096 and x.dtype == torch.float32:').replace(
        'configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 4096})]',
        'configs=[triton.Config({"BLOCK": 4096}), triton.Config({"BLOCK": 64})]').replace(
        "shapes=[(100,)], seeds=1)", 'shapes=[(100,)], dtypes=["float16", "float32"], seeds=1)')
    path = tmp_path / "double.py"
    path.write_text(source)
    [verdict] = run_checks(CheckRequest(str(path), source, device="interpreter")).verdicts
    assert verdict.status == "correct", verdict.message
    assert any("shapes kernel-lsp chose" in n for n in verdict.notes), verdict.notes
