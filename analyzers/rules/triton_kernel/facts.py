"""What the Triton kernel rules share: the file and kernel facts they query.

One walk per kernel collects what every rule needs (calls, bindings, operators, unsupported constructs); a
small flow-insensitive dataflow then gives each local name a set of facts (runtime or constexpr, derived from
tl.program_id, from tl.arange, a block pointer, already int64). Constexpr values are evaluated per "scenario":
the kernel's defaults, or each autotune config, so a message can say which config is wrong.

What triton accepts was checked by AOT-compiling small kernels with triton 3.6.0 and 3.9.0 (sm90, no GPU).
"""

from __future__ import annotations

import ast
import bisect
import collections
import difflib
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ...budget import UNKNOWN as BUDGET_UNKNOWN
from ...budget import bounded_binop
from ...discovery import is_constexpr_annotation
from ...model import Fix, Span, TextEdit
from ...source import literal_value, next_power_of_2
from ...triton_names import NAMES
from .. import FileContext

TL = "triton.language"
_TL_IMPL = ("triton.language.core.", "triton.language.standard.")

# Rule documentation examples start with this header.
KERNEL_HEADER = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"


# --------------------------------------------------------------------------------------------------------------
# What triton accepts (verified against 3.6.0 and 3.9.0)

# Modules a kernel can never call into (math is handled separately: it works on constexprs).
_HOST_MODULES = ("numpy", "torch", "random", "os", "sys", "time", "scipy", "cmath", "statistics", "functools",
                 "itertools", "copy", "jax", "cupy", "pandas", "subprocess", "json")
_CONSTEXPR_FUNCTIONS = {"triton.constexpr_function", "triton.runtime.jit.constexpr_function",
                        "triton.runtime.constexpr_function"}

# Arguments that must be compile-time constants: function -> (positions, "rest" from this index, keywords).
_NEEDS_CONSTEXPR: dict[str, tuple[tuple[int, ...], int | None, tuple[str, ...]]] = {
    "arange": ((0, 1), None, ("start", "end")),
    "zeros": ((0,), None, ("shape",)), "full": ((0,), None, ("shape",)),
    "reshape": ((), 1, ("shape",)), "view": ((), 1, ("shape",)), "broadcast_to": ((), 1, ("shape",)),
    "static_range": ((0, 1, 2), None, ("arg1", "arg2", "step")),
    "range": ((3, 4), None, ("num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer", "flatten",
                              "warp_specialize", "disable_licm")),
    "program_id": ((0,), None, ("axis",)), "num_programs": ((0,), None, ("axis",)),
    "expand_dims": ((1,), None, ("axis",)),
    "multiple_of": ((1,), None, ("values",)), "max_contiguous": ((1,), None, ("values",)),
    "max_constancy": ((1,), None, ("values",)),
    "make_block_ptr": ((4, 5), None, ("block_shape", "order")),
    "make_tensor_descriptor": ((3,), None, ("block_shape",)),
    "static_assert": ((0,), None, ("cond",)),
    "trans": ((), 1, ("dims",)), "permute": ((), 1, ("dims",)),
    **{r: ((1,), None, ("axis", "keep_dims")) for r in (
        "sum", "max", "min", "argmax", "argmin", "reduce", "cumsum", "cumprod", "xor_sum", "associative_scan",
        "reduce_or")},
    "sort": ((1,), None, ("dim", "descending")), "flip": ((1,), None, ("dim",)),
}
_HINTS = {  # common names triton.language does not have
    "tanh": "2 * tl.sigmoid(2 * x) - 1, or libdevice.tanh (from triton.language.extra import libdevice)",
    "pow": "libdevice.pow (from triton.language.extra import libdevice), or tl.exp2(y * tl.log2(x))",
    "relu": "tl.maximum(x, 0)", "mean": "tl.sum(x, axis) / n", "next_power_of_2": "triton.next_power_of_2",
    "jit": "triton.jit", "autotune": "triton.autotune", "heuristics": "triton.heuristics", "Config": "triton.Config",
    "constexpr_function": "triton.constexpr_function", "log10": "tl.log(x) * 0.4342944819032518",
    "_experimental_descriptor_load": "desc.load(offsets) with desc = tl.make_tensor_descriptor(...)",
    "_experimental_descriptor_store": "desc.store(offsets, value) with desc = tl.make_tensor_descriptor(...)",
    "_experimental_make_tensor_descriptor": "tl.make_tensor_descriptor",
}
_RENAMES = {"matmul": "dot", "mm": "dot", "float": "float32", "int": "int32", "bool": "int1", "half": "float16",
            "bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "double": "float64"}

# Dataflow facts, one bit each.
RT = 1  # a runtime value (not a compile-time constant)
PID = 2  # derived from tl.program_id
PIDOFF = 4  # derived from tl.program_id and not bounded by %, tl.where or tl.minimum (for TR002)
AR = 8  # has a tl.arange (vector) component
BP = 16  # a block pointer or tensor descriptor
I64 = 32  # already 64-bit
RTP = 64  # derived from a non-constexpr parameter (for TR009)

# How a local name is bound. Triton turns every value assigned with a plain `=` into a tensor (a runtime value),
# even `half = BLOCK // 2`; only `half: tl.constexpr = BLOCK // 2` and tl.static_range loop variables stay
# compile-time constants (checked on 3.6 and 3.9).
PLAIN, CONSTEXPR, UNPACK, FOR, COMP = "=", "constexpr", "unpack", "for", "comp"

# One binding of a local name: (kind, value, target). The value is the expression bound (PLAIN, CONSTEXPR, UNPACK:
# the whole right-hand side; COMP: the iterable), the For node itself (FOR), or None (a starred target); the target
# is the Name an annotation fix may follow, None where none can be added (`a = b = 1`, tuple elements).
Binding = tuple[str, ast.expr | ast.For | None, ast.Name | None]


# --------------------------------------------------------------------------------------------------------------
# File-level information shared by all kernels


def _nested_defs(stmt: ast.stmt) -> Iterator[ast.AST]:
    """stmt and the statements nested in its blocks, breadth first as ast.walk gives them; defs are statements,
    so the expressions around them (most of a function's nodes) need no visit."""
    queue: collections.deque[ast.AST] = collections.deque([stmt])
    while queue:
        node = queue.popleft()
        yield node
        for field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field_name, None)
            if isinstance(block, list):
                queue.extend(b for b in block if isinstance(b, ast.AST))


