"""Per-kernel timing history: `<workspace>/.kernel-lsp/history/<kernel>.json`, a JSON list of measurements, oldest
first, capped so the file stays small. Written atomically; a damaged file reads as empty history."""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import time
from pathlib import Path

MAX_ENTRIES = 200
_LOCK = threading.Lock()


def history_name(path: str | None, kernel: str) -> str:
    """What a kernel's history is filed under: its file's name and the kernel's (two files may each define an
    `add_kernel`)."""
    return f"{Path(path).stem}.{kernel}" if path else kernel


def history_dir(root: str | os.PathLike) -> Path:
    from ..files import PRIVATE_DIR

    return Path(root) / PRIVATE_DIR / "history"


def _file(root: str | os.PathLike, kernel: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", kernel) or "_"
    return history_dir(root) / f"{safe}.json"


def load_history(root: str | os.PathLike, kernel: str) -> list[dict]:
    try:
        data = json.loads(_file(root, kernel).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def record_history(root: str | os.PathLike, kernel: str, entry: dict) -> list[dict]:
    """Append `entry` (stamped with the time) to the kernel's history; returns the history after it."""
    from ..files import ensure_private_dir

    with _LOCK:
        entries = load_history(root, kernel)
        entries.append({"time": time.time(), **entry})
        entries = entries[-MAX_ENTRIES:]
        path = _file(root, kernel)
        try:
            ensure_private_dir(root)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        except OSError:  # a read-only or full workspace: the figures stand without their history
            return entries
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entries, f, indent=1)
            os.replace(tmp, path)
        except BaseException as exc:
            Path(tmp).unlink(missing_ok=True)
            if not isinstance(exc, OSError):
                raise
    return entries
