"""Rules on the bodies of @triton.jit functions: TR001-TR009.

One walk per kernel collects what every rule needs (calls, bindings, operators, unsupported constructs); a
small flow-insensitive dataflow then gives each local name a set of facts (runtime or constexpr, derived from
tl.program_id, from tl.arange, a block pointer, already int64). Constexpr values are evaluated per "scenario":
the kernel's defaults, or each autotune config, so a message can say which config is wrong.

What triton accepts was checked by AOT-compiling small kernels with triton 3.6.0 and 3.9.0 (sm90, no GPU).
"""

from __future__ import annotations

import ast
import difflib
import functools
import logging
import math
import re
from dataclasses import dataclass, field

from ..discovery import is_constexpr_annotation
from ..model import Fix, Related, Severity, Span, TextEdit
from ..source import StatementMemo, is_power_of_2, literal_value, next_power_of_2
from ..triton_names import MISSING, NAMES
from . import FileContext, Rule, file_check, register

log = logging.getLogger(__name__)

TL = "triton.language"
_TL_IMPL = ("triton.language.core.", "triton.language.standard.")

# --------------------------------------------------------------------------------------------------------------
# Rule documentation

_HDR = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"

register(Rule(
    code="TR001", name="arange-not-power-of-2", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A `tl.arange` extent or block shape that is not a power of 2.",
    explanation="Every Triton block dimension must be a power of 2: `tl.arange(0, 10)` or `tl.zeros((48,), ...)` "
    "fails to compile. Round the extent up to the next power of 2 and mask the extra lanes "
    "(`offs < n`). The value is checked for literals, module constants, parameter defaults, each "
    "autotune config and literals passed at launch sites (`kernel[grid](..., BLOCK=100)`); the quick fix rounds "
    "a literal up.",
    wrong=_HDR + "def copy(X, Y, n):\n    offs = tl.arange(0, 10)\n    x = tl.load(X + offs, mask=offs < n)\n"
    "    tl.store(Y + offs, x, mask=offs < n)\n",
    right=_HDR + "def copy(X, Y, n):\n    offs = tl.arange(0, 16)\n    x = tl.load(X + offs, mask=offs < n)\n"
    "    tl.store(Y + offs, x, mask=offs < n)\n",
))
register(Rule(
    code="TR002", name="unmasked-block-access", language="triton", severity=Severity.WARNING,
    summary="`tl.load`/`tl.store` of a block at offsets derived from `tl.program_id`, without `mask=`.",
    explanation="With `offs = pid * BLOCK + tl.arange(0, BLOCK)`, the last program reads or writes past the end "
    "unless the size is a multiple of BLOCK; out-of-bounds stores corrupt memory silently. Add "
    "`mask=offs < n` (and `other=` on loads). Loops and `if`s are analysed too: blocks walked by a runtime "
    "loop (`for start in range(0, n, BLOCK)`) overhang the same way. Not reported: an access that a bounds "
    "guard on the same offsets dominates (an `if`, an early `return`, an `assert`, `tl.device_assert` or "
    "`tl.static_assert` that bounds every tile dimension of the address as a whole: `offs < n`, "
    "`start + BLOCK <= n`, `N % BLOCK == 0`, a flag such as EVEN_K, a padded bound; `if pid * BLOCK >= n: "
    "return` alone only bounds where the last tile starts; `if row >= n_rows: return` covers a row), a kernel "
    "whose launches in the file "
    "assert the size is a multiple of the block or launch `n // BLOCK` programs, blocks counted by floor "
    "division (`M // TILE_M`), buffers allocated padded to whole blocks (`triton.cdiv(n, B) * B`), scalar "
    "per-program accesses such as `tl.load(ptr + pid)`, offsets wrapped with `%`, `tl.where` or "
    "`tl.minimum`, block pointers and tensor descriptors, and `row * stride + tl.arange(0, WIDTH)` rows (or "
    "`pid * HEAD_DIM + tl.arange(0, HEAD_DIM)`) unless the kernel bounds-checks those offsets elsewhere "
    "(WIDTH may be the exact row length).",
    wrong=_HDR + "def scale(X, Y, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n"
    "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n    x = tl.load(X + offs)\n    tl.store(Y + offs, x * 2)\n",
    right=_HDR + "def scale(X, Y, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n"
    "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n    x = tl.load(X + offs, mask=mask)\n"
    "    tl.store(Y + offs, x * 2, mask=mask)\n",
))
register(Rule(
    code="TR003", name="dot-tile-too-small", language="triton", severity=Severity.ERROR,
    summary="`tl.dot` with a K tile under 16 (K < 8 is an error, 8 <= K < 16 a warning, M/N under 16 information).",
    explanation="On NVIDIA GPUs `tl.dot` needs K >= 16 (32 for 8-bit inputs; triton 3.9 accepts K >= 8 for fp32, "
    "3.6 does not): smaller K fails to compile with 'Input shapes should have ... K >= 16'. M and N under 16 "
    "compile (information: small tiles waste tensor-core throughput). Tile sizes are traced from tl.arange extents, "
    "tl.zeros shapes and block shapes, through defaults, autotune configs and module constants.",
    wrong="import triton\nimport triton.language as tl\n\n\n@triton.autotune(\n"
    "    configs=[triton.Config({'BK': 32}), triton.Config({'BK': 8})], key=['K'])\n@triton.jit\n"
    "def mm(A, B, C, K, BK: tl.constexpr):\n    rm = tl.arange(0, 16)\n    rk = tl.arange(0, BK)\n"
    "    a = tl.load(A + rm[:, None] * K + rk[None, :]).to(tl.float16)\n"
    "    b = tl.load(B + rk[:, None] * 16 + rm[None, :]).to(tl.float16)\n"
    "    tl.store(C + rm[:, None] * 16 + rm[None, :], tl.dot(a, b))\n",
    right="import triton\nimport triton.language as tl\n\n\n@triton.autotune(\n"
    "    configs=[triton.Config({'BK': 32}), triton.Config({'BK': 16})], key=['K'])\n@triton.jit\n"
    "def mm(A, B, C, K, BK: tl.constexpr):\n    rm = tl.arange(0, 16)\n    rk = tl.arange(0, BK)\n"
    "    a = tl.load(A + rm[:, None] * K + rk[None, :]).to(tl.float16)\n"
    "    b = tl.load(B + rk[:, None] * 16 + rm[None, :]).to(tl.float16)\n"
    "    tl.store(C + rm[:, None] * 16 + rm[None, :], tl.dot(a, b))\n",
))
register(Rule(
    code="TR004", name="runtime-value-needs-constexpr", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A runtime value where Triton needs a compile-time constant (tl.arange bounds, shapes, axes, "
    "tl.static_range bounds, tl.range options).",
    explanation="Block shapes, `tl.arange` bounds, reduction axes, `tl.static_range` bounds and `tl.range`'s "
    "num_stages are fixed at compile time. A kernel parameter without a `tl.constexpr` annotation is a "
    "runtime scalar, even when autotune or the launch passes a literal for it: annotate it `: tl.constexpr`. "
    "A local assigned with a plain `=` is a runtime tensor too, even `half = BLOCK // 2` (triton 3.6 and 3.9 "
    "convert every assigned value): write `half: tl.constexpr = BLOCK // 2`. The quick fix adds the "
    "annotations. Unannotated parameters of @jit helpers are not reported: a caller may pass constexprs.",
    wrong=_HDR + "def fill(X, BLOCK):\n    offs = tl.arange(0, BLOCK)\n    tl.store(X + offs, 0.0)\n",
    right=_HDR + "def fill(X, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    tl.store(X + offs, 0.0)\n",
))
register(Rule(
    code="TR005", name="unsupported-python-construct", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A Python construct the Triton compiler rejects (try, with, lambda, break, dict, list.append, ...).",
    explanation="The kernel body is compiled, not run: try/except, with, lambda, nested def/class, global, "
    "yield, del, raise, import, match, break/continue, for/while-else, dict/set literals and comprehensions, "
    "generator expressions, list mutation, item assignment, starred assignment, `in` tests, the `@` operator, "
    "`**` on tensors, loops over anything but range/tl.range/tl.static_range, and f-strings of runtime "
    "values all fail to compile (checked on triton 3.6 and 3.9). `raise` under a constexpr `if` (a dtype "
    "dispatch) compiles until the branch is taken (information level): tl.static_assert gives a better error. "
    "`print` is compiled as tl.device_print and needs a "
    "string first argument (information level). Walrus and chained comparisons need triton >= 3.9.",
    wrong=_HDR + "def k(X, n):\n    total = 0.0\n    for i in range(n):\n        if i > 4:\n            break\n"
    "        total += tl.load(X + i)\n    tl.store(X, total)\n",
    right=_HDR + "def k(X, n):\n    total = 0.0\n    for i in range(tl.minimum(n, 5)):\n"
    "        total += tl.load(X + i)\n    tl.store(X, total)\n",
))
register(Rule(
    code="TR006", name="non-jit-call", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A kernel calls a function Triton cannot compile: a plain Python function, math/numpy/torch on "
    "tensors, or a builtin Triton does not provide.",
    explanation="Inside a kernel only triton.language functions, other @triton.jit functions and a few builtins "
    "(range, len, min, max, int, float, isinstance, getattr, hasattr, print) can be called. A plain "
    "module-level function fails with 'Unsupported function referenced': decorate it with @triton.jit, "
    "or compute the value on the host and pass it in. `math.*` works only on compile-time constants "
    "(math.sqrt(2.0) is fine, math.sqrt(x) of a tensor is not: use tl.sqrt); numpy, torch and random never "
    "work. triton.cdiv / triton.next_power_of_2 and @triton.constexpr_function functions need constexpr "
    "arguments: use tl.cdiv for runtime values. int()/float() only convert constants: use x.to(tl.float32).",
    wrong="import math\n\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
    "def k(X, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    x = tl.load(X + offs)\n"
    "    tl.store(X + offs, math.exp(x))\n",
    right="import math\n\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
    "def k(X, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    x = tl.load(X + offs)\n"
    "    tl.store(X + offs, tl.exp(x) * math.sqrt(2.0))\n",
))
register(Rule(
    code="TR007", name="unknown-triton-name", language="triton", severity=Severity.ERROR, fixable=True,
    summary="`tl.X` names something triton.language does not have (with a did-you-mean), or a block-pointer "
    "API that triton 3.9 removed.",
    explanation="An unknown attribute of triton.language fails when the kernel compiles. The list of known names "
    "is the union over the supported triton versions (analyzers/triton_names.py). `tl.make_block_ptr` and "
    "`tl.advance` exist in 3.6 but raise NotImplementedError in 3.9: use `tl.make_tensor_descriptor` "
    "(information: which triton runs the code is not known here). Names older triton releases had "
    "(`tl._experimental_descriptor_load`, `tl.math.pow`, `tl.libdevice`, ...) are information too: the "
    "code works on the triton it was written for; a compile for a target (`--target`) reports the failure "
    "on the installed triton as KC001.",
    wrong=_HDR + "def k(X, BLOCK: tl.constexpr):\n    offs = tl.arrange(0, BLOCK)\n    tl.store(X + offs, 0.0)\n",
    right=_HDR + "def k(X, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    tl.store(X + offs, 0.0)\n",
))
register(Rule(
    code="TR008", name="reduction-without-neutral-other", language="triton", severity=Severity.WARNING,
    fixable=True,
    summary="A masked `tl.load` without a neutral `other=` feeds tl.max/tl.min/tl.sum/tl.argmax/tl.argmin/tl.reduce.",
    explanation="Masked-off lanes of a load hold undefined values unless `other=` is given, and a reduction reads "
    "every lane. Use the reduction's identity: float('-inf') for max/argmax, float('inf') for min/argmin, "
    "0 for sum. `other=0` feeding tl.max is also wrong for all-negative rows. The value is followed "
    "through names, casts, negation and arithmetic; functions such as tl.exp or tl.where end the trace. A load "
    "that reaches a sum only through arithmetic with other values (`x * g`, x loaded with other=0) is "
    "information: the masked lanes usually cancel there.",
    wrong=_HDR + "def rowmax(X, Y, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
    "    x = tl.load(X + offs, mask=offs < n)\n    tl.store(Y, tl.max(x, axis=0))\n",
    right=_HDR + "def rowmax(X, Y, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
    "    x = tl.load(X + offs, mask=offs < n, other=float(\"-inf\"))\n    tl.store(Y, tl.max(x, axis=0))\n",
))
register(Rule(
    code="TR009", name="int32-offset-overflow", language="triton", severity=Severity.INFO, fixable=True,
    summary="`tl.program_id` times a runtime stride in 32-bit arithmetic: offsets overflow past 2**31 elements.",
    explanation="Program ids and integer arguments are int32, so `row * stride` wraps around once the tensor "
    "has more than 2**31 elements and the kernel reads the wrong memory. Whether that happens depends on sizes "
    "the code does not show, so this is information: a risk to weigh for tensors that large. Cast the program "
    "id where it is "
    "bound, `tl.program_id(0).to(tl.int64)`, or an operand at the multiplication. `pid * BLOCK` with a "
    "constexpr BLOCK is not reported, nor are vector offsets (pid * BLOCK + tl.arange) times a stride.",
    wrong=_HDR + "def softmax(X, Y, stride, n, BLOCK: tl.constexpr):\n    row = tl.program_id(0)\n"
    "    cols = tl.arange(0, BLOCK)\n    x = tl.load(X + row * stride + cols, mask=cols < n, other=0.0)\n"
    "    tl.store(Y + row * stride + cols, x, mask=cols < n)\n",
    right=_HDR + "def softmax(X, Y, stride, n, BLOCK: tl.constexpr):\n    row = tl.program_id(0).to(tl.int64)\n"
    "    cols = tl.arange(0, BLOCK)\n    x = tl.load(X + row * stride + cols, mask=cols < n, other=0.0)\n"
    "    tl.store(Y + row * stride + cols, x, mask=cols < n)\n",
))

# --------------------------------------------------------------------------------------------------------------
# What triton accepts (verified against 3.6.0 and 3.9.0)

# The code generator provides range, len, min, max, float, int, isinstance, getattr, hasattr, list and print;
# any other builtin is a NameError at compile time.
_BANNED_BUILTINS = {
    "abs": "tl.abs(x)", "sum": "tl.sum(x, axis)", "pow": "x * x, or tl.exp2(y * tl.log2(x))",
    "round": "tl.floor(x + 0.5)",
    "enumerate": "tl.static_range(len(t)) and t[i]", "zip": "tl.static_range(len(a)) and a[i], b[i]",
    "str": "a string literal", "bool": "a comparison (x != 0)", "tuple": "a tuple literal (a, b)",
    "sorted": "tl.sort", "any": "tl.reduce_or or a comparison", "all": "a comparison", "divmod": "// and %",
    "map": "a tuple comprehension", "filter": "a tuple comprehension", "reversed": "tl.flip",
    **{n: "" for n in ("bin", "bytes", "callable", "chr", "complex", "dict", "dir", "eval", "exec", "format",
                       "frozenset", "hash", "hex", "id", "input", "iter", "next", "oct", "open", "ord", "repr",
                       "set", "slice", "super", "type", "vars")},
}
_FIXABLE_BUILTINS = {"abs": "abs"}
# Modules a kernel can never call into (math is handled separately: it works on constexprs).
_HOST_MODULES = ("numpy", "torch", "random", "os", "sys", "time", "scipy", "cmath", "statistics", "functools",
                 "itertools", "copy", "jax", "cupy", "pandas", "subprocess", "json")
# numpy/torch names that exist in triton.language with different meaning or signature: no automatic fix.
_NOT_ELEMENTWISE = {"arange", "zeros", "full", "load", "store", "dot", "where", "reshape", "view", "cast", "sort",
                    "split", "join", "flip", "max", "min", "sum", "argmax", "argmin", "cumsum", "cumprod", "rand",
                    "randn", "randint", "range", "tensor", "dtype", "zeros_like", "broadcast", "broadcast_to",
                    "permute", "trans", "cat", "gather", "histogram", "softmax", "topk", "squeeze", "unsqueeze",
                    "ravel"}
_MATH_TO_TL = {"sqrt": "sqrt", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sin": "sin",
               "cos": "cos", "floor": "floor", "ceil": "ceil", "erf": "erf", "fabs": "abs", "fma": "fma"}
_CONSTEXPR_FUNCTIONS = {"triton.constexpr_function", "triton.runtime.jit.constexpr_function",
                        "triton.runtime.constexpr_function"}
_TRITON_CONSTEXPR_HELPERS = {"triton.cdiv": "cdiv", "triton.next_power_of_2": None}

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
_REDUCTIONS = {"max": "max", "min": "min", "sum": "sum", "argmax": "max", "argmin": "min", "reduce": "reduce"}
_NEUTRAL_TEXT = {"max": 'float("-inf")', "min": 'float("inf")', "sum": "0"}
# Calls that keep a traced value's lanes in place (TR008 follows them; anything else ends the trace).
_LANE_PRESERVING = {"reshape", "trans", "permute", "view", "broadcast_to", "expand_dims", "ravel", "cast"}
_REMOVED = {"make_block_ptr": "tl.make_tensor_descriptor(base, shape, strides, block_shape) and desc.load/desc.store",
            "advance": "tensor descriptors (desc.load([offsets]) with new offsets)"}
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


# --------------------------------------------------------------------------------------------------------------
# File-level information shared by all kernels


@dataclass
class _File:
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
            for stmt in self.ctx.body if lines else ():
                for fn in ast.walk(stmt) if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) else ():
                    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not any(
                            fn.lineno <= ln <= (fn.end_lineno or fn.lineno) for ln in lines):
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
    def build(cls, ctx: FileContext) -> _File:
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
class _Call:
    node: ast.Call
    name: str | None  # resolved dotted name of the callee
    ifs: tuple[ast.AST, ...]  # what encloses the call: `if` tests, and For/While nodes


