"""Tool-call latency of `kernel-lsp mcp` as an agent sees it: the MCP SDK's client over stdio, round trip per call.

    python bench/mcp_tools.py [--runs N]

- analyze: a 500-line file of Triton kernels (examples concatenated into one module), by path and unchanged
  between calls (an agent re-reading a file), and as a source with one line changed per call (an agent editing it);
  target < 50 ms.
- compile (cached): vector_add for sm_90 after a first, cold compile of the same text; target < 100 ms.

Prints median and p95 per tool over N calls (after one warm-up call). Exits 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import EXAMPLES, REPO, machine_line, percentile

sys.path.insert(0, str(REPO))
from tests.mcp.conftest import mcp_session, structured


def five_hundred_lines() -> str:
    """Examples one after another until the module has at least 500 lines (names stay as they are: one module)."""
    parts, lines = [], 0
    for name in ("fused_softmax.py", "layernorm.py", "matmul_autotune.py", "buggy_kernels.py", "vector_add.py"):
        text = (EXAMPLES / name).read_text(encoding="utf-8")
        parts.append(text)
        lines += text.count("\n")
        if lines >= 500:
            break
    return "\n".join(parts)


async def timed(session, tool: str, args, runs: int) -> list[float]:
    """`args`: the call's arguments, or a function of the call's number that gives them."""
    def args_of(i: int) -> dict:
        return args(i) if callable(args) else args

    structured(await session.call_tool(tool, args_of(-1)))  # warm-up
    out = []
    for i in range(runs):
        call_args = args_of(i)
        start = time.perf_counter()
        structured(await session.call_tool(tool, call_args))
        out.append((time.perf_counter() - start) * 1000)
    return out


def edited(text: str, i: int) -> str:
    """`text` with one line changed (a comment inside the last kernel's body: the rules have to run again)."""
    lines = text.splitlines(keepends=True)
    at = max(i for i, line in enumerate(lines) if line.startswith("    ") and line.strip())
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    return "".join(lines[:at] + [f"{indent}# edit {i}\n"] + lines[at:])


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        big = five_hundred_lines()
        (root / "kernels.py").write_text(big, encoding="utf-8")
        (root / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text(encoding="utf-8"), encoding="utf-8")
        async with mcp_session(root) as session:
            print(machine_line(), f"load average {os.getloadavg()[0]:.1f}")
            start = time.perf_counter()
            cold = structured(await session.call_tool("compile", {"path": "vector_add.py", "targets": ["sm_90"]}))
            print(f"compile cold (worker start + triton import + compile): {(time.perf_counter() - start) * 1000:.0f} ms,"
                  f" ok={cold['configs'][0]['ok']}")
            for label, tool, args, target in [
                ("analyze a one-line source (the protocol's own cost)", "analyze", {"source": "x = 1\n"}, 50),
                (f"analyze {big.count(chr(10))}-line file, unchanged", "analyze", {"path": "kernels.py"}, 50),
                (f"analyze {big.count(chr(10))}-line source, one line changed per call", "analyze",
                 lambda i: {"source": edited(big, i)}, 50),
                ("compile cached (sm_90)", "compile", {"path": "vector_add.py", "targets": ["sm_90"]}, 100),
            ]:
                ms = await timed(session, tool, args, runs)
                p95 = percentile(ms, 95)
                print(f"{label}: median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms over {runs} calls "
                      f"(target < {target} ms: {'PASS' if p95 < target else 'FAIL'})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(main(parser.parse_args().runs))
