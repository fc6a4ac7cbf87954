"""What a candidate may change, decided on the syntax trees of the user's file and the candidate file.

A candidate may change the kernel the action is about, its launcher and @triton.jit helpers, and add new
undecorated functions, constants and whitelisted imports. Everything else that would run when the module is
imported (assignments of computed values, calls, patches of torch, new classes, other imports) and everything the
correctness spec reads (its decorator, inputs function, reference, and the module-level names they use, however
indirectly) must stay as it was. Statements are compared by name with `ast.dump`, never as text: a comment or
blank line is not a change, a renamed argument is. Pure: no torch, no triton.

    refusals(old_text, new_text, kernel, action)   # -> ["line 12 assigns torch.randn at module level: ..."]
    tautology(new_text, kernel)                    # -> "the reference calls add_kernel: ..." or None
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from analyzers import analyze_source
from analyzers.source import ImportMap, parse_python
from analyzers.specs import SPEC_DECORATOR, find_specs

ONLY = "a candidate may change only the kernel, its launcher and @triton.jit helpers"
SPEC_FIXED = "the spec, its reference, inputs and tolerances may not change"
CERTIFY = "a kernel cannot certify itself; write the reference in plain PyTorch"

# Modules a candidate may import (their submodules too): importing them runs only library code. Per action:
# ports add the NKI packages, "Write a spec" the spec decorator.
IMPORTS = ("torch", "triton", "math", "numpy", "typing")
ACTION_IMPORTS = {"port": ("nki",), "spec": ("kernel_lsp.spec",)}
TRITON_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit",
                     "triton.runtime.autotune", "triton.runtime.heuristics"}
NKI_DECORATORS = {"nki.jit"}
# Calls allowed in what runs at import (decorator arguments, default values, constants): they build values and
# touch nothing else. A module-level definition of the same name takes the name away from this list.
PURE_CALLS = {"triton.Config", "triton.language.constexpr", "triton.cdiv", "triton.next_power_of_2",
              "dict", "list", "tuple", "set", "frozenset", "range", "len", "min", "max", "abs", "int", "float",
              "str", "bool", "sorted", "zip", "enumerate", "reversed"} | TRITON_DECORATORS | NKI_DECORATORS \
    | {SPEC_DECORATOR}
# What a function written by the model may not do, whenever it runs: reach other frames, globals or the import
# system, or patch what it did not define (torch.randn = ..., setattr(torch, ...)).
REACHING_CALLS = {"setattr", "delattr", "globals", "locals", "vars", "eval", "exec", "compile", "__import__",
                  "sys._getframe", "inspect.currentframe", "inspect.stack", "inspect.getouterframes",
                  "gc.get_objects", "gc.get_referrers", "gc.get_referents"}
REACHING_MODULES = ("importlib", "inspect", "gc", "builtins", "ctypes", "sys.modules")
REACHING_ATTRS = {"__globals__", "__builtins__", "__dict__", "__code__", "__closure__", "__setattr__",
                  "__subclasses__", "f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "cr_frame"}


@dataclass(frozen=True)
class _Module:
    """One file: its top-level statements by the names they bind, its imports, kernels and launchers."""

    tree: ast.Module
    imports: ImportMap
    named: dict[str, ast.stmt]  # function, class and assignment statements by the name they bind
    bound: set[str]  # every top-level name, imports included
    kernels: set[str]  # @triton.jit functions
    launchers: set[str]  # functions that launch a kernel, or that a spec names as launcher=

    @property
    def launcher_helpers(self) -> set[str]:
        """Undecorated functions the launchers call, however indirectly (a num_warps heuristic, a grid
        function): part of the launcher, which candidates may change."""
        out: set[str] = set()
        todo = [n for name in self.launchers if name in self.named for n in _loads(self.named[name])]
        while todo:
            name = todo.pop()
            node = self.named.get(name)
            if name not in out and isinstance(node, _FUNCS) and not node.decorator_list:
                out.add(name)
                todo += _loads(node)
        return out - self.launchers

    @classmethod
    def parse(cls, text: str) -> _Module:
        tree = parse_python(text)
        named: dict[str, ast.stmt] = {}
        bound: set[str] = set()
        for node in tree.body:
            bound.update(_binds(node))
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in _binds(node):
                    named.setdefault(name, node)
        analysis = analyze_source(text)
        kernels = {k.name for k in analysis.kernels}
        launchers = {s.launcher for s in find_specs(text) if s.launcher and "." not in s.launcher}
        for site in analysis.launch_sites:
            if site.target in kernels:
                launchers |= {n for n, node in named.items() if isinstance(node, _FUNCS)
                              and node.lineno - 1 <= site.span.start_line <= (node.end_lineno or 0) - 1}
        return cls(tree, ImportMap(tree.body), named, bound, kernels, launchers)


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_Why = tuple[int, str]  # (1-based line of the candidate file, what the statement there does and why it may not)


def _binds(node: ast.stmt) -> list[str]:
    if isinstance(node, (*_FUNCS, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [name for t in node.targets for name in _target_names(t)]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
        return [node.target.id]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    return []


def _target_names(target: ast.expr) -> list[str]:
    """The names an assignment target binds: `a`, `a, b`; none for `torch.randn` or `d[k]`."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _target_names(e)]
    return _target_names(target.value) if isinstance(target, ast.Starred) else []


