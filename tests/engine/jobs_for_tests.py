"""Functions the pool and cache tests run in worker processes (importable there as tests.engine.jobs_for_tests)."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

_initialized = False


def init() -> None:
    global _initialized
    _initialized = True


def describe(_: object) -> dict:
    return {
        "pid": os.getpid(),
        "initialized": _initialized,
        "var": os.environ.get("KERNEL_LSP_TEST_VAR"),
        "gone": os.environ.get("KERNEL_LSP_TEST_GONE"),
    }


def echo(arg: object) -> object:
    return arg


def niceness(_: object) -> int:
    return os.nice(0)


def getpid(_: object) -> int:
    return os.getpid()


def fail(message: str) -> None:
    raise ValueError(message)


def unpicklable(_: object) -> object:
    return lambda: None


def sleep(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def write_pid_and_sleep(path: str) -> None:
    """Tell the test which process runs this job (it is about to be killed), then hang."""
    Path(path + ".tmp").write_text(str(os.getpid()))
    os.replace(path + ".tmp", path)
    time.sleep(60)


def wait_for_file(path: str) -> str:
    """Block the worker until the test creates `path`: a blocker whose end the test controls."""
    deadline = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return "released"


def append_line(args: tuple[str, str]) -> str:
    path, label = args
    with open(path, "a") as fh:
        fh.write(label + "\n")
    return label


def exit_code(code: int) -> None:
    os._exit(code)


def segfault(_: object) -> None:
    ctypes.string_at(0)


def hog_memory(_: object) -> int:
    """Grow by 64 MiB steps, as a runaway compile would, until the address-space limit stops it."""
    chunks = []
    for _ in range(256):  # 16 GiB: far above any limit the tests set
        chunks.append(bytearray(64 * 2**20))
    return len(chunks)


def hammer_cache(args: tuple[str, bytes, int, int]) -> int:
    """Write one key over and over with values a reader can check for integrity; read it back meanwhile."""
    from kernel_lsp.engine.cache import ResultCache

    root, secret, writer, rounds = args
    cache = ResultCache(Path(root), 1 << 30, secret=secret)
    for i in range(rounds):
        cache.put("ab" * 16, consistent_value(writer, i))
        value = cache.get("ab" * 16)
        assert value is not None and is_consistent(value), "corrupted read"
    return cache.corrupt


def consistent_value(writer: int, i: int) -> tuple[int, int, bytes]:
    return (writer, i, bytes([(writer * 31 + i) % 256]) * 300_000)


def is_consistent(value: tuple[int, int, bytes]) -> bool:
    writer, i, blob = value
    return blob == consistent_value(writer, i)[2]


def broken_init() -> None:
    raise ImportError("triton is not installed")
