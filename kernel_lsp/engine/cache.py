"""A content-addressed result cache on disk: survives restarts, shared safely by several server processes.

Layout: `<root>/<first 2 hex digits>/<key>`, each file MAGIC + MAC + pickled value. The default root is
`<workspace>/.kernel-lsp/cache`, with a `.gitignore` of `*` in `.kernel-lsp/` so nobody commits it.

- Atomic: a value is written to a temporary file of its own and renamed over the entry (os.replace), so a
  reader, in this process or another, sees the old entry, the new one or none, never half of one.
- LRU by mtime: a hit sets the entry's mtime to now; pruning deletes the oldest mtimes first. No index file,
  hence no index to lock between processes or to lose in a crash.
- Signed: the MAC is an HMAC with a per-user key kept outside the workspace. A workspace can come from anyone
  (a cloned repository, a tarball) and unpickling a planted file would run its code; an entry whose MAC does
  not match, like a truncated or garbled one, is a miss and is deleted.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import pickle
import re
import threading
import time
from pathlib import Path
from typing import Any

from .files import PRIVATE_DIR as WORKSPACE_DIR
from .files import ensure_ignored_dir

log = logging.getLogger(__name__)

MAGIC = b"KLSPC1\n"
_MAC_SIZE = 32
_HEX = re.compile(r"[0-9a-f]{8,128}")
_STALE_TEMP_SECONDS = 3600  # a temporary file this old was left by a writer that died


def _user_key() -> bytes:
    """This user's signing key, created on first use under the user's cache directory."""
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernel-lsp"
    path = folder / "cache-key"
    try:
        key = path.read_bytes()
        if len(key) >= 32:
            return key
    except OSError:
        pass
    key = os.urandom(32)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".cache-key.{os.getpid()}.{threading.get_ident()}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
        try:
            os.link(temp, path)  # publish only if absent: two servers starting at once agree on one key
        except FileExistsError:
            key = path.read_bytes()
        finally:
            temp.unlink()
    except OSError as exc:  # read-only home: entries then last as long as this process
        log.warning("no persistent cache key (%s); the result cache will not survive a restart", exc)
    return key


PROBE_BYTES = 64 * 1024  # written and removed to tell a full disk or a read-only folder from a usable one


def unwritable(folder: Path) -> str | None:
    """Why `folder` cannot hold cache files (it cannot be made, written or is full), or None when it can."""
    folder = Path(folder)
    probe = folder / f".probe.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as fh:
            fh.write(b"\0" * PROBE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        try:
            probe.unlink()
        except OSError:
            pass
    return None


class ResultCache:
    """Results on disk by key. An optimisation only: when the disk refuses a write (read-only, full), the cache
    turns itself off for the rest of the process (`off`, the reason) instead of failing every write again."""

    def __init__(self, root: Path, max_bytes: int = 512 * 2**20, *, secret: bytes | None = None):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self._secret = secret if secret is not None else _user_key()
        self._ignore_dir = self.root  # where the `*` .gitignore goes: the topmost folder we own
        self._prepared = False
        self._size: int | None = None  # bytes on disk as this process believes; counted on the first put
        self._lock = threading.Lock()
        self.hits = self.misses = self.writes = self.evictions = self.corrupt = 0
        self.off: str | None = None  # why writing stopped (the disk's error), None while it works

    @classmethod
    def for_workspace(cls, workspace: Path, max_bytes: int = 512 * 2**20, **kwargs: Any) -> ResultCache:
        return cls.in_private_dir(Path(workspace) / WORKSPACE_DIR, max_bytes, **kwargs)

    @classmethod
    def in_private_dir(cls, private_dir: Path, max_bytes: int = 512 * 2**20, **kwargs: Any) -> ResultCache:
        """The cache in `<private_dir>/cache`, the `*` .gitignore in `private_dir`."""
        cache = cls(Path(private_dir) / "cache", max_bytes, **kwargs)
        cache._ignore_dir = cache.root.parent
        return cache

    def path(self, key: str) -> Path:
        name = key if _HEX.fullmatch(key) else hashlib.sha256(key.encode()).hexdigest()
        return self.root / name[:2] / name

    def get(self, key: str) -> Any | None:
        """The value stored under key, or None (so None itself cannot be cached)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:  # absent, or pruned by another process meanwhile
            self.misses += 1
            return None
        try:
            if data[: len(MAGIC)] != MAGIC or not hmac.compare_digest(
                data[len(MAGIC) : len(MAGIC) + _MAC_SIZE], self._mac(key, data[len(MAGIC) + _MAC_SIZE :])
            ):
                raise ValueError("bad header or MAC")
            value = pickle.loads(data[len(MAGIC) + _MAC_SIZE :])
        except Exception as exc:  # noqa: BLE001 - truncated, garbled, foreign, or a class that no longer exists
            log.info("dropping cache entry %s: %s", path.name, exc)
            self.corrupt += 1
            self.misses += 1
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)  # LRU: mtime is the last use
        except OSError:
            pass
        self.hits += 1
        return value

    def put(self, key: str, value: Any) -> bool:
        """Store value under key; False if it could not be (unpicklable, too big, disk trouble)."""
        try:
            payload = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        except Exception:
            log.warning("cannot cache a %s: not picklable", type(value).__name__, exc_info=True)
            return False
        data = MAGIC + self._mac(key, payload) + payload
        if len(data) > self.max_bytes or self.off is not None:
            return False
        path = self.path(key)
        # Unique per writer, so that two writers of one key never share a temporary file.
        temp = path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            self._prepare()
            path.parent.mkdir(exist_ok=True)
            with open(temp, "wb") as fh:
                fh.write(data)
            os.replace(temp, path)
        except OSError as exc:
            self.off = exc.strerror or str(exc)
            log.info("caching is off: %s cannot be written (%s)", self.root, self.off)
            try:
                temp.unlink(missing_ok=True)
            except OSError:
                pass
            return False
        with self._lock:
            self.writes += 1
            if self._size is None:
                self._size = sum(size for _, size, _ in self._scan())
            else:
                self._size += len(data)  # overwrites count twice: an overestimate that the next prune corrects
            if self._size > self.max_bytes:
                self._prune()
        return True

    def stats(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "bytes": self._size,
            "maxBytes": self.max_bytes,
            "hits": self.hits,
            "misses": self.misses,
            "writes": self.writes,
            "evictions": self.evictions,
            "corrupt": self.corrupt,
            **({"off": self.off} if self.off else {}),
        }

    def _mac(self, key: str, payload: bytes) -> bytes:
        # The key is signed with the value: a valid entry copied under another key's name is not accepted.
        return hmac.new(self._secret, key.encode() + b"\0" + payload, hashlib.sha256).digest()

    def _prepare(self) -> None:
        """Create the folders on the first write (not at start-up: a workspace that never caches stays clean)."""
        if self._prepared:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        ensure_ignored_dir(self._ignore_dir)
        self._prepared = True

    def _scan(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every entry, from the disk: other processes write here too."""
        entries = []
        now = time.time()
        try:
            shards = [d for d in os.scandir(self.root) if len(d.name) == 2 and d.is_dir()]
        except OSError:
            return []
        for shard in shards:
            try:
                files = list(os.scandir(shard.path))
            except OSError:
                continue
            for entry in files:
                try:
                    st = entry.stat()
                    if not entry.name.startswith("."):
                        entries.append((st.st_mtime, st.st_size, Path(entry.path)))
                    elif entry.name.endswith(".tmp") and now - st.st_mtime > _STALE_TEMP_SECONDS:
                        os.unlink(entry.path)
                except OSError:  # gone meanwhile
                    continue
        return entries

    def _prune(self) -> None:
        """Delete least recently used entries down to 90% of max_bytes (headroom: not a prune on every put)."""
        entries = sorted(self._scan())
        total = sum(size for _, size, _ in entries)
        target = self.max_bytes * 0.9
        for _, size, path in entries:
            if total <= target:
                break
            try:
                path.unlink()
                self.evictions += 1
            except FileNotFoundError:  # another process pruned it first
                pass
            except OSError:
                continue
            total -= size
        self._size = total
