"""Debian packages that tests drive (a real Chromium, a real Emacs): installed with apt-get when missing and this
user may, so that CI on a fresh Debian machine runs those tests instead of skipping them."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def ensure(program: str, packages: list[str]) -> tuple[str | None, str]:
    """The path of `program`, installing `packages` first where it is missing; else None and why not.
    pytest-xdist workers may ask at once (Chromium on one, Emacs on another): apt-get holds dpkg's lock, so a second
    install would fail at once. They take turns on one lock file and look again once it is theirs."""
    found = shutil.which(program)
    if found:
        return found, ""
    if not shutil.which("apt-get"):
        return None, f"{program} is not installed and there is no apt-get to install it ({' '.join(packages)})"
    if os.geteuid() != 0:
        return None, f"{program} is not installed; installing it needs root: apt-get install {' '.join(packages)}"
    with open(Path(tempfile.gettempdir()) / "kernel-lsp-tests-apt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = shutil.which(program)
        if found:
            return found, ""
        return _install(program, packages)


def _install(program: str, packages: list[str]) -> tuple[str | None, str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                                                *packages]):
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env, check=False)
        except subprocess.TimeoutExpired:
            return None, f"`{' '.join(cmd)}` did not finish within 20 minutes"
        if done.returncode != 0:
            return None, f"{program} is not installed and `{' '.join(cmd)}` failed: {done.stderr.strip()[-300:]}"
    found = shutil.which(program)
    return found, "" if found else f"{program} is still missing after apt-get install {' '.join(packages)}"
