"""NKI rules: NeuronCore tile limits (NK001-NK003), HBM misuse (NK004, NK006), API-generation mixing (NK005) and
values carried between `nl.affine_range` iterations (NK007).

Shapes are only judged when they are known from the source: literal or constant sizes (module-level `TILE = 256`,
kernel-level `TILE_N = nl.tile_size.gemm_moving_fmax`), slices like `a[k*128:(k+1)*128]` whose length does not
depend on the loop variable, and tiles allocated or loaded with such shapes. Anything else is left alone.
"""

from __future__ import annotations

import ast
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..budget import UNKNOWN as BUDGET_UNKNOWN
from ..budget import bounded_binop
from ..model import Fix, NkiKernel, Related, Severity, Span, TextEdit
from ..nki_discovery import CURRENT, LEGACY, NkiDiscovery, NkiImport, is_type_only, nki_name
from ..nki_limits import DTYPE_BYTES, MOVING_FMAX, PMAX, PSUM_BANK_BYTES, STATIONARY_FMAX, TILE_SIZES
from . import FileContext, Rule, file_check, register

# Allocation functions of nki.language -> position of the dtype argument.
ALLOCATORS = {"ndarray": 1, "zeros": 1, "ones": 1, "empty": 1, "rand": 1, "full": 2,
              "zeros_like": None, "empty_like": None, "ones_like": None, "full_like": None}
HBM_BUFFERS = {"shared_hbm", "hbm", "private_hbm"}
# Instructions that run on a compute engine and therefore read and write only SBUF/PSUM.
ISA_COMPUTE = {
    "nc_matmul", "nc_transpose", "activation", "activation_reduce", "tensor_tensor", "tensor_scalar",
    "tensor_reduce", "tensor_copy", "tensor_tensor_scan", "scalar_tensor_tensor", "tensor_scalar_reduce",
    "tensor_partition_reduce", "bn_stats", "bn_aggr", "reciprocal",
}
LANGUAGE_COMPUTE = {
    "matmul", "transpose", "exp", "log", "tanh", "sigmoid", "relu", "gelu", "silu", "sqrt", "rsqrt", "square",
    "abs", "negative", "reciprocal", "add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
    "sum", "max", "min", "mean", "prod", "softmax", "rms_norm", "sin", "cos", "erf",
}
# Calls that are evidence a parameter is a tensor (and so, for a top-level kernel, an HBM tensor).
_TENSOR_USES = {"load", "store", "dma_copy", "load_transpose2d", "dma_transpose", "empty_like", "zeros_like"}
_TENSOR_ATTRS = {"shape", "dtype", "reshape", "ap", "view", "T"}
_FOLDED = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.LShift, ast.Pow)
_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
              ast.Pow: "**", ast.MatMult: "@"}
_VIEW_METHODS = {"reshape", "ap", "view", "slice", "select", "permute"}

_NK = "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\nimport neuronxcc.nki.isa as nisa\n\n\n"
_NKC = "import nki\nimport nki.language as nl\nimport nki.isa as nisa\n\n\n"

register(Rule(
    code="NK001", name="partition-dim-over-128", language="nki", severity=Severity.ERROR,
    summary="An SBUF/PSUM tile has more than 128 partitions.",
    explanation="SBUF and PSUM have 128 partitions; the first dimension of an on-chip tile (or the one wrapped in "
    "nl.par_dim) is laid across them and cannot exceed 128. This covers allocations, nl.par_dim(N), "
    "nl.arange(N)[:, None] and nl.mgrid partition indices, and nl.load of a slice taller than 128 rows. Split "
    "the dimension into tiles of 128 and loop over them with nl.affine_range, or move it to the free dimension.",
    wrong=_NK + "@nki.jit\ndef k(a):\n    out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    t = nl.load(a[0:256, 0:512])\n    nl.store(out[0:256, 0:512], value=t)\n    return out\n",
    right=_NK + "@nki.jit\ndef k(a):\n    out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    for i in nl.affine_range(2):\n        t = nl.load(a[i * 128:(i + 1) * 128, 0:512])\n"
    "        nl.store(out[i * 128:(i + 1) * 128, 0:512], value=t)\n    return out\n",
))
register(Rule(
    code="NK002", name="psum-tile-over-bank", language="nki", severity=Severity.ERROR,
    summary="A PSUM tile needs more than one 2 KiB bank per partition.",
    explanation="PSUM has 8 banks of 2 KiB per partition and a matmul accumulates into one bank, so a PSUM tile's "
    "free dimension holds at most 2048 bytes: 512 float32 or 1024 bfloat16 elements. Tile the free dimension "
    "into blocks that fit a bank and give each block its own PSUM tile.",
    wrong=_NKC + "@nki.jit\ndef k(a):\n    acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)\n"
    "    return acc\n",
    right=_NKC + "@nki.jit\ndef k(a):\n    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
    "    return acc\n",
))
register(Rule(
    code="NK003", name="matmul-operand-limits", language="nki", severity=Severity.ERROR,
    summary="A matmul operand exceeds the Tensor Engine limits (K <= 128, stationary free <= 128, moving free <= 512).",
    explanation="nisa.nc_matmul computes stationary.T @ moving on a 128x128 systolic array: both operands share "
    "the contraction dimension K on their partitions (at most 128), the stationary operand's free size M is at "
    "most 128 and the moving operand's free size N at most 512 (one PSUM bank of float32). nl.matmul has the "
    "same limits. Both the legacy nc_matmul(stationary, moving) and the current nc_matmul(dst, stationary, "
    "moving) are checked when the operand shapes are known. Tile K by 128 and accumulate the partial products "
    "into one PSUM tile, tile M by 128 and N by 512.",
    wrong=_NKC + "@nki.jit\ndef k(a, b):\n    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
    "    m = nl.ndarray((128, 1024), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
    "    nisa.dma_copy(dst=s, src=a)\n    nisa.dma_copy(dst=m, src=b)\n"
    "    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
    "    nisa.nc_matmul(p, s, m)\n    return out\n",
    right=_NKC + "@nki.jit\ndef k(a, b):\n    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)\n    nisa.dma_copy(dst=s, src=a)\n"
    "    for n in nl.affine_range(2):\n        m = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
    "        nisa.dma_copy(dst=m, src=b[0:128, n * 512:(n + 1) * 512])\n"
    "        p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
    "        nisa.nc_matmul(p, s, m)\n    return out\n",
))
register(Rule(
    code="NK004", name="hbm-tensor-in-loop", language="nki", severity=Severity.WARNING, fixable=True,
    summary="An HBM output tensor (shared_hbm / hbm / private_hbm) is allocated inside a loop.",
    explanation="Every iteration allocates a new device-memory tensor, so the tensor the kernel returns holds only "
    "the last iteration's writes and the earlier ones are lost. Allocate the output once before the loop and "
    "write each iteration's tile into its own slice. Only tensors that leave the function (returned, or appended "
    "to a returned list) are reported: HBM scratch used within one iteration is legitimate. The quick fix moves "
    "the allocation above the outermost loop when it does not depend on the loop.",
    wrong=_NK + "@nki.jit\ndef k(a):\n    for i in nl.affine_range(4):\n"
    "        out = nl.ndarray((512, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "        t = nl.load(a[i * 128:(i + 1) * 128, 0:512])\n"
    "        nl.store(out[i * 128:(i + 1) * 128, 0:512], value=t)\n    return out\n",
    right=_NK + "@nki.jit\ndef k(a):\n    out = nl.ndarray((512, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    for i in nl.affine_range(4):\n        t = nl.load(a[i * 128:(i + 1) * 128, 0:512])\n"
    "        nl.store(out[i * 128:(i + 1) * 128, 0:512], value=t)\n    return out\n",
))
register(Rule(
    code="NK005", name="mixed-nki-generations", language="nki", severity=Severity.ERROR,
    summary="The legacy (neuronxcc.nki) and current (nki) APIs are mixed in one file or kernel.",
    explanation="NKI >= 0.4 (`import nki`) replaced the legacy `neuronxcc.nki` API: instructions changed signature "
    "(nc_matmul(dst, stationary, moving) instead of returning the result), and importing neuronxcc.nki inside a "
    "current kernel is an error. A kernel that uses names from both generations fails (error); a file that "
    "imports both is flagged as a warning. Port the file to one generation. A try/except ImportError shim that "
    "picks whichever is installed is not flagged.",
    wrong="import nki\nimport nki.isa as nisa\nimport neuronxcc.nki.language as nl\n\n\n@nki.jit\ndef k(a):\n"
    "    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n    return out\n",
    right=_NKC + "@nki.jit\ndef k(a):\n    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    return out\n",
))
register(Rule(
    code="NK006", name="compute-on-hbm-tensor", language="nki", severity=Severity.ERROR, fixable=True,
    summary="A compute instruction reads or writes a tensor that lives in HBM.",
    explanation="The compute engines (Tensor, Vector, Scalar, GpSimd) only access on-chip SBUF and PSUM; device memory "
    "(HBM) is reached by DMA: nl.load / nisa.dma_copy in, nl.store / nisa.dma_copy out. A tensor counts as HBM "
    "when it is allocated with buffer=nl.shared_hbm/hbm/private_hbm, is read by nl.load or written by nl.store, "
    "or is a tensor argument of a top-level kernel (one this file runs from the host, or one that returns a "
    "shared_hbm output). Arguments of kernels called from other kernels, or jitted with mode='trace', are "
    "on-chip tiles and are not assumed to be in HBM. The quick fix wraps an HBM operand in nl.load(...).",
    wrong=_NK + "@nki.jit\ndef k(a):\n    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    nl.store(out, value=nl.exp(a))\n    return out\n",
    right=_NK + "@nki.jit\ndef k(a):\n    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    nl.store(out, value=nl.exp(nl.load(a)))\n    return out\n",
))

