"""`kernel-lsp record -- CMD`: run the user's own command with the launch recorder loaded into every Python process
it starts, then merge what they saw into the workspace's record.

The command runs as the user typed it (same working directory, terminal, environment), with two additions: the
recorder's folder first on PYTHONPATH (its sitecustomize.py starts the recorder, then runs the environment's own
sitecustomize) and KERNEL_LSP_RECORD_DIR, where each process writes what it saw when it exits. It is the user
running their own code, so no trust is asked for.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import store

BOOT_DIR = Path(__file__).parent / "boot"


@dataclass
class Outcome:
    exit_code: int
    wall_s: float
    path: Path
    summary: dict[str, Any]
    bytes: int


def _shards(folder: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted(folder.glob("shard-*.json")):
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and data.get("format") == "kernel-lsp-launch-shard-1":
            out.append(data)
    return out


def record(command: list[str], root: str | Path, *, max_per_kernel: int = store.DEFAULT_MAX_PER_KERNEL,
           max_bytes: int = store.DEFAULT_MAX_BYTES, fresh: bool = False) -> Outcome:
    """Run `command` in the current directory with recording on; merge into `<root>/.kernel-lsp/launches.json`.
    Raises OSError when the command cannot be started (not found) and store.StoreError for an unreadable old
    record (unless `fresh`)."""
    root = Path(root).resolve()
    path = store.store_path(root)
    previous = None
    if not fresh and path.exists():
        store.load(root)  # raises StoreError for a record this version cannot extend
        previous = json.loads(path.read_text(encoding="utf-8"))
    started = _dt.datetime.now(_dt.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="kernel-lsp-record-") as tmp:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(BOOT_DIR), *filter(None, [env.get("PYTHONPATH")])])
        env["KERNEL_LSP_RECORD_DIR"] = tmp
        env["KERNEL_LSP_RECORD_MAX_PER_KERNEL"] = str(max_per_kernel)
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, env=env)
        try:
            code = proc.wait()
        except KeyboardInterrupt:  # the child got the Ctrl-C too: let it finish writing, keep what it saw
            code = proc.wait()
        wall = time.perf_counter() - t0
        shards = _shards(Path(tmp))
    run = {"id": started.strftime("%Y%m%dT%H%M%S.%fZ"), "command": shlex.join(command),
           "cwd": os.getcwd(), "started": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
           "exit_code": code, "wall_s": round(wall, 3),
           "triton": sorted({s["triton"] for s in shards if s.get("triton")})}
    data, summary = store.merge(previous, run, shards, root, max_per_kernel=max_per_kernel, max_bytes=max_bytes)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, separators=(",", ":"))
    tmp_path = path.with_suffix(".json.tmp")
    tmp_path.write_text(text, encoding="utf-8")
    os.replace(tmp_path, path)
    return Outcome(code, wall, path, summary, len(text.encode()))


def describe(outcome: Outcome, root: Path) -> list[str]:
    """What the user is told after a record run (stderr)."""
    s = outcome.summary
    rel = store.relative(root, outcome.path) or str(outcome.path)
    lines = []
    if not s["processes"]:
        lines.append("kernel-lsp record: no Python process of the command loaded the recorder (a Python started "
                     "with -E, -I or -S ignores PYTHONPATH and sitecustomize); nothing was recorded")
        return lines
    if s["kernels"] == 0:
        lines.append(f"kernel-lsp record: {s['processes']} Python process(es) ran, no Triton kernel of this "
                     "workspace was launched" + (" (triton was never imported)" if not s["triton"] else ""))
    else:
        lines.append(f"kernel-lsp record: {s['launches']} launches of {s['kernels']} kernel(s), "
                     f"{s['distinct']} distinct, written to {rel} ({outcome.bytes / 1024:.0f} KiB) in "
                     f"{outcome.wall_s:.1f} s; triton {', '.join(s['triton']) or '?'}")
    if s["outside"]:
        lines.append(f"  not kept: launches of {len(s['outside'])} kernel(s) outside the workspace "
                     f"(e.g. {next(iter(s['outside']))})")
    if s["trimmed"]:
        lines.append(f"  {s['trimmed']} launches left out to keep the record under its size cap")
    if s["triton"] and not {"JITFunction.run", "InterpretedFunction.run"} & set(s["patched"]):
        lines.append("  this triton's launch methods were not found: launches cannot be recorded with it")
    if s["errors"]:
        lines.append(f"  the recorder could not describe some launches: {s['errors']}")
    return lines
