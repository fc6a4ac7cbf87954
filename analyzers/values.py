"""Values a launcher's code shows: a small evaluator of literal expressions and of the names they read.

Launchers write `triton.next_power_of_2(1024)`, `min(64, BLOCK)`, `cfg["BLOCK"]`, `BLOCK_M, BLOCK_N = 16, 128`.
Pure AST interpretation: nothing of the user's code is imported or run. The compile planner reads constexpr
values with it, and the launch rules read the block sizes a launch passes.
"""

from __future__ import annotations

import ast
import bisect
import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from .budget import MAX_INT_BITS, MAX_NESTING, UNKNOWN, Budget, analysis_budget, bounded_binop, too_big
from .budget import current as current_budget
from .source import StatementMemo, literal_value, statements

_MISSING = StatementMemo.MISSING

TENSOR_SIZE_METHODS = frozenset({"size", "numel", "dim", "stride"})
_CMPOPS = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
           ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def _next_power_of_2(n: int) -> int:
    if not isinstance(n, int):  # triton's bit twiddling raises TypeError on a float too
        raise TypeError(f"next_power_of_2 of {type(n).__name__}")
    return 0 if n <= 0 else 1 << (n - 1).bit_length()  # triton.next_power_of_2 gives 0 for n <= 0 too


def _int(value: object) -> object:
    if isinstance(value, (str, bytes)) and len(value) > 64:
        return UNKNOWN  # int() of a long digit string is quadratic; no size is that long
    return int(value)  # type: ignore[call-overload]


_CALLS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "int": _int, "abs": abs, "bool": bool,
                                         "next_power_of_2": _next_power_of_2,
                                         "cdiv": lambda a, b: (a + b - 1) // b}  # as triton.cdiv writes it
_CALL_NAMES = frozenset({"min", "max", "int", "abs", "bool", "next_power_of_2", "cdiv", "triton.next_power_of_2",
                         "triton.cdiv"})

_MATH = {n: getattr(math, n) for n in ("log2", "log", "ceil", "floor", "sqrt", "exp", "exp2", "gcd", "isqrt",
                                       "pow", "prod") if hasattr(math, n)}


