"""Tests marked `gpu` run where a CUDA device is present and are skipped, saying why, everywhere else."""

from __future__ import annotations

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items) -> None:
    gpu_tests = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_tests or _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu_tests:
        item.add_marker(skip)
