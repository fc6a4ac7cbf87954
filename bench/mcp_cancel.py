"""How fast a cancelled call lets go, as an agent harness sees it: the MCP SDK's client over stdio.

    python bench/mcp_cancel.py [--runs N]

- check: a `check` of vector_add whose launcher spins (the check's own limit is a minute away) is cancelled once
  its checking process runs: the seconds until that process is gone, and until the next `check` (one slot,
  `--max-parallel 1`) has its answer, beside the same check's time with nothing before it.
- batch: four spinning candidates submitted as one batch (`--max-parallel 2`, `timeout_s` an hour), cancelled
  with `cancel_batch` once two run: the seconds until both checking processes are gone.

Prints each run's figures and their median. Exits 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import EXAMPLES, REPO, machine_line

sys.path.insert(0, str(REPO))
from tests.mcp.conftest import mcp_session, structured
from tests.mcp.test_robustness import RUNNER, _server_pid, spinning
from tests.procs import running_below


async def until(predicate) -> None:
    while not predicate():
        await anyio.sleep(0.01)


async def cancelled_check(root: Path) -> tuple[float, float, float]:
    marker = root.parent / "spinning"
    marker.unlink(missing_ok=True)
    async with mcp_session(root, "--allow-run", "--max-parallel", "1") as session:
        server = _server_pid()
        start = time.monotonic()
        structured(await session.call_tool("check", {"path": "vector_add.py"}))
        plain = time.monotonic() - start  # the same check with nothing before it: what the next one should take
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call_tool, "check", {"source": spinning(marker)})
            await until(lambda: marker.exists() and running_below(server, RUNNER))
            start = time.monotonic()
            tg.cancel_scope.cancel()
        await until(lambda: not running_below(server, RUNNER))
        gone = time.monotonic() - start
        structured(await session.call_tool("check", {"path": "vector_add.py"}))
        return gone, time.monotonic() - start, plain


async def cancelled_batch(root: Path) -> float:
    markers = [root.parent / f"spinning{i}" for i in range(4)]
    for m in markers:
        m.unlink(missing_ok=True)
    candidates = [{"name": f"spin{i}", "source": spinning(m), "timeout_s": 3600} for i, m in enumerate(markers)]
    async with mcp_session(root, "--allow-run", "--max-parallel", "2") as session:
        server = _server_pid()
        batch = structured(await session.call_tool("submit", {"candidates": candidates}))["batch"]
        await until(lambda: len(running_below(server, RUNNER)) == 2)
        start = time.monotonic()
        await session.call_tool("cancel_batch", {"batch": batch})
        await until(lambda: not running_below(server, RUNNER))
        return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        (root / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text(encoding="utf-8"))
        gone, answered, batch, plain = [], [], [], []
        for i in range(args.runs):
            g, a, p = anyio.run(cancelled_check, root)
            plain.append(p)
            b = anyio.run(cancelled_batch, root)
            gone.append(g)
            answered.append(a)
            batch.append(b)
            print(f"run {i + 1}: check process gone {g:.3f} s after cancel, next check answered {a:.1f} s after "
                  f"(the same check alone: {p:.1f} s); batch's checks gone {b:.3f} s after cancel_batch")
    print(f"median: process gone {statistics.median(gone):.3f} s, next check {statistics.median(answered):.1f} s "
          f"(alone {statistics.median(plain):.1f} s), batch {statistics.median(batch):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
