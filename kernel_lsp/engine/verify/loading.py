"""Import a user's kernel file from the text of its open buffer.

The buffer may differ from the file on disk, and triton's JIT reads a kernel's source through
`inspect.getsource`, which reads `linecache`: registering the buffer there under the real path makes the JIT,
tracebacks and the interpreter's line numbers all agree with what the user sees. Nothing is written to disk.
"""

from __future__ import annotations

import itertools
import linecache
import os
import sys
import traceback
import types

_counter = itertools.count()


class UserModuleError(Exception):
    """The user's module failed to import. `line` is 0-based in the user's file, or None when unknown."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None, details: str = ""):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.details = details  # the traceback, for logs

    def __reduce__(self):
        return (type(self), (self.message, self.line, self.column, self.details))


def register_source(path: str, source: str) -> None:
    """Make `linecache` (and so `inspect.getsource`) return `source` for `path`. The entry has no mtime, so
    `linecache.checkcache` leaves it alone even though the file on disk differs or does not exist."""
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[path] = (len(source), None, lines, path)


def user_line(tb: types.TracebackType | None, path: str) -> int | None:
    """The 0-based line of the innermost frame of `tb` that runs code from `path`."""
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == path and lineno is not None:
            line = lineno - 1
    return line


# kernel-lsp's own top-level packages. A project may hold folders of the same names (`analyzers/` is a common
# one): imported before any user folder joins sys.path, ours are the ones in sys.modules, and every later import of
# their submodules (the latency counter's `analyzers.hardware`, ...) searches only their own folders. An editable
# install's finder comes after sys.path's, so the order of sys.path alone would not be enough.
OWN_PACKAGES = ("kernel_lsp", "analyzers")


def _is_stdlib(entry: str) -> bool:
    """Whether a sys.path entry is the standard library's (its folder, lib-dynload below it, or its zip)."""
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    if entry.endswith(".zip"):
        return os.path.dirname(entry) == os.path.dirname(stdlib)
    parts = set(entry.split(os.sep))
    return (entry == stdlib or entry.startswith(stdlib + os.sep)) and not parts & {"site-packages", "dist-packages"}


def user_path_index() -> int:
    """Where the user's folders go in sys.path: after the standard library and after every entry that holds
    kernel-lsp's own packages, so that a project's `json.py` or `kernel_lsp/` never stands in for them; before
    the other installed packages, as Python puts a script's folder."""
    import importlib

    ours = {os.path.realpath(os.path.dirname(os.path.dirname(importlib.import_module(n).__file__ or "")))
            for n in OWN_PACKAGES}
    index = 0
    for i, entry in enumerate(sys.path):
        real = os.path.realpath(entry or os.getcwd())  # "" is the current folder
        if _is_stdlib(real) or real in ours:
            index = i + 1
    return index


def add_user_folders(*folders: str | None) -> None:
    """Put the user's folders on sys.path at `user_path_index` (never before the standard library or kernel-lsp's
    packages), kernel-lsp's own packages imported first."""
    import importlib

    for name in OWN_PACKAGES:
        importlib.import_module(name)
    wanted = [os.path.abspath(f) for f in folders if f]
    for folder in wanted:
        while folder in sys.path:
            sys.path.remove(folder)
    at = user_path_index()
    sys.path[at:at] = list(dict.fromkeys(wanted))


def load_user_module(path: str, source: str, root: str | None = None) -> types.ModuleType:
    """Execute `source` as the module of file `path` under a unique module name and return it.

    The file's folder, then `root`, join sys.path so that sibling imports work, after the standard library and
    kernel-lsp's own packages (`add_user_folders`). Raises UserModuleError (with the 0-based line where known)
    when the text does not compile or its top level raises.
    """
    path = os.path.abspath(path)
    register_source(path, source)
    add_user_folders(os.path.dirname(path), root)
    stem = "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(path))[0])
    name = f"_kernel_lsp_user_{stem}_{next(_counter)}"
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno - 1 if exc.lineno else None
        col = exc.offset - 1 if exc.offset else None
        raise UserModuleError(f"syntax error: {exc.msg}", line, col, traceback.format_exc()) from None
    module = types.ModuleType(name)
    module.__file__ = path
    module.__loader__ = None
    # Registered before running: dataclasses, pickling and triton's JIT look the module up by name.
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102 - running the user's module is the point, in its own process
    except BaseException as exc:  # noqa: BLE001 - SystemExit or KeyboardInterrupt at top level is the file's error
        sys.modules.pop(name, None)
        line = user_line(exc.__traceback__, path)
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        where = f" at line {line + 1}" if line is not None else ""
        raise UserModuleError(f"importing the file failed{where}: {text}", line, None,
                              traceback.format_exc()) from None
    return module
