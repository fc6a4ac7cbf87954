"""What makes an offline compile run none of the workspace's code.

A compile worker imports the module `extract.py` slices out of a user's file and hands its @jit functions to
triton. Both steps execute Python: importing runs module-level statements, defaults and annotations; triton's
front end calls whatever a kernel's body names (a global module's function is called at compile time, so
`triton.compiler.compiler.os.system(...)` in a kernel body runs). Two checks close that:

- `unsafe_statements` (static, before the import): the module may hold only imports of triton and a few pure
  standard modules, assignments and defaults built from literals, names bound once and calls of pure functions
  (`tl.constexpr`, `math.*`, `int`, ...), and defs under the plain `triton.jit` decorator the slice writes.
- `unsafe_reaches` (after the import, before triton sees the kernels): every global a kernel body reaches, through
  any chain of attributes, must be triton.language, math, a literal, or a @jit function of the slice; no dunder
  attribute, no builtin outside a short pure list, no module used as a value (kept, passed or wrapped, it could
  be reached later by any name). Attributes on values the check cannot resolve (locals, call results) are tried
  against every other object the kernels could have stored there.

Both answer (line in the sliced module, why) pairs; nothing here imports triton, torch or user code.
"""

from __future__ import annotations

import ast
import builtins
import math
import types
from typing import Any, Iterable

# Import roots the sliced module may hold: importing them runs only trusted code with no effect.
ALLOWED_IMPORT_ROOTS = frozenset({"triton", "math", "typing", "operator", "functools", "numbers"})

# Builtins a module-level expression may call, and names a kernel body may use: pure on literal arguments.
PURE_BUILTINS = frozenset({"int", "float", "bool", "str", "abs", "min", "max", "round", "len", "pow", "divmod",
                           "tuple", "list", "range", "isinstance", "print", "zip", "enumerate", "all", "any",
                           "sum", "sorted", "reversed", "slice", "True", "False", "None", "NotImplemented",
                           "Ellipsis"}) | {n for n, v in vars(builtins).items()
                                           if isinstance(v, type) and issubclass(v, BaseException)}
_PURE_CALLS = frozenset({"triton.language.constexpr", "triton.language.core.constexpr", "triton.cdiv",
                         "triton.next_power_of_2"}) | {f"math.{n}" for n in dir(math) if not n.startswith("_")}
_TRITON_FUNCTIONS = frozenset({"cdiv", "next_power_of_2"})
_ALL_BUILTINS = frozenset(dir(builtins))
_LITERALS = (type(None), bool, int, float, complex, str, bytes)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def allowed_import(dotted: str) -> bool:
    return dotted.split(".")[0] in ALLOWED_IMPORT_ROOTS


# ----------------------------------------------------------------------------------------------------------------
# Static: what the import of the sliced module executes


