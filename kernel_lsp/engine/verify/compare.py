"""Comparing a kernel's outputs with the reference's (runs in the checking process: imports torch).

NaN policy: a NaN in the output matches only a NaN at the same place in the reference; an infinity matches only
the same infinity. Everything else is compared in float64 as |out - ref| <= atol + rtol * |ref|.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# (atol, rtol) per dtype when the spec gives none: about two units in the last place of each format, loose
# enough for a different summation order in reductions, tight enough to catch a wrong cast.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-10, 1e-10),
    "float32": (1e-5, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1.6e-2),
    "float8_e4m3fn": (0.125, 0.125),
    "float8_e5m2": (0.25, 0.25),
}

# Bit patterns written into every tensor a launcher allocates with torch.empty*: a quiet NaN with a payload no
# arithmetic produces, so that "never written" can be told from "computed NaN".
NAN_FILL_BITS = {2: 0x7E5A, 4: 0x7FC0DEAD, 8: 0x7FF8DEADBEEF0BAD}
BF16_FILL_BITS = 0x7FDA


@dataclass
class Comparison:
    ok: bool
    max_abs: float | None
    max_rel: float | None
    mismatched: int
    total: int
    first_index: tuple[int, ...] | None
    tail_only: bool | None
    never_written: int
    message: str | None  # a structural problem (shape, dtype, type), or None


def fill_bits(dtype: Any) -> int | None:
    import torch

    if dtype == torch.bfloat16:
        return BF16_FILL_BITS
    if dtype.is_floating_point and dtype.itemsize in NAN_FILL_BITS:
        return NAN_FILL_BITS[dtype.itemsize]
    return None


_INT_VIEW = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _signed(bits: int, size: int) -> int:
    return bits - (1 << (8 * size)) if bits >= 1 << (8 * size - 1) else bits


def prefill(t: Any) -> Any:
    """Overwrite a freshly allocated tensor with the NaN fill (floats) or a sentinel (integers)."""
    import torch

    if t.numel() == 0 or t.device.type == "meta":
        return t
    with torch.no_grad():
        bits = fill_bits(t.dtype)
        if bits is not None:
            t.view(getattr(torch, _INT_VIEW[t.dtype.itemsize])).fill_(_signed(bits, t.dtype.itemsize))
        elif t.dtype == torch.bool:
            t.fill_(True)
        elif t.dtype.is_floating_point:
            t.fill_(float("nan"))
        elif not t.is_complex():
            t.fill_(torch.iinfo(t.dtype).max - 41)
    return t


def never_written(t: Any) -> Any:
    """Boolean mask of elements still holding the NaN fill bit pattern (None for dtypes without one)."""
    import torch

    bits = fill_bits(t.dtype)
    if bits is None or t.numel() == 0:
        return None
    return t.view(getattr(torch, _INT_VIEW[t.dtype.itemsize])) == _signed(bits, t.dtype.itemsize)


def bitwise_equal(a: Any, b: Any) -> bool:
    import torch

    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a == b if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor) else False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.device != b.device:
        b = b.to(a.device)
    if a.dtype.is_floating_point and a.dtype.itemsize in _INT_VIEW:
        view = getattr(torch, _INT_VIEW[a.dtype.itemsize])
        return bool(torch.equal(a.contiguous().view(view), b.contiguous().view(view)))
    return bool(torch.equal(a, b))


def changed_mask(a: Any, b: Any) -> Any:
    """Elementwise: whether the bits of `a` differ from those of `b` (same shape and dtype; NaN == NaN)."""
    import torch

    if a.dtype.is_floating_point and a.dtype.itemsize in _INT_VIEW:
        view = getattr(torch, _INT_VIEW[a.dtype.itemsize])
        return a.view(view) != b.view(view)
    return a != b


def not_following(first: Any, twin: Any, atol: float, rtol: float,
                  exempt: Any = None) -> tuple[int, int, tuple[int, ...] | None]:
    """(elements of `first` that did not move, elements judged, first such index) between a launcher's answer and
    its twin run's. Moving means leaving the tolerance: an answer that barely depends on the kernel (a small
    multiple of its output added to PyTorch's) does not count. Elements still holding the NaN fill are left to the
    comparison ("never written"); elements that are zero in both runs are buffers the kernel had no need to write
    (a zero-initialised output it stores only nonzero values to); `exempt` marks elements the launcher provided
    itself (provenance.py), which no launch writes."""
    import torch

    if not isinstance(twin, torch.Tensor) or tuple(twin.shape) != tuple(first.shape) or first.numel() == 0:
        total = first.numel()
        return total, total, (0,) * first.dim() if total else None
    unwritten = never_written(first)
    a = first.detach().to(torch.float64)
    b = twin.detach().to(a.device, torch.float64)
    same = (a - b).abs() <= atol + rtol * a.abs()
    same |= torch.isnan(a) & torch.isnan(b)
    same |= torch.isinf(a) & (a == b)
    same &= ~((a == 0) & (b == 0))
    if unwritten is not None:
        same &= ~unwritten.to(same.device)
    if exempt is not None:
        same &= ~exempt.to(same.device)
    judged = first.numel() - (int(unwritten.sum()) if unwritten is not None else 0)
    count = int(same.sum())
    index = tuple(int(i) for i in same.nonzero()[0]) if count else None
    return count, judged, index


def tail_only(indices: Any, shape: tuple[int, ...], blocks: list[int]) -> bool | None:
    """Whether every mismatching index lies past the last full block, for some block size of the launch along
    some dimension (or along the flattened tensor). None when no block size leaves a partial block."""
    if indices.numel() == 0:
        return None
    numel = 1
    for d in shape:
        numel *= d
    applicable = False
    for block in sorted({b for b in blocks if b >= 2}):
        for dim, size in enumerate(shape):
            if size > block and size % block:
                applicable = True
                if bool((indices[:, dim] >= (size // block) * block).all()):
                    return True
        if len(shape) > 1 and numel > block and numel % block:
            applicable = True
            # Python-int strides: a tensor made here would sit on the default device, not the indices' one.
            flat = sum(indices[:, d] * _stride(shape, d) for d in range(len(shape)))
            if bool((flat >= (numel // block) * block).all()):
                return True
    return False if applicable else None


def _stride(shape: tuple[int, ...], dim: int) -> int:
    s = 1
    for d in shape[dim + 1:]:
        s *= d
    return s


def compare(out: Any, ref: Any, atol: float, rtol: float, blocks: list[int], cast_to: Any = None) -> Comparison:
    """One output tensor against its reference. `cast_to`: dtype the output is rounded to first (bf16 run in
    fp32 on the interpreter)."""
    import torch

    def structural(message: str) -> Comparison:
        return Comparison(False, None, None, 0, 0, None, None, 0, message)

    if not isinstance(out, torch.Tensor):
        return structural(f"returned {type(out).__name__}, the reference returned a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return structural(f"shape {tuple(out.shape)}, the reference's is {tuple(ref.shape)}")
    unwritten_mask = never_written(out)
    unwritten = int(unwritten_mask.sum()) if unwritten_mask is not None else 0
    if cast_to is not None and out.dtype != cast_to:
        out = out.to(cast_to)
    elif out.dtype != ref.dtype:
        return structural(f"dtype {str(out.dtype).removeprefix('torch.')}, the reference's is "
                          f"{str(ref.dtype).removeprefix('torch.')}")
    total = out.numel()
    if total == 0:
        return Comparison(True, 0.0, 0.0, 0, 0, None, None, 0, None)
    # On the output's device: a GPU-sized case would not fit the host in float64.
    o = out.detach().to(torch.float64)
    r = ref.detach().to(o.device, torch.float64)
    diff = (o - r).abs()
    close = diff <= atol + rtol * r.abs()
    close |= torch.isnan(o) & torch.isnan(r)
    close |= torch.isinf(o) & (o == r)
    if unwritten_mask is not None:
        close &= ~unwritten_mask
    both_finite = torch.isfinite(o) & torch.isfinite(r)
    finite_diff = diff[both_finite]
    max_abs = float(finite_diff.max()) if finite_diff.numel() else 0.0
    rel = finite_diff / r[both_finite].abs().clamp_min(1e-30) if finite_diff.numel() else finite_diff
    max_rel = float(rel.max()) if rel.numel() else 0.0
    if bool(close.all()):
        return Comparison(True, max_abs, max_rel, 0, total, None, None, 0, None)
    bad = (~close).nonzero()
    first = tuple(int(i) for i in bad[0]) if bad.numel() else None
    if bool((~both_finite & ~close).any()):  # a non-finite mismatch: the error is unbounded
        max_abs = max_rel = float("inf")
    return Comparison(False, max_abs, max_rel, int(bad.shape[0]), total, first,
                      tail_only(bad, tuple(out.shape), blocks), unwritten, None)
