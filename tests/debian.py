"""Debian packages that tests drive (a real Chromium, a real Emacs): installed with apt-get when missing and this
user may, so that CI on a fresh Debian machine runs those tests instead of skipping them."""

from __future__ import annotations

import os
import shutil
import subprocess


def ensure(program: str, packages: list[str]) -> tuple[str | None, str]:
    """The path of `program`, installing `packages` first where it is missing; else None and why not."""
    found = shutil.which(program)
    if found:
        return found, ""
    if not shutil.which("apt-get"):
        return None, f"{program} is not installed and there is no apt-get to install it ({' '.join(packages)})"
    if os.geteuid() != 0:
        return None, f"{program} is not installed; installing it needs root: apt-get install {' '.join(packages)}"
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
