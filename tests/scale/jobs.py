"""Jobs the scale tests run on the cluster's nodes (imported there by path, like the engine's own jobs)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def where(arg: float) -> dict:
    """Sleep `arg` seconds; say which process ran it, when, and which GPUs Ray gave it."""
    started = time.time()
    time.sleep(arg)
    return {"pid": os.getpid(), "start": started, "end": time.time(),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}


def dies_once(folder: str) -> str:
    """The first attempt writes its pid and waits to be killed; the attempt after that answers."""
    marker = Path(folder) / "first-attempt.pid"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(600)
        return "the first attempt was not killed"
    return f"answered by {os.getpid()} after {marker.read_text()} was killed"


def hangs(folder: str) -> None:
    """Writes its pid, then never returns."""
    (Path(folder) / f"hang-{os.getpid()}.pid").write_text(str(os.getpid()))
    while True:
        time.sleep(1)
