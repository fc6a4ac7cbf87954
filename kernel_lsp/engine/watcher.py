"""Watches workspace folders on disk (watchdog), never descending into excluded folders.

Each non-excluded folder gets its own non-recursive watch, so .git, virtualenvs and build output are never
watched at all. Events are coalesced per path for a short settle time and delivered on the asyncio loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any, Callable, Iterable

from .files import is_excluded, is_source, path_is_excluded

log = logging.getLogger(__name__)

# Event kinds delivered to the callback.
CHANGED = "changed"  # created or modified: re-read it
DELETED = "deleted"  # gone: forget it
DELETED_DIR = "deleted_dir"  # a folder is gone: forget everything under it


class WorkspaceWatcher:
    def __init__(
        self,
        roots: Iterable[str],
        exclude: Iterable[str],
        on_changes: Callable[[list[tuple[str, str]]], None],
        loop: asyncio.AbstractEventLoop,
        settle: float = 0.05,
    ):
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        self.roots = [os.path.abspath(r) for r in roots]
        self.exclude = tuple(exclude)
        self._on_changes = on_changes
        self._loop = loop
        self._settle = settle
        self._observer = Observer()
        self._watches: dict[str, Any] = {}  # folder -> watchdog's ObservedWatch
        self._pending: dict[str, str] = {}
        self._lock = threading.Lock()
        self._flush_scheduled = False
        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # watchdog thread
                try:
                    watcher._event(event)
                except Exception:  # noqa: BLE001 - never let the observer thread die
                    log.exception("file event %r", event)

        self._handler = Handler()

    @property
    def watched_folders(self) -> list[str]:
        return sorted(self._watches)

    def start(self) -> None:
        for root in self.roots:
            self._watch_tree(root)
        self._observer.start()

    def stop(self) -> None:
        try:
            self._observer.stop()
            self._observer.join(timeout=2)
        except Exception:  # noqa: BLE001
            log.exception("stopping the file watcher")

    def _root_of(self, path: str) -> str | None:
        return next((r for r in self.roots if path == r or path.startswith(r + os.sep)), None)

    def _watch_tree(self, top: str) -> None:
        for dirpath, dirnames, _ in os.walk(top):
            if path_is_excluded(dirpath, self._root_of(dirpath), self.exclude):
                dirnames[:] = []
                continue
            dirnames[:] = [d for d in dirnames if not is_excluded(d, self.exclude)
                           and not os.path.islink(os.path.join(dirpath, d))]
            if dirpath not in self._watches:
                try:
                    self._watches[dirpath] = self._observer.schedule(self._handler, dirpath, recursive=False)
                except OSError as exc:  # inotify limit, permissions, vanished folder
                    log.warning("cannot watch %s: %s", dirpath, exc)

    def _unwatch_tree(self, top: str) -> None:
        for path in [p for p in self._watches if p == top or p.startswith(top + os.sep)]:
            watch = self._watches.pop(path)
            try:
                self._observer.unschedule(watch)
            except (KeyError, OSError):
                pass

    def _event(self, event) -> None:
        kind = event.event_type
        if kind in ("opened", "closed_no_write", "attrib"):
            return
        src = os.fsdecode(event.src_path)
        dest = os.fsdecode(event.dest_path) if event.dest_path else ""
        if event.is_directory:
            if kind == "created":
                self._watch_tree(src)
                self._queue_existing(src)
            elif kind == "deleted":
                self._unwatch_tree(src)
                self._queue(src, DELETED_DIR)
            elif kind == "moved":
                self._unwatch_tree(src)
                self._queue(src, DELETED_DIR)
                if self._root_of(dest):
                    self._watch_tree(dest)
                    self._queue_existing(dest)
            return
        if kind == "moved":
            self._queue(src, DELETED)
            if self._root_of(dest):
                self._queue(dest, CHANGED)
        elif kind == "deleted":
            self._queue(src, DELETED)
        else:  # created, modified, closed
            self._queue(src, CHANGED)

    def _queue_existing(self, top: str) -> None:
        # Files created in a new folder before its watch existed.
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if not is_excluded(d, self.exclude)]
            for name in filenames:
                self._queue(os.path.join(dirpath, name), CHANGED)

    def _queue(self, path: str, kind: str) -> None:
        if kind != DELETED_DIR and (not is_source(path) or path_is_excluded(path, self._root_of(path), self.exclude)):
            return
        with self._lock:
            self._pending[path] = kind
            if self._flush_scheduled:
                return
            self._flush_scheduled = True
        self._loop.call_soon_threadsafe(self._loop.call_later, self._settle, self._flush)

    def _flush(self) -> None:
        with self._lock:
            changes = list(self._pending.items())
            self._pending.clear()
            self._flush_scheduled = False
        if changes:
            self._on_changes(changes)