class _Kernel:
    def __init__(self, f: _File, ks) -> None:
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
        self.calls: list[_Call] = []
        # name -> [(kind, value, target Name node or None)]; value is an expression, a For node (FOR) or None
        self.assigns: dict[str, list[tuple[str, object, ast.Name | None]]] = {}
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
            if t is ast.Call:
                calls.append(_Call(node, resolve(node.func), ifs))
            elif t is ast.Name:
                if type(node.ctx) is ast.Store:
                    self.bound.add(node.id)
                continue
            elif t is ast.Attribute:
                self.attrs.append(node)
            elif t is ast.BinOp:
                if type(node.op) in (ast.Mult, ast.MatMult, ast.Pow):
                    ops.append((node, ifs))
            elif t is ast.Compare:
                if len(node.ops) > 1 or any(type(o) in (ast.In, ast.NotIn) for o in node.ops):
                    ops.append((node, ifs))
                # Bounds checks such as `cols < n_cols` (an equality such as `idx == key` is not one).
                if any(type(o) in (ast.Lt, ast.LtE, ast.Gt, ast.GtE) for o in node.ops):
                    for side in (node.left, *node.comparators):
                        base = side.value if isinstance(side, ast.Subscript) else side
                        if isinstance(base, ast.Name):
                            self.compared.setdefault(base.id, node)
                            self.comparisons.setdefault(base.id, []).append(node)
            elif t is ast.Assign:
                for target in node.targets:
                    self._bind(target, node.value, PLAIN, ifs)
                    if len(node.targets) > 1 and isinstance(target, ast.Name):  # `a = b = 1` cannot be annotated
                        binds = self.assigns[target.id]
                        binds[-1] = binds[-1][:2] + (None,)
            elif t is ast.AugAssign:
                if isinstance(node.target, ast.Name):
                    self.assigns.setdefault(node.target.id, []).append(
                        (PLAIN, ast.copy_location(ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value),
                                                  node), None))
                    if type(node.op) is ast.Mult:
                        ops.append((node, ifs))
                else:
                    self._bind(node.target, node.value, PLAIN, ifs)
            elif t is ast.AnnAssign:
                if node.value is not None:
                    ce = is_constexpr_annotation(self.imports, node.annotation)
                    self._bind(node.target, node.value, CONSTEXPR if ce else PLAIN, ifs)
                    if not ce and isinstance(node.target, ast.Name):  # `x: int = 5`: no annotation fix
                        binds = self.assigns[node.target.id]
                        binds[-1] = binds[-1][:2] + (None,)
                    stack.append((node.value, ifs))
                continue  # the annotation (often tl.constexpr) is not a value
            elif t is ast.NamedExpr:
                self.assigns.setdefault(node.target.id, []).append((PLAIN, node.value, None))
                self.bound.add(node.target.id)
                ops.append((node, ifs))
            elif t is ast.If:
                inner = ifs + (node.test,)
                stack.extend((s, inner) for s in reversed(node.orelse))
                stack.extend((s, inner) for s in reversed(node.body))
                stack.append((node.test, ifs))
                continue
            elif t in (ast.For, ast.While):
                # Loops join the context like `if`s: their bounds are the author's own bounds logic (TR002).
                inner = ifs + (node,)
                stack.extend((s, inner) for s in reversed(node.orelse))
                stack.extend((s, inner) for s in reversed(node.body))
                if t is ast.For:
                    self._bind(node.target, node, FOR, ifs)
                    self.fors.append(node)
                    stack.append((node.iter, ifs))
                else:
                    stack.append((node.test, ifs))
                if node.orelse:
                    unsupported.append((node, "for-else" if t is ast.For else "while-else", ifs))
                continue
            elif t in (ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp):
                for gen in node.generators:
                    self._bind(gen.target, gen.iter, COMP, ifs)
                if t is ast.ListComp:
                    self.fors.append(node)
                else:
                    unsupported.append((node, t.__name__, ifs))
            elif t is ast.JoinedStr:
                self.fstrings.append(node)
            elif t is ast.Return:
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

    def _bind(self, target: ast.AST, value, kind: str, ifs: tuple) -> None:
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

    def _value_facts(self, kind: str, value) -> int:
        if kind == FOR:
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
        t = type(e)
        if t is ast.Name:
            return self.name_facts(e.id)
        if t is ast.Constant or e is None:
            return 0
        if t is ast.BinOp:
            right = self.expr_facts(e.right)
            bits = self.expr_facts(e.left) | right
            if type(e.op) is ast.Mod:
                # `x % n` is in bounds for TR002; `pid % GROUP` (a constant) is also too small to overflow.
                return bits & ~(PIDOFF | PID) if not right & RT else bits & ~PIDOFF
            return bits
        if t is ast.Call:
            return self._call_facts(e)
        if t is ast.Attribute:
            if e.attr in _STATIC_ATTRS:
                return 0
            name = self.imports.resolve(e)
            if name is not None and name.split(".")[0] in ("triton", "math", "numpy"):
                return 0
            return self.expr_facts(e.value)
        if t is ast.Subscript:
            return self.expr_facts(e.value)
        if t is ast.UnaryOp:
            return self.expr_facts(e.operand)
        if t in (ast.Tuple, ast.List):
            return self._or(e.elts)
        if t is ast.Compare:
            if any(_is_dtype_expr(self, x) for x in (e.left, *e.comparators)):
                return 0  # `x.dtype == tl.float16` is decided at compile time
            return self.expr_facts(e.left) | self._or(e.comparators)
        if t is ast.BoolOp:
            return self._or(e.values)
        if t is ast.IfExp:
            return self.expr_facts(e.body) | self.expr_facts(e.orelse) | (self.expr_facts(e.test) & RT)
        if t in (ast.NamedExpr, ast.Starred):
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
            try:
                op = type(e.op)
                if op is ast.Add: return a + b
                if op is ast.Sub: return a - b
                if op is ast.Mult: return a * b
                if op is ast.FloorDiv: return a // b
                if op is ast.Div: return a / b
                if op is ast.Mod: return a % b
                if op is ast.Pow and abs(b) <= 64: return a ** b
                if op is ast.LShift and 0 <= b <= 64: return a << b
                if op is ast.RShift and 0 <= b <= 64: return a >> b
            except (ZeroDivisionError, TypeError, OverflowError):
                return None
            return None
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
            if name in ("min", "max", "int", "float") and name not in self.bound:
                try:
                    return {"min": min, "max": max, "int": int, "float": float}[name](*args)
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
            self._shape_memo[e.id] = None  # recursion guard
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
        if short == "trans" and len(args) == 1:
            s = self.shape(args[0], depth + 1)
            return s[::-1] if s else None
        if short is None and isinstance(e.func, ast.Attribute):
            if e.func.attr in ("to",):
                return self.shape(e.func.value, depth + 1)
            if e.func.attr == "load":  # desc.load([...]) of a tensor descriptor
                return self.shape(e.func.value, depth + 1)
        return None


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: (), ast.Name: ()}
_NOT_CHILDREN = {"ctx", "op", "ops", "type_comment", "kind", "type_ignores", "id", "attr", "arg", "value_kind"}

