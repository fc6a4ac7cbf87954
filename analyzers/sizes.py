"""What a file's code shows of the values its launches pass: launch arguments the launcher binds to constants, and
the sizes its `@spec` decorations run (docs/specs.md). Rules that depend on sizes the kernel alone does not show
(int32 offsets, a recompile per constexpr value) read these to tell a risk from a likely bug.

Pure AST reading: nothing of the user's code runs. Never raises for what it reads (a failure is reported by the
caller as KL900).
"""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

from .model import LaunchSite, ShownSizes, Span
from .budget import checkpoint
from .source import ImportMap, SourceText, StatementMemo, literal_value, parse_python
from .specs import SPEC_DECORATOR
from .values import UNKNOWN, ModuleIndex, Resolver, assigned, evaluate

_PLAIN = (int, float, bool, str)
# Tensor methods that return a tensor of the same shape.
_SHAPE_KEEPING = frozenset({"contiguous", "to", "float", "half", "bfloat16", "clone", "detach", "cuda", "cpu"})


def _parse_expr(text: str) -> ast.expr | None:
    try:
        return parse_python(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None


def launch_values(body: list[ast.stmt], sites: list[LaunchSite], index: ModuleIndex | None = None,
                  memo: StatementMemo | None = None) -> dict[Span, object]:
    """Launch arguments that are not literals but whose value the launcher's code shows, by argument span.

    A parameter's default is not taken for its value: a caller may pass another one."""
    index = index if index is not None else ModuleIndex(body, memo)
    tree = ast.Module(body=body, type_ignores=[])
    out: dict[Span, object] = {}
    for stmt, group in by_statement(body, sites):
        checkpoint()
        def compute(group=group) -> tuple:
            found = []
            for site in group:
                for arg in site.args + site.kwargs:
                    if arg.kind not in ("name", "expr"):
                        continue
                    node = _parse_expr(arg.text)
                    if node is None:
                        continue
                    value = evaluate(node, Resolver(tree, site.span.start_line + 1, False, index).lookup)
                    if value is not UNKNOWN and isinstance(value, _PLAIN):
                        found.append((arg.span, value))
            return tuple(found)

        found, moved = memoized(memo, "launch_values", stmt, _sites_key(group, stmt), index, compute)
        out.update((span.shifted(moved), value) for span, value in found)
    return out


def by_statement(body: list[ast.stmt], sites: list[LaunchSite]) -> list[tuple[ast.stmt | None, list[LaunchSite]]]:
    """The launch sites (sorted, as discovery gives them) grouped by the top-level statement around them, in
    order; a site outside every statement (none in practice) comes alone with None."""
    out: list[tuple[ast.stmt | None, list[LaunchSite]]] = []
    i = 0
    for stmt in body:
        first = min([d.lineno for d in getattr(stmt, "decorator_list", ())] + [stmt.lineno]) - 1
        last = (stmt.end_lineno or stmt.lineno) - 1
        while i < len(sites) and sites[i].span.start_line < first:
            out.append((None, [sites[i]]))
            i += 1
        group = []
        while i < len(sites) and sites[i].span.start_line <= last:
            group.append(sites[i])
            i += 1
        if group:
            out.append((stmt, group))
    out.extend((None, [site]) for site in sites[i:])
    return out


def _sites_key(sites: list[LaunchSite], stmt: ast.stmt | None) -> tuple:
    """What the values read of a statement's launch sites, apart from its tree: positions relative to it."""
    base = stmt.lineno if stmt is not None else 0
    return tuple((s.target, s.span.start_line - base, tuple((a.kind, a.text) for a in s.args + s.kwargs))
                 for s in sites)


def memoized(memo: StatementMemo | None, kind: str, stmt: ast.stmt | None, context: object, index: ModuleIndex,
             compute: Callable[[], Any]) -> tuple[Any, int]:
    """(compute(), 0), or what it gave for this statement and context in an earlier analysis and how many lines
    the statement moved since, while the module-level names it resolved still resolve to the same bindings."""
    if memo is None or stmt is None:
        return compute(), 0
    known, moved = memo.get(kind, stmt, context)
    if known is not StatementMemo.MISSING and index.unchanged(known[0]):  # type: ignore[index]
        return known[1], moved  # type: ignore[index]
    with index.recording() as deps:
        value = compute()
    memo.put(kind, stmt, context, (deps, value))
    return value, 0


@dataclass
class _Spec:
    name: str
    kernel: str | None
    launcher: ast.FunctionDef | None
    shapes: list[tuple[int, ...]]
    span: Span  # the shapes as written
    shaped: list[int]  # positions of the inputs that are tensors of the spec's shape


def _shape(value: object) -> tuple[int, ...] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, tuple) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def _shapes(node: ast.expr | None, tree: ast.Module, index: ModuleIndex | None = None
            ) -> list[tuple[int, ...]] | None:
    """A spec's `shapes=`/`bench_shapes=` list when every shape is a constant the code shows, else None."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    resolver = Resolver(tree, 0, index=index)
    out = []
    for elt in node.elts:
        value = (tuple(evaluate(e, resolver.lookup) for e in elt.elts) if isinstance(elt, ast.Tuple)
                 else evaluate(elt, resolver.lookup))
        shape = _shape(value)
        if shape is None:
            return None
        out.append(shape)
    return out


def _made_from_shape(node: ast.expr, shape: str, fn: ast.FunctionDef, depth: int = 0) -> bool:
    """Whether an expression of the inputs function is a new tensor of the spec's shape: `torch.randn(shape, ...)`,
    `torch.empty(*shape)`, `torch.rand(size=shape)`, times a constant or converted (`.to(dtype)`), or a name bound
    once to one of those."""
    if isinstance(node, ast.Name) and depth < 3:
        bound = assigned(fn.body, node.id)
        return len(bound) == 1 and bound[0] is not None and _made_from_shape(bound[0], shape, fn, depth + 1)  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp):  # `torch.randn(shape) * 4`: a scalar operand keeps the shape
        return any(_made_from_shape(side, shape, fn, depth + 1) and isinstance(other, ast.Constant)
                   for side, other in ((node.left, node.right), (node.right, node.left)))
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr in _SHAPE_KEEPING:  # `.to(dtype)`, `.contiguous()`
        return _made_from_shape(node.func.value, shape, fn, depth + 1)
    first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "size"), None)
    if isinstance(first, ast.Starred):
        first = first.value
    return isinstance(first, ast.Name) and first.id == shape


def _returned(fn: ast.FunctionDef) -> list[ast.expr] | None:
    returns = [s for s in fn.body if isinstance(s, ast.Return) and s.value is not None]
    if len(returns) != 1:
        return None
    value = returns[0].value
    return list(value.elts) if isinstance(value, (ast.Tuple, ast.List)) else [value]  # type: ignore[list-item]


def _name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _specs(src: SourceText, imports: ImportMap, body: list[ast.stmt], index: ModuleIndex | None = None,
           memo: StatementMemo | None = None, imports_key: tuple | None = None) -> list[_Spec]:
    index = index if index is not None else ModuleIndex(body, memo)
    tree = ast.Module(body=body, type_ignores=[])
    functions = {s.name: s for s in body if isinstance(s, ast.FunctionDef)}
    if memo is not None and imports_key is None:
        imports_key = tuple(sorted(imports.names.items()))
    out = []
    for fn in functions.values():
        # What a def's spec decorations show depends on it, the imports and the module names its shapes read.
        def compute(fn: ast.FunctionDef = fn) -> tuple:
            return tuple(_spec_decorations(src, imports, fn, tree, index))

        found, moved = memoized(memo, "specs", fn, imports_key, index, compute)
        for name, kernel, launcher, shapes, span, shaped in found:
            out.append(_Spec(name, kernel, functions.get(launcher), list(shapes), span.shifted(moved), list(shaped)))
    return out


def _spec_decorations(src: SourceText, imports: ImportMap, fn: ast.FunctionDef, tree: ast.Module,
                      index: ModuleIndex):
    """(name, kernel, launcher name, shapes, span of the shapes, shaped inputs) of each spec decorating fn."""
    for dec in fn.decorator_list:
        if not (isinstance(dec, ast.Call) and imports.resolve(dec.func) == SPEC_DECORATOR):
            continue
        kw = {k.arg: k.value for k in dec.keywords if k.arg}
        shapes: list[tuple[int, ...]] = []
        spans = []
        for field in ("shapes", "bench_shapes"):
            if field in kw:
                found = _shapes(kw[field], tree, index)
                if found is None:
                    continue
                shapes += found
                spans.append(src.span(kw[field]))
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        returned = _returned(fn)
        if not shapes or not params or returned is None:
            continue
        shaped = [i for i, e in enumerate(returned) if _made_from_shape(e, params[0], fn)]
        yield (fn.name, _name(kw.get("kernel")), _name(kw.get("launcher")) or "", tuple(shapes), spans[0],
               tuple(shaped))


def _keeps_shape(value: ast.AST | None, name: str) -> bool:
    """`x = x.contiguous()`, `x = x.to(torch.float32)`: a rebinding that keeps the tensor's shape."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in _SHAPE_KEEPING and isinstance(value.func.value, ast.Name)
            and value.func.value.id == name)