class Scope:
    """Module-level names of the sliced module: what each is bound to (dotted import path, or None) and how often."""

    def __init__(self, body: list[ast.stmt]):
        self.imports: dict[str, str] = {}
        self.count: dict[str, int] = {}
        for stmt in _flatten(body):
            for name, dotted in _bindings(stmt):
                self.count[name] = self.count.get(name, 0) + 1
                if dotted is not None:
                    self.imports[name] = dotted

    def stable(self, name: str) -> bool:
        return self.count.get(name, 0) <= 1

    def dotted(self, node: ast.expr) -> str | None:
        """`tl.constexpr` -> "triton.language.constexpr", through imports bound once; None for anything else."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or not self.stable(node.id):
            return None
        if node.id in self.imports:
            return ".".join([self.imports[node.id], *reversed(parts)])
        if node.id in _ALL_BUILTINS and node.id not in self.count and not parts:
            return node.id
        return None


def _flatten(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _flatten(stmt.body)
            yield from _flatten(stmt.orelse)


def _bindings(stmt: ast.stmt) -> Iterable[tuple[str, str | None]]:
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            yield (a.asname or a.name.split(".")[0]), (a.name if a.asname else a.name.split(".")[0])
    elif isinstance(stmt, ast.ImportFrom):
        for a in stmt.names:
            yield (a.asname or a.name), f"{stmt.module}.{a.name}"
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield stmt.name, None
    elif not isinstance(stmt, ast.If):
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                yield node.id, None
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for n in node.names:
                    yield n, None
                    yield n, None  # a name a function can rebind is never stable


def unsafe_expression(expr: ast.expr, scope: Scope) -> str | None:
    """Why evaluating `expr` could run code that is not pure triton/math on literals; None when it cannot."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            if not scope.stable(node.id):
                return f"`{node.id}` is bound more than once, so what it names is known only by running the code"
            if node.id not in scope.count and node.id in _ALL_BUILTINS and node.id not in PURE_BUILTINS:
                return f"it uses the builtin `{node.id}`"
        elif isinstance(node, ast.Attribute):
            if _dunder(node.attr):
                return f"it reaches `{node.attr}`"
        elif isinstance(node, ast.Call):
            dotted = scope.dotted(node.func)
            root = node.func
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and not scope.stable(root.id):
                return f"`{root.id}` is bound more than once, so what it names is known only by running the code"
            if dotted is None or (dotted not in _PURE_CALLS and dotted not in PURE_BUILTINS):
                what = ast.unparse(node.func)
                what = what if len(what) <= 60 else what[:57] + "..."
                return f"it calls `{what}`, which the offline compile does not run"
        elif isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                               ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return f"it holds a {type(node).__name__.lower()}, which the offline compile does not evaluate"
    return None


def _is_triton_jit(dec: ast.expr, scope: Scope) -> bool:
    if isinstance(dec, ast.Call):
        literal = all(isinstance(n, (ast.Constant, ast.List, ast.Tuple, ast.keyword, ast.Load, ast.UnaryOp,
                                     ast.USub))
                      for k in dec.keywords for n in ast.walk(k.value))
        return not dec.args and literal and _is_triton_jit(dec.func, scope)
    return scope.dotted(dec) in ("triton.jit", "triton.runtime.jit.jit")


def _definition_parts(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterable[tuple[str, ast.expr]]:
    a = fn.args
    positional = a.posonlyargs + a.args
    for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults):
        yield f"the default of `{arg.arg}`", default
    for arg, kw_default in zip(a.kwonlyargs, a.kw_defaults):
        if kw_default is not None:
            yield f"the default of `{arg.arg}`", kw_default
    for each in [*positional, *a.kwonlyargs, a.vararg, a.kwarg]:
        if each is not None and each.annotation is not None:
            yield f"the annotation of `{each.arg}`", each.annotation
    if fn.returns is not None:
        yield "the return annotation", fn.returns


def catches_import_errors(handler: ast.ExceptHandler) -> bool:
    """`except ImportError:` and the like: what a version guard catches (a bare `except:` does not count)."""
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return all(isinstance(k, ast.Name) and k.id in ("ImportError", "ModuleNotFoundError", "AttributeError")
               for k in kinds)


def _import_guard(stmt: ast.Try) -> bool:
    """`try: <imports> except ImportError/AttributeError: <imports>`: the version guard the slicer emits. Its
    blocks are checked like the module's own statements."""
    if stmt.finalbody or stmt.orelse or not stmt.handlers:
        return False
    if not all(catches_import_errors(h) for h in stmt.handlers):
        return False
    return all(isinstance(s, (ast.Import, ast.ImportFrom, ast.Try, ast.Pass))
               for block in [stmt.body] + [h.body for h in stmt.handlers] for s in block)