_DTYPE_ATTRS = {"dtype", "element_ty", "type"}
_INT64_NAMES = ("int64", "uint64")
_STATIC_ATTRS = _DTYPE_ATTRS | {"shape", "numel"}  # compile-time properties of a tensor


def _is_dtype_expr(k: _Kernel, e: ast.AST) -> bool:
    if isinstance(e, ast.Attribute):
        if e.attr in _DTYPE_ATTRS:
            return True
        name = k.callee(e) or ""
        return name.startswith(TL + ".") and name[len(TL) + 1:] in _DTYPES
    return False


def _keeps_constexpr(k: _Kernel, value) -> bool:
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


def _span(k: _Kernel, node: ast.AST) -> Span:
    return k.ctx.src.span(node)


def _once(k: _Kernel, title: str, edits: list[TextEdit]) -> Fix | None:
    """A fix whose edits were not offered yet in this kernel: applying every fix at once must stay correct."""
    fresh = [e for e in edits if (e.span, e.new_text) not in k.fixed]
    if not fresh:
        return None
    k.fixed.update((e.span, e.new_text) for e in fresh)
    return Fix(title, tuple(fresh))


def _constexpr_edit(k: _Kernel, name: str) -> TextEdit | None:
    arg = k.args.get(name)
    if arg is None or not k.f.can_fix:
        return None
    ann = f"{k.f.tl}constexpr"
    if arg.annotation is not None:
        return TextEdit(_span(k, arg.annotation), ann)
    s = _span(k, arg)
    end = Span(s.start_line, s.start_col + len(name), s.start_line, s.start_col + len(name))
    default = k.defaults.get(name)
    if default is not None:
        d = _span(k, default)
        if d.start_line == end.start_line:  # `BLOCK=128` -> `BLOCK: tl.constexpr = 128`
            return TextEdit(Span(end.start_line, end.start_col, d.start_line, d.start_col), f": {ann} = ")
    return TextEdit(end, f": {ann}")


def _insert_kwarg(k: _Kernel, call: ast.Call, text: str) -> TextEdit:
    last = max([*call.args, *(kw for kw in call.keywords)], key=lambda n: (n.end_lineno, n.end_col_offset))
    s = _span(k, last)
    return TextEdit(Span(s.end_line, s.end_col, s.end_line, s.end_col), f", {text}")


# --------------------------------------------------------------------------------------------------------------
# The rules


def _tr001_tr004_constexpr_args(k: _Kernel) -> None:
    """TR004 on every argument that must be constexpr; TR001 on arange extents and zeros/full shapes."""
    tl = k.f.tl
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
        runtime = [a for a in args if not k.is_static(a)]
        for a in runtime:
            _report_runtime(k, c, short, a)
        if runtime:
            continue
        if short == "arange" and len(c.node.args) == 2:
            _check_extent(k, c.node, c.node.args[1], c.node.args[0])
        elif short in ("zeros", "full"):
            shp = c.node.args[0] if c.node.args else \
                next((kw.value for kw in c.node.keywords if kw.arg == "shape"), None)
            for dim in shp.elts if isinstance(shp, (ast.Tuple, ast.List)) else ():
                _check_extent(k, c.node, dim, None, what=f"{tl}{short} shape element")


def _report_runtime(k: _Kernel, c: _Call, short: str, arg: ast.expr) -> None:
    tl = k.f.tl
    roots = k.runtime_roots(arg)
    order = list(k.args)
    params = sorted((n for kind, n in roots if kind == "param"), key=order.index)
    locals_ = [n for kind, n in roots if kind == "local"]
    others = [n for kind, n in roots if kind == "other"]
    fixable = bool(params or locals_) and not others
    parts = []
    if params:
        verb = "are runtime parameters" if len(params) > 1 else "is a runtime parameter"
        parts.append(f"{', '.join(f'`{p}`' for p in params)} {verb}")
    parts += [f"`{n}` is assigned with a plain `=`, which makes it a runtime tensor" for n in locals_]
    parts += [f"it depends on {o}" for o in others]
    why = "; ".join(parts) or "it is a runtime value"
    todo = (["annotate " + ", ".join(f"`{p}: {tl}constexpr`" for p in params)] if params else []) + \
        [f"write `{n}: {tl}constexpr = ...`" for n in locals_]
    if short == "static_assert":
        k.ctx.report("TR004", arg, f"{tl}static_assert needs a compile-time condition, but {why}: use "
                     f"{tl}device_assert(...) for a runtime check" + (f", or {' and '.join(todo)}" if fixable else ""),
                     kernel=k.name)
        return
    if short in ("max", "min") and len(c.node.args) == 2 and arg is c.node.args[1]:
        # tl.max(a, b) reads b as the axis: the elementwise maximum is tl.maximum.
        alt = f"{tl}{short}imum"
        fix = _once(k, f"Use {alt}", [TextEdit(_span(k, c.node.func), alt)]) if k.f.can_fix else None
        k.ctx.report("TR004", arg, f"the second argument of {tl}{short} is the axis, a compile-time constant, but "
                     f"this one is a runtime value: for the elementwise {short}imum of two values use "
                     f"{alt}(a, b)", fix=fix, kernel=k.name)
        return
    if short == "static_range" and arg in c.node.args and params and not locals_:
        fix = _once(k, f"Use {tl}range", [TextEdit(_span(k, c.node.func), f"{tl}range")]) if k.f.can_fix else None
        k.ctx.report("TR004", arg, f"{tl}static_range unrolls at compile time, but {why}: use {tl}range(...) for a "
                     f"runtime trip count", fix=fix, kernel=k.name)
        return
    what = f"{tl}{short} needs a compile-time constant here, but {why}"
    if fixable:
        edits = [e for e in [*(_constexpr_edit(k, p) for p in params), *(_local_constexpr_edit(k, n) for n in locals_)]
                 if e is not None]
        fix = _once(k, f"Make {', '.join(params + locals_)} {tl}constexpr", edits) if edits else None
        k.ctx.report("TR004", arg, f"{what}: {' and '.join(todo)}", fix=fix, kernel=k.name)
    else:
        hint = f"use {tl}static_range for an unrolled loop" if any(o.startswith("the loop variable") for o in others) \
            else f"use a {tl}constexpr block size and mask the lanes you do not need"
        k.ctx.report("TR004", arg, f"{what}: {hint}", kernel=k.name)


def _local_constexpr_edit(k: _Kernel, name: str) -> TextEdit | None:
    binds = k.assigns.get(name, [])
    if len(binds) != 1 or binds[0][2] is None or not k.f.can_fix:
        return None
    s = _span(k, binds[0][2])
    return TextEdit(Span(s.end_line, s.end_col, s.end_line, s.end_col), f": {k.f.tl}constexpr")


def _check_extent(k: _Kernel, call: ast.Call, end: ast.expr, start: ast.expr | None, what: str = "") -> None:
    tl = k.f.tl
    failing = []
    for env in k.scenarios:
        used: list = []
        e = k.evaluate(end, env, used)
        s = k.evaluate(start, env, used) if start is not None else 0
        if isinstance(e, int) and isinstance(s, int) and e - s > 0 and not is_power_of_2(e - s):
            failing.append((e, e - s, used))
    if not failing:
        return
    e, n, used = failing[0]
    p2 = next_power_of_2(n)
    more = _more_configs(len(failing))
    literal = isinstance(end, ast.Constant) and (start is None or isinstance(start, ast.Constant))
    fix = None
    if literal:
        new_end = p2 + (start.value if start is not None else 0)
        fix = _once(k, f"Round up to {new_end}", [TextEdit(_span(k, end), str(new_end))])
    names = list(dict.fromkeys(u[0] for u in used))
    if isinstance(end, ast.Name) and names == [end.id]:
        advice = f"make {end.id} a power of 2 such as {p2}"
    else:
        advice = f"use a power of 2 such as {p2}"
    if start is None:  # a zeros/full shape element
        desc = k.describe(end, e, used)
        k.ctx.report("TR001", end, f"{what} {desc}{more} is not a power of 2: "
                     f"{advice if not literal else f'use {p2}'}", fix=fix, kernel=k.name)
        return
    seg = k.ctx.src.segment
    subject = f"{tl}arange({_short(seg(start))}, {_short(seg(end))}) has {n} elements"
    if literal:
        advice = f"use {tl}arange({start.value}, {new_end})"
    else:
        subject += f" ({k.describe(end, e, used)})"
    # Name the offsets the way the code does (`cols = tl.arange(0, 100)`); never a name it does not have.
    owner = next((name for name, binds in k.assigns.items() for _, v, _ in binds if v is call), None)
    tail = (f"mask the lanes past {n}" + (f" ({owner} < {n})" if owner else "")) if literal else "mask the extra lanes"
    k.ctx.report("TR001", end, f"{subject}{more}, not a power of 2: {advice} and {tail}", fix=fix, kernel=k.name)


def _more_configs(count: int) -> str:
    return "" if count <= 1 else f" (also in {count - 1} other autotune config{'s' if count > 2 else ''})"