register(Rule(
    code="NK007", name="affine-range-carried-dependency", language="nki", severity=Severity.WARNING,
    summary="A tile written in one nl.affine_range iteration is read by the next: a loop-carried dependency.",
    explanation="`nl.affine_range` promises the compiler that its iterations are independent, so it may reorder, "
    "pipeline or run them in parallel; the NKI documentation calls a loop-carried dependency inside it unsafe, "
    "with possible numerical errors, and asks for `nl.sequential_range` there. Accumulation is the exception: "
    "`tile += ...` (matmul results into PSUM, the documented reduction), `nl.loop_reduce` and "
    "`nisa.nc_matmul(..., accumulate=True)` are not dependencies. Reported: a tile (or variable) bound before the "
    "loop that the loop body reads and then writes at the same place every iteration (`acc[...] = nl.add(acc, t)`, "
    "`nisa.tensor_tensor(dst=acc, data1=acc, ...)`, `acc = nl.add(acc, t)`). An access indexed by the loop "
    "variable belongs to its own iteration and is left alone. The NKI model runs affine_range iterations in order, "
    "so a check can pass where the device would not.",
    wrong=_NK + "@nki.jit\ndef k(a):\n    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n    for i in nl.affine_range(4):\n"
    "        t = nl.load(a[i * 128:(i + 1) * 128, 0:512])\n        acc[...] = nl.maximum(acc, t)\n"
    "    nl.store(out, value=acc)\n    return out\n",
    right=_NK + "@nki.jit\ndef k(a):\n    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n    for i in nl.sequential_range(4):\n"
    "        t = nl.load(a[i * 128:(i + 1) * 128, 0:512])\n        acc[...] = nl.maximum(acc, t)\n"
    "    nl.store(out, value=acc)\n    return out\n",
))


@dataclass
class Tile:
    dims: list[int | None]
    part: int  # index of the partition dimension in dims
    buffer: str | None = None  # "sbuf", "psum", "hbm" or None when unknown
    dtype: str | None = None

    @property
    def partitions(self) -> int | None:
        return self.dims[self.part] if self.part < len(self.dims) else None

    @property
    def free(self) -> int | None:
        size = 1
        for d in self.dims[self.part + 1 :]:
            if d is None:
                return None
            size *= d
        return size


