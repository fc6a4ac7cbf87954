"""Autotune configuration lists written as plain data are read: literals, comprehensions over literals, sums of
lists. A list built by a call stays unknown, and so does one too large to be a list anyone reads."""

from __future__ import annotations

from analyzers import analyze_source

HEAD = """import triton
import triton.language as tl

WARPS = [4, 8]

"""
BODY = """@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr, SPLIT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0, mask=offs < n)
"""


def _configs(configs: str):
    kernel = analyze_source(HEAD + f"@triton.autotune(configs={configs}, key=['n'])\n" + BODY).kernel("k")
    assert kernel is not None
    if not kernel.autotune_configs_known:
        return None
    return [(c.kwargs, c.num_warps, c.num_stages) for c in kernel.autotune_configs]


def test_a_comprehension_over_literals_is_expanded_in_order() -> None:
    got = _configs("[triton.Config({'BLOCK': b, 'SPLIT': 1}, num_warps=w, num_stages=s) "
                   "for b in [64, 128] for w in WARPS for s in range(2, 4) if b * w <= 512]")
    assert got == [({"BLOCK": 64, "SPLIT": 1}, 4, 2), ({"BLOCK": 64, "SPLIT": 1}, 4, 3),
                   ({"BLOCK": 64, "SPLIT": 1}, 8, 2), ({"BLOCK": 64, "SPLIT": 1}, 8, 3),
                   ({"BLOCK": 128, "SPLIT": 1}, 4, 2), ({"BLOCK": 128, "SPLIT": 1}, 4, 3)]


def test_tuple_targets_and_sums_of_lists() -> None:
    got = _configs("[triton.Config({'BLOCK': b, 'SPLIT': s}, num_warps=w) for b, w in [(64, 2), (256, 8)] "
                   "for s in (1,)] + [triton.Config({'BLOCK': 32, 'SPLIT': 2})]")
    assert got == [({"BLOCK": 64, "SPLIT": 1}, 2, None), ({"BLOCK": 256, "SPLIT": 1}, 8, None),
                   ({"BLOCK": 32, "SPLIT": 2}, None, None)]


def test_lists_built_by_code_stay_unknown() -> None:
    assert _configs("make_configs()") is None
    assert _configs("[triton.Config({'BLOCK': b, 'SPLIT': 1}) for b in sizes()]") is None
    assert _configs("[triton.Config({'BLOCK': f(b), 'SPLIT': 1}) for b in [64, 128]]") is None
    # a tuning space, not a list anyone reads
    assert _configs("[triton.Config({'BLOCK': b, 'SPLIT': s}) for b in range(1, 100) for s in range(1, 100)]") is None