def _tr002_unmasked(k: _Kernel) -> None:
    tl = k.f.tl
    guards: dict[int, list[ast.AST]] | None = None
    launcher = None
    found: dict[tuple[str, bool, str], list[tuple[ast.Call, str]]] = {}
    for c in k.calls:
        if c.name is None or not c.name.startswith(TL + "."):
            continue
        short = c.name[len(TL) + 1:]
        if short == "load":
            mask_pos = 1
        elif short == "store" or (short.startswith("atomic_") and short not in ("atomic_cas", "atomic_load")):
            mask_pos = 2
        else:
            continue
        node = c.node
        kw = {x.arg: x.value for x in node.keywords}
        mask = kw.get("mask", node.args[mask_pos] if len(node.args) > mask_pos else None)
        if (mask is not None and not _is_none(mask)) or "boundary_check" in kw:
            continue
        ptr = node.args[0] if node.args else kw.get("pointer")
        bits = k.expr_facts(ptr)
        if not (bits & PIDOFF and bits & AR) or bits & BP:
            continue
        terms = _terms(k, ptr, set(), node.lineno)
        # Offsets by the name the user gave them (`offs` in `X + offs`), then names inside the expanded sums.
        shallow = _terms(k, ptr, {n.id for n in _iter_expr(ptr) if isinstance(n, ast.Name)})
        names = [n.id for t in shallow + terms if k.expr_facts(t) & AR
                 for n in _iter_expr(t) if isinstance(n, ast.Name) and k.name_facts(n.id) & AR]
        names = list(dict.fromkeys(names))
        extents = _arange_extents(k, terms)
        check = next((c for n in names for c in _checks_of(k, n, node.lineno) if not _vacuous(c, extents)), None)
        # A tile (`pid * BLOCK + tl.arange(0, BLOCK)`) overhangs the end unless the size is a multiple of BLOCK.
        # A row (`row * stride + tl.arange(0, WIDTH)`) is fine when WIDTH is the exact row length, so it is
        # only reported when the kernel bounds-checks those offsets elsewhere and forgets it here.
        tile = any(_is_tile_term(k, t, extents) for t in terms)
        if not tile and check is None:
            continue
        # What makes the access safe although it has no mask: a bounds test around it, an early return or an
        # assert before it, a launcher that checks divisibility, a buffer padded to whole blocks.
        if tile and _whole_blocks_only(k, extents):
            continue
        if guards is None:
            guards = _access_guards(k)
            launcher = _launcher_guards(k)
        if guards.get(id(node)):
            # Every tile dimension needs its own guard: `if pid_m * BM >= M: return` says nothing of the N tiles.
            parts = [t for t in terms if _is_tile_term(k, t, extents)] if tile else [ptr]
            tests = [g for g in guards[id(node)] if not tile or _covers_tile(k, g, extents)]
            if all(any(_relevant(k, g, _part_names(k, ptr, part)) for g in tests) for part in parts):
                continue
        if launcher[0] or any(isinstance(t, ast.Name) and t.id in launcher[1] for t in terms):
            continue
        what = "reads" if short == "load" else "writes"
        other = ", other=0.0" if short == "load" else ""
        # Name offsets, not pointers: a pointer is a sum with a bare parameter (the base address) in it, or a
        # name the kernel loads from or stores to (`A = A + ...; tl.load(A)`).
        pointers = _pointer_names(k)
        # The offsets that place this program's block come first: they are what overhangs the end.
        names.sort(key=lambda n: not k.name_facts(n) & PIDOFF)
        offs = next((n for n in names if n not in pointers and not n.lower().endswith(("ptr", "ptrs"))
                     and not any(isinstance(t, ast.Name) and t.id in k.args
                                 for t in _terms(k, ast.Name(n, ast.Load()), set()))), None)
        if check is not None:
            hint = f"add mask={_short(k.ctx.src.segment(check), 40)}{other}"
        else:
            size = _size_param(k, offs)
            subject = offs or "the offsets"
            hint = f"add mask={subject} < {size}{other}" if size and offs else \
                f"add a mask comparing {subject} with the size{other and ' (and other=0.0)'}"
        source = f"{tl}program_id" if bits & PID else "a runtime loop bound"
        if tile:
            msg = (f"{tl}{short} {what} a block at offsets derived from {source} with no mask: the last block "
                   f"{what} out of bounds unless the size is a multiple of the block; {hint}")
        else:
            msg = (f"{tl}{short} {what} a row without a mask although this kernel bounds-checks the same offsets "
                   f"elsewhere ({_short(k.ctx.src.segment(check), 40)}): {hint}")
        found.setdefault((short, tile, hint), []).append((node, msg))
    # Accesses with the same cause and the same fix (the k and v loads of one loop) are one finding: the first
    # carries the message, the others are listed with it.
    for (short, _, _), group in found.items():
        (node, msg), rest = group[0], group[1:]
        if rest:
            lines = ", ".join(str(n.lineno) for n, _ in rest)
            msg += f" (the same at line{'s' * (len(rest) > 1)} {lines})"
        related = tuple(Related(k.ctx.src.span(n), f"{tl}{short} with the same unmasked offsets") for n, _ in rest)
        k.ctx.report("TR002", node, msg, kernel=k.name, related=related)


# Compile-time flags that name a bounds property (`EVEN_K`, `DIVISIBLE_N`, `NO_MASK`): an `if` on one is the
# author's fast path for full blocks.
_BOUNDS_FLAG = re.compile(r"(?i)even|divisib|divides|aligned|full|mask|bound|pad|multiple|exact|tail|ragged")
# Extent names that read as a block (tiles of a larger size) rather than a whole dimension (`HEAD_DIM`, `D`).
_BLOCK_NAME = re.compile(r"(?i)block|tile|chunk|^bs|_bs|bs_|^blk|_blk|^b_|_b$|split|^tb|group")


def _guard_test(k: _Kernel, test: ast.AST) -> bool:
    """Whether a condition is bounds logic: a runtime test on program ids, loop offsets or arange offsets, a
    divisibility test, or a compile-time flag named for a bounds property."""
    has_mod = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in _iter_expr(test))
    bits = k.expr_facts(test)
    if bits & RT:
        return bool(bits & (PID | PIDOFF | AR)) or has_mod
    return has_mod or any(isinstance(n, ast.Name) and _BOUNDS_FLAG.search(n.id) for n in _iter_expr(test))


def _access_guards(k: _Kernel) -> dict[int, list[ast.AST]]:
    """For each call of the kernel body, the bounds conditions that dominate it: the tests of the `if`s around it,
    and those of an early `if ...: return`, an `assert`, `tl.device_assert` or `tl.static_assert` before it in
    the same block (or an enclosing one)."""
    out: dict[int, list[ast.AST]] = {}

    def mark(node: ast.AST, tests: list[ast.AST]) -> None:
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                out[id(n)] = tests

    def guard_of(st: ast.stmt) -> ast.AST | None:
        test = None
        early_return = isinstance(st, ast.If) and not st.orelse and st.body and isinstance(st.body[-1], ast.Return)
        if early_return or isinstance(st, ast.Assert):
            test = st.test
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and st.value.args and k.callee(
                st.value.func) in (f"{TL}.device_assert", f"{TL}.static_assert", f"{TL}.assume"):
            test = st.value.args[0]
        return test if test is not None and _guard_test(k, test) else None

    def block(stmts: list[ast.stmt], tests: list[ast.AST]) -> None:
        for st in stmts:
            visit(st, tests)
            g = guard_of(st)
            if g is not None:
                tests = tests + [g]

    def visit(st: ast.stmt, tests: list[ast.AST]) -> None:
        if isinstance(st, ast.If):
            mark(st.test, tests)
            inner = tests + [st.test] if _guard_test(k, st.test) else tests
            overflows = _overflow_branch(k, st.test)
            block(st.body, tests if overflows == "body" else inner)
            block(st.orelse, tests if overflows == "orelse" else inner)
        elif isinstance(st, (ast.For, ast.While)):
            mark(st.iter if isinstance(st, ast.For) else st.test, tests)
            block(st.body, tests)
            block(st.orelse, tests)
        elif tests:
            mark(st, tests)

    block(k.fn.body, [])
    return out


def _closure(k: _Kernel, e: ast.AST) -> tuple[set[str], set[int]]:
    """What an expression is built from, through assignments: the names, and the ids of every node visited."""
    names: set[str] = set()
    nodes: set[int] = set()
    stack = [e]
    while stack and len(names) < 300:
        for n in _iter_expr(stack.pop()):
            nodes.add(id(n))
            if isinstance(n, ast.Name) and n.id not in names:
                names.add(n.id)
                for kind, v, _ in k.assigns.get(n.id, ()):
                    if kind in (PLAIN, CONSTEXPR) and isinstance(v, ast.AST):
                        stack.append(v)
                    elif kind == FOR:
                        stack.append(v.iter)
    return names, nodes


def _covers_tile(k: _Kernel, test: ast.AST, extents: set) -> bool:
    """Whether a condition bounds a whole tile, not just where it starts: `offs < n` (element-wise), a full-block
    test `start + BLOCK <= n`, divisibility, or a bound named for padding or whole blocks (`n_full_blocks`,
    `num_tokens_post_padded`, `EVEN_K`). `if pid * BLOCK >= n: return` alone leaves the last tile overhanging."""
    if k.expr_facts(test) & AR:
        return True

    def extent(x: ast.AST) -> bool:
        return isinstance(x, ast.Name) and x.id in extents or isinstance(x, ast.Constant) and x.value in extents

    def tile_end(n: ast.AST) -> bool:
        # `start + BLOCK`, or `(pid + 1) * BLOCK`: where the tile ends
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and (extent(n.left) or extent(n.right)):
            return True
        return (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and any(
            extent(a) and isinstance(b, ast.BinOp) and isinstance(b.op, ast.Add) and isinstance(b.right, ast.Constant)
            and b.right.value == 1 for a, b in ((n.left, n.right), (n.right, n.left))))

    for n in _iter_expr(test):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):
            return True
        if isinstance(n, ast.Name) and _BOUNDS_FLAG.search(n.id):
            return True
        if tile_end(n):
            return True
    # Through the name an overflow test reads: `overflow = (start_m + 1) * BLOCK_M - seqlen; if overflow > 0: ...`
    return _overflow_branch(k, test) is not None and any(tile_end(n) for n in _closure_nodes(k, test))