class _ShapeLookup:
    """Values of the names and size calls of a launcher for one spec shape: `x.shape[1]`, `x.size(0)`,
    `x.numel()`, `x.stride(0)` (the spec's tensors are new and contiguous), `n_rows, n_cols = x.shape`, and what the
    launcher computes from them."""

    def __init__(self, launcher: ast.FunctionDef, tensors: dict[str, tuple[int, ...]], fallback: Resolver):
        self.fn = launcher
        # A parameter the launcher rebinds (`x = x.view(-1, n)`) no longer has the spec's shape, unless every
        # rebinding keeps it (`x = x.contiguous()`).
        self.local = fallback.index.local(launcher)
        self.tensors = {name: shape for name, shape in tensors.items()
                        if all(_keeps_shape(b, name) for b in self.local.get(name, ()))}
        self.fallback = fallback
        self.seen: set[str] = set()

    def _dim(self, tensor: ast.expr, index: object) -> object:
        shape = self.tensors.get(tensor.id) if isinstance(tensor, ast.Name) else None
        if shape is None or not isinstance(index, int) or not -len(shape) <= index < len(shape):
            return UNKNOWN
        return shape[index]

    def _unpacked(self, name: str) -> object:
        """`a, b = x.shape` (or `x.size()`) binds a to x's first size."""
        for stmt in ast.walk(self.fn):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], (ast.Tuple, ast.List))):
                continue
            elts = stmt.targets[0].elts
            names = [e.id if isinstance(e, ast.Name) else None for e in elts]
            if name not in names:
                continue
            v = stmt.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "size" and not v.args:
                v = ast.Attribute(v.func.value, "shape", ast.Load())
            if isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(v.value, ast.Name):
                shape = self.tensors.get(v.value.id)
                if shape is not None and len(shape) == len(names):
                    return shape[names.index(name)]
        return UNKNOWN

    def lookup(self, node: ast.AST) -> object:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            return self._dim(node.value.value, evaluate(node.slice, self.lookup))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            tensor, method = node.func.value, node.func.attr
            if method == "size" and len(node.args) == 1:
                return self._dim(tensor, evaluate(node.args[0], self.lookup))
            if method == "stride" and len(node.args) == 1:  # the spec's tensors are new, so contiguous
                shape = self.tensors.get(tensor.id) if isinstance(tensor, ast.Name) else None
                i = evaluate(node.args[0], self.lookup)
                if shape is None or not isinstance(i, int) or not -len(shape) <= i < len(shape):
                    return UNKNOWN
                return math.prod(shape[i % len(shape) + 1:])
            shape = self.tensors.get(tensor.id) if isinstance(tensor, ast.Name) else None
            if shape is not None and not node.args:
                return math.prod(shape) if method == "numel" else len(shape) if method == "dim" else UNKNOWN
            return UNKNOWN
        if isinstance(node, ast.Name) and node.id not in self.seen:
            bound = self.local.get(node.id, [])
            self.seen.add(node.id)
            try:
                if len(bound) == 1 and bound[0] is not None:
                    return evaluate(bound[0], self.lookup)
                if len(bound) == 1:
                    return self._unpacked(node.id)
            finally:
                self.seen.discard(node.id)
            if bound:
                return UNKNOWN
        return self.fallback.lookup(node)


