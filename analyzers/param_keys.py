"""Where a kernel parameter is named by a string or a keyword outside the kernel's body: its decorators (autotune
configs, `key=`, `prune_configs_by`, heuristics) and the module-level functions and values they use, the grids that
read it from their `meta` dict, the `**kwargs` dicts passed at launches, and keywords at calls of a @jit helper.

A rename has to change all of them or the program breaks at run time; a place whose uses cannot be seen (a grid
passed in as an argument, a pruner imported from elsewhere, a dict built by code) is returned with the reason, so a
rename can be refused naming it instead of leaving a `meta["OLD"]` behind.
"""

from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass, field

from .model import LaunchSite, Span, TritonKernel
from .source import ImportMap, SourceText, parse_python

# Modules whose functions never read a kernel's parameters by name.
_LIBRARY_ROOTS = ("triton", "torch", "math", "functools", "itertools", "operator", "typing", "numpy", "os")
_BUILTINS = frozenset(dir(builtins))


@dataclass
class KeyUses:
    spans: set[Span] = field(default_factory=set)  # the name itself, inside its quotes or as a keyword
    unproven: list[tuple[Span, str]] = field(default_factory=list)  # a place that may use the name, and why


class _File:
    def __init__(self, text: str):
        self.src = SourceText(text)
        self.tree = parse_python(text)
        self.imports = ImportMap(self.tree.body)
        self.module_defs: dict[str, list[ast.AST]] = {}  # name -> module-level defs and assigned values
        for stmt in _module_statements(self.tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.module_defs.setdefault(stmt.name, []).append(stmt)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        self.module_defs.setdefault(t.id, []).append(stmt.value)
        self.parents: dict[ast.AST, ast.AST] = {}
        self.launch_calls: dict[Span, ast.Call] = {}  # `kernel[grid](...)`, by the span of `kernel`
        self.named_calls: dict[str, list[ast.Call]] = {}  # `f(...)`, by the name called
        for node in ast.walk(self.tree):  # one walk: each request then looks these up
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Subscript):
                    self.launch_calls[self.src.span(node.func.value)] = node
                elif isinstance(node.func, ast.Name):
                    self.named_calls.setdefault(node.func.id, []).append(node)

    def string_span(self, node: ast.Constant, name: str) -> Span | None:
        """The name inside a string literal's quotes."""
        s = self.src.span(node)
        if s.start_line != s.end_line:
            return None
        text = self.src.line(s.start_line)[s.start_col:s.end_col]
        i = text.find(name)
        return Span(s.start_line, s.start_col + i, s.start_line, s.start_col + i + len(name)) if i >= 0 else None

    def keyword_span(self, kw: ast.keyword) -> Span:
        line = kw.lineno - 1
        col = self.src.col(line, kw.col_offset)
        return Span(line, col, line, col + len(kw.arg or ""))

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return None


# A rename or references request reads the defining file and each launching one; the next request (and the
# prepareRename before a rename) reads the same texts again: the parsed files are kept by text.
@functools.lru_cache(maxsize=4)
def _parsed(text: str) -> _File:
    return _File(text)


