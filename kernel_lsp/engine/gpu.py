"""Whether this machine has a GPU to run kernels on, known without importing torch (which costs ~1 s)."""

from __future__ import annotations

import os
import shutil


def gpu_present() -> bool:
    """An NVIDIA driver's device node or nvidia-smi, or AMD's compute device node."""
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd") or shutil.which("nvidia-smi") is not None


def runs_on_gpu(check_device: str) -> bool:
    """Where work for the `checkDevice` setting runs: "cuda", or "auto" on a machine with a GPU."""
    return check_device == "cuda" or (check_device == "auto" and gpu_present())