def _key(node: ast.stmt) -> str:
    names = _binds(node)
    if names and not isinstance(node, (ast.Import, ast.ImportFrom)):
        return "def " + ",".join(names)
    return ast.dump(node)  # imports and statements that bind nothing are what they are


def _changed(old: _Module, new: _Module) -> Iterator[tuple[ast.stmt, ast.stmt | None]]:
    """(new statement, the user's statement of that name or None) for each top-level statement the candidate
    changed or added, in order. A statement that binds nothing counts as added when there is more of it."""
    have = Counter(ast.dump(n) for n in old.tree.body)
    by_key = {_key(n): n for n in old.tree.body}
    for node in new.tree.body:
        dump = ast.dump(node)
        if have[dump] > 0:
            have[dump] -= 1
            continue
        yield node, by_key.get(_key(node))


# -- what the candidate may change -------------------------------------------------------------------------------


def refusals(old_text: str, new_text: str, kernel: str, action: str) -> list[str]:
    """Why the candidate file may not replace the user's file (empty: it may). Each reason names the candidate
    file's line and what the statement there does."""
    try:
        old, new = _Module.parse(old_text), _Module.parse(new_text)
    except SyntaxError:
        return []  # splice reports unparsable code; compiling reports the rest
    fixed = spec_closure(old)
    out = []
    for node, before in _changed(old, new):
        why = _refusal(node, before, old, new, kernel, action, fixed)
        if why:
            out.append(f"line {why[0]} {why[1]}")
    return out


def _refusal(node: ast.stmt, before: ast.stmt | None, old: _Module, new: _Module, kernel: str, action: str,
             fixed: dict[str, str]) -> _Why | None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return _import_refusal(node, old, action)
    names = _binds(node)
    touched = [n for n in names if n in fixed]
    if touched:
        verb = "changes" if before is not None else "rebinds" if touched[0] in old.bound else "defines"
        return node.lineno, f"{verb} {touched[0]}, {fixed[touched[0]]}: {SPEC_FIXED}"
    if isinstance(node, _FUNCS):
        return _function_refusal(node, before, old, new, kernel, action)
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and all(isinstance(t, ast.Name) for t in _targets(node)):
        return _constant_refusal(node, names, before, old, new)
    return node.lineno, f"{_what(node, new)} at module level: {ONLY}"


def _import_refusal(node: ast.Import | ast.ImportFrom, old: _Module, action: str) -> _Why | None:
    allowed = IMPORTS + ACTION_IMPORTS.get(action, ())
    bad = _outside(node, allowed)
    if bad:
        return node.lineno, f"imports {bad}: a candidate may import only {', '.join(allowed)}"
    if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
        return node.lineno, f"imports * from {node.module}: name what the code uses"
    for name, target in ImportMap([node]).names.items():
        if name in old.bound and old.imports.names.get(name) != target:
            return node.lineno, f"imports {target} as {name}, which already names something else in the file"
    return None


def _outside(node: ast.Import | ast.ImportFrom, allowed: tuple[str, ...]) -> str | None:
    """The first module the import names that is not among `allowed` (relative imports never are)."""
    if isinstance(node, ast.ImportFrom) and node.level:
        return "." * node.level + (node.module or "")
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return next((m for m in modules if not any(m == ok or m.startswith(ok + ".") for ok in allowed)), None)