_FACTORIES = frozenset(f"torch.{n}" for n in ("empty", "zeros", "ones", "full", "rand", "randn", "randint"))


def _allocated_elements(node: ast.expr, imports: ImportMap, fn: ast.AST, resolver: Resolver) -> int | None:
    """The element count of a tensor a launcher allocates with a constant shape: `torch.empty((1 << 16, 1 << 16))`,
    `torch.zeros(M, N)` with M and N constants, or a name bound once to such a call."""
    if isinstance(node, ast.Name) and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        bound = assigned(fn.body, node.id)
        node = bound[0] if len(bound) == 1 and isinstance(bound[0], ast.expr) else node  # type: ignore[assignment]
    if not (isinstance(node, ast.Call) and imports.resolve(node.func) in _FACTORIES):
        return None
    dims: list[ast.expr] = list(node.args)
    if imports.resolve(node.func) in ("torch.full", "torch.randint"):
        dims = dims[:1] if imports.resolve(node.func) == "torch.full" else dims[-1:]
    if len(dims) == 1 and isinstance(dims[0], (ast.Tuple, ast.List)):
        dims = list(dims[0].elts)
    values = [evaluate(d, resolver.lookup) for d in dims]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        return None
    return math.prod(values)  # type: ignore[arg-type]


def launch_tensor_sizes(src: SourceText, imports: ImportMap, body: list[ast.stmt], sites: list[LaunchSite],
                        index: ModuleIndex | None = None, memo: StatementMemo | None = None,
                        imports_key: tuple | None = None) -> dict[str, ShownSizes]:
    """Kernel name -> the largest tensor with a constant shape that a launch in this file passes to it."""
    if "torch" not in src.text:
        return {}
    index = index if index is not None else ModuleIndex(body, memo)
    if memo is not None and imports_key is None:
        imports_key = tuple(sorted(imports.names.items()))
    out: dict[str, ShownSizes] = {}
    tree = ast.Module(body=body, type_ignores=[])
    for stmt, group in by_statement(body, sites):
        checkpoint()
        def compute(group=group) -> tuple:
            found = []  # (kernel, elements, launch line, argument span), in the order of the arguments
            for site in group:
                resolver = Resolver(tree, site.span.start_line + 1, False, index)
                for arg in site.args + site.kwargs:
                    node = _parse_expr(arg.text) if arg.kind in ("name", "tensor", "expr") else None
                    count = _allocated_elements(node, imports, resolver.scope, resolver) if node is not None else None
                    if count is not None:
                        found.append((site.target, count, site.span.start_line, arg.value_span or arg.span))
            return tuple(found)

        found, moved = memoized(memo, "launch_tensors", stmt, (imports_key, _sites_key(group, stmt)), index, compute)
        for target, count, line, span in found:
            known = out.get(target)
            if known is None or count > known.values[-1]:
                out[target] = ShownSizes((count,), f"the launch at line {line + moved + 1} passes a tensor of",
                                         span.shifted(moved))
    return out


