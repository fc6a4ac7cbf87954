"""Which of a kernel's block sizes a tiling search may change, and where their values are written.

A launch's keyword value is followed through the code as people write it: a local (`tile = 16`), a dict or a
config object (`cfg["BLOCK"]`, `cfg.block` of `Cfg(block=64)`), a parameter of the launcher given a constant by
its callers or its default, and a value computed at run time (`triton.next_power_of_2(n_cols)`). Then:

- free: the search may change it. Its value is a constant written at one place (the edit goes there, so a grid
  computed from the same local follows it), or the grid is a function of the meta-parameters, or a loop of the
  kernel steps by it (any block covers the data);
- tied: the kernel's correctness depends on its value. The grid does not use it and no loop of the kernel steps by
  it, so each program covers its whole extent with one block (a one-pass softmax): a smaller block would leave part
  of the row unread. Kept at its value;
- frozen: the search cannot write it safely (the grid repeats its value by another expression, it is assigned in
  several places, it comes from outside the file).

Each one says why. Pure: ast only, never raises on odd source.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .source import parse_python

LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "grid"}
_LOOPS = {"range", "static_range", "tl.range", "tl.static_range", "triton.language.range"}

Range = tuple[int, int, int, int]  # 0-based start line, start col, end line, end col


@dataclass(frozen=True)
class Tunable:
    name: str  # the launch keyword (the kernel's constexpr)
    status: str  # "free" | "tied" | "frozen"
    reason: str
    site: Range | None = None  # the constant to edit (None: the launch keyword's value)


def own_nodes(scope: ast.AST):
    """The nodes of a module or function body, not those of functions or classes nested in it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def bindings(scope: ast.AST) -> dict[str, list[ast.AST]]:
    """Name -> the expressions (or functions) assigned to it in the scope's own body."""
    bound: dict[str, list[ast.AST]] = {}
    for node in own_nodes(scope):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    bound.setdefault(t.id, []).append(node.value)
                else:  # a, b = ...: the value of each is not one expression
                    for name in ast.walk(t):
                        if isinstance(name, ast.Name):
                            bound.setdefault(name.id, []).append(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) and node.value:
            bound.setdefault(node.target.id, []).append(node if isinstance(node, ast.AugAssign) else node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.For, ast.comprehension)):
            for name in ast.walk(node.target):
                if isinstance(name, ast.Name):
                    bound.setdefault(name.id, []).append(node)
    return bound


def grid_expressions(grid: ast.AST, bound: dict[str, list[ast.AST]]) -> set[str] | None:
    """The text of every expression a tuple grid is computed from, following the names it reads through the
    scope's assignments; None where the grid is a function (a lambda or a def)."""
    nodes = grid_nodes(grid, bound)
    return None if nodes is None else {ast.unparse(n) for n in nodes}


def grid_nodes(grid: ast.AST, bound: dict[str, list[ast.AST]]) -> list[ast.expr] | None:
    """Every expression node a tuple grid is computed from (see grid_expressions)."""
    seen: set[str] = set()
    nodes: list[ast.expr] = []
    todo = [grid]
    first = True
    while todo:
        expr = todo.pop()
        if isinstance(expr, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            if first or expr is grid:
                return None
            continue
        first = False
        for sub in ast.walk(expr):
            if isinstance(sub, ast.expr):
                nodes.append(sub)
            if isinstance(sub, ast.Name) and sub.id not in seen:
                seen.add(sub.id)
                values = bound.get(sub.id, [])
                if sub is expr and expr is grid and any(isinstance(v, (ast.Lambda, ast.FunctionDef,
                                                                         ast.AsyncFunctionDef)) for v in values):
                    return None
                todo.extend(v for v in values if isinstance(v, ast.expr))
    return nodes


@dataclass
class _Origin:
    kind: str  # "constant" | "computed" | "unknown"
    texts: list[str]  # the expressions the value passed through (the keyword's own first)
    site: ast.AST | None = None  # the constant
    detail: str = ""
    site_expr: ast.AST | None = None  # the expression a computed value comes from


def _range(node: ast.AST) -> Range:
    assert isinstance(node, ast.expr)
    return (node.lineno - 1, node.col_offset, (node.end_lineno or node.lineno) - 1,
            node.end_col_offset if node.end_col_offset is not None else node.col_offset)


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)


