"""Tests marked `gpu` run where a CUDA device is present and are skipped, saying why, everywhere else. The suite's
workspaces are its own: they are trusted (tests/server/test_trust.py runs servers without this)."""

from __future__ import annotations

import json
import os

import pytest

from kernel_lsp.engine.trust import TRUST_FILE_ENV
from tests.slow import hang_limit


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


def _stretch_hang_limits(config, items) -> None:
    """Each test's pytest-timeout limit (its `timeout` mark, else --timeout or the ini's) stretched with
    KERNEL_LSP_TEST_TIME_SCALE, so that one variable gives a slow machine time everywhere."""
    if hang_limit(1.0) == 1.0:
        return
    default = config.getoption("timeout", None) or config.getini("timeout")
    for item in items:
        mark = item.get_closest_marker("timeout")
        kwargs = dict(mark.kwargs) if mark is not None else {}
        seconds = kwargs.pop("timeout", mark.args[0] if mark is not None and mark.args else default)
        if seconds and float(seconds) > 0:
            # Put first, so that it is the closest `timeout` mark of the test, before its own.
            item.add_marker(pytest.mark.timeout(hang_limit(float(seconds)), **kwargs), append=False)


def pytest_collection_modifyitems(config, items) -> None:
    _stretch_hang_limits(config, items)
    gpu_tests = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_tests or _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu_tests:
        item.add_marker(skip)