def _cost(value: object) -> int:
    """Extra steps a value costs to build and to pass around: big values pay for their size."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() >> 8
    if isinstance(value, (str, bytes, tuple, list, dict, set, frozenset)):
        return len(value) >> 4
    return 0


def _fits(value: object) -> object:
    return UNKNOWN if too_big(value) else value


def evaluate(node: ast.AST, lookup=None, depth: int = 0) -> object:
    """The value of a literal expression, or UNKNOWN. `lookup(node)` gives the value of a name, an attribute or a
    subscript the expression reads (or UNKNOWN).

    Bounded by construction: every step is paid from the running analysis's budget (analyzers.budget; a budget
    of its own for a call outside one), sizes are checked before values are built, and evaluations nested
    through names stop at MAX_NESTING."""
    budget = current_budget()
    if budget is None:
        with analysis_budget(Budget()):
            return evaluate(node, lookup, depth)
    if depth > 20 or budget.nesting >= MAX_NESTING or not budget.step():
        return UNKNOWN
    budget.nesting += 1
    try:
        return _evaluate(node, lookup, depth, budget)
    finally:
        budget.nesting -= 1


def _evaluate(node: ast.AST, lookup, depth: int, budget: Budget) -> object:
    elts = getattr(node, "elts", None) or getattr(node, "keys", None)
    if elts is not None and not budget.pay(len(elts) >> 4):  # a literal's reading costs its length
        return UNKNOWN
    value = literal_value(node)
    if value is not None or (isinstance(node, ast.Constant) and node.value is None):
        return _fits(value)

    def ev(n: ast.AST) -> object:
        v = evaluate(n, lookup, depth + 1)
        return v if budget.pay(_cost(v)) else UNKNOWN

    try:
        if isinstance(node, ast.BinOp):
            a = ev(node.left)
            if a is UNKNOWN:
                return UNKNOWN
            b = ev(node.right)
            return UNKNOWN if b is UNKNOWN else bounded_binop(type(node.op), a, b)
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
            values = []
            for v in node.values:
                values.append(ev(v))
                if values[-1] is UNKNOWN:
                    return UNKNOWN
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.IfExp):
            test = ev(node.test)
            return UNKNOWN if test is UNKNOWN else ev(node.body if test else node.orelse)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and lookup is not None
                and node.func.attr in TENSOR_SIZE_METHODS):
            return lookup(node)  # `x.size(1)`, `x.numel()`: only a lookup that knows x's shape answers
        if isinstance(node, ast.Call) and not node.keywords and node.args:
            func = _dotted(node.func)
            name = func.split(".")[-1] if func else ""
            # Which function is known before any argument is read: `len('a' * (1 << 34))` reads nothing.
            if not (func in _CALL_NAMES or (name == "constexpr" and len(node.args) == 1)
                    or (func.startswith("math.") and name in _MATH)):
                return UNKNOWN
            args = []
            for a in node.args:
                args.append(ev(a))
                if args[-1] is UNKNOWN:
                    return UNKNOWN
            if name == "constexpr":  # tl.constexpr(128)
                return args[0]
            if func in _CALL_NAMES:
                return _fits(_CALLS[name](*args))
            if name == "prod" and not (isinstance(args[0], (tuple, list)) and sum(
                    x.bit_length() if isinstance(x, int) else 64 for x in args[0]) <= MAX_INT_BITS):
                return UNKNOWN  # a product's size is its factors' sizes added up
            if name == "pow" and not all(isinstance(x, (int, float)) for x in args):
                return UNKNOWN
            return _fits(_MATH[name](*args))
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and lookup is not None:
            return _fits(lookup(node))
    except (ArithmeticError, TypeError, ValueError, KeyError, IndexError):
        return UNKNOWN
    return UNKNOWN


def _dotted(node: ast.AST) -> str:
    """`a.b.c` as written, "" for anything else (what a call's function is, without unparsing an expression)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute) and len(parts) < 8:
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def scope_at(tree: ast.Module, line: int) -> ast.AST:
    """The innermost function around a (1-based) line, else the module."""
    return ModuleIndex(tree.body).scope_at(line) or tree


def _innermost(stmts: list[ast.stmt], line: int) -> ast.AST | None:
    scope: ast.AST | None = None
    for node in statements(stmts):  # functions are statements: no need to walk every expression
        encloses = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            node.lineno <= line <= (node.end_lineno or 0))
        if encloses and (scope is None or node.lineno >= scope.lineno):  # type: ignore[attr-defined]
            scope = node
    return scope


def assigned(body: list[ast.stmt], name: str) -> list[ast.AST | None]:
    """What `name` is bound to in a body: one expression per binding (None where it is not a plain value:
    `+=`, a loop, an unpacked call). `A, B = 16, 128` binds A to 16."""
    return bindings(body).get(name, [])