def _follow(expr: ast.AST, bound: dict[str, list[ast.AST]], functions: dict[str, list[ast.AST]],
            tree: ast.Module, scope: ast.AST, depth: int = 0) -> _Origin:
    texts = [ast.unparse(expr)]
    if depth > 8:
        return _Origin("unknown", texts, detail="followed too far")
    if _is_int(expr):
        return _Origin("constant", texts, expr)
    if isinstance(expr, ast.Name):
        values = bound.get(expr.id)
        if values is None:
            return _through_callers(expr.id, scope, tree, functions, texts, depth)
        if len(values) != 1 or not isinstance(values[0], ast.expr):
            return _Origin("unknown", texts, detail=f"`{expr.id}` is assigned in more than one place")
        got = _follow(values[0], bound, functions, tree, scope, depth + 1)
        return _Origin(got.kind, texts + got.texts, got.site, got.detail, got.site_expr)
    if isinstance(expr, (ast.Subscript, ast.Attribute)) and isinstance(expr.value, ast.Name):
        held = _holder(expr.value.id, bound, tree, scope)
        if held is not None:
            holder, holder_scope = held
            entry: ast.AST | None = None
            if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) \
                    and isinstance(holder, ast.Dict):
                entry = next((v for k, v in zip(holder.keys, holder.values)
                              if isinstance(k, ast.Constant) and k.value == expr.slice.value), None)
            elif isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) \
                    and isinstance(holder, ast.Call) and ast.unparse(holder.func) == "dict":
                entry = next((kw.value for kw in holder.keywords if kw.arg == expr.slice.value), None)
            elif isinstance(expr, ast.Attribute) and isinstance(holder, ast.Call):
                entry = next((kw.value for kw in holder.keywords if kw.arg == expr.attr), None)
            if entry is not None:
                inner = bound if holder_scope is scope else bindings(holder_scope)
                got = _follow(entry, inner, functions, tree, holder_scope, depth + 1)
                return _Origin(got.kind, texts + got.texts, got.site, got.detail, got.site_expr)
    if isinstance(expr, (ast.Subscript, ast.Attribute)):
        return _Origin("unknown", texts, detail=f"`{texts[0]}` could not be followed to a constant")
    return _Origin("computed", texts, detail=texts[0], site_expr=expr)


def _holder(name: str, bound: dict[str, list[ast.AST]], tree: ast.Module, scope: ast.AST, depth: int = 0
            ) -> tuple[ast.AST, ast.AST] | None:
    """The one dict or config object a name holds, and the scope it is written in: assigned once in the scope,
    or passed by the one caller of the launcher."""
    values = bound.get(name)
    if values is not None:
        if len(values) != 1:
            return None
        value = values[0]
        if isinstance(value, ast.Name) and depth < 8:
            return _holder(value.id, bound, tree, scope, depth + 1)
        return (value, scope) if isinstance(value, (ast.Dict, ast.Call)) else None
    passed = _passed(name, scope, tree)
    if passed is None or len(passed[0]) != 1 or passed[1]:
        return None
    value, caller = passed[0][0]
    if isinstance(value, ast.Name) and depth < 8:
        return _holder(value.id, bindings(caller), tree, caller, depth + 1)
    return (value, caller) if isinstance(value, (ast.Dict, ast.Call)) else None


