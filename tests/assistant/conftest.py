"""The assistant's tests: the language server (pytest-lsp) against a fake Messages API on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.conftest import client, start  # noqa: F401 - the server tests' fixtures, reused

from .fake_api import FakeMessagesAPI

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "examples" / "vector_add.py").read_text()
ONE_LAUNCH = "    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size, num_warps=4)\n"
# The example with a wasteful launcher: the kernel runs twice per call, so it is correct and twice as slow.
TWICE = EXAMPLE.replace(ONE_LAUNCH, ONE_LAUNCH + ONE_LAUNCH.replace("\n", "  # once more, to be sure\n"))
assert TWICE != EXAMPLE
KERNEL_LINE = EXAMPLE.splitlines().index("def add_kernel(")
# A recognisable key: it must reach the API's x-api-key header and nowhere else.
KEY = "sk-ant-test-SECRET-7f3c9b2e41d8a6"


@pytest.fixture(params=["vscode"])
def profile(request) -> str:
    return request.param


@pytest.fixture(autouse=True)
def no_ambient_key(monkeypatch):
    """The server inherits this process's environment: a developer's own key must not leak into the tests."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


@pytest.fixture
def fake():
    api = FakeMessagesAPI().start()
    yield api
    api.stop()


def options(fake: FakeMessagesAPI, **extra) -> dict:
    return {"assistantBaseUrl": fake.url, "assistantApiKey": KEY, "checkDevice": "interpreter", "checks": "request",
            "compile": "off", "assistantMaxAttempts": 2, "logLevel": "debug", **extra}
