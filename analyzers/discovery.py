"""Finds Triton kernels, their parameters and autotune configs, and `kernel[grid](...)` launch sites."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .model import AutotuneConfig, LaunchArg, LaunchSite, Param, Span, TritonKernel, shift_kernel, shift_launch_site
from .source import ImportMap, SourceText, StatementMemo, literal_value, statements
from .values import UNKNOWN, evaluate

JIT_NAMES = {"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"}
AUTOTUNE_NAMES = {"triton.autotune", "triton.runtime.autotune", "triton.runtime.autotuner.autotune"}
HEURISTICS_NAMES = {"triton.heuristics", "triton.runtime.heuristics", "triton.runtime.autotuner.heuristics"}
CONFIG_NAMES = {"triton.Config", "triton.runtime.Config", "triton.runtime.autotuner.Config"}
CONSTEXPR_NAMES = {"triton.language.constexpr", "triton.language.core.constexpr", "tl.constexpr", "constexpr"}

_LAUNCH_TEXT = re.compile(r"\]\s*\(")
_SHAPE_METHODS = {"numel", "stride", "size", "dim", "nelement", "element_size"}
_TENSOR_FACTORIES = {
    "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "rand", "randn",
    "randn_like", "rand_like", "randint", "arange", "tensor", "empty_strided", "as_strided",
}


@dataclass
class KernelSyntax:
    """A discovered kernel with its syntax tree, for rules that inspect the body."""

    kernel: TritonKernel
    node: ast.FunctionDef


@dataclass
class TritonDiscovery:
    kernels: list[KernelSyntax] = field(default_factory=list)
    launch_sites: list[LaunchSite] = field(default_factory=list)
    # Non-jit functions defined at module level: calling one from a kernel is an error.
    plain_functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    # Module-level names bound to literal values (constants a kernel may read as constexpr globals).
    module_constants: dict[str, object] = field(default_factory=dict)


def _decorator_kind(imports: ImportMap, dec: ast.expr) -> str | None:
    name = imports.resolve(dec.func if isinstance(dec, ast.Call) else dec)
    if name in JIT_NAMES:
        return "jit"
    if name in AUTOTUNE_NAMES:
        return "autotune"
    if name in HEURISTICS_NAMES:
        return "heuristics"
    return None


def is_constexpr_annotation(imports: ImportMap, ann: ast.expr | None) -> bool:
    if ann is None:
        return False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        return ann.value.split(".")[-1] == "constexpr"
    name = imports.resolve(ann)
    return name in CONSTEXPR_NAMES or (name is not None and name.endswith(".constexpr"))


def _params(src: SourceText, imports: ImportMap, fn: ast.FunctionDef) -> list[Param]:
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    defaults: list[ast.expr | None] = [None] * (len(fn.args.posonlyargs) + len(fn.args.args) - len(fn.args.defaults))
    defaults += list(fn.args.defaults) + list(fn.args.kw_defaults)
    out = []
    for arg, default in zip(args, defaults):
        span = src.span(arg)
        name_end = (span.start_line, span.start_col + len(arg.arg))
        out.append(
            Param(
                name=arg.arg,
                annotation=src.segment(arg.annotation) if arg.annotation is not None else None,
                is_constexpr=is_constexpr_annotation(imports, arg.annotation),
                default=src.segment(default) if default is not None else None,
                span=span,
                name_end=name_end,
            )
        )
    return out


# A configuration list written as a comprehension is plain data when it loops over literals; past this many
# configurations it is left unknown (a tuning space, not a list anyone reads).
_MAX_COMPREHENSION_CONFIGS = 512


def _items(node: ast.expr, lookup) -> list[object] | None:
    """The values a comprehension loops over: a list or tuple of constants (tuples of them too), or range()."""
    if isinstance(node, (ast.List, ast.Tuple)):
        out = []
        for e in node.elts:
            v = tuple(_items(e, lookup) or [UNKNOWN]) if isinstance(e, ast.Tuple) else evaluate(e, lookup)
            if v is UNKNOWN or (isinstance(v, tuple) and UNKNOWN in v):
                return None
            out.append(v)
        return out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
            and not node.keywords:
        bounds = [evaluate(a, lookup) for a in node.args]
        ints = [b for b in bounds if isinstance(b, int) and not isinstance(b, bool)]
        # A range Python refuses (more than three bounds, a zero step) is no list of configs either.
        if not 1 <= len(ints) == len(bounds) <= 3 or (len(ints) == 3 and ints[2] == 0):
            return None
        r = range(*ints)
        try:
            count = len(r)
        except OverflowError:  # more values than sys.maxsize
            return None
        return list(r) if count <= _MAX_COMPREHENSION_CONFIGS else None
    if isinstance(node, ast.Name):
        v = lookup(node)
        return list(v) if isinstance(v, (list, tuple)) else None
    return None


def _bind(target: ast.expr, value: object, env: dict[str, object]) -> bool:
    if isinstance(target, ast.Name):
        env[target.id] = value
        return True
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, tuple) and len(value) == len(target.elts):
        return all(_bind(t, v, env) for t, v in zip(target.elts, value))
    return False


def _comprehension_configs(
    src: SourceText, imports: ImportMap, node: ast.ListComp, constants: dict[str, ast.expr]
) -> list[AutotuneConfig] | None:
    """`[triton.Config({"BLOCK": b}, num_warps=w) for b in [64, 128] for w in (4, 8) if ...]`, expanded."""

    def lookup_in(env: dict[str, object]):
        def lookup(n: ast.AST) -> object:
            if isinstance(n, ast.Name):
                if n.id in env:
                    return env[n.id]
                if n.id in constants and not isinstance(constants[n.id], ast.ListComp):
                    items = _items(constants[n.id], lookup)
                    return tuple(items) if items is not None else evaluate(constants[n.id])
            return UNKNOWN
        return lookup

    envs: list[dict[str, object]] = [{}]
    for gen in node.generators:
        if gen.is_async:
            return None
        expanded = []
        for env in envs:
            items = _items(gen.iter, lookup_in(env))
            if items is None:
                return None
            for item in items:
                inner = dict(env)
                if not _bind(gen.target, item, inner):
                    return None
                keep = [evaluate(c, lookup_in(inner)) for c in gen.ifs]
                if any(k is UNKNOWN for k in keep):
                    return None
                if all(keep):
                    expanded.append(inner)
            if len(expanded) > _MAX_COMPREHENSION_CONFIGS:
                return None
        envs = expanded
    configs = []
    for env in envs:
        config = _config_call(src, imports, node.elt, lookup_in(env))
        if config is None:
            return None
        configs.append(config)
    return configs


def _config_call(src: SourceText, imports: ImportMap, elt: ast.expr, lookup=None) -> AutotuneConfig | None:
    """One `triton.Config({...}, num_warps=..., num_stages=...)`; with `lookup`, its names are read through it
    (a comprehension's loop variables) and must all have values."""
    if not (isinstance(elt, ast.Call) and imports.resolve(elt.func) in CONFIG_NAMES):
        return None
    kwargs_node = elt.args[0] if elt.args else next((k.value for k in elt.keywords if k.arg == "kwargs"), None)
    if not isinstance(kwargs_node, ast.Dict):
        return None

    def value(node: ast.expr) -> object:
        if lookup is None:
            return literal_value(node)
        v = evaluate(node, lookup)
        return None if v is UNKNOWN else v

    kwargs: dict[str, object] = {}
    for key, item in zip(kwargs_node.keys, kwargs_node.values):
        k = value(key) if key is not None else None
        if isinstance(k, str):
            v = value(item)
            if v is None and lookup is not None:
                return None  # a loop value that is not plain data
            kwargs[k] = v if v is not None else src.segment(item)
    opts = {k.arg: value(k.value) for k in elt.keywords if k.arg}
    positional = [value(a) for a in elt.args[1:3]]
    num_warps = opts.get("num_warps", positional[0] if positional else None)
    num_stages = opts.get("num_stages", positional[1] if len(positional) > 1 else None)
    return AutotuneConfig(kwargs, num_warps, num_stages, src.span(elt))


def _configs_from_list(
    src: SourceText, imports: ImportMap, node: ast.expr | None, constants: dict[str, ast.expr]
) -> list[AutotuneConfig] | None:
    if isinstance(node, ast.Name) and node.id in constants:
        node = constants[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # `configs_a + configs_b`
        left = _configs_from_list(src, imports, node.left, constants)
        right = _configs_from_list(src, imports, node.right, constants)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.ListComp):
        return _comprehension_configs(src, imports, node, constants)
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None  # built by code: unknown statically
    configs = []
    for elt in node.elts:
        config = _config_call(src, imports, elt)
        if config is None:
            return None
        configs.append(config)
    return configs


def module_assignments(body: list[ast.stmt]) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out


_CALL_TEXT = re.compile(r"\b(" + "|".join(sorted({"arange", "zeros", "full", "static_range", "reshape", "view",
                                                      "broadcast_to", "make_block_ptr", "make_tensor_descriptor", "sum",
                                                      "max", "min", "argmax", "argmin", "reduce", "cumsum", "cumprod",
                                                      "expand_dims", "trans", "permute", "static_assert"})) + r")\s*\(")
_WORD = re.compile(r"[A-Za-z_]\w*")
_SHAPE_CALLS = {"arange", "zeros", "full"}


def _call_args_text(text: str, start: int) -> str:
    """The text between the parenthesis at `start` and its match (or the rest of the text)."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    return text[start + 1:]


def _constexpr_uses(src: SourceText, fn: ast.FunctionDef, constexpr: set[str]) -> tuple[frozenset, frozenset]:
    """Constexpr parameters used as block dimensions (tl.arange bounds, tl.zeros/tl.full shapes), and those needed
    as compile-time constants at all (also static_range bounds, reshape shapes, axes). Read from the body's text:
    walking every kernel's tree for this cost more than the rest of discovery."""
    if not constexpr or not fn.body:
        return frozenset(), frozenset()
    text = "\n".join(src.line(i) for i in range(fn.body[0].lineno - 1, fn.end_lineno or fn.lineno))
    shapes: set[str] = set()
    needed: set[str] = set()
    for m in _CALL_TEXT.finditer(text):
        args = _call_args_text(text, m.end() - 1)
        if m.group(1) in _SHAPE_CALLS:
            if m.group(1) != "arange":  # the shape is the first argument
                args = args.split("]")[0] if args.lstrip().startswith("[") else args.split(")")[0]
            words = set(_WORD.findall(args)) & constexpr
            shapes |= {w for w in words if re.search(r"(^|[(\[,\s])" + w + r"\s*([,)\]]|$)", args)}
            needed |= words
        else:
            needed |= set(_WORD.findall(args)) & constexpr
    return frozenset(shapes), frozenset(needed | shapes)


def _kernel_from_def(
    src: SourceText, imports: ImportMap, fn: ast.FunctionDef, assignments: dict[str, ast.expr], qualname: str,
    decorators: list[ast.expr] | None = None, name: str | None = None,
) -> TritonKernel | None:
    """The kernel a def defines; `decorators` replaces its decorator list for `k = triton.jit(f)` spellings."""
    decorator_list = fn.decorator_list if decorators is None else decorators
    kinds = [(_decorator_kind(imports, d), d) for d in decorator_list]
    if not any(kind == "jit" for kind, _ in kinds):
        return None
    start = min([d.lineno for d in fn.decorator_list] + [fn.lineno]) - 1
    end_line = (fn.end_lineno or fn.lineno) - 1
    def_line = fn.lineno - 1
    name_col = src.line(def_line).find(fn.name, src.col(def_line, fn.col_offset))
    params = _params(src, imports, fn)
    shapes, needed = _constexpr_uses(src, fn, {p.name for p in params if p.is_constexpr})
    kernel = TritonKernel(
        name=name or fn.name,
        span=Span(start, 0, end_line, len(src.line(end_line))),
        name_span=Span(def_line, max(name_col, 0), def_line, max(name_col, 0) + len(fn.name)),
        params=params,
        decorators=[kind for kind, _ in kinds if kind],
        qualname=qualname,
        shape_params=shapes,
        needed_constexprs=needed,
        unknown_wrappers=any(kind is None for kind, _ in kinds),
    )
    for kind, dec in kinds:
        if not isinstance(dec, ast.Call):
            continue
        kw = {k.arg: k.value for k in dec.keywords if k.arg}
        if kind == "autotune":
            configs_node = kw.get("configs", dec.args[0] if dec.args else None)
            configs = _configs_from_list(src, imports, configs_node, assignments)
            kernel.autotune_configs = configs or []
            kernel.autotune_configs_known = configs is not None
            keys = literal_value(kw.get("key", dec.args[1] if len(dec.args) > 1 else None))
            if isinstance(keys, (list, tuple)):
                kernel.autotune_keys = [k for k in keys if isinstance(k, str)]
        elif kind == "heuristics":
            values = kw.get("values", dec.args[0] if dec.args else None)
            if isinstance(values, ast.Name) and isinstance(assignments.get(values.id), ast.Dict):
                values = assignments[values.id]
            if isinstance(values, ast.Dict) and all(k is not None for k in values.keys):
                kernel.heuristics.extend(k for k in map(literal_value, values.keys) if isinstance(k, str))
            else:
                kernel.heuristics_known = False  # built by code: it may set any parameter
    return kernel


def _wrapped_def(imports: ImportMap, value: ast.expr) -> tuple[str, list[ast.expr]] | None:
    """`triton.jit(f)`, `triton.autotune(...)(triton.jit(f))`, ...: the wrapped function's name and the
    decorators in decorator order (outermost first); None when the value is not such a wrapping."""
    decorators: list[ast.expr] = []
    node = value
    while isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        func = node.func
        kind = _decorator_kind(imports, func)
        if kind == "jit" or isinstance(func, ast.Call) and kind in ("autotune", "heuristics"):
            decorators.append(func)
        else:
            return None
        node = node.args[0]
    if isinstance(node, ast.Name) and any(_decorator_kind(imports, d) == "jit" for d in decorators):
        return node.id, decorators
    return None


def _arg_kind(node: ast.expr, imports: ImportMap, local_kinds: dict[str, str]) -> str:
    if literal_value(node) is not None:
        return "literal"
    if isinstance(node, ast.Name):
        return local_kinds.get(node.id, "name")
    return _expr_kind(node, imports, local_kinds)


def _expr_kind(node: ast.expr, imports: ImportMap, local_kinds: dict[str, str]) -> str:
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return "shape"
    if isinstance(node, ast.Attribute) and node.attr == "shape":
        return "shape"
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _SHAPE_METHODS:
            return "shape"
        if isinstance(func, ast.Name) and func.id == "len":
            return "shape"
        name = imports.resolve(func) or ""
        if name.startswith("torch.") and name.rsplit(".", 1)[-1] in _TENSOR_FACTORIES:
            return "tensor"
    if isinstance(node, ast.BinOp):
        kinds = {_arg_kind(node.left, imports, local_kinds), _arg_kind(node.right, imports, local_kinds)}
        if "tensor" in kinds:
            return "tensor"
        if "shape" in kinds:
            return "shape"
    return "expr"


# What a launch sits in: a function, a class body, or the module (None).
_Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _local_kinds(fn: _Scope | None, imports: ImportMap) -> dict[str, str]:
    """Classify names assigned in the function around a launch: tensors and runtime sizes."""
    kinds: dict[str, str] = {}
    reassigned: set[str] = set()  # names also bound to something that is not a runtime size
    if fn is None:
        return kinds
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for arg in fn.args.args + fn.args.kwonlyargs:
            ann = imports.resolve(arg.annotation) if arg.annotation is not None else None
            if ann in {"torch.Tensor", "Tensor"}:
                kinds[arg.arg] = "tensor"
    for node in statements(fn.body):  # assignments are statements: no need to walk expressions
        if isinstance(node, ast.Assign):
            kind = _expr_kind(node.value, imports, kinds)
            for target in node.targets:
                if isinstance(target, ast.Name) and kind in ("shape", "tensor"):
                    kinds[target.id] = kind
                elif isinstance(target, ast.Tuple) and kind == "shape":
                    for elt in target.elts:
                        if isinstance(elt, ast.Name):
                            kinds[elt.id] = "shape"
                elif isinstance(target, ast.Name):
                    reassigned.add(target.id)
    # `n = x.shape[0]; n = triton.next_power_of_2(n)`: a name is a runtime size (or a tensor: `topk: Tensor`
    # then `topk = 2`) only if every binding is one; otherwise what reaches the launch is not known.
    for name in reassigned:
        if kinds.get(name) in ("shape", "tensor"):
            del kinds[name]
    return kinds


def _launch_sites(
    src: SourceText, imports: ImportMap, body: list[ast.stmt], memo: StatementMemo | None = None,
) -> list[LaunchSite]:
    sites: list[LaunchSite] = []

    def visit(scope: _Scope | None, nodes: list[ast.stmt]) -> None:
        kinds: dict[str, str] | None = None
        # A launch is `name[grid](...)`: statements whose text has no "](" cannot hold one, so skip walking them.
        stack: list[ast.AST] = [n for n in nodes if _LAUNCH_TEXT.search(src.statement_text(n))]
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(node, node.body)
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                site = _site(node, node.func, scope)
                if site is not None:
                    if kinds is None:
                        kinds = _local_kinds(scope, imports)
                    sites.append(_with_kinds(site, node, kinds))
            stack.extend(ast.iter_child_nodes(node))

    def _site(call: ast.Call, func: ast.Subscript, scope: _Scope | None) -> LaunchSite | None:
        callee_node = func.value
        if isinstance(callee_node, ast.Name):
            callee = callee_node.id
            full = imports.names.get(callee)
            if full and "." in full:
                module, target = full.rsplit(".", 1)
            else:
                target, module = callee, None
        elif isinstance(callee_node, ast.Attribute):
            callee = src.segment(callee_node)
            target = callee_node.attr
            module = imports.resolve(callee_node.value)
        else:
            return None
        return LaunchSite(callee, target, module, src.span(call), src.span(callee_node), (), ())

    def _with_kinds(site: LaunchSite, call: ast.Call, kinds: dict[str, str]) -> LaunchSite:
        args = tuple(
            LaunchArg(src.segment(a), src.span(a), None, _arg_kind(a, imports, kinds))
            for a in call.args
            if not isinstance(a, ast.Starred)
        )
        kwargs = tuple(
            LaunchArg(src.segment(k.value), src.span(k), k.arg, _arg_kind(k.value, imports, kinds),
                      src.span(k.value))
            for k in call.keywords
            if k.arg is not None
        )
        star = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
        return LaunchSite(site.callee, site.target, site.module, site.span, site.callee_span, args, kwargs, star)

    if memo is None:
        visit(None, body)
    else:
        # A statement's launch sites depend on it and the imports only (not on which kernels the file defines: a
        # kernel hidden for a moment by a half-typed line leaves every launcher's sites as they were).
        context = tuple(sorted(imports.names.items()))
        for stmt in body:
            found, moved = memo.get("launch_sites", stmt, context)
            if isinstance(found, tuple):  # the statement's sites, put below by an earlier analysis
                sites.extend(shift_launch_site(site, moved) for site in found)
            else:
                start = len(sites)
                visit(None, [stmt])
                memo.put("launch_sites", stmt, context, tuple(sites[start:]))
    sites.sort(key=lambda s: (s.span.start_line, s.span.start_col))
    return sites


def _module_level_targets(body: list[ast.stmt]) -> set[str]:
    """Names assigned by module-level statements, inside if/try/with blocks too."""
    out: set[str] = set()
    pending = list(body)  # a list of its own, not recursion: an `elif` chain nests as deep as it is long
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            pending += node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            pending += [s for h in getattr(node, "handlers", []) for s in h.body]
    return out


def _assignment_count(body: list[ast.stmt], name: str) -> int:
    count = 0
    for node in ast.walk(ast.Module(body=[n for n in body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))],
                                    type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
            count += 1
    return count


def discover_triton(
    src: SourceText, imports: ImportMap, body: list[ast.stmt], memo: StatementMemo | None = None
) -> TritonDiscovery:
    found = TritonDiscovery()
    assignments = module_assignments(body)
    for name, value in assignments.items():
        v = literal_value(value)
        if v is not None:
            found.module_constants[name] = v

    # A def's kernel depends on it, the imports and the module-level assignments (named config lists) only.
    context = (tuple(sorted(imports.names.items())), tuple((n, id(v)) for n, v in assignments.items())) \
        if memo is not None else None

    def kernel_of(node: ast.FunctionDef, qualname: str) -> TritonKernel | None:
        if memo is None:
            return _kernel_from_def(src, imports, node, assignments, qualname)
        known, moved = memo.get("kernel", node, (context, qualname))
        if known is StatementMemo.MISSING:
            known = _kernel_from_def(src, imports, node, assignments, qualname)
            memo.put("kernel", node, (context, qualname), known)
            moved = 0
        # The memo also remembers a def that is no kernel (None).
        return shift_kernel(known, moved) if isinstance(known, TritonKernel) else None

    # Depth first in source order, with a stack of its own: an `elif` chain nests as deep as it is long.
    stack: list[tuple[Iterator[ast.stmt], str]] = [(iter(body), "")]
    while stack:
        nodes, prefix = stack[-1]
        node = next(nodes, None)
        if node is None:
            stack.pop()
        elif isinstance(node, ast.FunctionDef):
            kernel = kernel_of(node, prefix + node.name)
            if kernel is not None:
                found.kernels.append(KernelSyntax(kernel, node))
            elif not prefix:
                found.plain_functions[node.name] = node
            stack.append((iter(node.body), prefix + node.name + "."))
        elif isinstance(node, ast.ClassDef):
            stack.append((iter(node.body), prefix + node.name + "."))
        elif isinstance(node, (ast.If, ast.Try)):
            stack.append((iter(node.body + node.orelse), prefix))
    rebound = _module_level_targets(body)
    for ks in found.kernels:
        ks.kernel.rebound = ks.kernel.qualname in rebound
    # `k = triton.jit(k)` (and autotune/heuristics wrappings of it): the def is the kernel, under the assigned name.
    defs = {n.name: n for n in body if isinstance(n, ast.FunctionDef)}
    for node in body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)):
            continue
        wrapped = _wrapped_def(imports, node.value)
        if wrapped is None or wrapped[0] not in defs:
            continue
        target = node.targets[0].id
        fn = defs[wrapped[0]]
        kernel = _kernel_from_def(src, imports, fn, assignments, target, wrapped[1], target)
        if kernel is None or any(ks.node is fn for ks in found.kernels):
            continue
        # Assigned once (this wrapping) and, when it keeps the def's name, not reassigned elsewhere.
        kernel.rebound = _assignment_count(body, target) > 1
        found.kernels.append(KernelSyntax(kernel, fn))
        found.plain_functions.pop(fn.name, None)
    found.launch_sites = _launch_sites(src, imports, body, memo)
    return found