def spec_sizes(src: SourceText, imports: ImportMap, body: list[ast.stmt], sites: list[LaunchSite],
               index: ModuleIndex | None = None, memo: StatementMemo | None = None,
               imports_key: tuple | None = None) -> tuple[dict[Span, ShownSizes], dict[str, ShownSizes]]:
    """What the file's specs show: the values each launch argument takes over a spec's shapes (where they
    differ), and per kernel the element counts of the tensors a spec makes for it."""
    if "spec" not in src.text:
        return {}, {}
    index = index if index is not None else ModuleIndex(body, memo)
    values: dict[Span, ShownSizes] = {}
    tensor_sizes: dict[str, ShownSizes] = {}
    tree = ast.Module(body=body, type_ignores=[])
    launchers: dict[int, int] = {}
    for spec in _specs(src, imports, body, index, memo, imports_key):
        checkpoint()
        source = f"the spec `{spec.name}`"
        if spec.kernel and spec.shaped:
            counts = tuple(sorted({math.prod(s) for s in spec.shapes}))
            known = tensor_sizes.get(spec.kernel)
            if known is None or counts[-1] > known.values[-1]:
                tensor_sizes[spec.kernel] = ShownSizes(counts, f"{source} makes tensors of", spec.span)
        fn = spec.launcher
        if fn is None or not spec.shaped:
            continue
        inside = [s for s in sites if fn.lineno - 1 <= s.span.start_line <= (fn.end_lineno or 0) - 1]

        def compute(spec=spec, fn=fn, inside=inside) -> tuple:
            positional = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            found = []  # (argument span, the distinct values it takes over the shapes)
            for site in inside:
                fallback = Resolver(tree, site.span.start_line + 1, False, index)
                for arg in site.args + site.kwargs:
                    if literal_value(_parse_expr(arg.text)) is not None:
                        continue
                    node = _parse_expr(arg.text)
                    if node is None:
                        continue
                    seen = []
                    for shape in spec.shapes:
                        tensors = {positional[i]: shape for i in spec.shaped if i < len(positional)}
                        v = evaluate(node, _ShapeLookup(fn, tensors, fallback).lookup)
                        if not isinstance(v, int) or isinstance(v, bool):
                            break
                        seen.append(v)
                    else:
                        distinct = tuple(sorted(set(seen)))
                        if len(distinct) > 1:
                            found.append((arg.span, distinct))
            return tuple(found)

        # Keyed by the launcher, where the launches are (the spec's part is in the context), and by how many
        # specs before this one run the same launcher: each keeps its own entry.
        nth = launchers[id(fn)] = launchers.get(id(fn), -1) + 1
        context = (tuple(spec.shapes), tuple(spec.shaped), _sites_key(inside, fn))
        found, moved = memoized(memo, f"spec_values:{nth}", fn, context, index, compute)
        for span, distinct in found:
            if span.shifted(moved) not in values:
                values[span.shifted(moved)] = ShownSizes(distinct, source, spec.span)
    return values, tensor_sizes


