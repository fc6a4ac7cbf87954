"""The on-disk result cache: restarts, LRU pruning, damaged entries, two processes on one root."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import stat
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from kernel_lsp.engine.cache import MAGIC, ResultCache
from kernel_lsp.engine.compile.jobs import CompileResult, Resources
from tests.engine.jobs_for_tests import consistent_value, hammer_cache, is_consistent

SECRET = b"s" * 32
KEY = "0123456789abcdef" * 4


def test_hit_after_restart_and_counters(tmp_path):
    value = CompileResult(job_key=KEY, ok=True, resources=Resources(registers=40), asm={"ptx": "..."})
    first = ResultCache(tmp_path, 1 << 20, secret=SECRET)
    assert first.get(KEY) is None and first.misses == 1
    assert first.put(KEY, value)
    assert first.get(KEY) == value and first.hits == 1
    assert first.path(KEY) == tmp_path / KEY[:2] / KEY

    restarted = ResultCache(tmp_path, 1 << 20, secret=SECRET)
    assert restarted.get(KEY) == value
    assert restarted.put("kernel.py:add sm_90", 1) and restarted.get("kernel.py:add sm_90") == 1  # any str key
    assert restarted.stats()["hits"] == 2 and restarted.stats()["misses"] == 0


def test_user_key_is_shared_and_foreign_entries_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    ResultCache(tmp_path / "c", 1 << 20).put(KEY, "mine")
    assert ResultCache(tmp_path / "c", 1 << 20).get(KEY) == "mine"  # same user key after a restart
    key_file = tmp_path / "xdg" / "kernel-lsp" / "cache-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    # An entry planted in the workspace by someone else (another key) is never unpickled.
    stranger = ResultCache(tmp_path / "c", 1 << 20, secret=b"x" * 32)
    assert stranger.get(KEY) is None and stranger.corrupt == 1
    assert not stranger.path(KEY).exists()


def test_workspace_cache_is_gitignored_and_created_only_when_used(tmp_path):
    cache = ResultCache.for_workspace(tmp_path, secret=SECRET)
    assert cache.root == tmp_path / ".kernel-lsp" / "cache"
    assert cache.get(KEY) is None and not (tmp_path / ".kernel-lsp").exists()
    cache.put(KEY, 1)
    assert (tmp_path / ".kernel-lsp" / ".gitignore").read_text() == "*\n"


def test_prunes_least_recently_used_when_over_size(tmp_path):
    cache = ResultCache(tmp_path, 35_000, secret=SECRET)
    keys = {name: name * 32 for name in "abcd"}  # "aaaa...", "bbbb...": valid hex keys
    for name in "abc":
        assert cache.put(keys[name], name * 10_000)  # ~10 KB each, three fit
    now = time.time()
    for age, name in [(300, "a"), (200, "b"), (100, "c")]:  # written long ago, "a" first
        os.utime(cache.path(keys[name]), (now - age, now - age))
    assert cache.get(keys["a"]) == "a" * 10_000  # "a" is used again: "b" is now the least recently used
    assert cache.put(keys["d"], "d" * 10_000)  # over 35 KB: prune down to 90%
    assert cache.evictions == 1 and not cache.path(keys["b"]).exists()
    assert [cache.get(keys[n]) is not None for n in "acd"] == [True, True, True]
    assert not cache.put("e" * 32, "e" * 40_000)  # bigger than the whole cache: not stored
    # A fresh instance counts what is on disk, other processes' entries included, before pruning.
    other = ResultCache(tmp_path, 35_000, secret=SECRET)
    other.put("f" * 32, "f" * 10_000)
    assert other.evictions == 1 and sum(1 for _ in tmp_path.glob("??/*")) == 3


@dataclass
class Gone:
    x: int


def test_damaged_entries_are_misses_and_are_deleted(tmp_path):
    cache = ResultCache(tmp_path, 1 << 20, secret=SECRET)
    path = cache.path(KEY)

    cache.put(KEY, {"big": "x" * 5000})
    path.write_bytes(path.read_bytes()[:2000])  # truncated: a crash mid-copy, a full disk
    assert cache.get(KEY) is None and not path.exists()

    cache.put(KEY, 1)
    path.write_bytes(b"\0garbage")
    assert cache.get(KEY) is None and not path.exists()

    # Signed but unloadable: the value's class no longer exists in this version of the code.
    payload = pickle.dumps(Gone(1)).replace(b"Gone", b"Lost")
    path.write_bytes(MAGIC + cache._mac(KEY, payload) + payload)
    assert cache.get(KEY) is None and not path.exists()

    assert cache.corrupt == 3 and cache.misses == 3 and cache.hits == 0
    assert cache.put(KEY, 2) and cache.get(KEY) == 2  # usable again


def test_two_processes_writing_one_key_never_expose_a_torn_entry(tmp_path):
    reader = ResultCache(tmp_path, 1 << 30, secret=SECRET)
    key = "ab" * 16
    seen = 0
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as executor:
        writers = [executor.submit(hammer_cache, (str(tmp_path), SECRET, w, 150)) for w in (1, 2)]
        while not all(w.done() for w in writers):
            value = reader.get(key)
            if value is not None:
                assert is_consistent(value)
                seen += 1
        assert [w.result() for w in writers] == [0, 0]  # the writers never read a damaged entry either
    assert reader.corrupt == 0 and seen > 0
    assert reader.get(key) in (consistent_value(1, 149), consistent_value(2, 149))
    assert not list(tmp_path.glob("**/.*.tmp"))  # every temporary file was renamed into place
