"""Which folders the user trusts to run their code: a per-user file outside every workspace.

A workspace folder is untrusted until the user trusts it (the language server's prompt, `kernel-lsp trust PATH`,
`:KernelTrust` in Neovim, or VS Code's own workspace trust). Trust is tied to the folder's real path and covers
what lies below it. Nothing inside a workspace can grant it: the file lives in the user's configuration folder
(`$XDG_CONFIG_HOME/kernel-lsp/trusted.json`, `~/.config/...` by default; `KERNEL_LSP_TRUST_FILE` names another).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

TRUST_FILE_ENV = "KERNEL_LSP_TRUST_FILE"


def trust_file() -> Path:
    named = os.environ.get(TRUST_FILE_ENV)
    if named:
        return Path(named)
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "kernel-lsp" / "trusted.json"


def _real(folder: str | os.PathLike) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(folder)))


def trusted_folders() -> list[str]:
    """The folders in the trust file (an unreadable or malformed file trusts nothing)."""
    try:
        data = json.loads(trust_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    folders = data.get("trusted") if isinstance(data, dict) else None
    return [f for f in folders if isinstance(f, str)] if isinstance(folders, list) else []


def is_trusted(folder: str | os.PathLike) -> bool:
    """Whether `folder`, or a folder above it, is trusted."""
    path = _real(folder)
    for entry in trusted_folders():
        root = _real(entry)
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def _write(folders: list[str]) -> None:
    path = trust_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".trusted-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"trusted": folders}, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def trust(folder: str | os.PathLike) -> str:
    """Trust `folder` (its real path); returns that path."""
    path = _real(folder)
    folders = trusted_folders()
    if path not in (_real(f) for f in folders):
        _write([*folders, path])
    return path


def untrust(folder: str | os.PathLike) -> bool:
    """Remove `folder` from the trusted folders; whether it was there. A folder trusted through a parent stays
    trusted until the parent is removed."""
    path = _real(folder)
    folders = trusted_folders()
    kept = [f for f in folders if _real(f) != path]
    if len(kept) == len(folders):
        return False
    _write(kept)
    return True


__all__ = ["TRUST_FILE_ENV", "is_trusted", "trust", "trust_file", "trusted_folders", "untrust"]