def _overflow_branch(k: _Kernel, test: ast.AST) -> str | None:
    """For `if overflow > 0:` with `overflow = <tile end> - size`, the branch where the tile overhangs ("body";
    "orelse" for `overflow <= 0`): only the other one is in bounds. None for any other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0):
        return None
    bound = [v for kind, v, _ in k.assigns.get(test.left.id, ()) if kind == PLAIN]
    if len(bound) != 1 or not (isinstance(bound[0], ast.BinOp) and isinstance(bound[0].op, ast.Sub)):
        return None
    op = test.ops[0]
    return "body" if isinstance(op, (ast.Gt, ast.GtE)) else "orelse" if isinstance(op, (ast.Lt, ast.LtE)) else None


def _closure_nodes(k: _Kernel, e: ast.AST) -> list[ast.AST]:
    """The expressions the plain assignments of the names in `e` bind, transitively (not `e` itself)."""
    out: list[ast.AST] = []
    seen: set[str] = set()
    stack = [e]
    while stack and len(seen) < 100:
        for n in _iter_expr(stack.pop()):
            if isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                for kind, v, _ in k.assigns.get(n.id, ()):
                    if kind in (PLAIN, CONSTEXPR) and isinstance(v, ast.AST):
                        stack.append(v)
                        out.extend(_iter_expr(v))
    return out


def _part_names(k: _Kernel, ptr: ast.AST, part: ast.AST) -> set[str]:
    """The names one summand of an address is built from, and the names of the sums that hold it (`offs` for
    the `pid * BLOCK` of `offs = pid * BLOCK + tl.arange(0, BLOCK)`)."""
    names = _closure(k, part)[0]
    for n in _closure(k, ptr)[0] - names:
        if n in k.assigns and id(part) in _closure(k, ast.Name(n, ast.Load()))[1]:
            names.add(n)
    return names


def _relevant(k: _Kernel, test: ast.AST, related: set[str]) -> bool:
    """A bounds condition protects an access when it tests what the address is built from (`if pid < n_full`,
    `tl.device_assert(offs < n)`, `tl.static_assert(K % BLOCK_K == 0)` for a BLOCK_K tile), or is a
    compile-time bounds flag (`if EVEN_N`)."""
    names = {n.id for n in _iter_expr(test) if isinstance(n, ast.Name)}
    if names & related:
        return True
    if _overflow_branch(k, test) is not None and _closure(k, test)[0] & related - set(k.constexpr):
        return True
    return not k.expr_facts(test) & RT and any(_BOUNDS_FLAG.search(n) for n in names)


def _launcher_guards(k: _Kernel) -> tuple[bool, set[str]]:
    """From same-file launchers of this kernel: whether every one checks divisibility (`assert n % BLOCK == 0`,
    `if n % BLOCK: raise ...`), and the pointer parameters that always receive buffers padded to whole blocks
    (allocated with triton.cdiv / next_power_of_2 / a `pad` in the size)."""
    ctx = k.ctx
    scopes = k.f.launchers().get(k.name, [])
    if not scopes:
        return False, set()

    order = list(k.args)

    def block_values(sites: list[ast.Call]) -> set[str]:
        """How the launches spell the kernel's constexpr values (`BLOCK`, `1024`), and the parameter names."""
        out = set(k.constexpr)
        for site in sites:
            out.update(ctx.src.segment(a) for i, a in enumerate(site.args)
                       if i < len(order) and order[i] in k.constexpr)
            out.update(ctx.src.segment(kw.value) for kw in site.keywords if kw.arg in k.constexpr)
        return out

    def checks_divisibility(fn: ast.AST, sites: list[ast.Call]) -> bool:
        """`assert n % BLOCK == 0` or `if n % BLOCK: raise` on a block value this launch passes."""
        blocks = block_values(sites)
        for n in ast.walk(fn):
            test = n.test if isinstance(n, ast.Assert) else \
                n.test if isinstance(n, ast.If) and any(isinstance(b, ast.Raise) for b in n.body) else None
            if test is not None and any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mod)
                                        and ctx.src.segment(x.right) in blocks for x in ast.walk(test)):
                return True
        return False

    def whole_grid(site: ast.Call) -> bool:  # `kernel[(n // BLOCK,)]`: only whole blocks are launched
        grid = site.func.slice
        text = ctx.src.segment(grid)
        return "cdiv" not in text and any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.FloorDiv)
                                          for x in ast.walk(grid))

    all_checked = all(checks_divisibility(fn, sites) or all(whole_grid(s) for s in sites) for fn, sites in scopes)
    padded: set[str] | None = None
    for fn, sites in scopes:
        allocs = {}
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                    and isinstance(n.value, ast.Call):
                allocs[n.targets[0].id] = ctx.src.segment(n.value)
        for site in sites:
            here = set()
            for i, a in enumerate(site.args):
                if i < len(order) and isinstance(a, ast.Name) and _PADDED.search(allocs.get(a.id, "")):
                    here.add(order[i])
            for kw in site.keywords:
                if kw.arg and isinstance(kw.value, ast.Name) and _PADDED.search(allocs.get(kw.value.id, "")):
                    here.add(kw.arg)
            padded = here if padded is None else padded & here
    return all_checked, padded or set()


_PADDED = re.compile(r"cdiv|next_power_of_2|\bpad|padded|round_up|align")


def _checks_of(k: _Kernel, name: str, at: int) -> list[ast.Compare]:
    """Bounds checks of a name that test the value it has on line `at`: a name reassigned for other offsets
    (`o_a = ...` twice) is checked only by comparisons after its last assignment before that line."""
    plain = [b[2].lineno for b in k.assigns.get(name, ()) if b[2] is not None]
    since = max((ln for ln in plain if ln < at), default=0) if len(plain) > 1 else 0
    return [c for c in k.comparisons.get(name, ()) if c.lineno >= since]


def _whole_blocks_only(k: _Kernel, extents: set) -> bool:
    """The kernel counts its blocks with floor division by the block size (`Ms = M // TILE_M`): only whole blocks
    exist, so the last one cannot overhang."""
    for n in ast.walk(k.fn):
        # `(n + BLOCK - 1) // BLOCK` is a ceiling division: partial blocks do exist.
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv) and any(
                isinstance(x, ast.Name) and x.id in extents for x in _iter_expr(n.right)) and not any(
                isinstance(x, ast.Name) and x.id in extents for x in _iter_expr(n.left)):
            return True
    return False


def _vacuous(check: ast.Compare, extents: set) -> bool:
    """`cols < D` with cols = tl.arange(0, D): always true, not a real bounds check."""
    return len(check.comparators) == 1 and isinstance(check.ops[0], ast.Lt) and (
        isinstance(check.comparators[0], ast.Name) and check.comparators[0].id in extents)


def _pointer_names(k: _Kernel) -> set[str]:
    """Names a load or store of this kernel takes its address from."""
    pointers = set()
    for c in k.calls:
        if c.name in (f"{TL}.load", f"{TL}.store") and c.node.args:
            pointers.update(t.id for t in _terms(k, c.node.args[0], set()) if isinstance(t, ast.Name))
            if isinstance(c.node.args[0], ast.Name):
                pointers.add(c.node.args[0].id)
    return pointers


def _size_param(k: _Kernel, offs: str | None = None) -> str | None:
    """A runtime size parameter of this kernel to name in a mask hint (never one the kernel does not have).

    With several sizes, the one of the offsets' dimension (`offs_bn` -> `N`, `offs_cm` -> `M`); None when that is
    not clear: a hint naming the wrong dimension is worse than none."""
    pointers = _pointer_names(k)
    sizes = [n for n in k.args if n not in k.constexpr and n not in pointers and "stride" not in n.lower()
             and not n.lower().endswith("ptr") and _SIZE_NAME.search(n)]
    if len(sizes) <= 1:
        return sizes[0] if sizes else None
    if offs:
        dim = offs.lower().rsplit("_", 1)[-1][-1:]
        same = [n for n in sizes if n.lower() in (dim, f"n_{dim}", f"size_{dim}", f"{dim}_size", f"num_{dim}")]
        if len(same) == 1:
            return same[0]
    return None


_SIZE_NAME = re.compile(r"(?i)^(n|m|k|l|size|numel|length|len|total)$|^n_|^num_|_size$|numel|elements|^len|_len$|"
                        r"^(n|m|k)[a-z]?$|^seq|rows$|cols$")


def _is_tile_term(k: _Kernel, t: ast.AST, extents: set) -> bool:
    """A summand that places this program's block along the arange: a vector already holding the program id
    (`offs * stride` with offs = pid * BLOCK + arange), or `pid * BLOCK` scaled by the arange's own extent.
    `row * stride_row` with a different scale starts a row instead, and may be exactly as wide as the arange."""
    bits = k.expr_facts(t)
    if not bits & PIDOFF:
        return False
    if bits & AR:
        return True
    for _ in range(4):  # follow `start = pid * BLOCK`
        if isinstance(t, ast.Name):
            binds = k.assigns.get(t.id, ())
            if len(binds) == 1 and binds[0][0] == FOR and isinstance(binds[0][1].iter, ast.Call):
                # `for start in range(0, n, BLOCK)`: a block origin when the step is the arange's extent.
                it = binds[0][1].iter
                step = it.args[2] if len(it.args) > 2 else None
                return step is not None and any(
                    isinstance(n, ast.Name) and n.id in extents or isinstance(n, ast.Constant) and n.value in extents
                    for n in _iter_expr(step))
            if len(binds) != 1 or binds[0][0] != PLAIN:
                return False
            t = binds[0][1]
        if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult):
            scale = t.right if k.expr_facts(t.left) & PIDOFF else t.left
            # `pid * HEAD_DIM + tl.arange(0, HEAD_DIM)` walks rows of a whole dimension: not a tile.
            return any(isinstance(n, ast.Name) and n.id in extents and _BLOCK_NAME.search(n.id)
                       or isinstance(n, ast.Constant) and n.value in extents for n in _iter_expr(scale))
    return False


def _arange_extents(k: _Kernel, terms: list[ast.AST]) -> set:
    """Names and literals in the bounds of the tl.arange calls a pointer's offsets come from."""
    out: set = set()
    stack, seen = list(terms), set()
    while stack:
        for n in _iter_expr(stack.pop()):
            if isinstance(n, ast.Call) and k.callee(n.func) == f"{TL}.arange":
                out.update(x.id if isinstance(x, ast.Name) else x.value for a in n.args for x in _iter_expr(a)
                           if isinstance(x, ast.Name) or isinstance(x, ast.Constant) and isinstance(x.value, int))
            elif isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                stack.extend(b[1] for b in k.assigns.get(n.id, ()) if b[0] in (PLAIN, CONSTEXPR))
    out.discard(0)
    return out


def _terms(k: _Kernel, e: ast.AST | None, seen: set[str], at: int | None = None) -> list[ast.AST]:
    """The summands of a pointer expression, through names bound to sums (`ptrs = X + offs`). With `at` (the
    line of the use), a name assigned several times with `=` is followed to its last assignment before that line
    (kernels reuse names such as `o_dA` for different offsets); `+=` updates always count (loops)."""
    if isinstance(e, ast.BinOp) and type(e.op) in (ast.Add, ast.Sub):
        return _terms(k, e.left, seen, at) + _terms(k, e.right, seen, at)
    if isinstance(e, ast.Name) and "\0" + e.id in seen:
        return []  # `ptrs += step` refers back to the sum being expanded
    if isinstance(e, ast.Name) and e.id not in seen:
        binds = k.assigns.get(e.id, ())
        plain = [b for b in binds if b[2] is not None]
        if at is not None and len(plain) > 1:
            before = [b for b in plain if b[2].lineno < at]
            if before:
                last = max(before, key=lambda b: b[2].lineno)
                binds = [b for b in binds if b[2] is None or b is last]
                if len(binds) == 1 and last[0] == PLAIN and not (
                        isinstance(last[1], ast.BinOp) and type(last[1].op) in (ast.Add, ast.Sub)):
                    return [last[1]]  # the value itself: the name's facts mix in its other assignments
        if binds and all(b[0] == PLAIN and isinstance(b[1], ast.BinOp) and type(b[1].op) in (ast.Add, ast.Sub)
                         for b in binds):
            seen.update((e.id, "\0" + e.id))
            return [t for b in binds for t in _terms(k, b[1], seen, at)]
    return [e] if e is not None else []


