"""The command that adds a package to the Python environment kernel-lsp runs in, as the user installed it: a pipx
or `uv tool` environment has no pip of the user's own, so `pip install triton` would go elsewhere (or nowhere).
Layer neutral: the CLI's and the server's messages both name it."""

from __future__ import annotations

import json
import os
import shlex
import sys


def _source() -> str:
    """Where kernel-lsp was installed from (its folder or URL, PEP 610's direct_url.json), for a reinstall."""
    from importlib import metadata

    try:
        raw = metadata.distribution("kernel-lsp").read_text("direct_url.json")
        url = json.loads(raw or "{}").get("url", "")
    except (metadata.PackageNotFoundError, ValueError, OSError):
        url = ""
    if url.startswith("file://"):
        return url[len("file://"):]
    return url or "<the kernel-lsp folder or URL you installed from>"


def add_command(requirement: str, prefix: str | None = None) -> str:
    """`pipx inject kernel-lsp triton`, `uv tool install --reinstall --with triton SOURCE`, or this interpreter's
    `python -m pip install triton`."""
    where = (prefix or sys.prefix).replace(os.sep, "/")
    quoted = shlex.quote(requirement)
    if "/pipx/venvs/" in where:
        return f"pipx inject {where.rstrip('/').rsplit('/', 1)[-1]} {quoted}"
    if "/uv/tools/" in where:
        return f"uv tool install --reinstall --with {quoted} {shlex.quote(_source())}"
    return f"{shlex.quote(sys.executable)} -m pip install {quoted}"
