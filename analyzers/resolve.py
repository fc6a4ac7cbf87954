"""Where a dotted name leads: the definition it resolves to, read from source files of installed packages and of
the workspace, through aliases and re-exports, without importing (nor running) anything.

`torch._inductor.runtime.triton_helpers.libdevice` leads to `triton.language.extra.libdevice` (a re-export);
`triton_helpers.welford_reduce` to a `@triton.jit` def. A rule judges a call by where it leads, not by how its
module is spelt; a name this cannot follow offline is "unresolved", which a rule must not present as an error.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .discovery import JIT_NAMES
from .source import parse_python

_WRAPPERS = JIT_NAMES | {"triton.autotune", "triton.heuristics", "triton.runtime.autotune",
                         "triton.runtime.heuristics", "triton.runtime.autotuner.autotune",
                         "triton.runtime.autotuner.heuristics"}
_CONSTEXPR_FNS = {"triton.constexpr_function", "triton.runtime.jit.constexpr_function",
                  "triton.runtime.constexpr_function"}
_MAX_HOPS = 12


@dataclass(frozen=True)
class Resolved:
    kind: str  # "jit", "constexpr_function", "triton" (a name of the triton package), "plain" (an undecorated
    # def), "class", "module", "value" (an assignment), "unresolved"
    name: str  # the dotted name reached
    where: str = ""  # path:line of the definition, when one was read

    @property
    def device_ok(self) -> bool:
        """Whether a kernel may call it: a @triton.jit or constexpr function, or a name of triton itself."""
        return self.kind in ("jit", "constexpr_function", "triton")


def workspace_roots(path: str | None) -> tuple[str, ...]:
    """Folders a file's absolute imports may resolve in: its own folder and the one above its top package."""
    if not path or path.startswith("<"):
        return ()
    try:
        here = Path(path).resolve().parent
    except (OSError, RuntimeError):
        return ()
    top = here
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    # Packages without __init__.py (namespace packages, or a checkout of some files only): every ancestor may be
    # the folder an absolute import starts from.
    return tuple(dict.fromkeys((str(here), str(top), *(str(p) for p in list(here.parents)[:8]))))


def resolve_in_file(dotted: str, path: str | None) -> Resolved:
    """What a name imported by the file at `path` is; a relative import (`.utils.f`) is read beside that file."""
    level = len(dotted) - len(dotted.lstrip("."))
    if level:
        if not path or path.startswith("<"):
            return Resolved("unresolved", dotted)
        folder = Path(path).resolve().parent
        for _ in range(level - 1):
            folder = folder.parent
        return resolve(dotted[level:], (str(folder),))
    return resolve(dotted, workspace_roots(path))


