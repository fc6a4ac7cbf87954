"""Tests marked `gpu` run where a CUDA device is present and are skipped, saying why, everywhere else. The suite's
workspaces are its own: they are trusted (tests/server/test_trust.py runs servers without this). Under pytest-xdist
(`make test` runs two workers), tests that share a set-up run on one worker, the longest units first."""

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


# Folders whose tests share session-scoped set-ups of their own (tests/scale: Ray clusters and the local reference
# report): under pytest-xdist they run on one worker, as one unit of work, so that each set-up is made once.
SHARED_FOLDERS = ("tests/scale/",)


def work_unit(nodeid: str) -> str:
    """The unit of work a pytest-xdist worker takes whole: a test's module (its module-scoped fixtures are made
    once), or the folder of SHARED_FOLDERS it is in."""
    path = nodeid.split("::")[0]
    return next((folder for folder in SHARED_FOLDERS if path.startswith(folder)), path)


def _hang_seconds(item) -> float:
    mark = item.get_closest_marker("timeout")
    value = (mark.kwargs.get("timeout", mark.args[0] if mark.args else 0) if mark is not None
             else item.config.getini("timeout"))
    return float(value or 0)


def _longest_units_first(items) -> None:
    """Orders the work so that the units with the longest hang limits (the long tests, by their authors' own
    account) start first: the workers then finish close together instead of one waiting on a late long module.
    Stable: within a unit, and among equals, the collection order stays."""
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(work_unit(item.nodeid), []).append(item)
    ordered = sorted(units.values(), key=lambda unit: -max(_hang_seconds(i) for i in unit))
    items[:] = [item for unit in ordered for item in unit]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n N --dist loadscope` (make test): a module, or a whole shared folder, goes to one worker; the units in
    the workers' collection order (longest first), not xdist's reordering by test count."""
    if config.getoption("dist", None) != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return SharedSetups(config, log)


def pytest_collection_modifyitems(config, items) -> None:
    _stretch_hang_limits(config, items)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every worker orders its collection the same way
        _longest_units_first(items)
    gpu_tests = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_tests or _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu_tests:
        item.add_marker(skip)
