"""An MCP client session with `kernel-lsp mcp` over stdio, through the SDK's own client."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def server_env(trust_file: Path) -> dict[str, str]:
    """The environment a client gives the server: this checkout first on the path, a trust file of the test's own."""
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
           "KERNEL_LSP_TRUST_FILE": str(trust_file)}
    for name in ("XDG_CACHE_HOME", "TMPDIR", "TRITON_CACHE_DIR"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


@contextlib.asynccontextmanager
async def mcp_session(root: Path, *extra: str, env: dict[str, str] | None = None):
    params = StdioServerParameters(command=sys.executable, args=["-P", "-m", "kernel_lsp", "mcp", "--root", str(root),
                                                                 *extra],
                                   env={**server_env(root.parent / "trusted.json"), **(env or {})})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def structured(result) -> dict:
    """A successful tool result's structured content (the output schema's object)."""
    assert not result.is_error, result.content[0].text if result.content else result
    assert result.structured_content is not None
    return result.structured_content


def error_text(result) -> str:
    assert result.is_error, f"expected an error, got {result.structured_content}"
    return " ".join(getattr(c, "text", "") for c in result.content)


def resource_json(result) -> object:
    return json.loads(result.contents[0].text)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace folder with a copy of the examples (the tests write proposals and caches into it)."""
    root = tmp_path / "ws"
    root.mkdir()
    for name in ("vector_add.py", "buggy_kernels.py"):
        (root / name).write_text((EXAMPLES / name).read_text(encoding="utf-8"), encoding="utf-8")
    return root