@functools.lru_cache(maxsize=16)
def _file(text: str) -> tuple[SourceText, ImportMap, list[ast.stmt], tuple[_Spec, ...]] | None:
    try:
        body = parse_python(text).body
    except (SyntaxError, ValueError, RecursionError):
        return None
    src = SourceText(text)
    imports = ImportMap(body)
    return src, imports, body, tuple(_specs(src, imports, body))


def spec_launch_cases(text: str, site: LaunchSite) -> list[tuple[str, dict[Span, object]]]:
    """The values of a launch's arguments in each case of the spec whose launcher holds the launch: one
    (label, argument span -> value) per spec shape, values the launcher computes from the shape included
    (`BLOCK = triton.next_power_of_2(n_cols)`). Empty when no spec of the file runs this launch."""
    if "spec" not in text:
        return []
    found = _file(text)
    if found is None:
        return []
    _src, _imports, body, specs = found
    tree = ast.Module(body=body, type_ignores=[])
    out: list[tuple[str, dict[Span, object]]] = []
    for spec in specs:
        fn = spec.launcher
        if fn is None or not spec.shaped or not fn.lineno - 1 <= site.span.start_line <= (fn.end_lineno or 0) - 1:
            continue
        positional = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        fallback = Resolver(tree, site.span.start_line + 1, defaults=False)
        nodes = [(arg.span, _parse_expr(arg.text)) for arg in site.args + site.kwargs]
        for shape in spec.shapes:
            tensors = {positional[i]: shape for i in spec.shaped if i < len(positional)}
            values: dict[Span, object] = {}
            for span, node in nodes:
                v = evaluate(node, _ShapeLookup(fn, tensors, fallback).lookup) if node is not None else UNKNOWN
                if v is not UNKNOWN and isinstance(v, _PLAIN):
                    values[span] = v
            out.append((f"the spec `{spec.name}` at shape {shape}", values))
    return out
