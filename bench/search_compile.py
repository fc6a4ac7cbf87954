"""Wall time of the product's tiling search (`search_tiling`, model only, no verification) with and without
compiling its candidates for the device's target, on a kernel of examples/.

Three runs, each in this process, the search's own cache off:
- "assumed": the candidates are not compiled (the model assumes registers, shared memory and no spills);
- "compiled, cold": every candidate compiled through the compile service of a fresh workspace;
- "compiled, warm": the same workspace again: the compile results come from its cache.

    python bench/search_compile.py [FILE::KERNEL] [--device H200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    from kernel_lsp.engine.latency.search import search_tiling

    parser = argparse.ArgumentParser()
    parser.add_argument("target", nargs="?", default=str(REPO / "examples" / "matmul_autotune.py") + "::matmul_kernel")
    parser.add_argument("--device", default="H200")
    args = parser.parse_args()
    path, kernel = args.target.split("::")
    source = Path(path).read_text()

    def not_compiled(jobs, done, cancel):
        return [None] * len(jobs)

    with tempfile.TemporaryDirectory() as root:
        runs = [("assumed", not_compiled), ("compiled, cold", None), ("compiled, warm", None)]
        for name, compiler in runs:
            start = time.perf_counter()
            found = search_tiling(path, source, kernel, args.device, root, measure=False, verify=False, cache=False,
                                  compiler=compiler)
            seconds = time.perf_counter() - start
            read = sum(1 for t in found.tried if t.resources)
            print(f"{name:<15} {seconds:7.1f} s  {len(found.tried)} candidates, {read} with compiled resources, "
                  f"winner {found.winner}  errors {found.errors}", flush=True)


if __name__ == "__main__":
    main()