def _module_statements(body: list[ast.stmt]):
    """Module-level statements, looking inside `if`/`try`/`with` blocks but not into functions or classes."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for inner in ("body", "orelse", "finalbody", "handlers"):
                for sub in getattr(stmt, inner, []) or []:
                    yield from _module_statements(sub.body if isinstance(sub, ast.ExceptHandler) else [sub])


def _bound_in(node: ast.AST) -> set[str]:
    """Names an expression or function binds for itself (lambda and def parameters, comprehension targets,
    assignments in a body)."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            a = sub.args
            out.update(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            out.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(sub.name)
    return out


def _is_library(dotted: str) -> bool:
    return dotted.split(".")[0] in _LIBRARY_ROOTS


def _code_uses(f: _File, root: ast.AST, name: str, out: KeyUses, seen: set[int], what: str) -> None:
    """Strings equal to the name and `name=` keywords in code run with the parameters (decorator arguments, the
    functions and values they refer to), following module-level names of the same file."""
    if id(root) in seen:
        return
    seen.add(id(root))
    bound = _bound_in(root)
    for node in ast.walk(root):
        if isinstance(node, ast.Constant) and node.value == name:
            span = f.string_span(node, name)
            if span is not None:
                out.spans.add(span)
        elif isinstance(node, ast.keyword) and node.arg == name:
            out.spans.add(f.keyword_span(node))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            _follow(f, node, name, out, seen, what)


def _follow(f: _File, node: ast.Name, name: str, out: KeyUses, seen: set[int], what: str) -> None:
    ident = node.id
    if ident in f.module_defs:
        for value in f.module_defs[ident]:
            _code_uses(f, value, name, out, seen, what)
        return
    dotted = f.imports.names.get(ident)
    if dotted is not None:
        if not _is_library(dotted):
            out.unproven.append((f.src.span(node), f"{what} uses `{ident}`, imported from `{dotted.rsplit('.', 1)[0]}`"
                                                   f": its uses of '{name}' are not visible here"))
        return
    if ident not in _BUILTINS:
        out.unproven.append((f.src.span(node), f"{what} uses `{ident}`, whose value is not known here"))


def decorator_uses(text: str, kernel: TritonKernel, name: str) -> KeyUses:
    """In the kernel's own file: the name in its decorators and in what they refer to (configs lists, pruners,
    perf models, heuristics functions), and keywords `name=` at calls of the kernel (a @jit helper)."""
    out = KeyUses()
    try:
        f = _parsed(text)
    except (SyntaxError, ValueError):
        return out
    fn = next((n for n in ast.walk(f.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.lineno - 1 == kernel.name_span.start_line), None)
    if fn is None:
        return out
    seen: set[int] = set()
    for dec in fn.decorator_list:
        _code_uses(f, dec, name, out, seen, f"the decorator of `{kernel.name}`")
    _helper_call_keywords(f, {kernel.name}, name, out)
    return out


def _helper_call_keywords(f: _File, callees: set[str], name: str, out: KeyUses) -> None:
    for callee in callees:
        for node in f.named_calls.get(callee, ()):
            for kw in node.keywords:
                if kw.arg == name:
                    out.spans.add(f.keyword_span(kw))


def importer_uses(text: str, kernel_name: str, local_names: set[str], name: str) -> KeyUses:
    """In a file importing a @jit helper: `name=` keywords at its calls."""
    out = KeyUses()
    try:
        f = _parsed(text)
    except (SyntaxError, ValueError):
        return out
    _helper_call_keywords(f, local_names or {kernel_name}, name, out)
    return out


def launch_uses(text: str, sites: list[LaunchSite], other_sites: list[LaunchSite], name: str) -> KeyUses:
    """In a file launching the kernel at `sites`: `meta["name"]` in the grids (inline lambdas, and the lambdas and
    functions a grid name is bound to) and keys of `**kwargs` dicts. A grid shared with launches of other kernels
    (`other_sites`) cannot be renamed for one of them."""
    out = KeyUses()
    try:
        f = _parsed(text)
    except (SyntaxError, ValueError):
        return out
    calls = f.launch_calls
    # Only a grid given by name can be shared with another kernel's launch: look at those launches alone.
    named = {c.func.slice.id for s in sites if (c := calls.get(s.callee_span)) is not None
             and isinstance(c.func, ast.Subscript) and isinstance(c.func.slice, ast.Name)}
    others = {id(g) for s in other_sites if (c := calls.get(s.callee_span)) is not None
              and isinstance(c.func, ast.Subscript) and isinstance(c.func.slice, ast.Name)
              and c.func.slice.id in named for g in _grid_bindings(f, c)[0]}
    for site in sites:
        call = calls.get(site.callee_span)
        if call is None:
            continue
        where = f"the launch of `{site.callee}` on line {site.span.start_line + 1}"
        bindings, problem = _grid_bindings(f, call)
        if problem is not None:
            out.unproven.append(problem)
        for grid in bindings:
            if id(grid) in others:
                out.unproven.append((f.src.span(grid), "this grid is also used to launch another kernel: renaming "
                                                       f"'{name}' in it would break that launch"))
                continue
            _meta_uses(f, grid, name, out)
        for kw in call.keywords:
            if kw.arg is None:
                _star_kwargs_uses(f, call, kw.value, name, out, where)
    return out


def _bindings(f: _File, at: ast.AST, ident: str) -> list[ast.AST] | None:
    """What a name used at `at` may be bound to: assignments and defs in the enclosing function, else at module
    level; None where it is a parameter of the enclosing function or bound by something else."""
    fn = f.enclosing_function(at)
    while fn is not None:
        a = fn.args
        if ident in {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}:
            return None
        found: list[ast.AST] = []
        plain = {id(t) for node in ast.walk(fn) if isinstance(node, (ast.Assign, ast.AnnAssign))
                 for t in (node.targets if isinstance(node, ast.Assign) else [node.target])}
        for node in ast.walk(fn):
            if node is fn:
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == ident:
                found.append(node)
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == ident for t in node.targets):
                found.append(node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and node.target.id == ident and node.value is not None:
                found.append(node.value)
            elif isinstance(node, ast.Name) and node.id == ident and isinstance(node.ctx, ast.Store) \
                    and id(node) not in plain:
                return None  # a loop target, a tuple unpacking, a walrus: bound by code
        if found:
            return found
        fn = f.enclosing_function(fn)
    return f.module_defs.get(ident)


def _grid_bindings(f: _File, call: ast.Call) -> tuple[list[ast.AST], tuple[Span, str] | None]:
    """The lambdas and functions a launch's grid may be (the grid expression itself when it is a tuple or other
    value), or the reason its `meta` uses cannot be seen."""
    assert isinstance(call.func, ast.Subscript)
    grid = call.func.slice
    if isinstance(grid, ast.Name):
        bound = _bindings(f, call, grid.id)
        if bound is None:
            return [], (f.src.span(grid), f"the grid `{grid.id}` comes from outside this function: whether it reads "
                                          "the parameter from its `meta` dict cannot be seen")
        out: list[ast.AST] = []
        for value in bound:
            if isinstance(value, ast.Call):
                # `grid = make_grid(n)`: a local function's returned lambdas and defs are followed.
                callee = value.func.id if isinstance(value.func, ast.Name) else None
                local = [d for d in f.module_defs.get(callee or "", []) if isinstance(d, ast.FunctionDef)]
                if not local:
                    return [], (f.src.span(grid), f"the grid `{grid.id}` is made by a call whose result cannot be "
                                                  "seen")
                out.extend(n for d in local for n in ast.walk(d) if n is not d
                           and isinstance(n, (ast.Lambda, ast.FunctionDef)))
            else:
                out.append(value)
        return out, None
    return [grid], None


def _meta_uses(f: _File, grid: ast.AST, name: str, out: KeyUses) -> None:
    """`meta["name"]` and `meta.get("name")` in a grid lambda or function; the dict passed on to other code is a
    place the rename cannot follow."""
    if not isinstance(grid, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
        return  # a tuple or a value: no meta dict
    args = [*grid.args.posonlyargs, *grid.args.args]
    if not args:
        return
    meta = args[0].arg
    body = grid.body if isinstance(grid.body, list) else [grid.body]
    for stmt in body:
        for node in ast.walk(stmt):
            if not (isinstance(node, ast.Name) and node.id == meta and isinstance(node.ctx, ast.Load)):
                continue
            parent = f.parents.get(node)
            key: ast.AST | None = None
            if isinstance(parent, ast.Subscript) and parent.value is node:
                key = parent.slice
            elif isinstance(parent, ast.Attribute) and parent.attr == "get":
                call = f.parents.get(parent)
                key = call.args[0] if isinstance(call, ast.Call) and call.args else None
            elif isinstance(parent, ast.Compare) or isinstance(parent, ast.Attribute) and parent.attr in ("keys",
                                                                                                       "items"):
                continue
            else:
                out.unproven.append((f.src.span(node), f"the grid passes `{meta}` on: its uses of '{name}' "
                                                       "are not visible here"))
                continue
            if isinstance(key, ast.Constant) and key.value == name:
                span = f.string_span(key, name)
                if span is not None:
                    out.spans.add(span)
            elif not isinstance(key, ast.Constant):
                out.unproven.append((f.src.span(node), f"the grid reads `{meta}` with a computed key"))


def _star_kwargs_uses(f: _File, call: ast.Call, value: ast.expr, name: str, out: KeyUses, where: str) -> None:
    """The keys of a `**kwargs` dict at a launch: a literal, `dict(...)`, or a local name bound to one of those
    (and its `d["name"] = ...` updates)."""
    values: list[ast.AST] | None = [value]
    if isinstance(value, ast.Name):
        values = _bindings(f, call, value.id)
        fn = f.enclosing_function(call)
        for node in ast.walk(fn or f.tree):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == value.id \
                    and isinstance(node.slice, ast.Constant) and node.slice.value == name:
                span = f.string_span(node.slice, name)
                if span is not None:
                    out.spans.add(span)
    if values is None:
        out.unproven.append((f.src.span(value), f"{where} passes `**{f.src.segment(value)}`, whose keys come from "
                                                "outside this function"))
        return
    for v in values:
        if isinstance(v, ast.Dict) and all(k is None or isinstance(k, ast.Constant) for k in v.keys):
            for k in v.keys:
                if isinstance(k, ast.Constant) and k.value == name:
                    span = f.string_span(k, name)
                    if span is not None:
                        out.spans.add(span)
        elif isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "dict" and not v.args:
            for kw in v.keywords:
                if kw.arg == name:
                    out.spans.add(f.keyword_span(kw))
        else:
            out.unproven.append((f.src.span(value), f"{where} passes `**{f.src.segment(value)}`, whose keys are "
                                                    "computed"))