def _tr003_dot(k: _Kernel) -> None:
    tl = k.f.tl
    for c in k.calls:
        if c.name != f"{TL}.dot" or len(c.node.args) < 2:
            continue
        a, b = c.node.args[:2]
        sa, sb = k.shape(a), k.shape(b)
        # NVIDIA minimum K: 32 for 8-bit inputs, 16 for 16-bit; fp32 accepts K >= 8 since triton 3.9 (not 3.6).
        bits = _operand_bits(k, a) or _operand_bits(k, b)
        k_min = 32 if bits == 8 else 16
        dims = []
        if sa is not None and len(sa) >= 2:
            dims += [("K", sa[-1]), ("M", sa[-2])]
        elif sb is not None and len(sb) >= 2:
            dims.append(("K", sb[-2]))
        if sb is not None and len(sb) >= 2:
            dims.append(("N", sb[-1]))
        for label, dim in dims:
            minimum = k_min if label == "K" else 16
            failing = []
            for env in k.scenarios:
                used: list = []
                v = _eval_dim(k, dim, env, used)
                if isinstance(v, int) and 0 < v < minimum:
                    failing.append((v, used))
            if not failing:
                continue
            v, used = failing[0]
            node = dim if isinstance(dim, ast.AST) else dim[1] if isinstance(dim, tuple) else None
            desc = k.describe(node, v, used) if node is not None else str(v)
            more = _more_configs(len(failing))
            if label == "K":
                maybe_fp32 = bits is None or bits >= 32
                if bits in (8, 16):
                    need = f"needs K >= {k_min} for {bits}-bit inputs"
                else:
                    need = "needs K >= 16 (32 for 8-bit inputs)"
                k.ctx.report("TR003", c.node, f"{tl}dot {need}, but K is {desc}{more}: use a K tile of {k_min} or "
                             "more" + (" (triton 3.9 accepts K = 8 for fp32 inputs)" if maybe_fp32 and v >= 8 else ""),
                             kernel=k.name, related=_related(k, used),
                             severity=Severity.WARNING if maybe_fp32 and v >= 8 else None)
            else:
                k.ctx.report("TR003", c.node, f"{tl}dot with {label} = {desc}{more} compiles, but tiles under 16 "
                             f"waste tensor-core throughput: use {label} >= 16 if the data allows it", kernel=k.name,
                             severity=Severity.INFO, related=_related(k, used))


_DTYPE_BITS = {"float16": 16, "bfloat16": 16, "int16": 16, "float32": 32, "int32": 32, "float64": 64, "int8": 8,
               "uint8": 8, "float8e4nv": 8, "float8e5": 8, "float8e4b15": 8, "float8e4b8": 8, "float8e5b16": 8}


def _operand_bits(k: _Kernel, e: ast.AST, depth: int = 0) -> int | None:
    """The element width of a tl.dot operand when the code states it (`.to(tl.float16)`, `tl.zeros(..., dtype)`)."""
    if depth > 8:
        return None
    if isinstance(e, ast.Name):
        binds = k.assigns.get(e.id, ())
        return _operand_bits(k, binds[0][1], depth + 1) if len(binds) == 1 and binds[0][0] == PLAIN else None
    if not isinstance(e, ast.Call):
        return None
    dtypes = [*e.args, *(kw.value for kw in e.keywords if kw.arg in ("dtype", "dst_ty"))]
    if isinstance(e.func, ast.Attribute) and e.func.attr == "to" or k.callee(e.func) in (
            f"{TL}.cast", f"{TL}.zeros", f"{TL}.full"):
        for d in dtypes:
            name = k.callee(d) if isinstance(d, (ast.Name, ast.Attribute)) else None
            if name and name.startswith(TL + "."):
                bits = _DTYPE_BITS.get(name[len(TL) + 1:])
                if bits:
                    return bits
    return None


def _eval_dim(k: _Kernel, dim, env: dict, used: list):
    if isinstance(dim, int):
        return dim
    if isinstance(dim, tuple):
        e, s = k.evaluate(dim[1], env, used), k.evaluate(dim[2], env, used)
        return e - s if isinstance(e, int) and isinstance(s, int) else None
    return k.evaluate(dim, env, used)


def _related(k: _Kernel, used: list) -> tuple[Related, ...]:
    out = []
    for name, value, origin in used:
        if origin.startswith("in autotune config"):
            idx = int(origin.split()[3]) - 1
            cfg = k.kernel.autotune_configs[idx]
            out.append(Related(cfg.span, f"{name} = {value} here"))
    return tuple(out[:3])


def _tr005_constructs(k: _Kernel) -> None:
    tl = k.f.tl
    rep = k.ctx.report
    for node, what, ifs in k.unsupported:
        if what == "Raise":
            static = any(isinstance(t, ast.expr) and k.is_static(t) for t in ifs)
            rep("TR005", node, f"a kernel cannot raise: use {tl}static_assert(cond, \"message\") for a compile-time "
                f"check or {tl}device_assert(cond) at run time" + (" (this `raise` compiles only while its "
                "constexpr condition is false)" if static else ""),
                kernel=k.name, severity=Severity.INFO if static else None)
            continue
        if what in ("With", "AsyncWith"):
            items = node.items
            if all(isinstance(i.context_expr, ast.Call) and (k.callee(i.context_expr.func) or "").startswith("triton.")
                   for i in items):
                continue
        msg = _UNSUPPORTED_MSG.get(what, "this Python construct is not supported in a kernel")
        span = _span(k, node)
        if what in ("for-else", "while-else"):  # point at the `else:` line
            lines = k.ctx.src.lines
            line = next((i for i in range(node.orelse[0].lineno - 1, node.body[-1].end_lineno - 1, -1)
                         if lines[i].lstrip().startswith("else")), node.orelse[0].lineno - 1)
            col = len(lines[line]) - len(lines[line].lstrip())
            span = Span(line, col, line, col + 4)
        if isinstance(node, ast.stmt) and span.end_line > span.start_line:  # underline the keyword line only
            span = Span(span.start_line, span.start_col, span.start_line, len(k.ctx.src.line(span.start_line)))
        rep("TR005", span, msg.format(tl=tl), kernel=k.name)
    # list mutation on local lists
    lists = {n for n, vals in k.assigns.items() if any(isinstance(v, (ast.List, ast.ListComp)) for _, v, _ in vals)}
    for c in k.calls:
        f = c.node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in lists \
                and f.attr in _LIST_MUTATORS:
            rep("TR005", c.node, f"`{f.value.id}.{f.attr}(...)`: lists in a kernel are immutable tuples; build a new "
                f"tuple (`t = t + (x,)`) or use a tensor", kernel=k.name)
        if isinstance(f, ast.Name) and f.id == "print" and "print" not in k.bound and "print" not in k.f.module_names:
            first = c.node.args[0] if c.node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                edit = TextEdit(_span(k, f), f"{tl}device_print")
                fix = _once(k, f"Use {tl}device_print", [edit]) if k.f.can_fix else None
                rep("TR005", c.node, f"print(...) is compiled as {tl}device_print and prints from every program: "
                    f"write {tl}device_print to make that explicit", fix=fix, kernel=k.name, severity=Severity.INFO)
            else:
                label = _short(k.ctx.src.segment(first), 20) if first is not None else "value"
                edits = [TextEdit(_span(k, f), f"{tl}device_print")]
                if first is not None:
                    s = _span(k, first)
                    edits.append(TextEdit(Span(s.start_line, s.start_col, s.start_line, s.start_col), f"\"{label}\", "))
                fix = _once(k, f"Use {tl}device_print with a prefix", edits) if k.f.can_fix else None
                rep("TR005", c.node, f"print(...) in a kernel is {tl}device_print, whose first argument must be a "
                    f"string: write {tl}device_print(\"{label}\", ...)", fix=fix, kernel=k.name)
    for node, ifs in k.ops:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            text = f"{tl}dot({k.ctx.src.segment(node.left)}, {k.ctx.src.segment(node.right)})"
            fix = _once(k, f"Use {tl}dot", [TextEdit(_span(k, node), text)]) if k.f.can_fix else None
            rep("TR005", node, f"the @ operator is not supported in a kernel: write {_short(text, 60)}", fix=fix,
                kernel=k.name)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            if k.expr_facts(node.left) & RT:
                rep("TR005", node, "`**` is not defined for tensors: multiply (x * x) or use "
                    f"{tl}exp2(y * {tl}log2(x))", kernel=k.name)
        elif isinstance(node, ast.Compare):
            if any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops):
                rep("TR005", node, "`in` / `not in` are not supported in a kernel: compare with == and combine "
                    "with `or` (or `|` on tensors)", kernel=k.name)
            else:
                rep("TR005", node, "chained comparisons need triton >= 3.9 (3.6 rejects them): write "
                    "`(a < b) & (b < c)`", kernel=k.name, severity=Severity.INFO)
        elif isinstance(node, ast.NamedExpr):
            rep("TR005", node, "`:=` needs triton >= 3.9 (3.6 rejects it): assign on its own line", kernel=k.name,
                severity=Severity.INFO)
    for node in k.fors:
        it = node.generators[0].iter if isinstance(node, ast.ListComp) else node.iter
        ok, name = False, None
        if isinstance(it, ast.Call):
            name = k.callee(it.func) or ""
            ok = name in (f"{TL}.range", f"{TL}.static_range") or (name == "range" and "range" not in k.bound) or \
                _unknown_import(k, name)
        if isinstance(node, ast.ListComp):
            # 3.9 runs comprehensions over tuples; range-like iterators are not tuples.
            if isinstance(it, ast.Call) and name in (f"{TL}.range", f"{TL}.static_range", "range"):
                rep("TR005", node, "a comprehension in a kernel can only iterate a tuple: write the tuple out or use "
                    f"a loop over {tl}static_range", kernel=k.name)
            continue
        if not ok:
            rep("TR005", it, f"a kernel can only loop over range(...), {tl}range(...) or {tl}static_range(...): "
                f"loop `for i in {tl}static_range(len(t))` and index t[i]", kernel=k.name)
    for node in k.fstrings:
        if any(isinstance(v, ast.FormattedValue) and k.expr_facts(v.value) & RT for v in node.values):
            rep("TR005", node, f"an f-string can only format compile-time values: pass runtime values as extra "
                f"arguments, {tl}device_print(\"x\", x)", kernel=k.name)


_LIST_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"}
_UNSUPPORTED_MSG = {
    "Try": "try/except is not supported in a kernel: guard with masks or {tl}where instead",
    "TryStar": "try/except* is not supported in a kernel: guard with masks or {tl}where instead",
    "With": "`with` is not supported in a kernel (only triton's own context managers): remove it",
    "AsyncWith": "`async with` is not supported in a kernel: remove it",
    "Lambda": "lambda is not supported in a kernel: define a @triton.jit function at module level",
    "FunctionDef": "nested functions are not supported in a kernel: move it to module level and decorate it with "
    "@triton.jit",
    "AsyncFunctionDef": "nested functions are not supported in a kernel: move it to module level",
    "ClassDef": "classes cannot be defined in a kernel: define it at module level",
    "Global": "global is not supported in a kernel: pass the value as a parameter, or read a module-level "
    "`NAME = {tl}constexpr(...)`",
    "Nonlocal": "nonlocal is not supported in a kernel: pass the value as a parameter",
    "Yield": "a kernel cannot yield: store results through a pointer",
    "YieldFrom": "a kernel cannot yield: store results through a pointer",
    "Await": "await is not supported in a kernel: remove it",
    "Delete": "del is not supported in a kernel: remove it (rebind the name if needed)",
    "Import": "imports are not supported inside a kernel: import at module level",
    "ImportFrom": "imports are not supported inside a kernel: import at module level",
    "Match": "match is not supported in a kernel: use if/elif on constexpr values",
    "Break": "break is not supported in a kernel: loop over the exact range ({tl}minimum on the bound), or use a "
    "while loop with the exit condition",
    "Continue": "continue is not supported in a kernel: put the rest of the loop body under an if",
    "for-else": "for-else is not supported in a kernel: move the else block after the loop",
    "while-else": "while-else is not supported in a kernel: move the else block after the loop",
    "Dict": "dict literals are not supported in a kernel: use a tuple or separate names",
    "Set": "set literals are not supported in a kernel: use a tuple",
    "DictComp": "dict comprehensions are not supported in a kernel: use a tuple",
    "SetComp": "set comprehensions are not supported in a kernel: use a tuple",
    "GeneratorExp": "generator expressions are not supported in a kernel: use a tuple comprehension [.. for x in t]",
    "Starred": "starred assignment is not supported in a kernel: unpack every element by name",
    "setitem": "item assignment is not supported in a kernel (tensors and tuples are immutable): build a new value, "
    "e.g. with {tl}where(idx == i, v, x)",
}


