"""Ahead-of-time compilation of Triton kernels for the user's GPU targets, in worker processes, cached on disk."""

import importlib.util


def triton_installed() -> bool:
    """Whether the workers can import triton, found without importing it (the server never does)."""
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False