def _local_nodes(nodes: Iterable[ast.AST]):
    """Walk statements without entering nested functions, classes or lambdas (their own scopes)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in ast.iter_child_nodes(node)
                     if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)))


def _literal(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _target_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _single_assignments(stmts: list[ast.stmt], extra_bound: Sequence[str] = ()) -> tuple[dict[str, ast.expr], set[str]]:
    """Names assigned exactly once by a plain `name = value` (constants to resolve) and every name bound at all."""
    counts: Counter[str] = Counter(extra_bound)
    values: dict[str, ast.expr] = {}
    for node in _local_nodes(list(stmts)):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                counts.update(_target_names(t))
                if isinstance(t, ast.Name):
                    values[t.id] = node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            counts.update(_target_names(node.target))
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                values[node.target.id] = node.value
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            counts.update(_target_names(node.target))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            counts.update(_target_names(node.optional_vars))
        elif isinstance(node, ast.NamedExpr):
            counts.update(_target_names(node.target))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[node.name] += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            counts.update((a.asname or a.name).split(".")[0] for a in node.names)
    return {k: v for k, v in values.items() if counts[k] == 1}, set(counts)


def _statements(nodes: Sequence[ast.stmt | ast.excepthandler]):
    """Statements of a block and of the blocks nested in it (if/for/while/with/try), without expressions."""
    stack = list(reversed(nodes))  # a stack of its own, in source order: an `elif` chain nests as deep as it is long
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = [n for name in ("body", "orelse", "finalbody", "handlers") for n in getattr(node, name, [])
                     if isinstance(n, (ast.stmt, ast.excepthandler))]
            stack.extend(reversed(inner))


def _module_constants(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """Module-level names bound once by `NAME = value`; names bound inside functions are their locals."""
    counts: Counter[str] = Counter()
    values: dict[str, ast.expr] = {}
    for node in _statements(body):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                counts.update(_target_names(t))
                if isinstance(t, ast.Name):
                    values[t.id] = node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            counts.update(_target_names(node.target))
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                values[node.target.id] = node.value
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[node.name] += 2
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            counts.update((a.asname or a.name).split(".")[0] for a in node.names)
    return {k: v for k, v in values.items() if counts[k] == 1}


class _Scope:
    """One function's body, walked in statement order, tracking the tiles and HBM tensors its names hold."""

    def __init__(self, ctx: FileContext, disc: NkiDiscovery, fn: ast.FunctionDef, kernel: NkiKernel | None,
                 module_env: dict[str, ast.expr], seen: set[tuple[str, Span]]):
        self.ctx, self.disc, self.fn, self.kernel, self.seen = ctx, disc, fn, kernel, seen
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        params = [a.arg for a in args] + [a.arg for a in (fn.args.vararg, fn.args.kwarg) if a]
        local, bound = _single_assignments(fn.body, params)
        self.env = {k: v for k, v in module_env.items() if k not in bound} | local
        self.loop_vars: set[str] = set()
        self.tiles: dict[str, Tile] = {}
        self.index: dict[str, int | None] = {}  # names bound to nl.arange/nl.mgrid partition or free indices
        self.grids: dict[str, list[int | None]] = {}  # names bound to a whole nl.mgrid
        self.returned = self._returned(fn)
        self.hbm: set[str] = self._hbm_params(args, fn)
        self.stmt: tuple[ast.stmt, list[ast.stmt]] | None = None

    # ----------------------------------------------------------------- names and values
    def nki(self, node: ast.AST) -> tuple[str, str, str] | None:
        """(api, module, name) for nki names, e.g. ("legacy", "language", "ndarray")."""
        c = nki_name(self.ctx.imports, node)
        if c is None:
            return None
        parts = c[1].split(".")
        return c[0], parts[0] if len(parts) > 1 else "", parts[-1]

    def _returned(self, fn: ast.FunctionDef) -> set[str]:
        """Names whose value leaves the function: returned, or appended to a list that is returned."""
        nodes = list(_local_nodes(fn.body))
        out = {n.id for r in nodes if isinstance(r, ast.Return) and r.value is not None
               for n in ast.walk(r.value) if isinstance(n, ast.Name)}
        for call in nodes:
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append"
                    and isinstance(call.func.value, ast.Name) and call.func.value.id in out):
                out.update(a.id for a in call.args if isinstance(a, ast.Name))
        return out

    def _hbm_params(self, args: list[ast.arg], fn: ast.FunctionDef) -> set[str]:
        """Parameters known to hold HBM tensors.

        Certain everywhere: the source of nl.load and the destination of nl.store. For a top-level kernel (run from
        the host in this file, or returning a shared_hbm output) also every tensor argument, since the host can
        only pass HBM tensors. A @nki.jit function called by other kernels receives on-chip tiles instead.
        """
        n_pos = len(fn.args.posonlyargs) + len(fn.args.args)
        defaults = {a.arg for a in (fn.args.posonlyargs + fn.args.args)[n_pos - len(fn.args.defaults):]}
        defaults |= {a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None}
        candidates = {a.arg for a in args} - defaults  # a literal default marks a Python scalar
        strong: set[str] = set()
        used: set[str] = set()
        shared_outputs: set[str] = set()
        for node in _local_nodes(fn.body):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                used.add(node.value.id)
            elif isinstance(node, ast.Attribute) and node.attr in _TENSOR_ATTRS and isinstance(node.value, ast.Name):
                used.add(node.value.id)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    self.buffer_kind(node.value) == "shared_hbm":
                shared_outputs.update(_target_names(node.targets[0]))
            if not (isinstance(node, ast.Call) and (c := self.nki(node.func))):
                continue
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            if c[2] in _TENSOR_USES:
                used.update(a.id for a in list(node.args) + list(kw.values()) if isinstance(a, ast.Name))
            if c[1] == "language" and c[2] in ("load", "load_transpose2d", "store"):
                moved = kw.get("src" if c[2] != "store" else "dst", node.args[0] if node.args else None)
                if (base := self.base_name(moved)) is not None:
                    strong.add(base)
        kernel = self.kernel
        top_level = kernel is not None and kernel.name not in self.disc.subkernels and (
            kernel.name in self.disc.entry_points or bool(shared_outputs & self.returned))
        return candidates & (strong | (used if top_level else set()))

    @staticmethod
    def base_name(node: ast.AST | None) -> str | None:
        """The variable under subscripts and views: `a` for a[0:128, :].reshape(...)."""
        while True:
            if isinstance(node, ast.Subscript):
                node = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _VIEW_METHODS:
                node = node.func.value
            else:
                return node.id if isinstance(node, ast.Name) else None

    def value(self, node: ast.AST | None, probe: int | None = None, depth: int = 0) -> int | None:
        """Integer value of an expression. With a probe seed, unknown parts get arbitrary stand-in values, so
        that `hi - lo` of a slice like a[i*T:(i+1)*T] can be found constant across several seeds."""
        if node is None or depth > 25:
            return None
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in self.env and node.id not in self.loop_vars:
            return self.value(self.env[node.id], probe, depth + 1)
        if (isinstance(node, ast.Attribute) and node.attr in TILE_SIZES and isinstance(node.value, ast.Attribute)
                and node.value.attr == "tile_size" and self.nki(node)):
            return TILE_SIZES[node.attr]  # nl.tile_size.pmax and friends
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.value(node.operand, probe, depth + 1)
            return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
        if isinstance(node, ast.BinOp):
            a, b = self.value(node.left, probe, depth + 1), self.value(node.right, probe, depth + 1)
            if a is None or b is None:
                return None
            if isinstance(node.op, ast.LShift) and not 0 <= b < 64:
                return None
            if isinstance(node.op, ast.Pow) and not (0 <= b < 64 and abs(a) < 1 << 16):
                return None
            if type(node.op) not in _FOLDED:
                return None
            value = bounded_binop(type(node.op), a, b)  # sizes checked before the value is built
            return None if value is BUDGET_UNKNOWN else value  # type: ignore[return-value]
            return None
        if probe is not None:  # an opaque part (loop variable, parameter, runtime size): a seeded stand-in
            return 1 + (zlib.crc32(ast.dump(node).encode()) * (2 * probe + 1)) % 4099
        return None

    def dtype(self, node: ast.AST | None, depth: int = 0) -> str | None:
        if node is None or depth > 5:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            if node.id in self.env:
                return self.dtype(self.env[node.id], depth + 1)
            name = node.id if node.id in self.ctx.imports.names else ""
        else:
            return None
        return name if name in DTYPE_BYTES else None

    def buffer(self, node: ast.AST | None) -> str | None:
        if node is None:
            return None
        c = nki_name(self.ctx.imports, node)
        if c is None:
            return None
        parts = set(c[1].split("."))
        if parts & HBM_BUFFERS:
            return "hbm"
        return "psum" if "psum" in parts else "sbuf" if "sbuf" in parts else None

    # ----------------------------------------------------------------- shapes
    def is_scalar(self, node: ast.AST, depth: int = 0) -> bool:
        if depth > 25:
            return False
        if isinstance(node, ast.Constant):
            return type(node.value) is int
        if isinstance(node, ast.Name):
            if node.id in self.loop_vars:
                return True
            return node.id in self.env and self.is_scalar(self.env[node.id], depth + 1)
        if isinstance(node, ast.BinOp):
            return self.is_scalar(node.left, depth + 1) and self.is_scalar(node.right, depth + 1)
        if isinstance(node, ast.UnaryOp):
            return self.is_scalar(node.operand, depth + 1)
        return self.value(node) is not None

    def index_size(self, node: ast.AST, depth: int = 0) -> tuple[str, int | None] | None:
        """How one subscript element shapes the result: ("dim", size), ("drop", None), or None when unknown."""
        if isinstance(node, ast.Name) and node.id in self.index:
            return "dim", self.index[node.id]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.grids:
            sizes = self.grids[node.value.id]
            pos = {"p": 0, "x": 1, "y": 2, "z": 3}.get(node.attr)
            return ("dim", sizes[pos]) if pos is not None and pos < len(sizes) else None
        if isinstance(node, ast.BinOp):  # an index tile shifted by a scalar keeps its size
            sides = [self.index_size(node.left), self.index_size(node.right)]
            dims = [s for s in sides if s and s[0] == "dim"]
            if len(dims) == 1 and all(s is not None for s in sides):
                return dims[0]
        if isinstance(node, ast.Call) and (c := self.nki(node.func)) and c[2] == "ds" and len(node.args) == 2:
            return "dim", self.value(node.args[1])
        if isinstance(node, ast.Name) and node.id in self.env and node.id not in self.loop_vars and depth < 5:
            return self.index_size(self.env[node.id], depth + 1)
        if self.is_scalar(node):
            return "drop", None
        return None

    def slice_size(self, sl: ast.Slice, base: int | None) -> int | None:
        step = 1 if sl.step is None else self.value(sl.step)
        if step is None or step <= 0:
            return None
        lower = sl.lower if sl.lower is not None else ast.Constant(0)
        lo = self.value(lower)
        if sl.upper is None:
            length = None if base is None or lo is None else base - lo
        elif (hi := self.value(sl.upper)) is not None and lo is not None:
            length = hi - lo
        else:  # symbolic bounds: the length is known if it comes out the same for every stand-in value
            lengths = set()
            for seed in (1, 2, 3):
                hi_p, lo_p = self.value(sl.upper, seed), self.value(lower, seed)
                lengths.add(None if hi_p is None or lo_p is None else hi_p - lo_p)
            length = lengths.pop() if len(lengths) == 1 else None
        if length is None or length < 0:
            return None
        return -(-length // step)

    def subscript(self, base: Tile | None, index: ast.AST) -> Tile | None:
        elts = index.elts if isinstance(index, ast.Tuple) else [index]
        if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
            return base if len(elts) == 1 else None
        dims: list[int | None] = []
        part = None
        for i, e in enumerate(elts):
            base_dim = base.dims[i] if base and i < len(base.dims) else None
            if isinstance(e, ast.Slice):
                kind, size = "dim", self.slice_size(e, base_dim)
            else:
                kind_size = self.index_size(e)
                if kind_size is None:
                    return None
                kind, size = kind_size
            if kind == "drop":
                continue
            if base is not None and i == base.part:
                part = len(dims)
            dims.append(size)
        if base is not None and len(elts) < len(base.dims):
            if base.part >= len(elts):
                part = len(dims) + base.part - len(elts)
            dims.extend(base.dims[len(elts):])
        if not dims:
            return None
        return Tile(dims, part or 0, base.buffer if base else None, base.dtype if base else None)

    def tile_of(self, node: ast.AST | None) -> Tile | None:
        """The shape of an on-chip tile expression, when known."""
        if isinstance(node, ast.Name):
            return self.tiles.get(node.id)
        if isinstance(node, ast.Subscript):
            base = self.tile_of(node.value)
            if base is None and not self.hbm_ref(node.value):
                return None
            return self.subscript(base, node.slice)
        if isinstance(node, ast.Call) and (c := self.nki(node.func)) and c[2] == "load" and node.args:
            t = self.tile_of(node.args[0])
            return Tile(t.dims, t.part, "sbuf", t.dtype) if t else None
        return None

    def shape(self, node: ast.AST | None, depth: int = 0) -> Tile | None:
        """An allocation's shape argument: a tuple/list (possibly with nl.par_dim) or another tile's .shape."""
        if node is None or depth > 5:
            return None
        if isinstance(node, ast.Name) and node.id in self.env:
            return self.shape(self.env[node.id], depth + 1)
        if isinstance(node, ast.Attribute) and node.attr == "shape":
            t = self.tile_of(node.value)
            return Tile(list(t.dims), t.part) if t else None
        if not isinstance(node, (ast.Tuple, ast.List)):
            return None
        dims, part = [], 0
        for i, e in enumerate(node.elts):
            if isinstance(e, ast.Call) and (c := self.nki(e.func)) and c[2] == "par_dim" and e.args:
                part, e = i, e.args[0]
            dims.append(self.value(e))
        return Tile(dims, part)

    def hbm_ref(self, node: ast.AST) -> bool:
        return self.base_name(node) in self.hbm

    # ----------------------------------------------------------------- reporting
    def report(self, code: str, node: ast.AST, message: str, **kw) -> None:
        span = self.ctx.src.span(node)
        if (code, span) in self.seen:
            return
        self.seen.add((code, span))
        self.ctx.report(code, span, message, kernel=self.kernel.name if self.kernel else None, **kw)

    def seg(self, node: ast.AST) -> str:
        text = " ".join(self.ctx.src.segment(node).split())  # one line, for messages
        return text if len(text) <= 40 else text[:37] + "..."

    # ----------------------------------------------------------------- walking
    def run(self) -> None:
        self.block(self.fn.body, [])

    def block(self, stmts: list[ast.stmt], loops: list[ast.stmt]) -> None:
        for st in stmts:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # analysed as their own scope
            if isinstance(st, (ast.For, ast.AsyncFor)):
                self.check(st.iter, loops)
                self.loop_vars.update(_target_names(st.target))
                self.block(st.body, loops + [st])
                self.block(st.orelse, loops)
            elif isinstance(st, ast.While):
                self.check(st.test, loops)
                self.block(st.body, loops + [st])
                self.block(st.orelse, loops)
            elif isinstance(st, ast.If):
                self.check(st.test, loops)
                self.block(st.body, loops)
                self.block(st.orelse, loops)
            elif isinstance(st, (ast.With, ast.AsyncWith)):
                for item in st.items:
                    self.check(item.context_expr, loops)
                self.block(st.body, loops)
            elif isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
                self.block(st.body, loops)  # type: ignore[attr-defined]
                for h in st.handlers:  # type: ignore[attr-defined]
                    self.block(h.body, loops)
                self.block(st.orelse + st.finalbody, loops)  # type: ignore[attr-defined]
            else:
                self.stmt = (st, stmts)
                self.check(st, loops)
                self.stmt = None
                self.bind(st)

    def check(self, node: ast.AST, loops: list[ast.stmt]) -> None:
        for sub in _local_nodes([node]):
            if isinstance(sub, ast.Call):
                self.check_call(sub, loops)
            elif isinstance(sub, ast.Subscript):
                self.check_index_grid(sub)
            elif isinstance(sub, ast.BinOp) and type(sub.op) in _OPERATORS:
                for side in (sub.left, sub.right):
                    if self.hbm_ref(side):
                        self.report_hbm_operand(side, f"the `{_OPERATORS[type(sub.op)]}` operator", is_dst=False)

    def bind(self, st: ast.stmt) -> None:
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            target, value = st.targets[0], st.value
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            target, value = st.target, st.value
        else:
            return
        names = _target_names(target)
        for name in names:
            self.tiles.pop(name, None)
            self.index.pop(name, None)
            self.grids.pop(name, None)
            self.hbm.discard(name)
        grid = self.grid_sizes(value)
        if isinstance(target, ast.Tuple) and grid is not None:
            for elt, size in zip(target.elts, grid):
                if isinstance(elt, ast.Name):
                    self.index[elt.id] = size
            return
        if not isinstance(target, ast.Name):
            return
        name = target.id
        if grid is not None:
            self.grids[name] = grid
            return
        arange = self.arange_index(value)
        if arange is not None:
            self.index[name] = arange[1]
            return
        alloc = self.allocation(value)
        if alloc is not None:
            self.tiles[name] = alloc
            if alloc.buffer == "hbm":
                self.hbm.add(name)
            return
        if self.hbm_ref(value):
            self.hbm.add(name)  # a slice or view (reshape, ap) of an HBM tensor is still in HBM
            return
        tile = self.tile_of(value)
        if tile is not None:
            self.tiles[name] = tile

    # ----------------------------------------------------------------- checks
    def grid_sizes(self, node: ast.AST) -> list[int | None] | None:
        if not (isinstance(node, ast.Subscript) and (c := self.nki(node.value)) and c[2] == "mgrid"):
            return None
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [self.slice_size(e, None) if isinstance(e, ast.Slice) else None for e in elts]

    def arange_index(self, node: ast.AST) -> tuple[int, int | None] | None:
        """(axis, size) for nl.arange(n)[:, None] (axis 0, the partition index) or nl.arange(n)[None, :]."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)):
            return None
        call = node.value
        if not ((c := self.nki(call.func)) and c[2] == "arange" and call.args):
            return None
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        kinds = ["slice" if isinstance(e, ast.Slice) else "none" if isinstance(e, ast.Constant) and e.value is None
                 else "?" for e in elts]
        if "?" in kinds or kinds.count("slice") != 1:
            return None
        if len(call.args) == 1:
            size = self.value(call.args[0])
        else:
            hi, lo = self.value(call.args[1]), self.value(call.args[0])
            size = None if hi is None or lo is None else hi - lo
        return kinds.index("slice"), size

    def check_index_grid(self, node: ast.Subscript) -> None:
        arange = self.arange_index(node)
        if arange is not None and arange[0] == 0 and arange[1] is not None and arange[1] > PMAX:
            self.report("NK001", node, f"partition index covers {arange[1]} partitions, but SBUF/PSUM have {PMAX}: "
                        f"index tiles of 128 partitions (nl.arange(128)[:, None]) and loop over the "
                        f"{-(-arange[1] // PMAX)} tiles with nl.affine_range")
        grid = self.grid_sizes(node)
        if grid and grid[0] is not None and grid[0] > PMAX:
            self.report("NK001", node, f"nl.mgrid partition range covers {grid[0]} partitions, more than {PMAX}: "
                        f"use a range of at most 128 and loop over {-(-grid[0] // PMAX)} tiles with nl.affine_range")

    def allocation(self, call: ast.AST) -> Tile | None:
        if not isinstance(call, ast.Call):
            return None
        c = self.nki(call.func)
        if c is None or c[1] != "language" or c[2] not in ALLOCATORS:
            return None
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        dtype_pos = ALLOCATORS[c[2]]
        if dtype_pos is None:  # *_like: shape and placement of another tile unless overridden
            src = self.tile_of(call.args[0]) if call.args else None
            tile = Tile(list(src.dims), src.part, src.buffer, src.dtype) if src else Tile([None], 0)
        else:
            tile = self.shape(kw.get("shape", call.args[0] if call.args else None)) or Tile([None], 0)
            tile.buffer = "sbuf"  # both generations default to SBUF
            dt = kw.get("dtype", call.args[dtype_pos] if len(call.args) > dtype_pos else None)
            tile.dtype = self.dtype(dt)
        buf = kw.get("buffer", call.args[dtype_pos + 1] if dtype_pos and len(call.args) > dtype_pos + 1 else None)
        if buf is not None:
            tile.buffer = self.buffer(buf)
        if "dtype" in kw and dtype_pos is None:
            tile.dtype = self.dtype(kw["dtype"])
        return tile

    def check_call(self, call: ast.Call, loops: list[ast.stmt]) -> None:
        c = self.nki(call.func)
        if c is None:
            return
        api, module, name = c
        if module == "language" and name in ALLOCATORS:
            self.check_allocation(call, loops)
        elif name == "par_dim" and call.args:
            n = self.value(call.args[0])
            if n is not None and n > PMAX:
                self.report("NK001", call, f"nl.par_dim({n}) asks for {n} partitions, but SBUF/PSUM have {PMAX}: "
                            f"split it into {-(-n // PMAX)} tiles of 128 (a block dimension before the par_dim)")
        elif module == "language" and name == "load" and call.args and isinstance(call.args[0], ast.Subscript):
            self.check_load(call.args[0])
        if (module == "isa" and name == "nc_matmul") or (module == "language" and name == "matmul"):
            self.check_matmul(call, name)
        if (module == "isa" and name in ISA_COMPUTE) or (module == "language" and name in LANGUAGE_COMPUTE):
            self.check_compute_operands(call, api, module, name)

    def check_allocation(self, call: ast.Call, loops: list[ast.stmt]) -> None:
        tile = self.allocation(call)
        if tile is None:
            return
        shape_node = next((k.value for k in call.keywords if k.arg == "shape"), call.args[0] if call.args else call)
        if tile.buffer in ("sbuf", "psum") and tile.partitions is not None and tile.partitions > PMAX:
            where = shape_node
            if isinstance(shape_node, (ast.Tuple, ast.List)) and tile.part < len(shape_node.elts):
                where = shape_node.elts[tile.part]
            self.report("NK001", where, f"{tile.buffer.upper()} tile has {tile.partitions} partitions, more than "
                        f"{PMAX}: split the partition dimension into tiles of 128 with nl.affine_range "
                        f"(or move it into the free dimension)")
        if tile.buffer == "psum" and tile.free is not None and tile.dtype is not None:
            size = DTYPE_BYTES[tile.dtype]
            if tile.free * size > PSUM_BANK_BYTES:
                fmax = PSUM_BANK_BYTES // size
                self.report("NK002", call, f"PSUM tile holds {tile.free} {tile.dtype} per partition "
                            f"({tile.free * size} bytes), more than one 2 KiB bank: a bank fits at most {fmax} "
                            f"{tile.dtype} elements in the free dimension; tile it into blocks of {fmax}")
        # Only a tensor that leaves the function (an output) is lost this way; per-iteration HBM scratch is fine.
        escapes = self.stmt is not None and any(n in self.returned for n in self._bound_by(self.stmt[0]))
        if tile.buffer == "hbm" and loops and escapes:
            self.report("NK004", call, "HBM output tensor allocated inside a loop: each iteration creates a new "
                        "tensor, so earlier iterations' results are lost; allocate it once before the loop and "
                        "write each iteration into a slice of it", fix=self.hoist_fix(loops[0]))

    def buffer_kind(self, call: ast.Call) -> str | None:
        buf = next((k.value for k in call.keywords if k.arg == "buffer"), None)
        c = nki_name(self.ctx.imports, buf) if buf is not None else None
        return c[1].rsplit(".", 1)[-1] if c else None

    def check_load(self, sub: ast.Subscript) -> None:
        base = self.tiles.get(sub.value.id) if isinstance(sub.value, ast.Name) else None
        elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        for i, e in enumerate(elts):  # the first dimension the index keeps becomes the tile's partition dimension
            if isinstance(e, ast.Slice):
                size = self.slice_size(e, base.dims[i] if base and i < len(base.dims) else None)
            else:
                kind = self.index_size(e)
                if kind is None or any(isinstance(n, ast.Name) and (n.id in self.index or n.id in self.grids)
                                       for n in ast.walk(e)):
                    return  # unknown, or an arange/mgrid index (checked where it is built)
                if kind[0] == "drop":
                    continue
                size = kind[1]
            if size is not None and size > PMAX:
                self.report("NK001", e, f"nl.load of {size} rows makes a tile with {size} partitions, more "
                            f"than {PMAX}: load tiles of 128 rows in a nl.affine_range loop")
            return

    def check_matmul(self, call: ast.Call, name: str) -> None:
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        if name == "nc_matmul":
            # Legacy: nc_matmul(stationary, moving) returns a PSUM tile; current: nc_matmul(dst, stationary, moving).
            order = ["dst", "stationary", "moving"] if "dst" in kw or len(call.args) >= 3 else ["stationary", "moving"]
            ops = dict(zip(order, call.args)) | kw
            stat, mov, x_transposed = ops.get("stationary"), ops.get("moving"), True
        else:
            ops = dict(zip(["x", "y"], call.args)) | kw
            stat, mov = ops.get("x"), ops.get("y")
            x_transposed = ops.get("transpose_x") is not None and _literal(ops["transpose_x"]) is True
        label = "nc_matmul" if name == "nc_matmul" else "nl.matmul"
        st = self.tile_of(stat) if stat is not None else None
        if stat is not None and st is not None and len(st.dims) == 2 and st.part == 0:
            k_dim, m_dim = (st.dims[0], st.dims[1]) if x_transposed else (st.dims[1], st.dims[0])
            if k_dim is not None and k_dim > PMAX:
                self.report("NK003", stat, f"{label}: contraction dimension K of `{self.seg(stat)}` is {k_dim}, "
                            f"more than {PMAX}: split K into tiles of 128 and accumulate the partial products "
                            "into one PSUM tile")
            if m_dim is not None and m_dim > STATIONARY_FMAX:
                self.report("NK003", stat, f"{label}: stationary operand `{self.seg(stat)}` has a free size of "
                            f"{m_dim}, more than {STATIONARY_FMAX}: tile M into blocks of 128 "
                            "(nl.tile_size.gemm_stationary_fmax)")
        mv = self.tile_of(mov) if mov is not None else None
        if mov is not None and mv is not None and mv.part == 0 and mv.dims:
            if mv.partitions is not None and mv.partitions > PMAX:
                self.report("NK003", mov, f"{label}: contraction dimension K of `{self.seg(mov)}` is "
                            f"{mv.partitions}, more than {PMAX}: split K into tiles of 128 and accumulate the "
                            "partial products into one PSUM tile")
            if mv.free is not None and mv.free > MOVING_FMAX:
                self.report("NK003", mov, f"{label}: moving operand `{self.seg(mov)}` has a free size of {mv.free}, "
                            f"more than {MOVING_FMAX}: tile N into blocks of 512 (nl.tile_size.gemm_moving_fmax) "
                            "so each result fits one PSUM bank")

    def check_compute_operands(self, call: ast.Call, api: str, module: str, name: str) -> None:
        # Current-generation ISA calls write into their first argument (dst); everything else is read.
        dst_first = module == "isa" and api == CURRENT and not (name == "nc_matmul" and len(call.args) == 2)
        operands = [(a, dst_first and i == 0) for i, a in enumerate(call.args)]
        operands += [(k.value, k.arg == "dst") for k in call.keywords if k.arg]
        label = f"{'nisa' if module == 'isa' else 'nl'}.{name}"
        for node, is_dst in operands:
            if self.hbm_ref(node):
                self.report_hbm_operand(node, label, is_dst)

    def report_hbm_operand(self, node: ast.AST, label: str, is_dst: bool) -> None:
        text = self.seg(node)
        if is_dst:
            self.report("NK006", node, f"{label} writes into `{text}`, a tensor in HBM, but compute engines write "
                        "only SBUF/PSUM: compute into an on-chip tile and copy it out with nl.store or "
                        "nisa.dma_copy")
            return
        lang = self.language_alias()
        how = f"load it first: {lang}.load({text})" if lang else "copy it into an SBUF tile with nisa.dma_copy first"
        fix = None
        if lang:
            full = self.ctx.src.segment(node)
            fix = Fix(f"Load `{text}` into SBUF with {lang}.load", (TextEdit(self.ctx.src.span(node), f"{lang}.load({full})"),))
        self.report("NK006", node, f"{label} reads `{text}`, a tensor in HBM, but compute engines read only "
                    f"SBUF/PSUM: {how}", fix=fix)

    def language_alias(self) -> str | None:
        """How this file spells nki.language for the scope's generation (e.g. `nl`), for quick fixes."""
        apis = [self.kernel.api] if self.kernel else [LEGACY, CURRENT]
        roots = {LEGACY: "neuronxcc.nki", CURRENT: "nki"}
        names = sorted(self.ctx.imports.names.items())
        for suffix in (".language", ""):
            for local, full in names:
                if any(full == roots[a] + suffix for a in apis):
                    return local if suffix else f"{local}.language"
        return None

    def hoist_fix(self, outer: ast.stmt) -> Fix | None:
        """Move the allocation statement above the outermost loop, when nothing it reads changes in the loop."""
        if self.stmt is None:
            return None
        stmt, parent = self.stmt
        if len(parent) < 2 or not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            return None
        value = stmt.value
        bound = {n for node in _local_nodes([outer]) for n in self._bound_by(node)}
        reads = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} if value is not None else set()
        if reads & bound:
            return None
        src = self.ctx.src
        s = src.span(stmt)
        if src.line(s.start_line)[: s.start_col].strip() or src.line(s.end_line)[s.end_col :].strip()[:1] not in ("", "#"):
            return None  # shares its line with other code
        loop_line = outer.lineno - 1
        shift = s.start_col - src.col(loop_line, outer.col_offset)
        lines = [src.line(i) for i in range(s.start_line, s.end_line + 1)]
        moved = "".join((ln[shift:] if not ln[:shift].strip() else ln) + "\n" for ln in lines)
        edits = (TextEdit(Span(loop_line, 0, loop_line, 0), moved), TextEdit(Span(s.start_line, 0, s.end_line + 1, 0), ""))
        return Fix("Move the HBM allocation before the loop", edits)

    @staticmethod
    def _bound_by(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Assign):
            return [n for t in node.targets for n in _target_names(t)]
        if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
            return _target_names(node.target)
        if isinstance(node, ast.withitem) and node.optional_vars is not None:
            return _target_names(node.optional_vars)
        return []