def _function_refusal(node, before, old: _Module, new: _Module, kernel: str, action: str) -> _Why | None:
    name = node.name
    kind = _kind(node, new)
    if before is not None:  # a definition the user wrote
        if not (name == kernel or name in old.launchers | old.launcher_helpers
                or (name in old.kernels and kind == "triton")):
            return node.lineno, (f"changes {name}, which is neither the kernel, its launcher (or a function only "
                                 f"it calls) nor a @triton.jit helper: {ONLY}")
        if kind != "triton" and _dumps(node.decorator_list) != _dumps(getattr(before, "decorator_list", [])):
            return node.lineno, f"changes the decorators of {name}: {ONLY}"
    elif kind is None or (kind == "nki" and action != "port") or (kind == "spec" and action != "spec"):
        return node.lineno, f"defines {name} decorated with {_decorators(node, new)}: {ONLY}"
    return _import_time_refusal(node, before, new) or _reaching(node, before, new)


def _dumps(nodes: list[ast.AST]) -> list[str]:
    return [ast.dump(n) for n in nodes]


def _kind(node, module: _Module) -> str | None:
    """"triton", "nki", "spec" or "plain" (no decorator); None for any other decoration."""
    decorators = {module.imports.resolve(d) for d in node.decorator_list}
    if not decorators:
        return "plain"
    for kind, allowed in (("triton", TRITON_DECORATORS), ("nki", NKI_DECORATORS), ("spec", {SPEC_DECORATOR})):
        if decorators <= allowed:
            return kind
    return None


def _constant_refusal(node, names: list[str], before, old: _Module, new: _Module) -> _Why | None:
    """Constants (literals, lists of triton.Config, tl.constexpr values) may change or join, built only from pure
    calls; they may not take a name the file uses for an import or a definition."""
    for name in names:
        if name in old.bound and not isinstance(old.named.get(name), (ast.Assign, ast.AnnAssign)):
            what = "a definition" if name in old.named else "an import"
            return node.lineno, f"assigns {name}, which already names {what}: {ONLY}"
    return _import_time_refusal(node, before, new) or _reaching(node, before, new)


