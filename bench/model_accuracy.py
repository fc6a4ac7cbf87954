"""Latency model accuracy: the roofline estimate (work counted under Triton's interpreter) against GPU timing.

    python bench/model_accuracy.py                   # on a GPU machine: estimate vs measurement, errors, fits
    python bench/model_accuracy.py --dry-run         # anywhere: the estimates only, on the quick points
    python bench/model_accuracy.py --dry-run --full  # anywhere: the estimates of all 22 points of the GPU run

Measured times are the kernel's GPU time (the host's launch cost outside the window); the host's cost per call is
printed beside them.

The points are (kernel, shape, config) of examples/: vector_add, fused_softmax, layernorm, matmul_autotune. This
file is also the module the latency workers import to build each point (the `*_point` factories).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "examples")):
    if p not in sys.path:
        sys.path.insert(0, p)


def vector_add_point(shape, dtype, device):
    import torch
    import triton
    from vector_add import add_kernel

    x = torch.randn(shape, dtype=dtype, device=device)
    y = torch.randn(shape, dtype=dtype, device=device)

    def launch(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[lambda m: (triton.cdiv(n, m["BLOCK_SIZE"]),)](x, y, out, n, BLOCK_SIZE=1024, num_warps=4)
        return out
    return add_kernel, launch, (x, y), lambda x, y: x + y


def softmax_point(shape, dtype, device):
    import torch
    from fused_softmax import softmax, softmax_kernel

    return softmax_kernel, softmax, (torch.randn(shape, dtype=dtype, device=device),), \
        lambda x: torch.softmax(x, dim=-1)


def layernorm_point(shape, dtype, device):
    import torch
    from layernorm import layer_norm, layernorm_fwd_kernel

    n = shape[-1]
    args = (torch.randn(shape, dtype=dtype, device=device), torch.randn(n, dtype=dtype, device=device),
            torch.randn(n, dtype=dtype, device=device))
    return layernorm_fwd_kernel, layer_norm, args, \
        lambda x, w, b: torch.nn.functional.layer_norm(x, (n,), w, b)


def matmul_point(shape, dtype, device):
    import torch
    from matmul_autotune import matmul, matmul_kernel

    M, N, K = shape
    args = (torch.randn(M, K, dtype=dtype, device=device), torch.randn(K, N, dtype=dtype, device=device))
    return matmul_kernel, matmul, args, lambda a, b: a @ b


MM = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8, "num_warps": 8,
      "num_stages": 3}
MM_SMALL = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "num_warps": 4,
            "num_stages": 3}


def points(quick: bool = False) -> list[dict]:
    out = []
    for n in ((1 << 20, 1 << 24) if quick else (1 << 20, 1 << 24, 1 << 26)):
        for block in (1024, 4096):
            out.append({"factory": "vector_add_point", "kernel": "add_kernel", "shape": [n], "dtype": "float32",
                        "overrides": {"BLOCK_SIZE": block, "num_warps": 4 if block == 1024 else 8}})
    for shape in ([4096, 1024], [8192, 4096]) if quick else ([4096, 1024], [8192, 4096], [16384, 8192]):
        for dtype in ("float16", "float32"):
            out.append({"factory": "softmax_point", "kernel": "softmax_kernel", "shape": shape, "dtype": dtype})
            out.append({"factory": "layernorm_point", "kernel": "layernorm_fwd_kernel", "shape": shape,
                        "dtype": dtype})
    for shape in ([1024, 1024, 1024],) if quick else ([2048, 2048, 2048], [4096, 4096, 4096]):
        for cfg in (MM, MM_SMALL):
            out.append({"factory": "matmul_point", "kernel": "matmul_kernel", "shape": shape, "dtype": "float16",
                        "overrides": cfg})
    return out


def estimates(pts: list[dict], device: str = "H200") -> list:
    from kernel_lsp.engine.latency import count_work, entries_for_point, resolve_device

    counted = count_work(__file__, None, pts, root=str(REPO), samples=6, timeout=1800)
    hw = resolve_device(device)
    return [(entries_for_point(p, [(device, hw)]) or [None])[0] for p in counted], counted


def main() -> None:
    dry = "--dry-run" in sys.argv
    pts = points(quick=dry and "--full" not in sys.argv)
    print(f"model accuracy: {len(pts)} points{' (dry run: estimates only)' if dry else ''}")
    ests, counted = estimates(pts)
    measured: list[float | None] = [None] * len(pts)
    host: list[float | None] = [None] * len(pts)
    if not dry:
        from kernel_lsp.engine.latency import measure_file

        report = measure_file(__file__, None, root=str(REPO), points=pts, history=False, timeout=1800)
        for err in report.errors:
            print("measurement error:", err)
        measured = [e.us for e in report.entries] + [None] * (len(pts) - len(report.entries))
        host = [(e.timing or {}).get("launch_us") for e in report.entries] + [None] * (len(pts) - len(report.entries))
    errors, bw_fit, mm_fit = [], [], []
    print(f"{'kernel':<22} {'shape':<20} {'dtype':<8} {'config':<34} {'estimate':>12} {'measured':>10} {'error':>7}"
          f" {'host/call':>10}")
    for p, est, meas, launch in zip(pts, ests, measured, host):
        cfg = ",".join(f"{k}={v}" for k, v in (p.get("overrides") or {}).items())[:34]
        est_us = est.us if est is not None and est.us else None
        err = (est_us / meas - 1.0) if est_us and meas else None
        if err is not None:
            errors.append(abs(err))
            e = est.estimate
            body = meas - e["terms_us"]["launch"]
            if body > 0 and est.bound == "memory":
                bw_fit.append(e["dram_bytes"] / (body * 1e-6) / 4.8e12)
            if body > 0 and est.bound == "compute":
                flops = sum(est.work["tensor_flops"].values())
                mm_fit.append(flops / (body * 1e-6) / 989.4e12)
        print(f"{p['kernel']:<22} {p['shape']!s:<20} {p['dtype']:<8} {cfg:<34} "
              f"{(est.label if est else 'failed'):>12} {(f'{meas:.1f} us' if meas else '-'):>10} "
              f"{(f'{err:+.0%}' if err is not None else '-'):>7} {(f'{launch:.1f} us' if launch else '-'):>10}")
        if est is not None and est.error:
            print("    error:", est.error)
    if errors:
        xs = sorted(errors)
        print(f"median abs error {statistics.median(xs):.1%}; p90 {xs[int(0.9 * (len(xs) - 1))]:.1%}; "
              f"worst {xs[-1]:.1%} over {len(xs)} points (target: median <= 25%)")
    if bw_fit:
        print(f"fitted bw_efficiency (H200, memory-bound points): {statistics.median(bw_fit):.3f}")
    if mm_fit:
        print(f"fitted matmul throughput fraction (H200, compute-bound points): {statistics.median(mm_fit):.3f}")
    ok = sum(1 for e in ests if e is not None and e.us)
    print(f"estimated {ok}/{len(pts)} points; counting took {sum(c.get('seconds', 0) for c in counted):.1f} s")


if __name__ == "__main__":
    main()