def unsafe_statements(source: str) -> list[tuple[int, str]]:
    """(line, why) for each statement of the sliced module whose import could run code of the workspace's."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the import reports it as the user's syntax error; nothing ran
    scope = Scope(tree.body)
    out: list[tuple[int, str]] = []

    def check(body: list[ast.stmt]) -> None:
        for stmt in body:
            line = stmt.lineno
            if isinstance(stmt, ast.Import):
                out.extend((line, f"it imports `{a.name}`") for a in stmt.names if not allowed_import(a.name))
            elif isinstance(stmt, ast.ImportFrom):
                if stmt.level or not stmt.module or not allowed_import(stmt.module):
                    out.append((line, f"it imports from `{'.' * stmt.level}{stmt.module or ''}`"))
                elif any(a.name == "*" for a in stmt.names):
                    out.append((line, f"`from {stmt.module} import *` binds names known only by running it"))
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if not all(isinstance(t, ast.Name) for t in targets):
                    out.append((line, "it assigns to something other than a name"))
                    continue
                parts = [stmt.value] + ([stmt.annotation] if isinstance(stmt, ast.AnnAssign) else [])
                for part in parts:
                    why = part is not None and unsafe_expression(part, scope)
                    if why:
                        name = ast.unparse(targets[0])
                        out.append((line, f"the value of `{name}` cannot be computed offline: {why}"))
                        break
            elif isinstance(stmt, ast.FunctionDef):
                if not stmt.decorator_list or not all(_is_triton_jit(d, scope) for d in stmt.decorator_list):
                    out.append((line, f"`{stmt.name}` is not a plain @triton.jit function"))
                    continue
                for what, expr in _definition_parts(stmt):
                    why = unsafe_expression(expr, scope)
                    if why:
                        out.append((expr.lineno, f"{what} in `{stmt.name}` cannot be computed offline: {why}"))
            elif isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Constant) and stmt.test.value is True:
                check(stmt.body)
                check(stmt.orelse)
            elif isinstance(stmt, ast.Try) and _import_guard(stmt):
                for block in [stmt.body] + [h.body for h in stmt.handlers]:
                    check(block)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue
            elif isinstance(stmt, ast.Pass):
                continue
            else:
                out.append((line, f"a {type(stmt).__name__} statement runs code when the module is imported"))

    check(tree.body)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Dynamic: what triton's front end can reach from the kernels' bodies


def allowed_value(value: Any) -> bool:
    """Whether calling or reading `value` at compile time stays within triton.language, math and literals."""
    if isinstance(value, _LITERALS):
        return True
    if isinstance(value, tuple):
        return all(allowed_value(v) for v in value)
    if isinstance(value, types.ModuleType):
        name = value.__name__
        return name in ("triton", "math") or name.startswith(("triton.language", "triton.experimental.gluon.language"))
    module = getattr(value, "__module__", None)
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        if module == "triton":
            return getattr(value, "__name__", "") in _TRITON_FUNCTIONS
        return isinstance(module, str) and (module == "math" or module.startswith(
            ("triton.language", "triton.experimental.gluon.language")))
    kind = type(value)
    if kind.__module__ == "triton.runtime.jit" and kind.__name__ in ("JITFunction", "JITCallable"):
        return True
    return kind.__module__.startswith(("triton.language", "triton.experimental.gluon.language"))


def _holds_module(value: Any) -> bool:
    if isinstance(value, types.ModuleType):
        return True
    return isinstance(value, tuple) and any(_holds_module(v) for v in value)


def _local_names(fn: ast.FunctionDef) -> set[str]:
    a = fn.args
    out = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    out.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
    return out


def _functions(body: list[ast.stmt]) -> Iterable[ast.FunctionDef]:
    for stmt in _flatten(body):
        if isinstance(stmt, ast.FunctionDef):
            yield stmt


_MISSING = object()


def unsafe_reaches(source: str, namespace: dict[str, Any]) -> list[tuple[int, str]]:
    """(line, why) for each place a @jit function of the imported sliced module (`namespace`: its globals) could
    reach, at compile time, something outside triton.language, math and literals."""
    tree = ast.parse(source)
    fns = list(_functions(tree.body))
    out: dict[int, str] = {}
    resolved: dict[int, Any] = {}  # id(node) -> value, for chains rooted at a global
    parents: dict[int, ast.AST] = {}
    stored: list[Any] = []  # non-literal values the kernels can keep in a local or pass on

    def parts_of(fn: ast.FunctionDef) -> list[ast.AST]:
        return [fn.args, *fn.body]  # the decorator is the slice's own

    for fn in fns:
        local = _local_names(fn)
        for root in parts_of(fn):
            for node in ast.walk(root):
                for child in ast.iter_child_nodes(node):
                    parents[id(child)] = node
        for root in parts_of(fn):
            for node in ast.walk(root):
                if isinstance(node, ast.Attribute) and _dunder(node.attr):
                    out.setdefault(node.lineno, f"`{fn.name}` reaches `{node.attr}`")
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
                    value = namespace.get(node.id, _MISSING)
                    if value is _MISSING:
                        if node.id in _ALL_BUILTINS and node.id not in PURE_BUILTINS:
                            out.setdefault(node.lineno, f"`{fn.name}` uses the builtin `{node.id}`")
                        continue
                    if not allowed_value(value):
                        out.setdefault(node.lineno, f"`{fn.name}` uses `{node.id}`, which is not triton.language")
                        continue
                    resolved[id(node)] = value

    def resolve(node: ast.expr) -> Any:
        """The value of a global-rooted attribute chain (checking each step), or _MISSING."""
        if id(node) in resolved:
            return resolved[id(node)]
        if isinstance(node, ast.Attribute) and not _dunder(node.attr):
            base = resolve(node.value)
            if base is _MISSING:
                return _MISSING
            value = getattr(base, node.attr, _MISSING)
            if value is _MISSING:
                return _MISSING  # triton reports the missing attribute itself
            if not allowed_value(value):
                out.setdefault(node.lineno, f"it reaches `{ast.unparse(node)}`, which is not triton.language")
                return _MISSING
            resolved[id(node)] = value
            return value
        return _MISSING

    attributes = [n for fn in fns for root in parts_of(fn) for n in ast.walk(root) if isinstance(n, ast.Attribute)]
    for node in attributes:
        resolve(node)
    nodes = {id(n): n for fn in fns for root in parts_of(fn) for n in ast.walk(root)}
    for key, value in resolved.items():
        parent = parents.get(key)
        used_in_place = ((isinstance(parent, ast.Attribute) and parent.value is nodes[key])
                         or (isinstance(parent, ast.Call) and parent.func is nodes[key]))
        if used_in_place:
            continue
        if _holds_module(value):
            # A module kept in a local, passed, wrapped or returned could be reached later by any attribute name.
            node = nodes[key]
            out.setdefault(getattr(node, "lineno", 0), f"it uses the module `{ast.unparse(node)}` as a value")
        elif not isinstance(value, _LITERALS) and all(value is not v for v in stored):
            stored.append(value)
    # A value in a local, a call's result or an element can be any object the kernels name; try each of them.
    unknown: dict[int, list[Any]] = {}

    def candidates(node: ast.expr) -> list[Any]:
        if id(node) in resolved:
            return [resolved[id(node)]]
        if isinstance(node, ast.Attribute):
            if id(node) in unknown:
                return unknown[id(node)]
            found = []
            for base in candidates(node.value):
                value = getattr(base, node.attr, _MISSING)
                if value is _MISSING:
                    continue
                if not allowed_value(value):
                    out.setdefault(node.lineno, f"`{ast.unparse(node)}` can reach something that is not "
                                                "triton.language")
                    continue
                found.append(value)
            unknown[id(node)] = found
            return found
        return stored

    for node in attributes:
        if id(node) not in resolved:
            candidates(node)
    return sorted(out.items())
