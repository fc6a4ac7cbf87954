"""Workspace commands: `kernel-lsp.status` and `kernel-lsp.reindex`."""

from __future__ import annotations

import os
import resource
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..commands import REINDEX, STATUS, TRUST
from ..engine.gpu import runs_on_gpu
from .lifecycle import confirm_trust, workspace_trusted

if TYPE_CHECKING:
    from ..server import KernelLanguageServer


def rss_mb() -> float:
    """Resident memory of this process now (Linux), else its peak."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return round(peak / (2**20 if os.uname().sysname == "Darwin" else 2**10), 1)


def status(ls: "KernelLanguageServer") -> dict[str, Any]:
    state = ls.state
    watcher = state.watcher
    return {
        "version": __version__,
        "roots": state.roots,
        "trusted": workspace_trusted(ls),
        "indexed": state.index.stats(),
        "ready": state.ready,
        "indexing": state.indexing,
        "queued": state.scheduler.queued,
        "completedJobs": state.scheduler.completed,
        "supersededJobs": state.scheduler.superseded,
        "staleResultsDropped": state.stale_dropped,
        "diagnostics": "pull" if state.pull else "push",
        "watchedFolders": len(watcher.watched_folders) if watcher else 0,
        "compile": {
            "mode": state.settings.compile, "targets": list(state.settings.targets),
            "filesCompiled": len(ls.compiles.compiled), "staleDropped": ls.compiles.stale_dropped,
            **ls.compiles.counts(),
        },
        "mode": "gpu" if runs_on_gpu(state.settings.check_device) else "cpu",
        "checks": {"when": state.settings.checks, "device": state.settings.check_device, "run": ls.checks.count,
                   "running": len(ls.checks.running),
                   **({"executor": ls.checks.executor.stats()} if ls.checks.executor is not None else {})},
        "memoryMB": rss_mb(),
        "pid": os.getpid(),
    }


def register(server: "KernelLanguageServer") -> None:
    @server.command(STATUS)
    def status_command(ls, *args) -> dict[str, Any]:
        return status(ls)

    @server.command(TRUST)
    async def trust_command(ls, *args) -> dict[str, Any]:
        if not ls.state.roots:
            return {"error": "there is no workspace folder to trust"}
        trusted = await confirm_trust(ls)
        if trusted is None:
            return {"trusted": [], "error": "the workspace was not trusted: the question was not answered with "
                    "Trust (`kernel-lsp trust PATH` in a shell trusts a folder)"}
        return {"trusted": trusted}

    @server.command(REINDEX)
    async def reindex_command(ls, *args) -> dict[str, Any]:
        for path in [p for p in ls.state.index.files if ls.open_document(p) is None]:
            ls.state.index.remove(path)
        await ls.index_workspace()
        return status(ls)
