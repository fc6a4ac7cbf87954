"""Tiling search against exhaustive measurement, on matmul, softmax and layernorm from examples/.

For each kernel: the tiling space (analyzers.tiling), every candidate estimated (roofline on counted work), the
top 30% by estimate measured (what `search_tiling` does); with a GPU, the whole space measured too. Prints the
fraction of the best configuration's speed the search reaches (target >= 95%) and the fraction of the space it
measured (target <= 30%). `--dry-run`: estimates only.

    python bench/tiling_search.py [--dry-run]
"""

from __future__ import annotations

import sys

from model_accuracy import MM, REPO

from analyzers.tiling import Candidate, choose, enumerate_space, rank, to_measure

CASES = [
    ("matmul_kernel", "matmul_point", [4096, 4096, 4096], "float16",
     [Candidate(tuple(sorted((k, v) for k, v in MM.items() if k.isupper())), 8, 3)]),
    ("softmax_kernel", "softmax_point", [8192, 4096], "float16", None),
    ("layernorm_fwd_kernel", "layernorm_point", [8192, 4096], "float16", None),
]


def main() -> None:
    from kernel_lsp.engine.latency import count_work, entries_for_point, measure_file, resolve_device

    dry = "--dry-run" in sys.argv
    hw = resolve_device("H200")
    path = __file__.replace("tiling_search", "model_accuracy")
    for kernel, factory, shape, dtype, configs in CASES:
        if dry and kernel == "matmul_kernel":
            shape = [1024, 1024, 1024]
        if configs:
            space = enumerate_space({}, configs=configs, radius=1, limit=24)
        else:  # one row per program: only the launch parameters are free (BLOCK_SIZE must cover the row)
            space = enumerate_space({}, [], num_warps=8, num_stages=3)
        pts = [{"factory": factory, "kernel": kernel, "shape": shape, "dtype": dtype, "overrides": c.overrides}
               for c in space]
        counted = count_work(path, None, pts, root=str(REPO), samples=4, timeout=1800)
        est = {}
        for c, p in zip(space, counted):
            e = entries_for_point(p, [("H200", hw)])
            est[c] = e[0].us if e and e[0].us else None
        ranked = rank([c for c in space if est[c] is not None], est)
        picked = to_measure(ranked, space_size=len(space))
        print(f"{kernel} {shape} {dtype}: {len(space)} configurations, search measures {len(picked)} "
              f"({len(picked) / len(space):.0%} of the space)")
        if dry:
            for c in ranked[:5]:
                print(f"    {c.label:<80} ≈{est[c]:.1f} µs est.")
            continue
        report = measure_file(path, None, root=str(REPO), history=False, timeout=1800, repetitions=20,
                              points=[{**pt, "overrides": c.overrides} for pt, c in zip(pts, space)])
        measured = {c: e.us for c, e in zip(space, report.entries) if e.us}
        best = min(measured.values()) if measured else None
        winner, _ = choose(ranked, {c: measured[c] for c in picked if c in measured})
        if best and winner in measured:
            print(f"    exhaustive best {best:.1f} us; search winner {winner.label} {measured[winner]:.1f} us: "
                  f"{best / measured[winner]:.1%} of the best speed (target >= 95%)")
        else:
            print("    measurement failed:", report.errors)


if __name__ == "__main__":
    main()