def bindings(body: list[ast.stmt]) -> dict[str, list[ast.AST | None]]:
    """`assigned(body, name)` for every name bound in a body, in one walk."""
    out: dict[str, list[ast.AST | None]] = {}
    for sub in statements(body):
        if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(None if isinstance(sub, ast.AugAssign) else sub.value)
                elif isinstance(t, (ast.Tuple, ast.List)):
                    value = sub.value
                    same = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(t.elts)
                    named: set[str] = set()
                    for i, e in enumerate(t.elts):
                        if isinstance(e, ast.Name) and e.id not in named:  # `a, a = ...` binds a once, to the first
                            named.add(e.id)
                            out.setdefault(e.id, []).append(value.elts[i] if same else None)  # type: ignore[union-attr]
        elif isinstance(sub, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            targets = [sub.target] if isinstance(sub, (ast.For, ast.AsyncFor)) else [
                i.optional_vars for i in sub.items if i.optional_vars is not None]
            for name in {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}:
                out.setdefault(name, []).append(None)
    return out


class ModuleIndex:
    """What resolving names in a module reads, built once per analysis instead of walking the module for each
    launch site and name: the top-level statements by line (a function around a line lies inside the top-level
    statement around it), the module's bindings (nested ones included, as `assigned(module.body, name)` counts
    them) and its classes. With a StatementMemo, each top-level statement's bindings are read once per parse.

    `recording()` collects the module-level names a computation resolved and what they resolved to, so a result
    memoised per statement can be reused while `unchanged(deps)` holds (bindings are compared by identity: the
    parse cache keeps the nodes of unchanged statements).
    """

    def __init__(self, body: list[ast.stmt], memo: StatementMemo | None = None):
        self.body = body
        self.memo = memo
        self._lines = [s.lineno for s in body]
        self.classes = {n.name: n for n in body if isinstance(n, ast.ClassDef)}
        self._module: dict[str, list[ast.AST | None]] | None = None
        self._local: dict[int, tuple[ast.AST, dict[str, list[ast.AST | None]]]] = {}
        self._deps: dict[str, ast.AST | None] | None = None

    def scope_at(self, line: int) -> ast.AST | None:
        """The innermost function around a (1-based) line, None at module level."""
        i = bisect.bisect_right(self._lines, line)
        around: list[ast.stmt] = []
        while i > 0 and (self.body[i - 1].end_lineno or 0) >= line:  # end lines never decrease along a body
            i -= 1
            around.append(self.body[i])
        return _innermost(around[::-1], line) if around else None

    def local(self, node: ast.AST) -> dict[str, list[ast.AST | None]]:
        """The bindings of a function's or class's body."""
        known = self._local.get(id(node))
        if known is None or known[0] is not node:
            known = self._local[id(node)] = (node, bindings(node.body))  # type: ignore[attr-defined]
        return known[1]

    def _module_bindings(self) -> dict[str, list[ast.AST | None]]:
        if self._module is None:
            merged: dict[str, list[ast.AST | None]] = {}
            for stmt in self.body:
                part = self.memo.get("bindings", stmt, None)[0] if self.memo is not None else _MISSING
                if part is _MISSING:
                    part = bindings([stmt])
                    if self.memo is not None:
                        self.memo.put("bindings", stmt, None, part)
                for name, values in part.items():  # type: ignore[attr-defined]
                    merged.setdefault(name, []).extend(values)
            self._module = merged
        return self._module

    def _resolve(self, name: str) -> ast.AST | None:
        if name in self.classes:
            return self.classes[name]
        values = self._module_bindings().get(name, ())
        return values[0] if len(values) == 1 else None

    def module_binding(self, name: str) -> ast.AST | None:
        """The class or the one expression `name` is bound to at module level, None if unknown."""
        found = self._resolve(name)
        if self._deps is not None:
            self._deps.setdefault(name, found)
        return found

    @contextmanager
    def recording(self) -> Iterator[dict[str, ast.AST | None]]:
        outer, self._deps = self._deps, {}
        try:
            yield self._deps
        finally:
            if outer is not None:  # a nested computation's dependencies are the outer one's too
                outer.update({k: v for k, v in self._deps.items() if k not in outer})
            self._deps = outer

    def unchanged(self, deps: dict[str, ast.AST | None]) -> bool:
        return all(self._resolve(name) is found for name, found in deps.items())


class Resolver:
    """Values of a launch's arguments read from the launcher's code: literals, names bound once to them (tuple
    assignments, parameter defaults, module constants), `cfg["BLOCK"]` of a dict literal, `cfg.BLOCK` of a call
    with literal keywords or of a class attribute, and arithmetic, min/max, triton.next_power_of_2 of those."""

    def __init__(self, tree: ast.Module, line: int, defaults: bool = True, index: ModuleIndex | None = None):
        # defaults=False: a parameter's default is not its value (a caller may pass another one)
        self.defaults = defaults
        self.tree = tree
        self.index = index if index is not None else ModuleIndex(tree.body)
        self.scope = self.index.scope_at(line) or tree
        self.classes = self.index.classes
        self.seen: set[str] = set()

    def binding(self, name: str) -> ast.AST | None:
        """The one expression `name` is bound to, None if unknown (several bindings, a parameter)."""
        scope = self.scope
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            values = self.index.local(scope).get(name, [])
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
        return self.index.module_binding(name)

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
                values = self.index.local(bound).get(node.attr, [])
                if len(values) == 1 and values[0] is not None:
                    return self.value(values[0])
        return UNKNOWN


