"""Tests marked `gpu` run where a CUDA device is present and are skipped, saying why, everywhere else. The suite's
workspaces are its own: they are trusted (tests/server/test_trust.py runs servers without this)."""

from __future__ import annotations

import json
import os

import pytest

from kernel_lsp.engine.trust import TRUST_FILE_ENV


@pytest.fixture(autouse=True, scope="session")
def _trusted_workspaces(tmp_path_factory):
    """Every server and worker the tests start inherits a trust file that trusts every folder, never the
    developer's own (~/.config/kernel-lsp/trusted.json)."""
    path = tmp_path_factory.mktemp("trust") / "trusted.json"
    path.write_text(json.dumps({"trusted": ["/"]}))
    saved = os.environ.get(TRUST_FILE_ENV)
    os.environ[TRUST_FILE_ENV] = str(path)
    yield path
    if saved is None:
        os.environ.pop(TRUST_FILE_ENV, None)
    else:
        os.environ[TRUST_FILE_ENV] = saved


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