def _functions(nodes: list[ast.stmt]):
    """Every function definition, at any depth of statements (module, classes, other functions)."""
    for node in _statements(nodes):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not isinstance(node, ast.ClassDef):
                yield node
            yield from _functions(node.body)  # as deep as defs nest: at most Python's 100 indentation levels


def _uses_nki(fn: ast.FunctionDef, aliases: dict[str, str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in aliases for n in _local_nodes(fn.body))


@file_check
def check_nki_shapes(ctx: FileContext) -> None:
    disc: NkiDiscovery = ctx.nki  # type: ignore[assignment]
    if not disc.aliases:
        return
    kernels = {id(node): kernel for kernel, node in disc.items}
    module_env = _module_constants(ctx.body)
    seen: set[tuple[str, Span]] = set()
    for fn in _functions(ctx.body):
        kernel = kernels.get(id(fn))
        if kernel is None and not _uses_nki(fn, disc.aliases):  # type: ignore[arg-type]
            continue  # not NKI code: host functions, tests, other languages
        _Scope(ctx, disc, fn, kernel, module_env, seen).run()  # type: ignore[arg-type]


@file_check
def check_nki_generations(ctx: FileContext) -> None:
    disc: NkiDiscovery = ctx.nki  # type: ignore[assignment]
    # File level: imports of both generations, outside try/except ImportError shims.
    plain = [i for i in disc.imports if not i.guarded]
    first: dict[str, NkiImport] = {}
    for imp in plain:
        first.setdefault(imp.api, imp)
    if len(first) == 2 and disc.kernels:  # a host file may import prebuilt kernels of both generations
        later_api = max(first, key=lambda a: (first[a].span.start_line, first[a].span.start_col))
        other = first[LEGACY if later_api == CURRENT else CURRENT]
        names = {LEGACY: "the legacy API (neuronxcc.nki)", CURRENT: "the current API (nki)"}
        for imp in plain:
            if imp.api == later_api:
                ctx.report("NK005", imp.span, f"this file imports {names[later_api]} and also "
                           f"{names[other.api]} (line {other.span.start_line + 1}); a kernel cannot use both: "
                           f"port the file to one generation", severity=Severity.WARNING,
                           related=(Related(other.span, f"{names[other.api]} imported here"),))
    # Kernel level: a kernel of one generation that uses a name imported from the other.
    for kernel, fn in disc.items:
        uses: list[tuple[ast.Name, str]] = []
        for node in _local_nodes(list(fn.decorator_list) + list(fn.body)):
            if isinstance(node, ast.Name) and node.id in disc.aliases:
                uses.append((node, disc.aliases[node.id]))
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and (c := nki_name(ctx.imports, node)) and not is_type_only(c[1])):
                uses.append((node.value, c[0]))  # e.g. neuronxcc.nki.language.x after a plain `import neuronxcc`
        reported: set[str] = set()
        for name, api in sorted(uses, key=lambda u: (u[0].lineno, u[0].col_offset)):
            if api != kernel.api and name.id not in reported:
                reported.add(name.id)
                ctx.report("NK005", name, f"`{name.id}` comes from the {api} NKI API, but kernel `{kernel.name}` "
                           f"uses the {kernel.api} one: a kernel cannot mix them; use the {kernel.api} "
                           f"module's equivalent", kernel=kernel.name)