def _unknown_import(k: _Kernel, name: str) -> bool:
    """A callee imported from a module we know nothing about: not our business."""
    if "." not in name or name.startswith("triton."):
        return False
    return name.split(".")[0] not in ("math", *_HOST_MODULES)


def _tr006_calls(k: _Kernel) -> None:
    tl = k.f.tl
    # Loops over enumerate/zip and `with open(...)` are TR005's: one problem per mistake.
    for_iters = {id(n.iter) for n in k.fors if isinstance(n, ast.For)}
    for_iters.update(id(i.context_expr) for n, what, _ in k.unsupported if what in ("With", "AsyncWith")
                     for i in n.items)
    for c in k.calls:
        node, f = c.node, c.node.func
        if id(node) in for_iters:
            continue
        name = c.name or ""
        if isinstance(f, ast.Name) and f.id not in k.bound:
            fid = f.id
            if fid in k.f.plain:
                k.ctx.report("TR006", node, f"{fid}() is a plain Python function and cannot be called from a kernel: "
                             f"decorate it with @triton.jit, or compute the value on the host and pass it in",
                             kernel=k.name, related=(Related(_span(k, k.f.plain[fid]), f"{fid} is defined here"),))
                continue
            if fid in k.f.constexpr_fns:
                if any(not k.is_static(a) for a in [*node.args, *(kw.value for kw in node.keywords)]):
                    k.ctx.report("TR006", node, f"{fid}() is a constexpr function and runs at compile time, but gets a "
                                 f"runtime value: make it @triton.jit, or pass constexpr arguments", kernel=k.name)
                continue
            if fid in ("float", "int") and fid not in k.f.module_names and len(node.args) == 1 \
                    and k.expr_facts(node.args[0]) & RT and not isinstance(node.args[0], ast.Constant):
                # int()/float() run at compile time; on a tensor they raise TypeError.
                arg = node.args[0]
                text = k.ctx.src.segment(arg)
                if not isinstance(arg, (ast.Name, ast.Call, ast.Attribute, ast.Subscript)):
                    text = f"({text})"
                dtype = f"{tl}{'float32' if fid == 'float' else 'int32'}"
                edit = TextEdit(_span(k, node), f"{text}.to({dtype})")
                fix = _once(k, f"Use .to({dtype})", [edit]) if k.f.can_fix else None
                k.ctx.report("TR006", node, f"{fid}() converts compile-time values only; this argument is a runtime "
                             f"tensor: write {_short(text, 30)}.to({dtype})", fix=fix, kernel=k.name)
                continue
            if fid in _BANNED_BUILTINS and fid not in k.f.module_names:
                alt = _BANNED_BUILTINS[fid]
                fix = None
                if fid in _FIXABLE_BUILTINS and k.f.can_fix:
                    new = f"{tl}{_FIXABLE_BUILTINS[fid]}"
                    fix = _once(k, f"Use {new}", [TextEdit(_span(k, f), new)])
                k.ctx.report("TR006", node, f"the builtin {fid}() is not available in a kernel" +
                             (f": use {alt.replace('tl.', tl)}" if alt else ": compute it on the host"),
                             fix=fix, kernel=k.name)
                continue
        top = name.split(".")[0]
        if top == "math" and "." in name and (isinstance(f, ast.Attribute) or f.id not in k.bound):
            if all(k.is_static(a) for a in [*node.args, *(kw.value for kw in node.keywords)]):
                continue  # math on compile-time constants is evaluated by the compiler
            attr = name.rsplit(".", 1)[1]
            alt = _MATH_TO_TL.get(attr)
            fix = _once(k, f"Use {tl}{alt}", [TextEdit(_span(k, f), f"{tl}{alt}")]) if alt and k.f.can_fix else None
            k.ctx.report("TR006", node, f"{name}() only works on compile-time constants, not on tensors: " +
                         (f"use {tl}{alt}" if alt else
                          f"use {_HINTS.get(attr, 'the libdevice equivalent')}".replace("tl.", tl)),
                         fix=fix, kernel=k.name)
        elif top in _HOST_MODULES and "." in name and (isinstance(f, ast.Attribute) or f.id not in k.bound):
            attr = name.rsplit(".", 1)[1]
            alt = attr if top in ("numpy", "torch") and attr in NAMES[TL] and attr not in _NOT_ELEMENTWISE else None
            fix = _once(k, f"Use {tl}{alt}", [TextEdit(_span(k, f), f"{tl}{alt}")]) if alt and k.f.can_fix else None
            advice = f"use {tl}{alt}" if alt else f"use {tl}rand(seed, offsets)" if top == "random" else \
                "use the triton.language equivalent, or compute the value on the host and pass it in"
            k.ctx.report("TR006", node, f"{name}() is host code and cannot be called from a kernel: {advice}",
                         fix=fix, kernel=k.name)
        elif name in _TRITON_CONSTEXPR_HELPERS:
            if all(k.is_static(a) for a in [*node.args, *(kw.value for kw in node.keywords)]):
                continue
            alt = _TRITON_CONSTEXPR_HELPERS[name]
            if alt:
                fix = _once(k, f"Use {tl}{alt}", [TextEdit(_span(k, f), f"{tl}{alt}")]) if k.f.can_fix else None
                k.ctx.report("TR006", node, f"{name}() runs at compile time and needs constexpr arguments: use "
                             f"{tl}{alt}(...) for runtime values", fix=fix, kernel=k.name)
            else:
                k.ctx.report("TR006", node, f"{name}() runs at compile time and needs constexpr arguments: compute "
                             f"it on the host and pass it as a {tl}constexpr parameter", kernel=k.name)


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


def _tr007_names(k: _Kernel) -> None:
    attrs = list(k.attrs)
    # Annotations and defaults in the signature (`BLOCK: tl.constexr`) are checked too.
    for arg in k.args.values():
        if arg.annotation is not None:
            attrs.extend(n for n in _iter_expr(arg.annotation) if isinstance(n, ast.Attribute))
    for node in attrs:
        module = k.callee(node.value)
        known = _ALL_MODULES.get(module) if module else None
        if known is None or module == f"{TL}.extra" or node.attr.startswith("_") and node.attr not in _HINTS:
            continue  # tl.extra.<backend> depends on the installed backends (vendor forks add their own)
        _check_name(k.ctx, k.f, node, module, node.attr, known, k)


def _check_name(ctx: FileContext, f: _File, node: ast.AST, module: str, attr: str, known: frozenset[str],
                k: _Kernel | None) -> None:
    if attr in known and attr not in _REMOVED and not any(attr in m.get(module, ()) for m in MISSING.values()):
        return  # the common case, kept cheap
    tl = f.tl
    kernel = k.name if k else None
    if k is not None and (attr in known or _older_triton(module, attr) is not None):
        if (module, attr) in k.noted:  # a version note once per kernel and name, not at every call site
            return
        k.noted.add((module, attr))
    # Spell the name the way the user wrote it (`tl.arrange`, `libdevice.tanhh`); imports name the module.
    written = _short(ctx.src.segment(node), 60) if isinstance(node, ast.Attribute) else attr
    prefix = written[: len(written) - len(attr)]
    where = f" ({module} has no such name)" if not isinstance(node, ast.Attribute) else ""
    if attr in known:
        if module == TL and attr in _REMOVED:
            # Works on 3.6: whether 3.9 runs the code is not known here (information).
            ctx.report("TR007", node, f"{written} raises NotImplementedError in triton 3.9 (block pointers were "
                       f"removed): use {_REMOVED[attr].replace('tl.', tl)} to support 3.9", kernel=kernel,
                       severity=Severity.INFO)
            return
        lacking = [v for v, mods in MISSING.items() if attr in mods.get(module, ())]
        if lacking:
            ctx.report("TR007", node, f"{written} does not exist in triton {', '.join(lacking)}: keep it only if "
                       f"those versions need not be supported", kernel=kernel, severity=Severity.INFO)
        return
    older = _older_triton(module, attr)
    if older is not None:
        # It worked on the triton the code was written for; which triton runs it is not known here, and a compile
        # for a target (KC001) reports the failure on the installed one.
        ctx.report("TR007", node, f"{written} is from an older triton ({older}): it fails on triton 3.6 and 3.9; "
                   "keep it "
                   "only if the project pins that older triton", kernel=kernel, severity=Severity.INFO)
        return
    guess = _suggest(attr, known)
    hint = _HINTS.get(attr) if module == TL else None
    fix = None
    if guess is not None and isinstance(node, ast.Attribute):
        s = ctx.src.span(node)
        edit = TextEdit(Span(s.end_line, s.end_col - len(attr), s.end_line, s.end_col), guess)
        fix = _once(k, f"Replace with {guess}", [edit]) if k else Fix(f"Replace with {guess}", (edit,))
    if guess is not None:
        msg = f"{written} does not exist{where}: did you mean {prefix}{guess}?"
    elif hint:
        msg = f"{written} does not exist{where}: use {hint.replace('tl.', tl)}"
    else:
        msg = f"{written} does not exist{where}: check the name in the {module} documentation"
    ctx.report("TR007", node, msg, fix=fix, kernel=kernel)


# Names older triton releases had and 3.6/3.9 do not: module -> name -> where it lived and what replaced it.
_OLDER = {
    TL: {
        "_experimental_descriptor_load": "triton 3.0-3.3; now desc.load with tl.make_tensor_descriptor",
        "_experimental_descriptor_store": "triton 3.0-3.3; now desc.store with tl.make_tensor_descriptor",
        "_experimental_make_tensor_descriptor": "triton 3.2-3.3; now tl.make_tensor_descriptor",
        "libdevice": "triton 2.0; now `from triton.language.extra import libdevice`",
    },
    f"{TL}.extra.cuda": {
        "experimental_device_tensormap_create1d": "triton 3.0-3.3; now tl.make_tensor_descriptor",
        "experimental_device_tensormap_create2d": "triton 3.0-3.3; now tl.make_tensor_descriptor",
        "experimental_tensormap_fenceproxy_acquire": "triton 3.0-3.3; tensor descriptors need no fence",
    },
    f"{TL}.math": {
        "max": "triton 2.1-2.3 tl.math.max; now tl.maximum",
        "min": "triton 2.1-2.3 tl.math.min; now tl.minimum",
    },
}


def _older_triton(module: str, attr: str) -> str | None:
    if attr in _OLDER.get(module, {}):
        return _OLDER[module][attr]
    # triton 2.1-2.3 exposed libdevice functions as tl.math.<name>; 3.0 moved them to libdevice.
    if module == f"{TL}.math" and attr in NAMES.get(f"{TL}.extra.cuda.libdevice", ()):
        return f"triton 2.x tl.math; now `from triton.language.extra import libdevice`, libdevice.{attr}"
    return None


