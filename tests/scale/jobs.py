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


def stand_in_us(overrides: dict) -> float:
    """A made-up, deterministic "true" time of a tiling configuration, in microseconds: best at BLOCK_SIZE=512,
    num_warps=8, num_stages=3."""
    block = overrides.get("BLOCK_SIZE", 512)
    return (100.0 * (1 + 0.3 * abs(block.bit_length() - 10)) * (1 + abs(overrides.get("num_warps", 8) - 8) / 8)
            * (1 + 0.05 * abs(overrides.get("num_stages", 3) - 3)))


def stand_in_timing(job: dict) -> dict:
    """In place of the engine's timing job, on a CPU: each point's `stand_in_us` times this node's slowdown
    (`KLSP_TEST_SLOWDOWN` in the node's environment), in the answer format of `cluster.time_on_node`."""
    slowdown = float(os.environ.get("KLSP_TEST_SLOWDOWN", "1"))
    # A timing takes a while, so the round's tasks overlap. At 0.2 s, once on a busy machine, every task of a
    # search ran on the head, one after another: Ray places a task by the head's view of the other node's free
    # GPU, which lags behind it.
    time.sleep(2.0)
    return {"us": [stand_in_us(p["overrides"]) * slowdown for p in job["points"]],
            "errors": [None] * len(job["points"]), "device": f"stand-in GPU (x{slowdown:g})", "error": None}