# Calls whose reading of their destination is the documented accumulation, not a dependency.
_ACCUMULATING = {"language.loop_reduce"}
_METADATA_ATTRS = {"shape", "dtype", "ndim", "buffer"}


def _varies(node: ast.AST, varying: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in varying for n in ast.walk(node))


class _CarriedDependencies:
    """NK007 for one nl.affine_range loop of a kernel."""

    def __init__(self, ctx: FileContext, kernel: NkiKernel, loop: ast.For, outer: set[str]):
        self.ctx, self.kernel, self.loop, self.outer = ctx, kernel, loop, outer
        inner: set[str] = set(_target_names(loop.target))
        for node in _local_nodes(loop.body):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        inner.add(t.id)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr)):
                inner.update(_target_names(node.target))
        self.varying = inner  # names that may differ between iterations
        self.reads: list[tuple[tuple[int, int], str, ast.AST]] = []
        self.writes: list[tuple[tuple[int, int], str, ast.AST]] = []

    def _place(self, target: ast.AST) -> str | None:
        """The outer name a write or read reaches at an iteration-invariant place, else None."""
        if isinstance(target, ast.Name):
            return target.id if target.id in self.outer else None
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            if target.value.id in self.outer and not _varies(target.slice, self.varying):
                return target.value.id
        return None

    def run(self) -> None:
        for stmt in _statements(self.loop.body):
            if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.Try)):
                # Only the header's expressions: the nested block's statements come on their own.
                for field_name in ("iter", "test", "items"):
                    part = getattr(stmt, field_name, None)
                    for item in part if isinstance(part, list) else [part] if part is not None else []:
                        self._expression(item, stmt)
                continue
            self._statement(stmt)
        first_write: dict[str, tuple[tuple[int, int], ast.AST]] = {}
        for at, name, node in sorted(self.writes, key=lambda w: w[0]):
            first_write.setdefault(name, (at, node))
        reported: set[str] = set()
        for at, name, node in sorted(self.reads, key=lambda r: r[0]):
            write = first_write.get(name)
            if write is None or name in reported or at[0] > write[0][0]:
                continue  # never written here, or written earlier in the same iteration (a scratch tile)
            reported.add(name)
            line = write[1].lineno  # type: ignore[attr-defined]
            where = "in the same statement" if at[0] == write[0][0] else f"written at line {line}"
            self.ctx.report("NK007", node, f"`{name}` carries a value from one nl.affine_range iteration to the "
                            f"next (read here, {where}); affine_range iterations may be reordered or run in "
                            "parallel: use nl.sequential_range, or accumulate with `+=`",
                            kernel=self.kernel.name)

    def _statement(self, stmt: ast.stmt) -> None:
        key = (stmt.lineno, stmt.col_offset)
        if isinstance(stmt, ast.AugAssign):
            return  # `acc += ...`: the documented accumulation
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                name = self._place(t)
                if name is not None:
                    self.writes.append((key, name, t))
                if isinstance(t, ast.Subscript):
                    self._expression(t.slice, stmt)
            self._expression(stmt.value, stmt)
            return
        self._expression(stmt, stmt)

    def _expression(self, node: ast.AST, stmt: ast.stmt) -> None:
        key = (stmt.lineno, stmt.col_offset)
        skip: set[int] = set()
        for n in _local_nodes([node]):
            if isinstance(n, ast.Call):
                c = nki_name(self.ctx.imports, n.func)
                inner = c[1] if c else ""
                if inner in _ACCUMULATING:
                    skip.update(id(x) for x in ast.walk(n))
                    continue
                dst = next((k.value for k in n.keywords if k.arg == "dst"), None)
                if dst is None and inner in ("language.store",) and n.args:
                    dst = n.args[0]
                if dst is None and c and c[0] == CURRENT and inner.startswith("isa.") and n.args:
                    dst = n.args[0]  # the current generation's instructions take dst first
                if dst is not None:
                    name = self._place(dst)
                    if name is not None:
                        self.writes.append((key, name, dst))
                    skip.add(id(dst))
                    if isinstance(dst, ast.Subscript):
                        skip.add(id(dst.value))
            elif isinstance(n, ast.Attribute) and n.attr in _METADATA_ATTRS:
                skip.update(id(x) for x in ast.walk(n.value))
        for n in _local_nodes([node]):
            if id(n) in skip:
                continue
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and isinstance(n.ctx, ast.Load):
                name = self._place(n)
                skip.add(id(n.value))
                if name is not None:
                    self.reads.append((key, name, n))
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in self.outer:
                self.reads.append((key, n.id, n))


def _bound_outside(fn: ast.FunctionDef, loop: ast.For) -> set[str]:
    """Names the function binds outside the loop by assignment (tiles, accumulators), parameters aside."""
    inside = {id(n) for n in ast.walk(loop)}
    out: set[str] = set()
    for node in _local_nodes(fn.body):
        if id(node) in inside:
            continue
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.add(t.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


@file_check
def check_nki_affine_dependencies(ctx: FileContext) -> None:
    disc: NkiDiscovery = ctx.nki  # type: ignore[assignment]
    if not disc.aliases:
        return
    for kernel, fn in disc.items:
        for loop in _local_nodes(fn.body):
            if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)):
                continue
            c = nki_name(ctx.imports, loop.iter.func)
            if c is None or c[1] != "language.affine_range":
                continue
            outer = _bound_outside(fn, loop)
            if outer:
                _CarriedDependencies(ctx, kernel, loop, outer).run()
