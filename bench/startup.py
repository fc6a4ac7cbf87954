"""Startup: wall time from spawning `python -m kernel_lsp serve` to the `initialize` response.

Each run spawns a fresh server process, sends `initialize` with VS Code 1.65.2's recorded capabilities and an
empty workspace folder, and stops the clock when the response arrives (the server is then shut down; that is
not timed). The benchmark client (pygls) builds its message encoders before the clock starts, so the
figure holds the server's time plus the pipe, not the Python client's one-time set-up. Every run is timed;
there is no warm-up run, except that one untimed import first writes
kernel_lsp's and analyzers' bytecode cache (__pycache__, git-ignored) as `pip install` does for a regular
install: the server's environment drops PYTHONDONTWRITEBYTECODE, which the project's sandboxes set (with it,
an editable install without __pycache__ compiles kernel_lsp and analyzers from source at every start, about
60 ms more). The OS page cache is warm after the first run, as on any machine that has run Python before.

For context the same number of runs times the bare interpreter (`python -c pass`), `import lsprotocol.types`
(the protocol types every pygls server imports: the floor for any pygls-based server) and the server's imports.

    python bench/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, Figure, ServerSession, common_args, load_line, print_table, summarize, write_json

TARGET_S = 0.5


def cached_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def time_command(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


async def time_server_start(root: Path, env: dict[str, str] | None) -> float:
    session = ServerSession("push", root=root, env=env)
    session.warm_client()  # the benchmark client's own encoder set-up is not the server's startup
    try:
        await session.spawn()
        await session.initialize(send_initialized=False)
        return session.t_initialized - session.t_spawn
    finally:
        await session.stop()


CONTEXT = {
    "bare": [sys.executable, "-c", "pass"],
    "lsprotocol": [sys.executable, "-c", "import lsprotocol.types"],
    "imports": [sys.executable, "-c", "import kernel_lsp.cli, kernel_lsp.server, kernel_lsp.features"],
}


async def rounds(runs: int, env: dict[str, str]) -> dict[str, list[float]]:
    """Each round times one server start and each context command, interleaved so that a burst of load from
    other processes affects them alike."""
    times: dict[str, list[float]] = {"server": [], **{k: [] for k in CONTEXT}}
    with tempfile.TemporaryDirectory(prefix="kl-bench-startup-") as tmp:
        for _ in range(runs):
            times["server"].append(await time_server_start(Path(tmp), env))
            for key, cmd in CONTEXT.items():
                times[key].append(time_command(cmd, env))
    return times


def run(runs: int = 15) -> list[Figure]:
    env = cached_env()
    # Untimed: write the project's bytecode cache (what `pip install` does for a regular install).
    subprocess.run(CONTEXT["imports"], check=True, cwd=REPO, env=env)
    times = asyncio.run(rounds(runs, env))
    srv = summarize(times["server"])
    ctx = {k: summarize(times[k]) for k in CONTEXT}
    own = summarize([a - b for a, b in zip(times["server"], times["lsprotocol"])])
    return [
        Figure("startup: spawn -> initialize response, median", srv["p50"], "s", TARGET_S,
               f"n={srv['n']}, min {srv['min'] * 1000:.0f} ms, max {srv['max'] * 1000:.0f} ms; {load_line()}"),
        Figure("startup: spawn -> initialize response, p95", srv["p95"], "s", TARGET_S),
        Figure("context: python -c pass, median", ctx["bare"]["p50"], "s"),
        Figure("context: python -c 'import lsprotocol.types', median", ctx["lsprotocol"]["p50"], "s", None,
               "the protocol types pygls needs: the floor for any pygls-based server"),
        Figure("context: python -c 'import kernel_lsp.server ...', median", ctx["imports"]["p50"], "s", None,
               "kernel_lsp.cli + server + features: every import done before the server can answer"),
        Figure("context: startup minus the lsprotocol.types process, median", own["p50"], "s", None,
               "per round: what pygls, kernel_lsp and answering initialize add to the floor"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="timed rounds (default 15)")
    common_args(parser)
    args = parser.parse_args(argv)
    figures = run(max(args.runs, 1))
    print_table("Language server startup", figures)
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
