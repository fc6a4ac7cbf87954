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


def load_user_module(path: str, source: str, root: str | None = None) -> types.ModuleType:
    """Execute `source` as the module of file `path` under a unique module name and return it.

    The file's folder and `root` go to the front of sys.path so that sibling imports work. Raises
    UserModuleError (with the 0-based line where known) when the text does not compile or its top level raises.
    """
    path = os.path.abspath(path)
    register_source(path, source)
    for folder in (root, os.path.dirname(path)):
        if folder:
            folder = os.path.abspath(folder)
            if folder in sys.path:
                sys.path.remove(folder)
            sys.path.insert(0, folder)
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
