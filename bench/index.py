"""Indexing: a 500-file workspace, by the engine alone and through the server.

The workspace (bench/common.workspace_files) has 500 Python files in nested package folders: about 40% kernel
modules (renamed copies of examples/*.py) and the rest plain Python modules and __init__.py files. Beside them
are a .git folder (1,500 object files) and a .venv with 1,500 .py files in site-packages (a third of them
kernel modules); both are excluded by the default settings, and the figures below confirm that exactly the 500
workspace files were indexed.

(a) engine alone: `kernel_lsp.engine.batch.check_paths([root], Settings())`, timed inside a fresh Python
    process after its imports (the import time is reported separately); includes the walk, reading, analysis
    and the cross-file launch checks of every file.
(b) through the server: a fresh `kernel-lsp serve` (VS Code 1.65.2 capabilities, default settings, file
    watching on) is initialized on the workspace; the clock starts when `initialized` is sent and stops when
    the `kernel-lsp.status` command, polled every 10 ms, first reports `ready` (the first index is complete).

Each is repeated --runs times (default 5), each run in a new process; the median is the figure. The files
were just written, so they are in the OS page cache for every run (a cold-disk start is not measured).

    python bench/index.py [--runs 5] [--files 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    REPO,
    Figure,
    ServerSession,
    common_args,
    load_line,
    noise_files,
    print_table,
    summarize,
    workspace_files,
    write_files,
    write_json,
)

TARGET_S = 5.0

_ENGINE = r"""
import json, sys, time
t0 = time.perf_counter()
from kernel_lsp.engine.batch import check_paths
from kernel_lsp.settings import Settings
t1 = time.perf_counter()
result = check_paths([sys.argv[1]], Settings())
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "check_s": t2 - t1, "files": len(result.problems),
                  "problems": sum(len(p) for p in result.problems.values()),
                  "kernels": sum(len(e.analysis.kernels) for e in result.index.files.values() if e.analysis),
                  "excluded_seen": sum(1 for p in result.problems if "/.git/" in p or "/.venv/" in p)}))
"""


def engine_run(root: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _ENGINE, str(root)], check=True, cwd=REPO,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


async def server_run(root: Path) -> dict:
    async with ServerSession("push", root=root) as s:
        await s.spawn()
        await s.initialize(send_initialized=False)
        from lsprotocol import types

        t0 = time.perf_counter()
        s.client.initialized(types.InitializedParams())
        t_ready, st = await s.wait_ready(timeout=120)
        return {"ready_s": t_ready - t0, "files": st["indexed"]["files"], "memory_mb": st["memoryMB"],
                "kernels": st["indexed"]["tritonKernels"], "watched": st["watchedFolders"]}


def run(runs: int = 5, n_files: int = 500) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="kl-bench-index-") as tmp:
        root = Path(tmp) / "workspace"
        files = workspace_files(n_files)
        noise = noise_files()
        write_files(root, files)
        write_files(root, noise)
        n_kernel_files = sum(1 for k in files if "/kernel_" in k)
        engine = [engine_run(root) for _ in range(runs)]
        server = [asyncio.run(server_run(root)) for _ in range(runs)]
    e = summarize([r["check_s"] for r in engine])
    sv = summarize([r["ready_s"] for r in server])
    imp = statistics.median(r["import_s"] for r in engine)
    ws = (f"{n_files} files ({n_kernel_files} kernel modules) in nested folders, plus {len(noise)} files under "
          f".git and .venv that must be skipped")
    return [
        Figure(f"index (engine check_paths): {n_files}-file workspace, median", e["p50"], "s", TARGET_S,
               f"{ws}; n={e['n']}, min {e['min']:.2f} s, max {e['max']:.2f} s; indexed {engine[0]['files']} files, "
               f"{engine[0]['kernels']} kernels, {engine[0]['problems']} problems, {engine[0]['excluded_seen']} "
               f"from .git/.venv; import of the engine {imp:.2f} s (not included); {load_line()}"),
        Figure("index (server): initialized -> status ready, median", sv["p50"], "s", TARGET_S,
               f"n={sv['n']}, min {sv['min']:.2f} s, max {sv['max']:.2f} s; indexed {server[0]['files']} files, "
               f"{server[0]['kernels']} Triton kernels, {server[0]['watched']} folders watched, "
               f"RSS when ready {statistics.median(r['memory_mb'] for r in server):.0f} MB; status polled every 10 ms"),
        Figure("index (server): initialized -> status ready, max", sv["max"], "s"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each measurement (default 5)")
    parser.add_argument("--files", type=int, default=500, help="workspace files (default 500)")
    common_args(parser)
    args = parser.parse_args(argv)
    figures = run(max(args.runs, 1), args.files)
    print_table("Workspace indexing", figures)
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
