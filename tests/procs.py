"""What the tests read of other processes on Linux (/proc)."""

from __future__ import annotations

from pathlib import Path

from kernel_lsp.engine.proc import cmdline, descendants


def proc_state(pid: int) -> str | None:
    """The process's state letter ("R", "S", "Z" for a zombie, ...); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Running: neither gone nor a zombie."""
    return proc_state(pid) not in (None, "Z")


def running_below(pid: int, marker: str) -> list[int]:
    """The live processes below `pid` whose command line holds `marker`."""
    return [p for p in descendants(pid) if marker in cmdline(p) and alive(p)]