def _tr007_imports(ctx: FileContext, f: _File) -> None:
    """`from triton.language import arnage` fails at import time, anywhere in the file."""
    for node in ctx.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in _ALL_MODULES:
            for alias in node.names:
                if alias.name != "*" and alias.name not in _ALL_MODULES[node.module] \
                        and f"{node.module}.{alias.name}" not in _ALL_MODULES:
                    _check_name(ctx, f, node, node.module, alias.name, _ALL_MODULES[node.module], None)


def _tr008_neutral(k: _Kernel) -> None:
    tl = k.f.tl
    seen: set[int] = set()
    env = k.scenarios[0]
    for c in k.calls:
        node = c.node
        kind = None
        if c.name and c.name.startswith(TL + ".") and c.name[len(TL) + 1:] in _REDUCTIONS:
            kind, src = _REDUCTIONS[c.name[len(TL) + 1:]], (node.args[0] if node.args else None)
            label = c.name[len(TL) + 1:]
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _REDUCTIONS \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in k.assigns:
            kind, src, label = _REDUCTIONS[node.func.attr], node.func.value, node.func.attr
        if kind is None or src is None:
            continue
        for load, flipped, direct in _trace_loads(k, src, kind, node.lineno):
            if id(load) in seen:
                continue
            kw = {x.arg: x for x in load.keywords}
            mask = kw["mask"].value if "mask" in kw else (load.args[1] if len(load.args) > 1 else None)
            if mask is None or _is_none(mask):
                continue
            other = kw["other"].value if "other" in kw else (load.args[2] if len(load.args) > 2 else None)
            need = flipped
            if other is not None and not _is_none(other):
                # Only a value reaching the reduction as is must be its identity: in `qk + bias` a -inf in qk
                # already decides the masked lanes, whatever bias holds there.
                if need == "reduce" or not direct:
                    continue
                v = k.evaluate(other, env, [])
                if not isinstance(v, (int, float)) or _is_neutral(need, v):
                    continue
                seen.add(id(load))
                fix = _once(k, f"Use other={_NEUTRAL_TEXT[need]}", [TextEdit(_span(k, other), _NEUTRAL_TEXT[need])])
                k.ctx.report("TR008", load, f"other={_short(k.ctx.src.segment(other))} is not neutral for the "
                             f"{tl}{label} on line {node.lineno}: masked-off lanes would win the reduction; use "
                             f"other={_NEUTRAL_TEXT[need]}", fix=fix, kernel=k.name,
                             related=(Related(_span(k, node), "the reduction"),))
                continue
            seen.add(id(load))
            if need == "reduce":
                k.ctx.report("TR008", load, f"this masked {tl}load has no other= and feeds the {tl}reduce on line "
                             f"{node.lineno}: masked-off lanes hold undefined values; add other=<the combine "
                             f"function's identity>", kernel=k.name,
                             related=(Related(_span(k, node), "the reduction"),))
                continue
            fix = _once(k, f"Add other={_NEUTRAL_TEXT[need]}", [_insert_kwarg(k, load, f"other={_NEUTRAL_TEXT[need]}")])
            # Into a sum through arithmetic with other values (`x * z` with x loaded as 0 there), the masked lanes
            # usually cancel: a risk to look at (information), not a likely bug.
            soft = need == "sum" and not direct
            k.ctx.report("TR008", load, f"this masked {tl}load has no other= and feeds the {tl}{label} on line "
                         f"{node.lineno}{' through arithmetic' if soft else ''}: masked-off lanes hold undefined "
                         f"values; add other={_NEUTRAL_TEXT[need]}", fix=fix, kernel=k.name,
                         related=(Related(_span(k, node), "the reduction"),), severity=Severity.INFO if soft else None)


def _is_neutral(kind: str, v: float) -> bool:
    # Large sentinels (-1e30, -3.4e38) are accepted as practical neutrals; 0 or -1 feeding a max are not.
    if kind == "max":
        return v <= -1e4
    if kind == "min":
        return v >= 1e4
    return v == 0


def _trace_loads(k: _Kernel, e: ast.AST, kind: str, line: int):
    """The tl.load calls whose lanes reach `e` (used on `line`) in place: (load, reduction kind as seen there,
    whether it arrives directly, without arithmetic with other values). A name is followed to its nearest
    binding before the use: kernels often reuse names across loops."""
    flip = {"max": "min", "min": "max", "sum": "sum", "reduce": "reduce"}
    stack = [(e, kind, 0, line, True)]
    seen: set[tuple[int, str]] = set()
    while stack:
        n, kd, depth, at, direct = stack.pop()
        if depth > 20 or (id(n), kd) in seen:
            continue
        seen.add((id(n), kd))
        if isinstance(n, ast.Name):
            binds = [(getattr(b[2] or b[1], "lineno", 0), b) for b in k.assigns.get(n.id, ())
                     if b[0] in (PLAIN, CONSTEXPR)]
            before = [lb for lb in binds if lb[0] < at]
            if before:
                last = max(ln for ln, _ in before)
                binds = [lb for lb in before if lb[0] == last]
            for ln, (_, v, _) in binds:
                stack.append((v, kd, depth + 1, ln or at, direct))
        elif isinstance(n, ast.Call):
            name = k.callee(n.func) or ""
            short = name[len(TL) + 1:] if name.startswith(TL + ".") else None
            if short == "load":
                yield n, kd, direct
            elif short in _LANE_PRESERVING and n.args:
                stack.append((n.args[0], kd, depth + 1, at, direct))
            elif isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "cast", "reshape", "trans", "permute",
                                                                         "view", "broadcast_to", "expand_dims"):
                stack.append((n.func.value, kd, depth + 1, at, direct))
        elif isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.USub):
                stack.append((n.operand, flip[kd], depth + 1, at, direct))
            elif isinstance(n.op, ast.UAdd):
                stack.append((n.operand, kd, depth + 1, at, direct))
        elif isinstance(n, ast.BinOp) and type(n.op) in (ast.Add, ast.Sub, ast.Mult, ast.Div):
            stack.append((n.left, kd, depth + 1, at, False))
            stack.append((n.right, flip[kd] if isinstance(n.op, ast.Sub) else kd, depth + 1, at, False))
        elif isinstance(n, ast.Subscript):
            stack.append((n.value, kd, depth + 1, at, direct))


def _tr009_overflow(k: _Kernel) -> None:
    tl = k.f.tl
    for node, _ifs in k.ops:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            pairs = ((node.left, node.right), (node.right, node.left))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            pairs = ((ast.Name(node.target.id, ast.Load()), node.value),)
        else:
            continue
        for p, o in pairs:
            pf, of = k.expr_facts(p), k.expr_facts(o)
            if not (pf & PID) or pf & (I64 | AR) or not (of & RTP) or of & (I64 | AR | PID):
                continue
            pid_text = _short(k.ctx.src.segment(p), 30) if hasattr(p, "lineno") else p.id
            o_text = _short(k.ctx.src.segment(o), 30)
            edit = _pid_cast_edit(k, p)
            fix = _once(k, f"Cast to {tl}int64", [edit]) if edit is not None and k.f.can_fix else None
            where = "where it is bound" if edit is not None and edit.span != _span(k, p) else "at the multiplication"
            k.ctx.report("TR009", node, f"{pid_text} * {o_text} is computed in int32 and would overflow if the "
                         f"offset passed 2**31 elements: if tensors that large are possible, cast the program id "
                         f"to int64 {where}, e.g. "
                         f"{tl}program_id(0).to({tl}int64)", fix=fix, kernel=k.name)
            break


def _pid_cast_edit(k: _Kernel, p: ast.AST) -> TextEdit | None:
    tl = k.f.tl
    if isinstance(p, ast.Name) and p.id not in k.args:
        vals = k.assigns.get(p.id, [])
        if len(vals) == 1 and vals[0][0] == PLAIN and isinstance(vals[0][1], ast.Call) and \
                k.callee(vals[0][1].func) == f"{TL}.program_id":
            call = vals[0][1]
            return TextEdit(_span(k, call), f"{k.ctx.src.segment(call)}.to({tl}int64)")
    if not hasattr(p, "lineno"):
        return None
    text = k.ctx.src.segment(p)
    if not isinstance(p, (ast.Name, ast.Call, ast.Attribute, ast.Subscript)):
        text = f"({text})"
    return TextEdit(_span(k, p), f"{text}.to({tl}int64)")


_RULES = (_tr001_tr004_constexpr_args, _tr002_unmasked, _tr003_dot, _tr005_constructs, _tr006_calls, _tr007_names,
          _tr008_neutral, _tr009_overflow)


@file_check
def check_triton_kernels(ctx: FileContext) -> None:
    imports_tl = any(isinstance(n, ast.ImportFrom) and n.module in _ALL_MODULES for n in ctx.body)
    if not ctx.triton.kernels and not imports_tl:
        return
    f = _File.build(ctx)
    if imports_tl:
        _guard(ctx, "imports", lambda: _tr007_imports(ctx, f))
    memo = ctx.memo
    built: dict[int, _Kernel] = {}
    referenced: dict[int, frozenset[str]] = {}
    for ks in ctx.triton.kernels:
        names = memo.get("names", ks.node, None)[0] if memo else StatementMemo.MISSING
        if names is StatementMemo.MISSING:
            k = built[id(ks.node)] = _Kernel(f, ks)
            called = frozenset(c.node.func.id for c in k.calls if isinstance(c.node.func, ast.Name))
            names = (called, frozenset(n.id for n in ast.walk(ks.node) if isinstance(n, ast.Name)))
            if memo:
                memo.put("names", ks.node, None, names)
        f.called.update(names[0])
        referenced[id(ks.node)] = names[1]
    shared = _file_fingerprint(ctx, f) if memo else None
    for ks in ctx.triton.kernels:
        def check(ks=ks) -> None:
            k = built.get(id(ks.node)) or _Kernel(f, ks)
            if _guard(ctx, "dataflow", k.solve):
                for rule in _RULES:
                    _guard(ctx, rule.__name__, lambda rule=rule, k=k: rule(k))

        # A kernel's problems depend on its own tree, on the file-level facts in `shared`, and on module-level
        # names only where it uses them: typing in one kernel (even a half-typed line that hides it from the
        # file for a moment) leaves the others' problems as they were.
        context = None
        if memo:
            refs = referenced[id(ks.node)]
            context = (shared, ks.kernel.name in f.launched, ks.kernel.name in f.called,
                       tuple(sorted((n, f.plain[n].lineno) for n in refs & f.plain.keys())),
                       refs & f.constexpr_fns, refs & f.module_names)
        ctx.memoized("kernel_problems", ks.node, context, ks.kernel.span.start_line, ks.kernel.span.end_line, check)


def _file_fingerprint(ctx: FileContext, f: _File) -> tuple:
    """The file-level facts every kernel's rules read: imports, how triton.language is spelled, constants."""
    return (
        tuple(sorted(ctx.imports.names.items())),
        f.tl, f.can_fix,
        tuple(sorted((name, repr(value)) for name, value in f.module_env.items())),
        repr(sorted(ctx.triton.module_constants.items(), key=lambda kv: kv[0])),
    )


def _guard(ctx: FileContext, what: str, fn) -> bool:
    """One rule's bug must not hide the others' results: report it as KL900 and go on."""
    try:
        fn()
        return True
    except Exception as exc:  # one rule's bug must not hide the others' results
        log.exception("triton_kernel.%s failed", what)
        ctx.report("KL900", Span.point(0), f"internal error in triton_kernel.{what}: {type(exc).__name__}: {exc}")
        return False
