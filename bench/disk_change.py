"""Files changed on disk: from another tool's write to the diagnostics of the new content.

A workspace holds one kernel module (examples/vector_add.py) and 40 other kernel modules beside it; the file is
not open in the editor. A fresh `kernel-lsp serve` (VS Code 1.65.2 capabilities: problems of closed files are
pushed) indexes the workspace; then the file is rewritten --runs times, alternating between a version with a
typo (`tl.arrange`, TR007) and the correct one, --gap-ms apart. Each figure runs from just before the write
until the client has decoded a publishDiagnostics for that file whose codes match the new content (the
watcher's events, the re-analysis and the cross-file launch checks included).

    python bench/disk_change.py [--runs 20] [--gap-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    Figure,
    ServerSession,
    common_args,
    example_text,
    kernel_file,
    load_line,
    print_table,
    summarize,
    write_files,
    write_json,
)

TARGET_S = 1.0
GOOD = example_text("vector_add.py")
TYPO = GOOD.replace("tl.arange(0, BLOCK_SIZE)", "tl.arrange(0, BLOCK_SIZE)", 1)
assert TYPO != GOOD


async def _published(s: ServerSession, uri: str, since: float, want_typo: bool, timeout: float = 10.0) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for p in s.published.get(uri, []):
            if p.time > since and ("TR007" in p.codes) == want_typo:
                return p.time
        await asyncio.sleep(0.001)
    raise TimeoutError(f"no diagnostics for the {'typo' if want_typo else 'fixed'} version within {timeout} s")


async def measure(runs: int, gap_s: float) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="kl-bench-disk-") as tmp:
        root = Path(tmp) / "workspace"
        write_files(root, {"pkg/watched.py": GOOD, **{f"pkg/other_{i}.py": kernel_file(i) for i in range(40)}})
        path = root / "pkg" / "watched.py"
        uri = path.as_uri()
        async with ServerSession("push", root=root) as s:
            await s.start()
            await s.wait_ready()
            await s.wait_idle()
            out = []
            for i in range(runs):
                typo = i % 2 == 0
                t0 = time.perf_counter()
                path.write_text(TYPO if typo else GOOD)
                out.append(await _published(s, uri, t0, typo) - t0)
                await asyncio.sleep(gap_s)
            return out


def run(runs: int = 20, gap_ms: float = 200) -> list[Figure]:
    times = asyncio.run(measure(runs, gap_ms / 1000))
    st = summarize(times)
    notes = (f"n={st['n']}, min {st['min'] * 1000:.0f} ms, max {st['max'] * 1000:.0f} ms; a closed file rewritten "
             f"by another tool, 41 kernel modules in the workspace; {load_line()}")
    return [
        Figure("disk change -> diagnostics of a closed file, median", st["p50"], "s", TARGET_S, notes),
        Figure("disk change -> diagnostics of a closed file, p95", st["p95"], "s", TARGET_S),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="writes to time (default 20)")
    parser.add_argument("--gap-ms", type=float, default=200, help="pause after each result (default 200)")
    common_args(parser)
    args = parser.parse_args(argv)
    figures = run(max(args.runs, 2), args.gap_ms)
    print_table("Files changed on disk", figures)
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
