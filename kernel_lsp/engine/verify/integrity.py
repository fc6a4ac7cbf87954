"""What the checking process trusts about the user's file before and after running it (imports no torch itself).

Two defences, both about a file that tries to pass its check instead of computing the answer:
- `scan(source)` reads the file's syntax tree for ways into the checker itself: the caller's frames
  (`sys._getframe`, `inspect.stack`, `.f_back`, ...), the garbage collector's object lists, ctypes, the checker's
  own modules and pipe, code built at run time. A file that does any of this is not run at all: its verdict is
  "not checked" at that line.
- `Snapshot` records the functions the checker relies on (torch, numpy, triton, random, builtins, the checker's own
  modules) before the user's module is imported; `changed()` afterwards names any that were replaced, and
  `patch_line` finds the assignment that did it.

Neither makes the process a sandbox: code that runs in it can do anything the process can. They refuse the known
ways in, and docs/specs.md says so.
"""

from __future__ import annotations

import ast
import sys
import types
from dataclasses import dataclass
from typing import Any

# Frame and generator attributes that lead to other functions' locals (the checker's reference, its state).
_FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                "tb_next", "f_trace"}
# module -> functions that reach other frames, the interpreter's object graph or the tracing hooks.
_INTROSPECTION = {
    "sys": {"_getframe", "_current_frames", "settrace", "setprofile", "_getframemodulename", "modules",
            "addaudithook"},
    "inspect": {"currentframe", "stack", "trace", "getouterframes", "getinnerframes", "getframeinfo"},
    "gc": {"get_objects", "get_referrers", "get_referents"},
    "traceback": {"extract_stack", "walk_stack", "format_stack", "print_stack"},
    "threading": {"settrace", "setprofile"},
}
_BANNED_MODULES = {"ctypes": "imports ctypes (raw memory access)", "_ctypes": "imports ctypes (raw memory access)",
                   "gc": "imports gc (its object lists reach the checker's values)",
                   "builtins": "imports builtins (replaces functions the checker relies on)"}
_SECRET_TEXT = ("KERNEL_LSP_VERIFY", "kernel_lsp.engine", "/proc/self/fd", "/dev/fd", "_kernel_lsp_user")
_DYNAMIC = {"exec", "eval", "compile", "__import__"}
# What a spec file may import from kernel-lsp: the spec helper, which imports nothing heavy.
_ALLOWED_OWN = {"kernel_lsp.spec"}


@dataclass(frozen=True)
class Finding:
    line: int  # 0-based
    what: str  # "calls sys._getframe (the caller's frames)"


