"""Time of the latency estimate's work counting for a 4096^3 fp16 matmul on the CPU (no GPU).

    python bench/count_time.py [--full]

Counts the work of examples/matmul_autotune.py at 4096x4096x4096 fp16, as "Optimize tiling" and the latency hints
do: once with one configuration pinned (64x64x32, 4 warps) and once through its autotuner (all 6 configs). Prints,
per case, the worker's time for the point (inputs built at full size, the launches captured, the reduced shapes
interpreted) and the wall time of the whole call including the worker process's start (importing torch and
triton). `--full` also counts the pinned configuration at full size, without the reduced shapes, for comparison
(minutes).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

POINTS = f'''
import sys
sys.path.insert(0, {str(REPO / "examples")!r})


def matmul_point(shape, dtype, device):
    import torch
    from matmul_autotune import matmul, matmul_kernel

    M, N, K = shape
    return matmul_kernel, matmul, (torch.randn(M, K, dtype=dtype, device=device),
                                   torch.randn(K, N, dtype=dtype, device=device))
'''

SMALL = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "num_warps": 4,
         "num_stages": 3}


def main() -> None:
    from kernel_lsp.engine.latency import count_work

    full = "--full" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "points.py")
        Path(path).write_text(POINTS)
        base = {"factory": "matmul_point", "kernel": "matmul_kernel", "shape": [4096, 4096, 4096],
                "dtype": "float16"}
        cases = [("one configuration (64x64x32, 4 warps)", {**base, "overrides": SMALL}, True),
                 ("autotuned (6 configurations)", base, True)]
        if full:
            cases.append(("one configuration, full shape interpreted", {**base, "overrides": SMALL}, False))
        for name, point, scale in cases:
            started = time.perf_counter()
            [result] = count_work(path, None, [point], root=tmp, scale=scale, timeout=3600)
            wall = time.perf_counter() - started
            if result.get("error"):
                print(f"{name}: {result['error']}")
                continue
            flops = sum(sum(lc["tensor_flops"].values()) for lc in result["launches"]) / len(result["launches"])
            print(f"{name}: point {result['seconds']:.2f} s, call {wall:.2f} s (worker start included); "
                  f"counted at {result.get('counted_shape') or point['shape']}, "
                  f"{flops / 2 / 4096 ** 3:.3f} x M*N*K multiply-adds per launch")


if __name__ == "__main__":
    main()