_FOLDED = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div, ast.Mod, ast.Pow, ast.LShift, ast.RShift)


@dataclass
class FileFacts:
    ctx: FileContext
    tl: str  # how this file spells "triton.language." ("tl.", "triton.language.", ...)
    can_fix: bool  # whether that spelling is importable as is (a fix may insert it)
    module_env: dict[str, tuple[object, str]]
    plain: dict[str, ast.FunctionDef]  # undecorated module-level functions
    constexpr_fns: set[str]
    module_names: set[str]  # names bound at module level (they shadow builtins)
    launched: set[str]
    called: set[str] = field(default_factory=set)  # names called from some @jit function
    _launchers: dict | None = None

    def launchers(self) -> dict[str, list[tuple[ast.AST, list[ast.Call]]]]:
        """Kernel name -> the functions of this file that launch it, with their `name[grid](...)` calls."""
        if self._launchers is None:
            self._launchers = {}
            lines = {s.span.start_line + 1 for s in self.ctx.triton.launch_sites}
            ordered = sorted(lines)
            for stmt in self.ctx.body if lines else ():
                # Launchers sit in defs and classes, also under `if has_triton():` or `try:` at module level.
                for fn in _nested_defs(stmt) if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.If, ast.Try)) else ():
                    # A bisection, not a scan of every launch line: linear in the file, not in defs x launches.
                    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or bisect.bisect_right(
                            ordered, fn.end_lineno or fn.lineno) == bisect.bisect_left(ordered, fn.lineno):
                        continue
                    by_name: dict[str, list[ast.Call]] = {}
                    for n in ast.walk(fn):
                        if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) and n.lineno in lines:
                            callee = n.func.value
                            name = getattr(callee, "id", None) or getattr(callee, "attr", None)
                            if name:
                                by_name.setdefault(name, []).append(n)
                    for name, calls in by_name.items():
                        self._launchers.setdefault(name, []).append((fn, calls))
        return self._launchers

    @classmethod
    def build(cls, ctx: FileContext) -> FileFacts:
        imports = ctx.imports
        aliases = sorted(imports.aliases_of(TL))
        if "tl" in aliases:
            tl, ok = "tl.", True
        elif aliases:
            tl, ok = aliases[0] + ".", True
        elif imports.names.get("triton") == "triton":
            tl, ok = "triton.language.", True
        else:
            tl, ok = "tl.", False
        env: dict[str, tuple[object, str]] = {}
        for name, value in ctx.triton.module_constants.items():
            if isinstance(value, (int, float)):
                env[name] = (value, "(module constant)")
        module_names = set(imports.names)
        constexpr_fns: set[str] = set()
        plain: dict[str, ast.FunctionDef] = {}
        for node in ctx.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.value.args) == 1 \
                    and imports.resolve(node.value.func) == f"{TL}.constexpr":
                v = literal_value(node.value.args[0])
                for t in node.targets:
                    if isinstance(t, ast.Name) and isinstance(v, (int, float)):
                        env[t.id] = (v, f"from the module constant on line {node.lineno}")
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    module_names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                module_names.add(node.name)
                decos = [imports.resolve(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
                if any(d in _CONSTEXPR_FUNCTIONS for d in decos):
                    constexpr_fns.add(node.name)
                elif isinstance(node, ast.FunctionDef) and not decos and node.name in ctx.triton.plain_functions:
                    plain[node.name] = node
        lines = _def_lines(ctx.body)
        for name, (value, origin) in list(env.items()):
            if origin == "(module constant)":
                env[name] = (value, f"from the module constant on line {lines.get(name, 0)}")
        launched = {s.target for s in ctx.triton.launch_sites if s.module is None}
        return cls(ctx, tl, ok, env, plain, constexpr_fns, module_names, launched)


def _def_lines(body: list[ast.stmt]) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name):
                out.setdefault(t.id, node.lineno)
    return out


# --------------------------------------------------------------------------------------------------------------
# Per-kernel facts


@dataclass
class CallSite:
    node: ast.Call
    name: str | None  # resolved dotted name of the callee
    ifs: tuple[ast.AST, ...]  # what encloses the call: `if` tests, and For/While nodes


class KernelFacts:
    def __init__(self, f: FileFacts, ks) -> None:
        self.f = f
        self.ctx = f.ctx
        self.kernel = ks.kernel
        self.fn: ast.FunctionDef = ks.node
        self.name = ks.kernel.name
        self.imports = f.ctx.imports
        self.args: dict[str, ast.arg] = {}
        self.defaults: dict[str, ast.expr] = {}
        a = self.fn.args
        positional = a.posonlyargs + a.args
        for arg, d in zip(positional[len(positional) - len(a.defaults):], a.defaults):
            self.defaults[arg.arg] = d
        for arg, d in zip(a.kwonlyargs, a.kw_defaults):
            if d is not None:
                self.defaults[arg.arg] = d
        for arg in positional + a.kwonlyargs:
            self.args[arg.arg] = arg
        self.constexpr = {p.name for p in ks.kernel.params if p.is_constexpr}
        self.calls: list[CallSite] = []
        self.assigns: dict[str, list[Binding]] = {}
        self.bound: set[str] = set(self.args)
        self.ops: list[tuple[ast.AST, tuple]] = []  # BinOp/AugAssign with * @ **, Compare with in / chains
        self.attrs: list[ast.Attribute] = []
        self.unsupported: list[tuple[ast.AST, str, tuple]] = []  # (node, what, ifs)
        self.fors: list[ast.AST] = []  # For loops and comprehensions (iterators to check)
        self.fstrings: list[ast.JoinedStr] = []
        self.compared: dict[str, ast.Compare] = {}  # names used in comparisons -> the first such comparison
        self.comparisons: dict[str, list[ast.Compare]] = {}  # names -> every comparison of them
        self.returns_value = False
        self._walk()
        self.facts: dict[str, int] = {}
        self._scenarios: list[dict[str, tuple[object, str]]] | None = None
        self._shape_memo: dict[str, tuple | None] = {}
        self.fixed: set[tuple[Span, str]] = set()  # edits already offered (fix-all must not apply one twice)
        self.noted: set[tuple[str, str]] = set()  # names already given a triton-version note (TR007)

    # ---- the walk -----------------------------------------------------------------------------------------

    def callee(self, func: ast.expr) -> str | None:
        """The dotted name of a called module function; None for methods of computed values (`f(x).to(...)`)."""
        n = func
        while isinstance(n, ast.Attribute):
            n = n.value
        name = self.imports.resolve(func) if isinstance(n, ast.Name) else None
        if name and name.startswith(_TL_IMPL):  # `from triton.language import core; core.arange`
            name = f"{TL}.{name.rsplit('.', 1)[1]}"
        return name

    def _walk(self) -> None:
        resolve = self.callee
        stack: list[tuple[ast.AST, tuple]] = [(s, ()) for s in reversed(self.fn.body)]
        calls, ops, unsupported = self.calls, self.ops, self.unsupported
        while stack:
            node, ifs = stack.pop()
            t = type(node)
            # The most frequent kinds first: each test that fails costs an isinstance call.
            if isinstance(node, ast.Name):
                if type(node.ctx) is ast.Store:
                    self.bound.add(node.id)
                continue
            elif isinstance(node, ast.Call):
                calls.append(CallSite(node, resolve(node.func), ifs))
            elif isinstance(node, ast.Attribute):
                self.attrs.append(node)
            elif isinstance(node, ast.BinOp):
                if type(node.op) in (ast.Mult, ast.MatMult, ast.Pow):
                    ops.append((node, ifs))
            elif isinstance(node, ast.Compare):
                if len(node.ops) > 1 or any(type(o) in (ast.In, ast.NotIn) for o in node.ops):
                    ops.append((node, ifs))
                # Bounds checks such as `cols < n_cols` (an equality such as `idx == key` is not one).
                if any(type(o) in (ast.Lt, ast.LtE, ast.Gt, ast.GtE) for o in node.ops):
                    for side in (node.left, *node.comparators):
                        base = side.value if isinstance(side, ast.Subscript) else side
                        if isinstance(base, ast.Name):
                            self.compared.setdefault(base.id, node)
                            self.comparisons.setdefault(base.id, []).append(node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind(target, node.value, PLAIN, ifs)
                    if len(node.targets) > 1 and isinstance(target, ast.Name):  # `a = b = 1` cannot be annotated
                        binds = self.assigns[target.id]
                        binds[-1] = binds[-1][:2] + (None,)
            elif isinstance(node, ast.AugAssign):
                if isinstance(node.target, ast.Name):
                    self.assigns.setdefault(node.target.id, []).append(
                        (PLAIN, ast.copy_location(ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value),
                                                  node), None))
                    if type(node.op) is ast.Mult:
                        ops.append((node, ifs))
                else:
                    self._bind(node.target, node.value, PLAIN, ifs)
            elif isinstance(node, ast.AnnAssign):
                if node.value is not None:
                    ce = is_constexpr_annotation(self.imports, node.annotation)
                    self._bind(node.target, node.value, CONSTEXPR if ce else PLAIN, ifs)
                    if not ce and isinstance(node.target, ast.Name):  # `x: int = 5`: no annotation fix
                        binds = self.assigns[node.target.id]
                        binds[-1] = binds[-1][:2] + (None,)
                    stack.append((node.value, ifs))
                continue  # the annotation (often tl.constexpr) is not a value
            elif isinstance(node, ast.NamedExpr):
                self.assigns.setdefault(node.target.id, []).append((PLAIN, node.value, None))
                self.bound.add(node.target.id)
                ops.append((node, ifs))
            elif isinstance(node, ast.If):
                inner = ifs + (node.test,)
                stack.extend((s, inner) for s in reversed(node.orelse))
                stack.extend((s, inner) for s in reversed(node.body))
                stack.append((node.test, ifs))
                continue
            elif isinstance(node, (ast.For, ast.While)):
                # Loops join the context like `if`s: their bounds are the author's own bounds logic (TR002).
                inner = ifs + (node,)
                stack.extend((s, inner) for s in reversed(node.orelse))
                stack.extend((s, inner) for s in reversed(node.body))
                if isinstance(node, ast.For):
                    self._bind(node.target, node, FOR, ifs)
                    self.fors.append(node)
                    stack.append((node.iter, ifs))
                else:
                    stack.append((node.test, ifs))
                if node.orelse:
                    unsupported.append((node, "for-else" if t is ast.For else "while-else", ifs))
                continue
            elif isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)):
                for gen in node.generators:
                    self._bind(gen.target, gen.iter, COMP, ifs)
                if t is ast.ListComp:
                    self.fors.append(node)
                else:
                    unsupported.append((node, t.__name__, ifs))
            elif isinstance(node, ast.JoinedStr):
                self.fstrings.append(node)
            elif isinstance(node, ast.Return):
                self.returns_value = self.returns_value or node.value is not None
            elif t in _UNSUPPORTED_NODES:
                unsupported.append((node, t.__name__, ifs))
                if t in (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                    continue  # their bodies are not kernel code
            # Children in source order; ast.iter_child_nodes is generic and dominated the cost of this walk.
            fields = _CHILD_FIELDS.get(t)
            if fields is None:
                fields = _CHILD_FIELDS[t] = tuple(f for f in t._fields if f not in _NOT_CHILDREN)
            for name in reversed(fields):
                v = getattr(node, name, None)
                if type(v) is list:
                    stack.extend((c, ifs) for c in reversed(v) if isinstance(c, ast.AST))
                elif isinstance(v, ast.AST):
                    stack.append((v, ifs))

    def _bind(self, target: ast.AST, value: ast.expr | ast.For | None, kind: str, ifs: tuple) -> None:
        if isinstance(target, ast.Name):
            self.bound.add(target.id)
            self.assigns.setdefault(target.id, []).append((kind, value, target))
        elif isinstance(target, (ast.Tuple, ast.List)):
            if kind in (PLAIN, CONSTEXPR) and isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._bind(t, v, kind, ifs)
                    if isinstance(t, ast.Name):  # an element of a tuple target cannot be annotated
                        binds = self.assigns[t.id]
                        binds[-1] = binds[-1][:2] + (None,)
                return
            for t in target.elts:
                self._bind(t, value, UNPACK if kind in (PLAIN, CONSTEXPR) else kind, ifs)
        elif isinstance(target, ast.Starred):
            self.unsupported.append((target, "Starred", ifs))
            self._bind(target.value, None, UNPACK, ifs)
        elif isinstance(target, ast.Subscript):
            self.unsupported.append((target, "setitem", ifs))

    # ---- dataflow -----------------------------------------------------------------------------------------

    @property
    def helper_like(self) -> bool:
        # A @jit helper may receive constexprs through unannotated parameters; a launched kernel cannot.
        if {"autotune", "heuristics"} & set(self.kernel.decorators) or self.name in self.f.launched:
            return False
        return self.name in self.f.called or self.returns_value

    def solve(self) -> None:
        self.param_facts: dict[str, int] = {}
        helper = self.helper_like
        for name, arg in self.args.items():
            if name in self.constexpr:
                continue
            ann = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            bits = RTP | (I64 if "int64" in ann else 0)
            if helper:
                bits = bits if not name.isupper() else 0  # ALL_CAPS helper parameters are constexprs by convention
            else:
                bits |= RT
            self.param_facts[name] = bits
        for _ in range(6):  # flow-insensitive fixpoint; loops converge in two or three rounds
            changed = False
            for name, values in self.assigns.items():
                bits = 0
                for kind, v, _ in values:
                    bits |= self._value_facts(kind, v)
                if bits != self.facts.get(name, 0):
                    self.facts[name] = bits
                    changed = True
            if not changed:
                break

    def _value_facts(self, kind: str, value: ast.expr | ast.For | None) -> int:
        if isinstance(value, ast.For):  # kind FOR
            it = value.iter
            if isinstance(it, ast.Call):
                args = self._or(it.args)
                if self.callee(it.func) == f"{TL}.static_range":
                    return args & ~RT
                # A loop over a runtime range walks offsets like a program id does (TR002's PIDOFF), not bounded by
                # a constant; over constant bounds it does not.
                return RT | args | (PIDOFF if args & RT else 0)
            return self.expr_facts(it)
        if kind in (CONSTEXPR, COMP):
            return self.expr_facts(value)
        if kind == PLAIN and _keeps_constexpr(self, value):
            return self.expr_facts(value)
        return RT | self.expr_facts(value)

    def _or(self, nodes) -> int:
        bits = 0
        for n in nodes:
            bits |= self.expr_facts(n)
        return bits

    def name_facts(self, name: str) -> int:
        return self.facts.get(name, 0) | self.param_facts.get(name, 0)

    def expr_facts(self, e: ast.AST | None) -> int:
        if isinstance(e, ast.Name):
            return self.name_facts(e.id)
        if e is None or isinstance(e, ast.Constant):
            return 0
        if isinstance(e, ast.BinOp):
            right = self.expr_facts(e.right)
            bits = self.expr_facts(e.left) | right
            if type(e.op) is ast.Mod:
                # `x % n` is in bounds for TR002; `pid % GROUP` (a constant) is also too small to overflow.
                return bits & ~(PIDOFF | PID) if not right & RT else bits & ~PIDOFF
            return bits
        if isinstance(e, ast.Call):
            return self._call_facts(e)
        if isinstance(e, ast.Attribute):
            if e.attr in _STATIC_ATTRS:
                return 0
            name = self.imports.resolve(e)
            if name is not None and name.split(".")[0] in ("triton", "math", "numpy"):
                return 0
            return self.expr_facts(e.value)
        if isinstance(e, ast.Subscript):
            return self.expr_facts(e.value)
        if isinstance(e, ast.UnaryOp):
            return self.expr_facts(e.operand)
        if isinstance(e, (ast.Tuple, ast.List)):
            return self._or(e.elts)
        if isinstance(e, ast.Compare):
            if any(_is_dtype_expr(self, x) for x in (e.left, *e.comparators)):
                return 0  # `x.dtype == tl.float16` is decided at compile time
            return self.expr_facts(e.left) | self._or(e.comparators)
        if isinstance(e, ast.BoolOp):
            return self._or(e.values)
        if isinstance(e, ast.IfExp):
            return self.expr_facts(e.body) | self.expr_facts(e.orelse) | (self.expr_facts(e.test) & RT)
        if isinstance(e, (ast.NamedExpr, ast.Starred)):
            return self.expr_facts(e.value)
        return 0

    def _call_facts(self, e: ast.Call) -> int:
        name = self.callee(e.func) or ""
        short = name[len(TL) + 1:] if name.startswith(TL + ".") else None
        if short is not None:
            if short == "program_id":
                return RT | PID | PIDOFF
            if short == "num_programs":
                return RT
            if short == "arange":
                return AR | (self._or(e.args) & RT)
            if short == "load":
                return RT
            if short in ("make_block_ptr", "advance", "make_tensor_descriptor"):
                return RT | BP
            if short == "cast" and e.args:
                i64 = self._is_i64(e.args[1:] + [k.value for k in e.keywords])
                return self.expr_facts(e.args[0]) | (I64 if i64 else 0)
            if short in ("multiple_of", "max_contiguous", "max_constancy") and e.args:
                return self.expr_facts(e.args[0])
            if short == "where" and len(e.args) == 3:
                return (self._or(e.args[1:]) & ~PIDOFF) | (self.expr_facts(e.args[0]) & RT)
            if short in ("minimum", "clamp"):
                return self._or(e.args) & ~PIDOFF
            if short in ("zeros", "full", "zeros_like", "full_like", "rand", "randn", "randint"):
                return RT | self._or(e.args)
        if isinstance(e.func, ast.Attribute) and not name.startswith("triton"):
            recv = self.expr_facts(e.func.value)
            if e.func.attr == "to":
                return recv | (I64 if self._is_i64(e.args + [k.value for k in e.keywords]) else 0)
            if e.func.attr in ("load", "gather", "atomic_add"):  # data read through a tensor descriptor
                return RT
            return recv | self._or(e.args)
        return self._or(e.args) | self._or(k.value for k in e.keywords)

    def _is_i64(self, nodes) -> bool:
        for n in nodes:
            name = self.imports.resolve(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
            if name in (f"{TL}.int64", f"{TL}.uint64") or isinstance(n, ast.Constant) and n.value in _INT64_NAMES:
                return True
        return False

    def is_static(self, e: ast.AST) -> bool:
        return not self.expr_facts(e) & RT

    def runtime_roots(self, e: ast.AST, seen: set[str] | None = None) -> list[tuple[str, str]]:
        """Why an expression is a runtime value: ("param", name) for an unannotated parameter, ("local", name) for
        a local bound once with a plain `=`, ("other", description) for anything no annotation can fix."""
        seen = set() if seen is None else seen
        out: list[tuple[str, str]] = []
        for n in _iter_expr(e, skip_static=True):
            if isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                binds = self.assigns.get(n.id)
                if binds is None:
                    if self.param_facts.get(n.id, 0) & RT:
                        out.append(("param", n.id))
                    continue
                if not self.facts.get(n.id, 0) & RT:
                    continue
                if len(binds) > 1 or n.id in self.args:
                    out.append(("other", f"{n.id} (reassigned, so never a constant)"))
                    continue
                kind, v, target = binds[0]
                if kind == FOR:
                    out.append(("other", f"the loop variable {n.id}"))
                    continue
                if kind == PLAIN and target is not None:
                    out.append(("local", n.id))
                elif kind != CONSTEXPR:
                    out.append(("other", n.id))
                if v is not None and self.expr_facts(v) & RT:
                    out.extend(self.runtime_roots(v, seen))
            elif isinstance(n, ast.Call):
                name = self.callee(n.func) or ""
                if name in (f"{TL}.program_id", f"{TL}.num_programs", f"{TL}.load"):
                    out.append(("other", f"{self.f.tl}{name.rsplit('.', 1)[1]}(...)"))
        return list(dict.fromkeys(out))

    # ---- constexpr values per scenario --------------------------------------------------------------------

    @property
    def scenarios(self) -> list[dict[str, tuple[object, str]]]:
        if self._scenarios is None:
            base = {k: v for k, v in self.f.module_env.items() if k not in self.args}
            heur = set(self.kernel.heuristics)
            defaults = {}
            if self.kernel.autotune_configs_known:
                for name, node in self.defaults.items():
                    if name in self.constexpr and name not in heur:
                        v = self.evaluate(node, base, [])
                        if isinstance(v, (int, float)):
                            defaults[name] = (v, "from its default")
            out = []
            for i, cfg in enumerate(self.kernel.autotune_configs):
                env = dict(base, **defaults)
                where = f"in autotune config {i + 1} (line {cfg.span.start_line + 1})"
                for k, v in cfg.kwargs.items():
                    number = isinstance(v, (int, float)) and not isinstance(v, bool)
                    if k in self.constexpr and k not in heur and number:
                        env[k] = (v, where)
                out.append(env)
            self._scenarios = out or [dict(base, **defaults)]
        return self._scenarios

    def evaluate(self, e, env: dict, used: list, depth: int = 0):
        """The compile-time value of an expression in one scenario, or None; `used` collects (name, value, origin)."""
        if depth > 12 or e is None:
            return None
        t = type(e)
        if t is ast.Constant:
            return e.value if isinstance(e.value, (int, float)) else None
        if t is ast.Name:
            vals = self.assigns.get(e.id)
            if vals is not None:  # only `x: tl.constexpr = ...` locals are compile-time values
                if len(vals) == 1 and vals[0][0] == CONSTEXPR and e.id not in self.args:
                    return self.evaluate(vals[0][1], env, used, depth + 1)
                return None
            if e.id in env and (e.id in self.constexpr or e.id not in self.args):
                value, origin = env[e.id]
                used.append((e.id, value, origin))
                return value
            return None
        if t is ast.UnaryOp:
            v = self.evaluate(e.operand, env, used, depth + 1)
            if isinstance(v, (int, float)):
                return -v if isinstance(e.op, ast.USub) else v if isinstance(e.op, ast.UAdd) else None
            return None
        if t is ast.BinOp:
            a = self.evaluate(e.left, env, used, depth + 1)
            b = self.evaluate(e.right, env, used, depth + 1)
            if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
                return None
            op = type(e.op)
            if op in (ast.LShift, ast.RShift) and not (isinstance(a, int) and isinstance(b, int) and 0 <= b <= 64):
                return None  # shifts of a float raise TypeError; wider shifts are no size
            if op not in _FOLDED:
                return None
            value = bounded_binop(op, a, b)  # sizes checked before the value is built
            return None if value is BUDGET_UNKNOWN else value  # type: ignore[return-value]
        if t is ast.Attribute:
            name = self.imports.resolve(e)
            if name in ("math.inf", "numpy.inf"):
                return math.inf
            if name in ("math.pi", "numpy.pi"):
                return math.pi
            return None
        if t is ast.Call:
            name = self.callee(e.func)
            if name == "float" and len(e.args) == 1 and isinstance(e.args[0], ast.Constant) \
                    and isinstance(e.args[0].value, str) and "float" not in self.bound:
                try:
                    return float(e.args[0].value)
                except ValueError:
                    return None
            args = [self.evaluate(a, env, used, depth + 1) for a in e.args]
            if not args or not all(isinstance(a, (int, float)) for a in args):
                return None
            if name in ("triton.next_power_of_2", f"{TL}.next_power_of_2") and isinstance(args[0], int):
                return next_power_of_2(args[0])
            if name in ("triton.cdiv", f"{TL}.cdiv") and len(args) == 2 and args[1]:
                return -(-args[0] // args[1])
            if name in _FOLDED_BUILTINS and name not in self.bound:
                try:
                    return _FOLDED_BUILTINS[name](*args)
                except (TypeError, ValueError):
                    return None
            if name == f"{TL}.constexpr" and len(args) == 1:
                return args[0]
        return None

    def describe(self, e: ast.AST, value, used: list) -> str:
        """'BLOCK_K = 8 in autotune config 2 (line 14)' or '`BK // 2` = 4 with BK = 8 (...)' or '10'."""
        names = list(dict.fromkeys((n, v, o) for n, v, o in used))
        if isinstance(e, ast.Constant):
            return f"{value} (the literal on line {e.lineno})"
        if isinstance(e, ast.Name) and len(names) == 1 and names[0][0] == e.id:
            return f"{e.id} = {value} {names[0][2]}"
        text = f"`{_short(self.ctx.src.segment(e))}` = {value}" if isinstance(e, ast.AST) else f"{value}"
        if names:
            text += " with " + ", ".join(f"{n} = {v} {o}" for n, v, o in names)
        return text

    # ---- shapes (for tl.dot) ------------------------------------------------------------------------------

    def shape(self, e, depth: int = 0) -> tuple | None:
        """Block shape as a tuple of dimension expressions (ast nodes, ints, or ('sub', end, start)); None: unknown."""
        if depth > 30 or e is None:
            return None
        t = type(e)
        if t is ast.Name:
            if e.id in self._shape_memo:
                return self._shape_memo[e.id]
            if e.id not in self.assigns:
                return () if e.id in self.args else None
            # Recursion guard; a parameter shifted in place (`X += row * stride`) starts as the scalar it was passed.
            self._shape_memo[e.id] = () if e.id in self.args else None
            result = None
            for kind, v, _ in self.assigns[e.id]:
                if kind in (PLAIN, CONSTEXPR):
                    result = self.shape(v, depth + 1)
                    if result is not None:
                        break
            self._shape_memo[e.id] = result
            return result
        if t is ast.Constant:
            return ()
        if t is ast.BinOp:
            return _broadcast(self.shape(e.left, depth + 1), self.shape(e.right, depth + 1))
        if t is ast.UnaryOp:
            return self.shape(e.operand, depth + 1)
        if t is ast.Compare:  # `cols < N`: a mask of the offsets' shape
            mask = self.shape(e.left, depth + 1)
            for c in e.comparators:
                mask = _broadcast(mask, self.shape(c, depth + 1))
            return mask
        if t is ast.Subscript:
            base = self.shape(e.value, depth + 1)
            items = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
            if base is None or not all(_is_none(i) or isinstance(i, ast.Slice) for i in items):
                return None
            out, it = [], iter(base)
            for i in items:
                out.append(1 if _is_none(i) else next(it, None))
            return tuple(out) + tuple(it)
        if t is ast.Attribute:
            inner = self.shape(e.value, depth + 1) if e.attr == "T" else None
            return inner[::-1] if inner else None
        if t is not ast.Call:
            return None
        name = self.callee(e.func) or ""
        short = name[len(TL) + 1:] if name.startswith(TL + ".") else None
        args = e.args
        kw = {k.arg: k.value for k in e.keywords}
        if short == "program_id" or short == "num_programs":
            return ()
        if short == "arange" and len(args) == 2:
            start, end = args
            return (end,) if isinstance(start, ast.Constant) and start.value == 0 else (("sub", end, start),)
        if short in ("zeros", "full"):
            shp = args[0] if args else kw.get("shape")
            return tuple(shp.elts) if isinstance(shp, (ast.Tuple, ast.List)) else None
        if short in ("make_block_ptr", "make_tensor_descriptor"):
            shp = kw.get("block_shape") or (args[4] if short == "make_block_ptr" and len(args) > 4 else
                                            args[3] if short == "make_tensor_descriptor" and len(args) > 3 else None)
            return tuple(shp.elts) if isinstance(shp, (ast.Tuple, ast.List)) else None
        if short in ("load", "advance", "multiple_of", "max_contiguous", "max_constancy", "cast", "zeros_like",
                     "full_like") or (short in _ELEMENTWISE and len(args) == 1):
            return self.shape(args[0] if args else kw.get("pointer") or kw.get("input"), depth + 1)
        if short == "where" and len(args) == 3:
            return _broadcast(_broadcast(*(self.shape(a, depth + 1) for a in args[:2])), self.shape(args[2], depth + 1))
        if short == "dot" and len(args) >= 2:
            a, b = self.shape(args[0], depth + 1), self.shape(args[1], depth + 1)
            return (a[-2], b[-1]) if a and b and len(a) >= 2 and len(b) >= 2 else None
        if short is None and isinstance(e.func, ast.Name) and e.func.id in ("float", "int") \
                and e.func.id not in self.bound:
            return ()  # float("inf"): a scalar
        if short in ("maximum", "minimum", "fma", "clamp") and len(args) >= 2:
            joined = self.shape(args[0], depth + 1)
            for a in args[1:]:
                joined = _broadcast(joined, self.shape(a, depth + 1))
            return joined
        if short in ("sum", "max", "min", "argmax", "argmin", "xor_sum") and args:
            # A reduction drops its axis (all of them without one), unless keep_dims keeps it as 1.
            inner = self.shape(args[0], depth + 1)
            axis = kw.get("axis", args[1] if len(args) > 1 else None)
            keep = kw.get("keep_dims", args[2] if len(args) > 2 else None)
            if inner is None or isinstance(keep, ast.Constant) and keep.value:
                return None
            if axis is None or _is_none(axis):
                return ()
            ax = literal_value(axis)
            if not isinstance(ax, int) or not -len(inner) <= ax < len(inner):
                return None
            ax %= len(inner)
            return inner[:ax] + inner[ax + 1:]
        if short == "trans" and len(args) == 1:
            s = self.shape(args[0], depth + 1)
            return s[::-1] if s else None
        if short is None and isinstance(e.func, ast.Attribute):
            if e.func.attr in ("to",):
                return self.shape(e.func.value, depth + 1)
            if e.func.attr == "load":  # desc.load([...]) of a tensor descriptor
                return self.shape(e.func.value, depth + 1)
        return None


# Builtins a constexpr expression may call, evaluated on the numbers (`min(BLOCK, 64)`); min or max of one number
# raises TypeError (None), as it would in Python.
_FOLDED_BUILTINS: dict[str, Callable[..., int | float]] = {"min": min, "max": max, "int": int, "float": float}

_CHILD_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: (), ast.Name: ()}
_NOT_CHILDREN = {"ctx", "op", "ops", "type_comment", "kind", "type_ignores", "id", "attr", "arg", "value_kind"}

_DTYPE_ATTRS = {"dtype", "element_ty", "type"}
_INT64_NAMES = ("int64", "uint64")
_STATIC_ATTRS = _DTYPE_ATTRS | {"shape", "numel"}  # compile-time properties of a tensor


def _is_dtype_expr(k: KernelFacts, e: ast.AST) -> bool:
    if isinstance(e, ast.Attribute):
        if e.attr in _DTYPE_ATTRS:
            return True
        name = k.callee(e) or ""
        return name.startswith(TL + ".") and name[len(TL) + 1:] in _DTYPES
    return False


def _keeps_constexpr(k: KernelFacts, value) -> bool:
    """Values a plain `=` does not turn into tensors: dtypes, None, strings (and what is already a tensor)."""
    if isinstance(value, ast.Constant):
        return value.value is None or isinstance(value.value, str)
    return _is_dtype_expr(k, value)


_DTYPES = {"int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
           "float32", "float64", "float8e4nv", "float8e5", "float8e4b15", "float8e4b8", "float8e5b16", "void"}


def _iter_expr(e: ast.AST, skip_static: bool = False):
    """The nodes of an expression, without descending into lambdas (nor, with skip_static, into `.shape`/`.dtype`,
    which are compile-time values whatever they are read from)."""
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, ast.Lambda) or skip_static and isinstance(n, ast.Attribute) and n.attr in _STATIC_ATTRS:
            continue
        stack.extend(ast.iter_child_nodes(n))


def _is_none(n: ast.AST) -> bool:
    return isinstance(n, ast.Constant) and n.value is None


def _broadcast(a: tuple | None, b: tuple | None) -> tuple | None:
    if a is None or b is None:
        return None
    if len(a) < len(b):
        a, b = b, a
    b = (1,) * (len(a) - len(b)) + b
    return tuple(y if x == 1 else x for x, y in zip(a, b))


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_ELEMENTWISE = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "sin", "cos", "sigmoid", "floor", "ceil", "erf",
                "sqrt_rn", "fma", "maximum", "minimum", "clamp", "softmax"}