def scan(source: str) -> list[Finding]:
    """Ways into the checker in this source, in line order (none for a file that does not parse: its syntax
    error is reported by the import)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    aliases: dict[str, str] = {}  # local name -> module, for `import inspect as ins` / `from sys import _getframe`
    found: list[Finding] = []

    def add(node: ast.AST, what: str) -> None:
        found.append(Finding(getattr(node, "lineno", 1) - 1, what))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                _check_import(a.name, node, add)
                aliases[(a.asname or a.name).split(".")[0]] = a.name.split(".")[0] if not a.asname else a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            _check_import(node.module, node, add, [a.name for a in node.names])
            for a in node.names:
                banned = _INTROSPECTION.get(node.module, set())
                if a.name in banned:
                    add(node, f"imports {node.module}.{a.name} (the checker's frames and objects)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in _FRAME_ATTRS:
                add(node, f"reads .{node.attr} (another function's frame: the checker's)")
            base = node.value.id if isinstance(node.value, ast.Name) else None
            module = aliases.get(base, base) if base is not None else None
            if module in _INTROSPECTION and node.attr in _INTROSPECTION[module]:
                add(node, f"uses {module}.{node.attr} (the checker's frames and objects)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name in _DYNAMIC:
                add(node, f"calls {name}() (code or names chosen at run time, which the checker cannot vet)")
            elif name in ("getattr", "setattr", "delattr") and len(node.args) >= 2:
                target = node.args[0].id if isinstance(node.args[0], ast.Name) else None
                module = aliases.get(target, target) if target is not None else None
                attr = node.args[1]
                if module in _INTROSPECTION and not isinstance(attr, ast.Constant):
                    add(node, f"calls {name}({target}, <computed name>) (which the checker cannot vet)")
                elif (module in _INTROSPECTION and isinstance(attr, ast.Constant)
                      and attr.value in _INTROSPECTION[module]):
                    add(node, f"uses {module}.{attr.value} through {name}() (the checker's frames and objects)")
                elif isinstance(attr, ast.Constant) and attr.value in _FRAME_ATTRS:
                    add(node, f"reads .{attr.value} through {name}() (another function's frame)")
        elif isinstance(node, ast.Name) and node.id in ("__builtins__",):
            add(node, "uses __builtins__ (replaces functions the checker relies on)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = next((s for s in _SECRET_TEXT if s in node.value), None)
            if hit:
                add(node, f"names {hit!r} (the checker's own process)")
    # The use is the place to show; an import of the module it uses comes after it.
    found.sort(key=lambda f: (f.what.startswith("imports "), f.line))
    return found


def _check_import(module: str, node: ast.AST, add, names: list[str] | None = None) -> None:
    root = module.split(".")[0]
    if root in _BANNED_MODULES:
        add(node, _BANNED_MODULES[root])
    elif root == "kernel_lsp":
        # `import kernel_lsp.spec`, `from kernel_lsp.spec import spec`, `from kernel_lsp import spec` only.
        imported = [module] if names is None else [f"{module}.{n}" if module == "kernel_lsp" else module
                                                   for n in names]
        if any(m not in _ALLOWED_OWN for m in imported):
            add(node, f"imports {module} (the checker itself; a spec file needs only kernel_lsp.spec)")


# --- the functions the checker relies on ---------------------------------------------------------------------

_WATCHED_MODULES = ("torch", "torch.testing", "torch.nn.functional", "torch.cuda", "torch.random", "torch.linalg",
                    "numpy", "numpy.random", "numpy.testing", "triton", "triton.language", "triton.testing",
                    "triton.runtime", "triton.runtime.jit", "triton.runtime.autotuner", "random", "math",
                    "builtins", "os", "time", "threading", "json")
_WATCHED_CLASSES = (("torch", "Tensor"), ("torch", "Generator"), ("numpy", "ndarray"),
                    ("triton.runtime.jit", "JITFunction"), ("triton.runtime.autotuner", "Autotuner"),
                    ("triton.runtime.autotuner", "Heuristics"), ("triton.runtime.jit", "KernelInterface"))


def _callable_entries(namespace: dict) -> dict[str, int]:
    return {k: id(v) for k, v in list(namespace.items())
            if callable(v) or isinstance(v, (staticmethod, classmethod, property, types.ModuleType))}


def _own_wrapper(value: object, before: int) -> bool:
    """torch's own lazy wrapping of its functions (importing torch._dynamo wraps torch.manual_seed): a
    functools.wraps wrapper of the very same function, defined inside torch."""
    wrapped = getattr(value, "__wrapped__", None)
    code = getattr(value, "__code__", None)
    filename = getattr(code, "co_filename", "") if code is not None else ""
    module = sys.modules.get("torch")
    root = getattr(module, "__file__", None)
    return (wrapped is not None and id(wrapped) == before and root is not None
            and filename.startswith(root.rsplit("/", 1)[0]))


class Snapshot:
    """Identity of every callable in the watched namespaces. Taken after torch/triton/numpy are imported and
    before the user's module runs; entries that appear later (lazily imported submodules) are not judged."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, dict, str, int]] = []  # (namespace name, namespace, key, id)
        self.class_keys: list[tuple[str, Any, set]] = []  # a method added to a class shadows its base's
        self._keep = []  # the namespaces' values stay alive, so that no id is reused by a replacement
        for name, namespace in self._namespaces():
            for key, ident in _callable_entries(namespace).items():
                self.entries.append((name, namespace, key, ident))
            self._keep.append(dict(namespace))
            if isinstance(namespace, types.MappingProxyType):
                self.class_keys.append((name, namespace, set(namespace)))

    @staticmethod
    def _namespaces():
        for name in _WATCHED_MODULES:
            module = sys.modules.get(name)
            if module is not None:
                yield name, vars(module)
        for module_name, cls_name in _WATCHED_CLASSES:
            module = sys.modules.get(module_name)
            cls = getattr(module, cls_name, None) if module is not None else None
            if isinstance(cls, type):
                yield f"{module_name}.{cls_name}", cls.__dict__
        for name, module in list(sys.modules.items()):
            if name.startswith("kernel_lsp") and module is not None:
                yield name, vars(module)
                for value in list(vars(module).values()):
                    if isinstance(value, type) and value.__module__ == name:
                        yield f"{name}.{value.__name__}", value.__dict__

    def add_module(self, name: str, module: types.ModuleType) -> None:
        """Also watch the functions of the user's module itself: a launcher that rebinds one (the reference's
        helper) changes what the spec says without touching its text."""
        namespace = vars(module)
        for key, value in list(namespace.items()):
            if isinstance(value, (types.FunctionType, type)) or callable(value):
                self.entries.append((name, namespace, key, id(value)))
                self._keep.append(value)

    def changed(self) -> list[str]:
        """Dotted names of watched functions that were replaced or deleted since the snapshot."""
        out = []
        for name, namespace, key, ident in self.entries:
            value = namespace.get(key)
            if id(value) != ident and not _own_wrapper(value, ident):
                out.append(f"{name}.{key}")
        for name, namespace, keys in self.class_keys:
            out += [f"{name}.{key}" for key in namespace.keys() - keys]
        return sorted(set(out))


def patch_line(source: str, dotted: str) -> int | None:
    """0-based line of the statement in `source` that most likely replaced `dotted` (`torch.randn`): an assignment
    to an attribute of that name, a setattr naming it, a `del`, or a function's assignment to a global of it."""
    attr = dotted.rsplit(".", 1)[-1]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for fn in ast.walk(tree):  # `global name; name = ...` inside a function rebinds a module-level one
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(n, ast.Global) and attr in n.names for n in ast.walk(fn)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
                        isinstance(t, ast.Name) and t.id == attr
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
                    return node.lineno - 1
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("setattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and node.args[1].value == attr):
            return node.lineno - 1
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and t.attr == attr:
                    return getattr(node, "lineno", 1) - 1  # a statement: it has one
    return None


def describe_findings(findings: list[Finding]) -> str:
    """"line 12 uses sys._getframe (...) (and 2 more such places)": the first way in, and how many others."""
    first, more = findings[0], len(findings) - 1
    return f"line {first.line + 1} {first.what}" + (f" (and {more} more such place{'s' if more > 1 else ''})"
                                                     if more else "")


def describe_replaced(changed: list[str]) -> str:
    """"torch.randn, torch.allclose and 2 more": what a file replaced."""
    return ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")


__all__ = ["Finding", "Snapshot", "describe_findings", "describe_replaced", "patch_line", "scan"]
