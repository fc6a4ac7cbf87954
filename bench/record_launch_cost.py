"""The launch recorder's cost per launch, in process: the time `kernel-lsp record` adds to each launch of a kernel
(repeated launches take the cheap path: a key of dtypes, shapes, strides, alignment and scalars; a new distinct
launch is described in full once). Printed beside a fixed piece of Python work, to tell a slow machine from a slow
recorder.

    python bench/record_launch_cost.py
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kernel_lsp" / "engine" / "record" / "boot"))

import kernel_lsp_launch_recorder as recorder  # noqa: E402
import torch  # noqa: E402
import triton.language as tl  # noqa: E402


def kernel(x_ptr, y_ptr, out_ptr, n, eps, BLOCK: tl.constexpr, ACT: tl.constexpr):
    pass


class JitLike:
    """What the recorder reads of a JITFunction: the Python function in `.fn`."""

    def __init__(self) -> None:
        self.fn = kernel


def main() -> None:
    fn = JitLike()
    x, y, out = torch.randn(4096), torch.randn(4096), torch.empty(4096)
    n = 20000

    def repeated() -> None:
        recorder._record(fn, (x, y, out, 4096, 1e-5), {"BLOCK": 1024, "ACT": "relu", "num_warps": 4},
                         lambda meta: (4,), False)

    sizes = iter(range(1, 10**9))

    def distinct() -> None:  # a new size each time: described in full (up to the per-kernel cap)
        m = next(sizes)
        recorder._kernels.clear()
        recorder._fast.clear()
        recorder._record(fn, (x, y, out, m, 1e-5), {"BLOCK": 1024, "ACT": "relu"}, lambda meta: (4,), False)

    baseline = timeit.timeit("sum(range(100))", number=n) / n * 1e6
    cost = timeit.timeit(repeated, number=n) / n * 1e6
    first = timeit.timeit(distinct, number=n // 20) / (n // 20) * 1e6
    print(f"repeated launch: {cost:.1f} us; new distinct launch: {first:.1f} us; "
          f"sum(range(100)) on this machine: {baseline:.2f} us")


if __name__ == "__main__":
    main()