_UNSUPPORTED_NODES = {ast.Try, ast.With, ast.AsyncWith, ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                      ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await, ast.Delete, ast.Raise, ast.Import,
                      ast.ImportFrom, ast.Match, ast.Break, ast.Continue, ast.Dict, ast.Set}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED_NODES.add(ast.TryStar)

# --------------------------------------------------------------------------------------------------------------
# Fix helpers


def _span(k: KernelFacts, node: ast.AST) -> Span:
    return k.ctx.src.span(node)


def _once(k: KernelFacts, title: str, edits: list[TextEdit]) -> Fix | None:
    """A fix whose edits were not offered yet in this kernel: applying every fix at once must stay correct."""
    fresh = [e for e in edits if (e.span, e.new_text) not in k.fixed]
    if not fresh:
        return None
    k.fixed.update((e.span, e.new_text) for e in fresh)
    return Fix(title, tuple(fresh))


# --------------------------------------------------------------------------------------------------------------
# Shared by several rules


def _more_configs(count: int) -> str:
    return "" if count <= 1 else f" (also in {count - 1} other autotune config{'s' if count > 2 else ''})"


_ALL_MODULES = NAMES


@functools.lru_cache(maxsize=512)  # difflib over ~200 libdevice names is the slowest step of a typo report
def _suggest(name: str, known: frozenset[str]) -> str | None:
    if name in _RENAMES and _RENAMES[name] in known:
        return _RENAMES[name]
    lowered = {n.lower(): n for n in known}
    if name.lower() in lowered:
        return lowered[name.lower()]
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return close[0] if close else None


def constexpr_arg_calls(k: KernelFacts) -> Iterator[tuple[CallSite, str, list[ast.expr]]]:
    """Calls of triton.language functions with arguments that must be compile-time constants: each call, its
    short name (`arange`) and which of those arguments are runtime values."""
    for c in k.calls:
        if not c.name or not c.name.startswith(TL + "."):
            continue
        short = c.name[len(TL) + 1:]
        spec = _NEEDS_CONSTEXPR.get(short)
        if spec is None:
            continue
        positions, rest, keywords = spec
        args = [a for i, a in enumerate(c.node.args) if i in positions or (rest is not None and i >= rest)]
        args += [kw.value for kw in c.node.keywords if kw.arg in keywords]
        yield c, short, [a for a in args if not k.is_static(a)]


# The per-kernel checks, in the order they run: each rule module registers its own with @kernel_check.
KERNEL_CHECKS: list[Callable[[KernelFacts], None]] = []


def kernel_check(fn: Callable[[KernelFacts], None]) -> Callable[[KernelFacts], None]:
    KERNEL_CHECKS.append(fn)
    return fn
