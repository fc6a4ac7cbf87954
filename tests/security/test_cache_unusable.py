"""A cache folder that cannot be written (a file in its place, a read-only or full disk) turns caching off with one
information message; compiling goes on (no KC006 on every compile)."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp.engine.cache import ResultCache, unwritable
from tests.slow import scaled

ROOT = Path(__file__).resolve().parents[2]


def blocked_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(ROOT / "examples" / "vector_add.py", ws / "vector_add.py")
    (ws / ".kernel-lsp").write_text("a file where the cache folder would be\n")  # as unwritable as it gets as root
    return ws


def test_the_result_cache_turns_off_once(tmp_path, caplog):
    (tmp_path / "blocked").write_text("")
    cache = ResultCache(tmp_path / "blocked" / "cache", 1 << 20, secret=b"k" * 32)
    assert unwritable(cache.root) is not None
    with caplog.at_level(logging.INFO, logger="kernel_lsp.engine.cache"):
        assert cache.put("a" * 64, 1) is False
        assert cache.put("b" * 64, 2) is False
    assert cache.off and [r.levelno for r in caplog.records] == [logging.INFO]
    assert cache.get("a" * 64) is None and cache.stats()["off"] == cache.off


def test_check_with_target_compiles_without_the_cache_and_says_so_once(tmp_path):
    pytest.importorskip("triton")
    ws = blocked_workspace(tmp_path)
    done = subprocess.run([sys.executable, "-P", "-m", "kernel_lsp", "check", "vector_add.py", "--target",
                           "sm_90,sm_80", "--format", "json"], cwd=ws, capture_output=True, text=True,
                          timeout=scaled(300), check=False)
    report = json.loads(done.stdout)
    assert [p for p in report["problems"] if p["code"] == "KC006"] == [], report["problems"]
    assert report["compile"] and all(c["ok"] for c in report["compile"]), report["compile"]
    assert done.stderr.count("caching is off") == 1, done.stderr


def test_a_worker_whose_cache_fails_compiles_in_a_folder_of_its_own(tmp_path, monkeypatch):
    """The disk refusing triton's cache after the start (the parent's probe passed): the compile is tried again
    in the worker's own temporary folder instead of failing."""
    pytest.importorskip("triton")
    from kernel_lsp.api import Workspace
    from kernel_lsp.engine.compile import service

    ws = blocked_workspace(tmp_path)
    monkeypatch.setattr(service, "unwritable", lambda folder: None)
    with Workspace(ws, allow_run=False) as workspace:
        found = workspace.compile(path="vector_add.py", targets=["sm_90"])
    assert [f for f in found.findings if f.code == "KC006"] == [], found.findings
    assert found.configs and all(c.ok for c in found.configs)