def resolve(dotted: str, roots: tuple[str, ...] = ()) -> Resolved:
    """What `dotted` (`pkg.mod.name.attr`) is, searched in `roots` and then sys.path."""
    search = tuple(dict.fromkeys((*roots, *(p for p in sys.path if p))))
    # Answers are kept for half a minute: files of the workspace change while the server runs.
    return _resolve(dotted, search, 0, int(time.monotonic() // 30))


def _resolve(dotted: str, search: tuple[str, ...], hops: int, epoch: int = 0) -> Resolved:
    return _resolve_cached(dotted, search, hops, epoch or int(time.monotonic() // 30))


@functools.lru_cache(maxsize=4096)
def _resolve_cached(dotted: str, search: tuple[str, ...], hops: int, epoch: int) -> Resolved:
    if dotted == "triton" or dotted.startswith("triton."):
        return Resolved("triton", dotted)
    if hops > _MAX_HOPS:
        return Resolved("unresolved", dotted)
    parts = dotted.split(".")
    found = _find_module(parts[0], search)
    if found is None:
        return Resolved("unresolved", dotted)
    path, is_pkg = found
    i = 1
    # Descend through sub-packages and sub-modules as long as files exist for them.
    while i < len(parts) and is_pkg:
        sub = _submodule(path, parts[i])
        if sub is None:
            break
        path, is_pkg = sub
        i += 1
    module = ".".join(parts[:i])
    if i == len(parts):
        return Resolved("module", module, path)
    return _lookup(path, module, is_pkg, parts[i], parts[i + 1:], search, hops)


def _find_module(name: str, search: tuple[str, ...]) -> tuple[str, bool] | None:
    namespace = None
    for root in search:
        pkg = os.path.join(root, name, "__init__.py")
        if os.path.isfile(pkg):
            return pkg, True
        mod = os.path.join(root, name + ".py")
        if os.path.isfile(mod):
            return mod, False
        if namespace is None and os.path.isdir(os.path.join(root, name)):
            namespace = pkg  # a folder without __init__.py: a package whose __init__ defines nothing
    return (namespace, True) if namespace else None


def _submodule(init: str, name: str) -> tuple[str, bool] | None:
    folder = os.path.dirname(init)
    pkg = os.path.join(folder, name, "__init__.py")
    if os.path.isfile(pkg) or os.path.isdir(os.path.dirname(pkg)):
        return pkg, True
    mod = os.path.join(folder, name + ".py")
    return (mod, False) if os.path.isfile(mod) else None


@functools.lru_cache(maxsize=512)
def _parse(path: str, mtime: float) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return parse_python(fh.read())
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


def _module_level(body: list[ast.stmt]):
    """Statements that bind module names: the top level and the branches of if/try/with, not function bodies."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)) or type(node).__name__ == "TryStar":
            children: list[ast.stmt] = []
            for field in ("body", "handlers", "orelse", "finalbody"):
                for c in getattr(node, field, None) or ():
                    children.extend(c.body if isinstance(c, ast.ExceptHandler) else [c])
            stack.extend(reversed(children))


def _absolute(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    package = module.split(".") if is_pkg else module.split(".")[:-1]
    if level > 1:
        package = package[: len(package) - (level - 1)]
    return ".".join([*package, *([target] if target else [])])


def _lookup(path: str, module: str, is_pkg: bool, name: str, rest: list[str], search: tuple[str, ...],
            hops: int) -> Resolved:
    try:
        tree = _parse(path, os.path.getmtime(path))
    except OSError:
        tree = None
    if tree is None:
        return Resolved("unresolved", ".".join([module, name, *rest]))
    imports: dict[str, str] = {}
    found: Resolved | None = None
    star: list[str] = []
    # The last binding of the name at module level wins (a fallback `except ImportError:` def comes later than
    # the import it replaces, but the import is what runs where the package is installed: keep the first).
    for node in _module_level(tree.body):
        if isinstance(node, ast.Import):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                imports[local] = a.name if a.asname else a.name.split(".")[0]
                if local == name and found is None:
                    found = _resolve(".".join([imports[local], *rest]), search, hops + 1)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _absolute(module, is_pkg, node.level, node.module)
            for a in node.names:
                if a.name == "*":
                    star.append(base)
                    continue
                local = a.asname or a.name
                imports[local] = f"{base}.{a.name}"
                if local == name and found is None:
                    found = _resolve(".".join([base, a.name, *rest]), search, hops + 1)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name \
                and found is None:
            where = f"{path}:{node.lineno}"
            if isinstance(node, ast.ClassDef):
                found = Resolved("class", f"{module}.{name}", where)
            else:
                decos = {_dotted(d.func if isinstance(d, ast.Call) else d, imports) for d in node.decorator_list}
                # `from .compat import triton` then `@triton.jit`: the decorator is followed like any name.
                decos |= {_resolve(d, search, hops + 1).name for d in decos - _WRAPPERS - _CONSTEXPR_FNS
                          if d and "." in d}
                kind = "jit" if decos & _WRAPPERS else "constexpr_function" if decos & _CONSTEXPR_FNS else \
                    "plain" if not decos else "value"
                found = Resolved(kind if not rest else "value", f"{module}.{name}", where)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and found is not None and found.kind == "plain" \
                and any(isinstance(t, ast.Name) and t.id == name
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            # `f = triton.jit(f)` after `def f`: the name is what the wrapping made of it.
            wrapper = _dotted(node.value.func, imports) if isinstance(node.value, ast.Call) else ""
            kind = "jit" if wrapper in _WRAPPERS or wrapper and _resolve(wrapper, search, hops + 1).name in _WRAPPERS \
                else "value"
            found = Resolved(kind, found.name, f"{path}:{node.lineno}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and found is None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                value = node.value
                alias = _dotted(value, imports) if isinstance(value, (ast.Name, ast.Attribute)) else None
                if alias:  # `libdevice = tl.extra.cuda.libdevice`: an alias, followed
                    found = _resolve(".".join([alias, *rest]), search, hops + 1)
                else:
                    found = Resolved("value", f"{module}.{name}", f"{path}:{node.lineno}")
    if found is not None:
        return found
    for base in star:
        r = _resolve(".".join([base, name, *rest]), search, hops + 1)
        if r.kind != "unresolved":
            return r
    if is_pkg:  # a sub-module not imported by the package's __init__ is still an attribute once imported
        sub = _submodule(path, name)
        if sub is not None:
            return _lookup(sub[0], f"{module}.{name}", sub[1], rest[0], rest[1:], search, hops + 1) if rest \
                else Resolved("module", f"{module}.{name}", sub[0])
    return Resolved("unresolved", ".".join([module, name, *rest]))


def _dotted(node: ast.AST, imports: dict[str, str]) -> str:
    if isinstance(node, ast.Name):
        return imports.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, imports)
        return f"{base}.{node.attr}" if base else ""
    return ""


def definition_at(path: str, line: int) -> ast.FunctionDef | None:
    """The def that starts on `line` of a file `resolve` read (its AST is cached)."""
    try:
        tree = _parse(path, os.path.getmtime(path))
    except OSError:
        return None
    for node in _module_level(tree.body) if tree is not None else ():
        if isinstance(node, ast.FunctionDef) and node.lineno == line:
            return node
    return None