def _passed(name: str, scope: ast.AST, tree: ast.Module
            ) -> tuple[list[tuple[ast.AST, ast.AST]], int] | None:
    """What the callers in the file pass for parameter `name` of the function `scope`: (value, caller scope) for
    each call that passes it, and how many calls do not. None where `name` is not a parameter of `scope`."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = scope.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if name not in positional + [a.arg for a in args.kwonlyargs]:
        return None
    index = positional.index(name) if name in positional else None
    passed: list[tuple[ast.AST, ast.AST]] = []
    unpassed = 0
    for caller in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        for node in own_nodes(caller):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == scope.name):
                continue
            value = next((kw.value for kw in node.keywords if kw.arg == name), None)
            if value is None and index is not None and index < len(node.args) \
                    and not any(isinstance(a, ast.Starred) for a in node.args[:index + 1]):
                value = node.args[index]
            if value is None:
                unpassed += 1
            else:
                passed.append((value, caller))
    return passed, unpassed


def _through_callers(name: str, scope: ast.AST, tree: ast.Module, functions: dict[str, list[ast.AST]],
                     texts: list[str], depth: int) -> _Origin:
    """A parameter of the launcher: its value is the constant the one caller in the file passes, or its default
    where no caller passes it."""
    passed = _passed(name, scope, tree)
    if passed is None:
        where = f" in `{scope.name}`" if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else ""
        return _Origin("unknown", texts, detail=f"`{name}` is not assigned{where} in this file")
    assert isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
    calls, unpassed = passed
    where = f"a parameter of `{scope.name}`"
    args = scope.args
    positional = args.posonlyargs + args.args
    defaults: dict[str, ast.AST] = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):],
                                            args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    if not calls and name in defaults:
        got = _follow(defaults[name], {}, functions, tree, tree, depth + 1)
        return _Origin(got.kind, texts + got.texts, got.site, got.detail or where, got.site_expr)
    if len(calls) == 1 and not unpassed:
        value, caller = calls[0]
        got = _follow(value, bindings(caller), functions, tree, caller, depth + 1)
        return _Origin(got.kind, texts + got.texts, got.site, got.detail or where, got.site_expr)
    count = len(calls) + unpassed
    return _Origin("unknown", texts, detail=f"`{name}` is {where}, given by {count} calls in this file"
                   if count else f"`{name}` is {where}, not called in this file")


def _loop_steps(kernel_def: ast.AST | None) -> set[str]:
    """Constexpr names that a loop of the kernel reads in its range: a block that tiles a dimension."""
    out: set[str] = set()
    if kernel_def is None:
        return out
    for node in ast.walk(kernel_def):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and ast.unparse(node.iter.func) in _LOOPS:
            out |= {n.id for a in node.iter.args for n in ast.walk(a) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.While):
            out |= {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
            for sub in ast.walk(node):
                if isinstance(sub, ast.AugAssign):
                    out |= {n.id for n in ast.walk(sub.value) if isinstance(n, ast.Name)}
    return out


def _launch_sites(tree: ast.Module, kernel: str):
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        for node in own_nodes(scope):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                callee = node.func.value
                called = callee.id if isinstance(callee, ast.Name) else \
                    callee.attr if isinstance(callee, ast.Attribute) else None
                if called == kernel:
                    yield scope, node


def tunables(source: str, kernel: str) -> dict[str, Tunable] | None:
    """Each launch keyword of `kernel` in `source` (launch options aside): free, tied or frozen, and why.
    None where the file has no launch of `kernel` to read (or does not parse). A keyword decided differently at
    two launches takes the stricter decision."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return None
    functions: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, []).append(node)
    kernel_def = next(iter(functions.get(kernel, [])), None)
    steps = _loop_steps(kernel_def)
    out: dict[str, Tunable] = {}
    found = False
    order = {"free": 0, "frozen": 1, "tied": 2}
    for scope, call in _launch_sites(tree, kernel):
        found = True
        bound = bindings(scope)
        assert isinstance(call.func, ast.Subscript)
        grid = grid_nodes(call.func.slice, bound)
        grid_value: ast.AST = call.func.slice
        if isinstance(grid_value, ast.Name) and len(bound.get(grid_value.id, [])) == 1:
            grid_value = bound[grid_value.id][0]
        grid_text = ast.unparse(grid_value)
        for kw in call.keywords:
            if not kw.arg or kw.arg in LAUNCH_OPTIONS:
                continue
            decided = _decide(kw, _follow(kw.value, bound, functions, tree, scope), grid, grid_text,
                              kw.arg in steps)
            if decided.status == "tied" and kernel_def is None:
                # Without the kernel's source, whether a loop steps by it (and so any block is correct) is unknown.
                decided = Tunable(kw.arg, "frozen", f"`{kernel}` is defined in another file, so whether one block "
                                  f"must cover its data cannot be read: kept at its value")
            before = out.get(kw.arg)
            if before is None or order[decided.status] > order[before.status] \
                    or (decided.status == before.status == "free" and decided.site != before.site):
                if before is not None and decided.status == before.status == "free":
                    decided = Tunable(kw.arg, "frozen", "its launches write it at different places")
                out[kw.arg] = decided
    return out if found else None