def _targets(node: ast.stmt) -> list[ast.expr]:
    if isinstance(node, (ast.Assign, ast.Delete)):
        return list(node.targets)
    return [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []


def _what(node: ast.stmt, module: _Module) -> str:
    """What a module-level statement does, in a few words: "assigns torch.randn", "calls setattr"."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return f"assigns {', '.join(_text(t, module) for t in _targets(node))}"
    if isinstance(node, ast.Delete):
        return f"deletes {', '.join(_text(t, module) for t in node.targets)}"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return f"calls {_text(node.value.func, module)}"
    if isinstance(node, ast.ClassDef):
        return f"defines the class {node.name}"
    return f"runs {'an' if type(node).__name__[0] in 'AEIOU' else 'a'} `{type(node).__name__.lower()}` statement"


def _text(node: ast.AST, module: _Module) -> str:
    """An expression as the reader knows it: through import aliases (tl.load -> triton.language.load)."""
    resolved = module.imports.resolve(node) if isinstance(node, ast.Attribute) else None
    return resolved or ast.unparse(node)


def _decorators(node, module: _Module) -> str:
    return ", ".join("@" + (module.imports.resolve(d) or ast.unparse(d)) for d in node.decorator_list)


# -- code that runs at import, and code that reaches outside itself -----------------------------------------------


def _import_time(node: ast.stmt) -> Iterator[ast.expr]:
    """The expressions Python evaluates when the statement runs at import: decorators, default values and
    annotations of a definition; the value of an assignment. Function bodies are not among them."""
    if isinstance(node, _FUNCS):
        a = node.args
        yield from node.decorator_list
        yield from a.defaults
        yield from (d for d in a.kw_defaults if d is not None)
        yield from (x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                    if x is not None and x.annotation is not None)
        if node.returns is not None:
            yield node.returns
    elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        yield node.value


def _evaluated(expr: ast.expr) -> Iterator[ast.AST]:
    """The nodes of an expression that are evaluated with it: a lambda's body waits until it is called."""
    stack: list[ast.AST] = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.Lambda):
            stack += [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        else:
            stack += list(ast.iter_child_nodes(node))


def _import_time_refusal(node: ast.stmt, before: ast.stmt | None, module: _Module) -> _Why | None:
    """A call at import that is not a pure constructor (nor already in the user's version of the statement)."""
    had = _had(before)
    for expr in _import_time(node):
        for sub in _evaluated(expr):
            if ast.dump(sub) in had:
                continue
            if isinstance(sub, ast.NamedExpr):
                return sub.lineno, f"assigns {ast.unparse(sub.target)} at import (`:=`): {ONLY}"
            if isinstance(sub, ast.Call) and _call_name(sub, module) not in PURE_CALLS:
                where = f"in the decorators or defaults of {node.name}" if isinstance(node, _FUNCS) else "at import"
                return sub.lineno, f"calls {_call_name(sub, module) or ast.unparse(sub.func)} {where}: {ONLY}"
    return None


def _had(before: ast.stmt | None) -> set[str]:
    return {ast.dump(n) for n in ast.walk(before)} if before is not None else set()


def _call_name(call: ast.Call, module: _Module) -> str | None:
    if isinstance(call.func, ast.Name) and call.func.id in module.bound and call.func.id not in module.imports.names:
        return call.func.id  # the file's own function of that name, not a builtin
    return module.imports.resolve(call.func)


def _reaching(node: ast.stmt, before: ast.stmt | None, module: _Module) -> _Why | None:
    """The first construct of the new code, whenever it runs, that patches or reaches outside itself, unless the
    user's own version of the definition has it too."""
    had = _had(before)
    outer = _outer_names(node, module)
    for sub in ast.walk(node):
        if ast.dump(sub) in had:
            continue
        why = _reaches(sub, module, outer)
        if why:
            where = ", ".join(_binds(node))
            return getattr(sub, "lineno", node.lineno), \
                f"{why} in {where}: a candidate may not patch modules or reach other frames or globals"
    return None


def _outer_names(node: ast.AST, module: _Module) -> set[str]:
    """The names in a definition that refer to objects outside it: the module's names and imports, less its
    parameters and plain locals, plus locals that alias them (`t = torch`)."""
    args = {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments)
            for a in (*n.posonlyargs, *n.args, *n.kwonlyargs, n.vararg, n.kwarg) if a is not None}
    imported = {name for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)) for name in _binds(n)}
    outer = (module.bound | imported) - args
    for n in ast.walk(node):
        if isinstance(n, ast.Assign) and n is not node:
            names = {name for t in n.targets for name in _target_names(t)}
            if isinstance(n.value, (ast.Name, ast.Attribute)) and _root(n.value) in outer:
                outer |= names  # an alias of something outside
            else:
                outer -= names - imported
    return outer


def _reaches(sub: ast.AST, module: _Module, outer: set[str]) -> str | None:
    if isinstance(sub, ast.Global):
        return f"declares global {', '.join(sub.names)}"
    if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        for target in _targets(sub):
            if isinstance(target, (ast.Attribute, ast.Subscript)) and _root(target) in outer:
                return f"{'deletes' if isinstance(sub, ast.Delete) else 'assigns'} {_text(target, module)}"
    if isinstance(sub, (ast.Import, ast.ImportFrom)):
        bad = _outside(sub, IMPORTS)
        if bad is not None:
            return f"imports {bad}"
    if isinstance(sub, ast.Call):
        name = module.imports.resolve(sub.func) or ""
        if name in REACHING_CALLS or name.startswith(tuple(m + "." for m in REACHING_MODULES)):
            return f"calls {name}"
    if isinstance(sub, ast.Attribute) and sub.attr in REACHING_ATTRS:
        return f"reads {ast.unparse(sub)}"
    if isinstance(sub, ast.Name) and sub.id == "__builtins__":
        return "reads __builtins__"
    if isinstance(sub, ast.Constant) and sub.value in REACHING_ATTRS:  # getattr(torch, "__dict__")
        return f"names {sub.value!r}"
    if isinstance(sub, ast.Attribute) and module.imports.resolve(sub) in REACHING_MODULES:
        return f"reads {module.imports.resolve(sub)}"
    return None


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# -- the spec and what it reads ----------------------------------------------------------------------------------


