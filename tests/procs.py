"""What the tests read of other processes on Linux (/proc)."""

from __future__ import annotations

from pathlib import Path


def proc_state(pid: int) -> str | None:
    """The process's state letter ("R", "S", "Z" for a zombie, ...); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