def _decide(kw: ast.keyword, origin: _Origin, grid: list[ast.expr] | None, grid_text: str,
            looped: bool) -> Tunable:
    name = kw.arg or ""
    chain = origin.texts
    texts = {ast.unparse(n) for n in grid} if grid is not None else set()
    if origin.kind == "constant" and origin.site is not None:
        site_node = origin.site
        value = getattr(site_node, "value", None)
        site = None if site_node is kw.value else _range(site_node)
        where = f"set by `{chain[-2]} = {chain[-1]}` at line {site[0] + 1}" if site is not None \
            else "a constant at the launch"
        if grid is None:
            return Tunable(name, "free", f"{where}; the grid is a function of the meta-parameters", site)
        # The grid follows the value where it reads it through the same name (the local, the dict entry); it
        # repeats it where the same number is written into the grid a second time.
        follows = any(t in texts for t in chain[:-1])
        repeats = any(_is_int(n) and getattr(n, "value", None) == value and n is not site_node for n in grid)
        if follows:
            return Tunable(name, "free", f"{where}; the grid {grid_text} is computed from it and follows it", site)
        if repeats:
            return Tunable(name, "frozen", f"the grid {grid_text} repeats its value {value}: changing one would "
                           f"not change the other")
        if looped:
            return Tunable(name, "free", f"{where}; a loop of the kernel steps by it", site)
        return Tunable(name, "tied", f"the grid {grid_text} does not use it and no loop of the kernel steps by it: "
                       f"each program covers its whole extent with one block of {value}, so a smaller one would "
                       f"skip data")
    if origin.kind == "computed":
        what = f"computed at run time (`{origin.detail}`)"
        if grid is None:
            return Tunable(name, "free", f"{what}; the grid is a function of the meta-parameters and follows it "
                           f"(the proposal writes a constant at the launch)")
        if any(t in texts for t in chain):
            return Tunable(name, "frozen", f"{what}, and the grid {grid_text} is computed from it")
        if looped:
            return Tunable(name, "free", f"{what}; a loop of the kernel steps by it, so a constant block is "
                           f"correct too (the proposal writes one at the launch)")
        covers = _covered(origin.site_expr) or "what it is computed from"
        return Tunable(name, "tied", f"{what} and must cover {covers}: the grid {grid_text} does not use it and "
                       f"no loop of the kernel steps by it, so a smaller block would leave part of each "
                       f"program's data unread")
    return Tunable(name, "frozen", f"{origin.detail or 'its value could not be followed'}: kept at its value")


def _covered(expr: ast.AST | None) -> str | None:
    """`n_cols` of `triton.next_power_of_2(n_cols)`: what a block computed to cover it must cover."""
    if isinstance(expr, ast.Call) and ast.unparse(expr.func).split(".")[-1] == "next_power_of_2" and expr.args:
        return f"`{ast.unparse(expr.args[0])}`"
    return None
