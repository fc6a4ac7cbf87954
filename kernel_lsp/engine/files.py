"""Reading workspace files defensively and walking a workspace without its ignored folders."""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from analyzers.model import Problem, Span
from analyzers.rules import make_problem

SOURCE_SUFFIXES = (".py",)


@dataclass(frozen=True)
class FileText:
    text: str | None  # None when the file cannot be analysed
    problem: Problem | None = None  # why not, when that deserves a message
    missing: bool = False


def too_large_problem(size: int, max_bytes: int) -> Problem:
    return make_problem(
        "KL003", Span.point(0),
        f"file is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit; not analysed "
        "(raise the maxFileBytes setting to analyse it)",
    )


def oversize(text: str, max_bytes: int) -> int | None:
    """The UTF-8 size of text when it is over max_bytes, else None. A code point is at most 4 bytes: the text is
    only encoded when its length alone cannot decide."""
    if len(text) > max_bytes:
        return len(text)
    if len(text) * 4 <= max_bytes:
        return None
    size = len(text.encode("utf-8", "replace"))
    return size if size > max_bytes else None


def is_excluded(name: str, patterns: Iterable[str]) -> bool:
    return any(name == p or fnmatch.fnmatchcase(name, p) for p in patterns)


def is_source(path: str | Path) -> bool:
    return str(path).endswith(SOURCE_SUFFIXES)


def is_cuda(path: str | Path) -> bool:
    """A CUDA C++ file: compiled by nvcc while open, never analysed statically."""
    return str(path).endswith(".cu")


class NotARegularFile(OSError):
    """A FIFO, socket or device under a source's name: reading one could block forever or never end."""


_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def open_regular(path: str | Path) -> BinaryIO:
    """`open(path, "rb")` for a regular file only. The open does not block (a FIFO without a writer would), and
    anything but a regular file raises NotARegularFile (IsADirectoryError for a folder)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder", str(path))
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise NotARegularFile(errno.EINVAL, kind, str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_source(path: str | Path, max_bytes: int) -> FileText:
    """Read a source file; binary, non-UTF-8, oversized and vanished files and anything but a regular file become
    a FileText with a reason."""
    try:
        with open_regular(path) as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        return FileText(None, missing=True)
    except (IsADirectoryError, NotADirectoryError):
        return FileText(None, missing=True)
    except NotARegularFile as exc:
        return FileText(None, make_problem("KL002", Span.point(0), f"not read: the path is {exc.strerror}, not a "
                                                                     "regular file"))
    except OSError as exc:
        return FileText(None, make_problem("KL002", Span.point(0), f"cannot read the file: {exc.strerror or exc}"))
    if len(data) > max_bytes:
        size = os.path.getsize(path) if os.path.exists(path) else len(data)
        return FileText(None, too_large_problem(size, max_bytes))
    if b"\0" in data:
        return FileText(None, make_problem("KL002", Span.point(0), "binary file (contains NUL bytes); not analysed"))
    try:
        return FileText(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n")
        return FileText(None, make_problem(
            "KL002", Span.point(line),
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); re-save the file as UTF-8",
        ))


def walk_sources(root: str | Path, exclude: Iterable[str], suffixes: tuple[str, ...] = SOURCE_SUFFIXES
                 ) -> Iterator[Path]:
    """Every source file under root, skipping excluded folders and files (and symlinked folders)."""
    exclude = tuple(exclude)
    root = Path(root)
    if root.is_file():
        if str(root).endswith(suffixes):
            yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not is_excluded(d, exclude)
                             and not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            if name.endswith(suffixes) and not is_excluded(name, exclude):
                yield Path(dirpath, name)


def path_is_excluded(path: str | Path, root: str | Path | None, exclude: Iterable[str]) -> bool:
    """Whether any component of path (below root, when given) matches an exclude pattern."""
    p = Path(path)
    try:
        parts = p.relative_to(root).parts if root else p.parts
    except ValueError:
        parts = p.parts
    return any(is_excluded(part, exclude) for part in parts)


PRIVATE_DIR = ".kernel-lsp"


def ensure_private_dir(root: str | os.PathLike) -> Path:
    """`<root>/.kernel-lsp`, where caches, IR, histories and assistant sessions live, with a `.gitignore` of `*` in
    it so that none of it is ever committed. Raises OSError when it cannot be created."""
    return ensure_ignored_dir(Path(root) / PRIVATE_DIR)


def untrusted_private_dir(root: str | os.PathLike) -> Path:
    """Where an untrusted workspace's caches go instead of `<root>/.kernel-lsp`: the user's cache, one folder per
    workspace path, so that nothing is written into a folder the user has not trusted."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return base / "kernel-lsp" / "untrusted" / digest


def ensure_ignored_dir(folder: Path) -> Path:
    """`folder`, created if need be, with a `.gitignore` of `*` in it. Raises OSError when it cannot be created."""
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    return folder
