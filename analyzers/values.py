"""Values a launcher's code shows: a small evaluator of literal expressions and of the names they read.

Launchers write `triton.next_power_of_2(1024)`, `min(64, BLOCK)`, `cfg["BLOCK"]`, `BLOCK_M, BLOCK_N = 16, 128`.
Pure AST interpretation: nothing of the user's code is imported or run. The compile planner reads constexpr
values with it, and the launch rules read the block sizes a launch passes.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Callable

from .source import literal_value, statements

UNKNOWN = object()
TENSOR_SIZE_METHODS = frozenset({"size", "numel", "dim", "stride"})
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Div: lambda a, b: a / b,
           ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b, ast.BitAnd: lambda a, b: a & b,
           ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b,
           ast.Pow: lambda a, b: a ** b if abs(b) <= 64 else UNKNOWN}
_CMPOPS = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
           ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def _next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


_CALLS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "int": int, "abs": abs, "bool": bool, "next_power_of_2": _next_power_of_2,
          "cdiv": lambda a, b: -(-a // b)}


_MATH = {n: getattr(math, n) for n in ("log2", "log", "ceil", "floor", "sqrt", "exp", "exp2", "gcd", "isqrt",
                                       "pow", "prod") if hasattr(math, n)}


def evaluate(node: ast.AST, lookup=None, depth: int = 0) -> object:
    """The value of a literal expression, or UNKNOWN. `lookup(node)` gives the value of a name, an attribute or a
    subscript the expression reads (or UNKNOWN)."""
    if depth > 20:
        return UNKNOWN
    value = literal_value(node)
    if value is not None or (isinstance(node, ast.Constant) and node.value is None):
        return value

    def ev(n: ast.AST) -> object:
        return evaluate(n, lookup, depth + 1)

    try:
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            return UNKNOWN if UNKNOWN in (a, b) else _BINOPS[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp):
            operand: Any = ev(node.operand)
            if operand is UNKNOWN:
                return UNKNOWN
            return {ast.USub: lambda: -operand, ast.UAdd: lambda: +operand, ast.Not: lambda: not operand,
                    ast.Invert: lambda: ~operand}[type(node.op)]()
        if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = ev(right_node)
                if UNKNOWN in (left, right):
                    return UNKNOWN
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            values = [ev(v) for v in node.values]
            if UNKNOWN in values:
                return UNKNOWN
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.IfExp):
            test = ev(node.test)
            return UNKNOWN if test is UNKNOWN else ev(node.body if test else node.orelse)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and lookup is not None
                and node.func.attr in TENSOR_SIZE_METHODS):
            return lookup(node)  # `x.size(1)`, `x.numel()`: only a lookup that knows x's shape answers
        if isinstance(node, ast.Call) and not node.keywords:
            func = ast.unparse(node.func)
            name = func.split(".")[-1]
            args = [ev(a) for a in node.args]
            if UNKNOWN in args or not args:
                return UNKNOWN
            if func in ("min", "max", "int", "abs", "bool", "next_power_of_2", "cdiv",
                        "triton.next_power_of_2", "triton.cdiv"):
                return _CALLS[name](*args)
            if name == "constexpr" and len(args) == 1:  # tl.constexpr(128)
                return args[0]
            if func.startswith("math.") and name in _MATH:
                return _MATH[name](*args)
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and lookup is not None:
            return lookup(node)
    except (ArithmeticError, TypeError, ValueError, KeyError, IndexError):
        return UNKNOWN
    return UNKNOWN



def scope_at(tree: ast.Module, line: int) -> ast.AST:
    """The innermost function around a (1-based) line, else the module."""
    scope: ast.AST = tree
    for node in statements(tree.body):  # functions are statements: no need to walk every expression
        encloses = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            node.lineno <= line <= (node.end_lineno or 0))
        if encloses and (scope is tree or node.lineno >= scope.lineno):  # type: ignore[attr-defined]
            scope = node
    return scope


def assigned(body: list[ast.stmt], name: str) -> list[ast.AST | None]:
    """What `name` is bound to in a body: one expression per binding (None where it is not a plain value:
    `+=`, a loop, an unpacked call). `A, B = 16, 128` binds A to 16."""
    out: list[ast.AST | None] = []
    for sub in statements(body):
        if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id == name:
                    out.append(None if isinstance(sub, ast.AugAssign) else sub.value)
                elif isinstance(t, (ast.Tuple, ast.List)) and any(isinstance(e, ast.Name) and e.id == name
                                                                   for e in t.elts):
                    i = next(i for i, e in enumerate(t.elts) if isinstance(e, ast.Name) and e.id == name)
                    value = sub.value
                    same = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(t.elts)
                    out.append(value.elts[i] if same else None)  # type: ignore[union-attr]
        elif isinstance(sub, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            targets = [sub.target] if isinstance(sub, (ast.For, ast.AsyncFor)) else [
                i.optional_vars for i in sub.items if i.optional_vars is not None]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                out.append(None)
    return out


class Resolver:
    """Values of a launch's arguments read from the launcher's code: literals, names bound once to them (tuple
    assignments, parameter defaults, module constants), `cfg["BLOCK"]` of a dict literal, `cfg.BLOCK` of a call
    with literal keywords or of a class attribute, and arithmetic, min/max, triton.next_power_of_2 of those."""

    def __init__(self, tree: ast.Module, line: int, defaults: bool = True):
        # defaults=False: a parameter's default is not its value (a caller may pass another one)
        self.defaults = defaults
        self.tree = tree
        self.scope = scope_at(tree, line)
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.seen: set[str] = set()

    def binding(self, name: str) -> ast.AST | None:
        """The one expression `name` is bound to, None if unknown (several bindings, a parameter)."""
        scope = self.scope
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            values = assigned(scope.body, name)
            a = scope.args
            positional = a.posonlyargs + a.args
            defaults = dict(zip([x.arg for x in positional[len(positional) - len(a.defaults):]], a.defaults))
            defaults.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
            if values:
                return values[0] if len(values) == 1 else None
            if name in defaults and self.defaults:
                return defaults[name]
            if name in [x.arg for x in positional + a.kwonlyargs]:
                return None  # a parameter without a default: the caller decides
        if name in self.classes:
            return self.classes[name]
        values = assigned(self.tree.body, name)
        return values[0] if len(values) == 1 else None

    def value(self, node: ast.AST) -> object:
        return evaluate(node, self.lookup)

    def lookup(self, node: ast.AST) -> object:
        if isinstance(node, ast.Name):
            if node.id in self.seen:
                return UNKNOWN  # `n = n + 1` style cycles
            bound = self.binding(node.id)
            if bound is None or isinstance(bound, ast.ClassDef):
                return UNKNOWN
            self.seen.add(node.id)
            try:
                return self.value(bound)
            finally:
                self.seen.discard(node.id)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            bound = self.binding(node.value.id)
            key = self.value(node.slice)
            if isinstance(bound, ast.Dict) and key is not UNKNOWN:
                for k, v in zip(bound.keys, bound.values):
                    if k is not None and self.value(k) == key:
                        return self.value(v)
            if isinstance(bound, ast.Call):  # dict(BLOCK=64)
                for kw in bound.keywords:
                    if kw.arg == key:
                        return self.value(kw.value)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            bound = self.binding(node.value.id)
            if isinstance(bound, ast.Call):  # Config(BLOCK=64).BLOCK, SimpleNamespace(...)
                for kw in bound.keywords:
                    if kw.arg == node.attr:
                        return self.value(kw.value)
            if isinstance(bound, ast.ClassDef):
                values = assigned(bound.body, node.attr)
                if len(values) == 1 and values[0] is not None:
                    return self.value(values[0])
        return UNKNOWN


