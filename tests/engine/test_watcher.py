"""WorkspaceWatcher on its own, on a real folder: which changes it reports, coalesced, and which folders it never
watches. Each case is a set of file operations and the (path, kind) changes they must produce."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from kernel_lsp.engine.watcher import CHANGED, DELETED, DELETED_DIR, WorkspaceWatcher
from tests.slow import scaled

EXCLUDE = (".git", ".venv", "build", "__pycache__")


class Changes:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.arrived = asyncio.Event()

    def __call__(self, changes: list[tuple[str, str]]) -> None:
        self.seen.extend(changes)
        self.arrived.set()

    async def until(self, expected: set[tuple[str, str]]) -> None:
        async def wait() -> None:
            while not expected <= set(self.seen):
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(wait(), scaled(20))


@pytest.fixture
async def workspace(tmp_path):
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "old.py").write_text("x = 1\n")
    (root / ".git").mkdir()
    (root / "build").mkdir()
    changes = Changes()
    watcher = WorkspaceWatcher([str(root)], EXCLUDE, changes, asyncio.get_running_loop())
    watcher.start()
    yield root, watcher, changes
    watcher.stop()


def rel(root: Path, changes: list[tuple[str, str]]) -> set[tuple[str, str]]:
    return {(os.path.relpath(p, root), kind) for p, kind in changes}


# (case, operation on the workspace root, the changes expected, relative paths)
CASES = [
    ("a new source file", lambda r: (r / "new.py").write_text("y = 2\n"), {("new.py", CHANGED)}),
    ("a modified file", lambda r: (r / "pkg" / "old.py").write_text("x = 2\n"), {("pkg/old.py", CHANGED)}),
    ("a deleted file", lambda r: (r / "pkg" / "old.py").unlink(), {("pkg/old.py", DELETED)}),
    ("a renamed file", lambda r: (r / "pkg" / "old.py").rename(r / "pkg" / "new.py"),
     {("pkg/old.py", DELETED), ("pkg/new.py", CHANGED)}),
    ("a deleted folder", lambda r: shutil.rmtree(r / "pkg"), {("pkg", DELETED_DIR)}),
    ("a new folder with a file in it", lambda r: ((r / "sub").mkdir(), (r / "sub" / "k.py").write_text("z = 3\n")),
     {("sub/k.py", CHANGED)}),
]


@pytest.mark.parametrize("case,operation,expected", CASES, ids=[c[0] for c in CASES])
async def test_changes(workspace, case, operation, expected):
    root, _, changes = workspace
    operation(root)
    await changes.until({(str(root / p), kind) for p, kind in expected})


async def test_excluded_folders_and_other_files_are_never_reported(workspace):
    root, watcher, changes = workspace
    assert str(root / ".git") not in watcher.watched_folders
    assert str(root / "build") not in watcher.watched_folders
    assert str(root / "pkg") in watcher.watched_folders
    (root / ".git" / "x.py").write_text("a = 1\n")
    (root / "build" / "y.py").write_text("b = 1\n")
    (root / "notes.txt").write_text("not source\n")
    (root / "marker.py").write_text("c = 1\n")  # the last write: once it arrives, the others would have too
    await changes.until({(str(root / "marker.py"), CHANGED)})
    assert rel(root, changes.seen) == {("marker.py", CHANGED)}


async def test_a_burst_of_writes_is_delivered_coalesced(workspace):
    root, _, changes = workspace
    for i in range(20):
        (root / "pkg" / "old.py").write_text(f"x = {i}\n")
    await changes.until({(str(root / "pkg" / "old.py"), CHANGED)})
    assert changes.seen.count((str(root / "pkg" / "old.py"), CHANGED)) < 20