def spec_closure(module: _Module, inputs: str | None = None) -> dict[str, str]:
    """Every name the correctness specs read, with how ("the spec's reference", "read by reference_add"): the
    inputs functions, the references, what they and the decorators' other arguments use, transitively, builtins
    included (a new module-level `len` would change them too). The kernels and the launchers are left out:
    candidates may change them. `inputs`: only the spec that decorates this function."""
    todo: list[tuple[str, str]] = []
    for node in module.tree.body:
        if not isinstance(node, _FUNCS) or (inputs is not None and node.name != inputs):
            continue
        for dec in _spec_decorators(node, module):
            todo.append((node.name, "the @spec inputs function"))
            args = [(None, a) for a in dec.args] + [(kw.arg, kw.value) for kw in dec.keywords
                                                     if kw.arg not in ("kernel", "launcher")]
            for arg, value in args:
                direct = isinstance(value, ast.Name) and arg
                todo += [(name, f"the spec's {arg}" if direct else f"read by the spec's {arg or 'arguments'}")
                         for name in sorted(_loads(value))]
    movable = module.kernels | module.launchers
    out: dict[str, str] = {}
    while todo:
        name, why = todo.pop(0)
        if name in out or name in movable:
            continue
        out[name] = why
        if name in module.named:
            todo += [(n, f"read by {name}") for n in sorted(_loads(module.named[name]))]
    return out


def spec_changes(old_text: str, new_text: str) -> list[str]:
    """The module-level names the user's specs read whose statements the new text changes or removes."""
    try:
        old, new = _Module.parse(old_text), _Module.parse(new_text)
    except SyntaxError:
        return ["(the new text does not parse)"]
    return [name for name in spec_closure(old) if name in old.named and
            ast.dump(old.named[name]) != (ast.dump(new.named[name]) if name in new.named else None)]


def _spec_decorators(node: ast.stmt, module: _Module) -> list[ast.Call]:
    if not isinstance(node, _FUNCS):
        return []
    return [d for d in node.decorator_list if isinstance(d, ast.Call) and module.imports.resolve(d.func) ==
            SPEC_DECORATOR]


def _loads(node: ast.AST) -> set[str]:
    """The names a statement or expression reads (calls included), wherever they appear in it."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def tautology(new_text: str, kernel: str) -> str | None:
    """Why the kernel's spec in the candidate cannot certify it: its reference calls the kernel, a launcher or
    another Triton kernel, directly or through any function of the module, or looks names up dynamically."""
    try:
        module = _Module.parse(new_text)
    except SyntaxError:
        return None
    for node in module.tree.body:
        for dec in _spec_decorators(node, module):
            kw = {k.arg: k.value for k in dec.keywords}
            if _last(kw.get("kernel")) != kernel or kw.get("reference") is None:
                continue
            why = _calls_kernel(kw["reference"], module, kernel)
            if why:
                return why
    return None


def _last(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _calls_kernel(reference: ast.expr, module: _Module, kernel: str) -> str | None:
    forbidden = module.kernels | module.launchers
    start = [reference.id] if isinstance(reference, ast.Name) and reference.id in module.named else []
    todo: list[tuple[ast.AST, list[str]]] = [(module.named[start[0]] if start else reference, start)]
    seen = set(start)
    while todo:
        node, path = todo.pop(0)  # breadth first: the shortest chain is the one named
        dynamic = _dynamic(node, module, forbidden)
        if dynamic:
            return f"the reference {dynamic}{_chain(path)}: {CERTIFY}"
        for name in sorted(_loads(node)):
            if name in forbidden:
                launches = f", which launches {kernel}" if name not in module.kernels else ""
                return f"the reference calls {name}{launches}{_chain([*path, name])}: {CERTIFY}"
            if name in module.named and name not in seen:
                seen.add(name)
                todo.append((module.named[name], [*path, name]))
    return None


def _chain(path: list[str]) -> str:
    return f" ({' -> '.join(path)})" if len(path) > 1 else ""


def _dynamic(node: ast.AST, module: _Module, forbidden: set[str]) -> str | None:
    """A lookup that could reach the kernel without naming it: globals(), eval, a string naming it, ..."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value in forbidden:
            return f"names {sub.value!r} in a string"
        why = _reaches(sub, module, set())
        if why:
            return f"{why}, which could reach the kernel without naming it"
    return None
