"""Memory: the server's resident set size after opening 20 distinct kernel files.

The workspace is a folder of 20 kernel modules, renamed copies of examples/*.py (Triton vector add, softmax,
layernorm, autotuned matmul, the buggy kernels, and the NKI matmul), so the workspace index holds them too.
The client (VS Code 1.65.2 capabilities) initializes, waits for the first index (status `ready`), then opens
every file with textDocument/didOpen and its full text, waits for each file's publishDiagnostics of version 1
and for an empty job queue, and reads:

- `memoryMB` from the `kernel-lsp.status` command (the server's own /proc/self/statm reading), and
- VmRSS (and the peak, VmHWM) of the server process from /proc/PID/status, as a cross-check.

Both are MiB (2**20 bytes). The run is repeated in fresh server processes and the median reported.

    python bench/memory.py [--runs 3] [--files 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    Figure,
    ServerSession,
    common_args,
    kernel_file,
    load_line,
    print_table,
    rss_of,
    write_files,
    write_json,
)

TARGET_MB = 150.0


async def one_run(n_files: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="kl-bench-memory-") as tmp:
        root = Path(tmp)
        files = {f"kernels/kernel_{i}.py": kernel_file(i) for i in range(n_files)}
        write_files(root, files)
        async with ServerSession("push", root=root) as s:
            await s.start()
            await s.wait_ready()
            st0 = await s.status()
            before = rss_of(s.pid)
            waits = []
            for rel, text in files.items():
                uri = (root / rel).as_uri()
                waits.append(s.expect_publish(uri, 1))
                s.open(uri, text)
            await asyncio.wait_for(asyncio.gather(*waits), 120)
            st = await s.wait_idle()
            after = rss_of(s.pid)
            if st["pid"] != s.pid:
                raise RuntimeError(f"status pid {st['pid']} is not the spawned process {s.pid}")
            return {
                "idle_status_mb": st0["memoryMB"], "idle_vmrss": before.get("VmRSS", float("nan")),
                "status_mb": st["memoryMB"], "vmrss": after.get("VmRSS", float("nan")),
                "vmhwm": after.get("VmHWM", float("nan")), "open": st["indexed"]["openDocuments"],
                "kernels": st["indexed"]["tritonKernels"] + st["indexed"]["nkiKernels"],
            }


def run(runs: int = 3, n_files: int = 20) -> list[Figure]:
    results = [asyncio.run(one_run(n_files)) for _ in range(runs)]

    def med(key: str) -> float:
        return statistics.median(r[key] for r in results)

    per_run = ", ".join(f"{r['status_mb']:.1f}/{r['vmrss']:.1f}" for r in results)
    return [
        Figure(f"memory: RSS with {n_files} open kernel files (status memoryMB)", med("status_mb"), "MB", TARGET_MB,
               f"median of {runs} server processes; per run status/VmRSS MiB: {per_run}; "
               f"{results[0]['open']} open documents, {results[0]['kernels']} kernels indexed; {load_line()}"),
        Figure(f"memory: RSS with {n_files} open kernel files (/proc VmRSS)", med("vmrss"), "MB", TARGET_MB),
        Figure("memory: peak RSS (/proc VmHWM)", med("vmhwm"), "MB"),
        Figure("context: RSS after initialize + index, before opening (VmRSS)", med("idle_vmrss"), "MB"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="server processes to measure (default 3)")
    parser.add_argument("--files", type=int, default=20, help="kernel files to open (default 20)")
    common_args(parser)
    args = parser.parse_args(argv)
    figures = run(max(args.runs, 1), args.files)
    print_table("Language server memory", figures)
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
