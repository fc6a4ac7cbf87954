"""Counting what one launch of a Triton kernel does, with no GPU: bytes per tensor argument, dot FLOPs, elementwise
FLOPs. Runs only in a process with TRITON_INTERPRET=1 set before triton was imported (see worker.py).

The user's launcher is called on CPU inputs; the kernel's launch is intercepted (`InterpretedFunction.run`, and
the autotuner, whose configs become one launch each) and recorded instead of run. Then the interpreter runs a
sample of the grid's program ids with hooks on masked loads/stores (active lanes x element size, attributed to
the tensor argument whose storage holds the address) and on tl.dot (2*M*N*K, the product itself skipped: only
shapes matter). Stores are counted, not written, and lanes outside every argument are not read, so a kernel with
a missing mask cannot corrupt the worker. Programs are sampled per stratum (last index along each axis or not):
ragged edges are counted exactly for row-major grids, the interior is extrapolated from evenly spaced samples.
"""

from __future__ import annotations

import inspect
import itertools
import math
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from ...spec import unwrap_kernel

DEFAULT_SAMPLES = 12  # interior programs interpreted per launch; every stratum with at most this many runs whole


class Interpreted(Protocol):
    """What counting uses of the interpreter's InterpretedFunction (triton 3.6 and 3.9 alike)."""

    fn: Callable[..., Any]  # the kernel's Python function
    rewritten_fn: ClassVar[dict[Callable[..., Any], Callable[..., Any]]]  # the function each kernel runs as

    def rewrite(self) -> Callable[..., Any]: ...


@dataclass
class Launch:
    """One intercepted launch of the kernel."""

    fn: Interpreted
    args: tuple
    kwargs: dict
    grid: Sequence[int] | Callable[[dict], Sequence[int]]  # as the launch gave it: sizes, or sizes from the meta
    config_index: int | None = None  # autotune config this launch came from
    config_label: str = ""


@dataclass
class Counts:
    load: dict[str, float] = field(default_factory=dict)
    store: dict[str, float] = field(default_factory=dict)
    tensor_flops: dict[str, float] = field(default_factory=dict)
    vector_flops: float = 0.0
    outside_lanes: int = 0


class _Captured(Exception):
    pass


def _interp():
    from triton.runtime import interpreter

    from ..verify.interp_compat import patch_interpreter

    patch_interpreter()
    return interpreter


def capture(kernel, launcher, args, overrides: dict | None = None) -> list[Launch]:
    """Call `launcher(*args)` with the kernel's launches recorded, not run. Autotuned kernels give one launch
    per config, or only the first config's under `overrides` (constexprs, num_warps, num_stages), which replace
    the launch's own values."""
    interp = _interp()
    from triton.runtime import autotuner

    target = unwrap_kernel(kernel)
    launches: list[Launch] = []
    original_run = interp.InterpretedFunction.run
    original_tune = autotuner.Autotuner.run
    state = {"config": None}

    def run(self, *a, grid, warmup, **kw):
        if warmup:
            return None
        if self is target:
            idx, label = state["config"] or (None, "")
            if overrides:
                kw = {**kw, **overrides}
            launches.append(Launch(self, a, dict(kw), grid, idx, label))
            return None
        return original_run(self, *a, grid=grid, warmup=warmup, **kw)

    def tune(self, *a, **kw):
        if unwrap_kernel(self) is not target:
            return original_tune(self, *a, **kw)
        self.nargs = dict(zip(self.arg_names, a))
        try:
            configs = self.prune_configs(kw)
        except Exception:  # noqa: BLE001 - a pruning hook that needs a GPU: fall back to every config
            configs = self.configs
        # Overrides replace every config's values, so the other configs would only repeat the first launch.
        for i, cfg in enumerate(configs[:1] if overrides else configs):
            state["config"] = (i, config_text(cfg, target))
            try:
                self.fn.run(*a, **kw, **cfg.all_kwargs())
            finally:
                state["config"] = None
        self.nargs = None
        return None

    interp.InterpretedFunction.run = run
    autotuner.Autotuner.run = tune
    try:
        launcher(*args)
    finally:
        interp.InterpretedFunction.run = original_run
        autotuner.Autotuner.run = original_tune
    return launches


def config_text(cfg: Any, kernel: Any) -> str:
    """An autotune config as the user writes it (`BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3`, in the
    kernel's parameter order), not triton's repr with every default in it."""
    from analyzers.tiling import format_config

    try:
        order = list(inspect.signature(kernel.fn).parameters)
    except (AttributeError, TypeError, ValueError):
        order = None
    return format_config(list(getattr(cfg, "kwargs", {}).items()), getattr(cfg, "num_warps", 4),
                         getattr(cfg, "num_stages", 3), order, num_ctas=getattr(cfg, "num_ctas", 1),
                         maxnreg=getattr(cfg, "maxnreg", None))


def _bound_args(launch: Launch) -> dict:
    fn = launch.fn.fn
    names = list(inspect.signature(fn).parameters)
    bound = dict(zip(names, launch.args))
    bound.update({k: v for k, v in launch.kwargs.items() if k in names})
    for name, p in inspect.signature(fn).parameters.items():
        if name not in bound and p.default is not inspect.Parameter.empty:
            bound[name] = p.default
    return bound


def grid_of(launch: Launch) -> tuple[int, int, int]:
    grid = launch.grid
    sizes = grid({**launch.kwargs, **_bound_args(launch)}) if callable(grid) else grid
    x, y, z = (*(int(g) for g in sizes), 1, 1, 1)[:3]
    return x, y, z


def constexprs_of(launch: Launch) -> dict:
    fn = launch.fn.fn
    bound = _bound_args(launch)
    out = {}
    for name, p in inspect.signature(fn).parameters.items():
        ann = p.annotation
        text = ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))
        if "constexpr" in str(text) and name in bound:
            out[name] = bound[name]
    return out


def _strata(grid: tuple[int, int, int], samples: int) -> list[tuple[list[tuple[int, int, int]], int]]:
    """(sampled program ids, how many programs they stand for) per stratum of (last along x?, y?, z?)."""
    out = []
    for flags in itertools.product((False, True), repeat=3):
        ranges = []
        for axis, last in enumerate(flags):
            n = grid[axis]
            if last:
                ranges.append([n - 1] if n >= 1 else [])
            else:
                ranges.append(list(range(n - 1)) if n > 1 else [])
        count = math.prod(len(r) for r in ranges)
        if count == 0:
            continue
        if count <= samples:
            ids = [(x, y, z) for x, y, z in itertools.product(*ranges)]
        else:  # evenly spaced over the stratum's flattened index, first and last included
            picks = sorted({round(i * (count - 1) / (samples - 1)) for i in range(samples)})
            sizes = [len(r) for r in ranges]
            ids = []
            for p in picks:
                z = ranges[2][p % sizes[2]]
                p //= sizes[2]
                y = ranges[1][p % sizes[1]]
                p //= sizes[1]
                ids.append((ranges[0][p % sizes[0]], y, z))
        out.append((ids, count))
    return out


class _Tensors:
    """Address ranges of the tensor arguments: which argument a pointer lane belongs to."""

    def __init__(self, bound: dict):
        self.ranges: list[tuple[int, int, str, int]] = []  # start, end, name, extent bytes
        for name, value in bound.items():
            if hasattr(value, "data_ptr") and hasattr(value, "untyped_storage"):
                storage = value.untyped_storage()
                start = storage.data_ptr()
                extent = _extent_bytes(value)
                self.ranges.append((start, start + storage.nbytes(), name, extent))
        self.ranges.sort()

    def split(self, addrs: np.ndarray, active: np.ndarray) -> tuple[list[tuple[str, np.ndarray]], int, np.ndarray]:
        """Active addresses per argument, the count of active lanes outside every argument, and the mask of active
        lanes inside one."""
        out, inside = [], np.zeros(addrs.shape, dtype=bool)
        for start, end, name, _ in self.ranges:
            hit = (addrs >= start) & (addrs < end)
            inside |= hit
            mine = hit & active
            if mine.any():
                out.append((name, addrs[mine]))
        safe = active & inside
        return out, int((active & ~inside).sum()), safe


def _extent_bytes(t) -> int:
    if t.numel() == 0:
        return 0
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))
    return int(span * t.element_size())


_VECTOR_OPS = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_frem", "create_fma",
               "create_exp", "create_exp2", "create_log", "create_log2", "create_sqrt", "create_precise_sqrt",
               "create_rsqrt", "create_sin", "create_cos", "create_minimumf", "create_maximumf",
               "create_minnumf", "create_maxnumf", "create_precise_divf")


def _elem_bytes(handle) -> int:
    try:
        return max(1, handle.get_element_ty().primitive_bitwidth // 8)
    except Exception:  # noqa: BLE001
        return 4


def count(launch: Launch, samples: int = DEFAULT_SAMPLES) -> dict:
    """Interpret a sample of the launch's programs with counting hooks; totals extrapolated over the grid."""
    interp = _interp()
    builder_cls = interp.InterpreterBuilder
    bound = _bound_args(launch)
    tensors = _Tensors(bound)
    grid = grid_of(launch)
    strata = _strata(grid, max(2, int(samples)))
    weights: dict[tuple[int, int, int], float] = {}
    for ids, n in strata:
        for pid in ids:
            weights[pid] = weights.get(pid, 0.0) + n / len(ids)
    counts = Counts()
    current = {"w": 0.0}
    program: dict[str, list] = {}  # addresses each argument's lanes touched in the running program
    union: dict[str, list] = {}  # address intervals of each sampled program, per argument
    unique_w: dict[str, float] = {}  # per-program distinct elements, weighted over the grid
    unique_n: dict[str, int] = {}  # the same, unweighted: compared with the union to detect sharing
    saved = {name: getattr(builder_cls, name) for name in
             ("create_masked_load", "create_masked_store", "create_dot", *_VECTOR_OPS) if hasattr(builder_cls, name)}

    def record(kind: dict, ptrs, mask) -> np.ndarray:
        addrs = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        active = np.broadcast_to(np.asarray(mask.data, dtype=bool), addrs.shape)
        size = _elem_bytes(ptrs)
        parts, outside, safe = tensors.split(addrs, active)
        counts.outside_lanes += outside
        for name, hit in parts:
            kind[name] = kind.get(name, 0.0) + current["w"] * hit.size * size
            program.setdefault(name, []).append((int(hit.min()), int(hit.max()), int(hit.size), size))
        return safe

    def masked_load(self, ptrs, mask, other, *rest):
        safe = record(counts.load, ptrs, mask)
        mask = interp.TensorHandle(safe, mask.dtype) if hasattr(mask, "dtype") else mask
        return saved["create_masked_load"](self, ptrs, mask, other, *rest)

    def masked_store(self, ptrs, value, mask, *rest):
        record(counts.store, ptrs, mask)

    def dot(self, a, b, d, *rest):
        m, k = a.data.shape[-2], a.data.shape[-1]
        n = b.data.shape[-1]
        batch = math.prod(a.data.shape[:-2]) if a.data.ndim > 2 else 1
        cls = str(a.dtype.scalar if hasattr(a.dtype, "scalar") else a.dtype)
        counts.tensor_flops[cls] = counts.tensor_flops.get(cls, 0.0) + current["w"] * 2.0 * m * n * k * batch
        shape = tuple(a.data.shape[:-1]) + (n,)
        return interp.TensorHandle(np.broadcast_to(d.data, shape).copy(), d.dtype.scalar)

    def vector(name):
        original = saved[name]

        def op(self, *a, **kw):
            out = original(self, *a, **kw)
            data = getattr(out, "data", None)
            if data is not None:
                counts.vector_flops += current["w"] * float(np.size(data))
            return out
        return op

    fn = launch.fn
    real = fn.rewrite()

    builder = interp.interpreter_builder

    def template(**kw):
        w = weights.get(tuple(builder.grid_idx))
        if w is None:
            return None
        current["w"] = w
        program.clear()
        try:
            return real(**kw)
        finally:
            for name, chunks in program.items():
                # Distinct elements without np.unique (which would dominate the run time): the lanes touched,
                # at most the address span they cover.
                lo, hi = min(c[0] for c in chunks), max(c[1] for c in chunks)
                elem = chunks[0][3]
                mine = min(sum(c[2] for c in chunks), (hi - lo) // elem + 1)
                unique_w[name] = unique_w.get(name, 0.0) + w * mine
                unique_n[name] = unique_n.get(name, 0) + mine
                union.setdefault(name, []).append((lo, hi + elem, elem))

    # The interpreter patches triton.language into the launched function's globals: give the wrapper the kernel's.
    sampled = types.FunctionType(template.__code__, real.__globals__, "sampled", None, template.__closure__)
    sampled.__dict__["__signature__"] = inspect.signature(real)  # what inspect.signature reads
    sampled.__annotations__ = getattr(real, "__annotations__", {})
    sampled.__name__ = getattr(real, "__name__", "kernel")
    cache = type(fn).rewritten_fn
    restore_dev = interp.GridExecutor._restore_args_dev
    builder_cls.create_masked_load = masked_load
    builder_cls.create_masked_store = masked_store
    builder_cls.create_dot = dot
    for name in _VECTOR_OPS:
        if name in saved:
            setattr(builder_cls, name, vector(name))
    interp.GridExecutor._restore_args_dev = lambda *a, **k: None  # nothing was written: skip the copy-back
    cache[fn.fn] = sampled
    try:
        kwargs = dict(launch.kwargs)
        kwargs.pop("grid", None)
        interp.InterpretedFunction.run(fn, *launch.args, grid=grid, warmup=False, **kwargs)
    finally:
        cache[fn.fn] = real
        for name, value in saved.items():
            setattr(builder_cls, name, value)
        interp.GridExecutor._restore_args_dev = restore_dev
    programs = grid[0] * grid[1] * grid[2]
    extents = {name: ext for _, _, name, ext in tensors.ranges}
    args_out = []
    sampled_programs = len(weights)
    for name in dict.fromkeys([*counts.load, *counts.store]):
        load, store = counts.load.get(name, 0.0), counts.store.get(name, 0.0)
        elem = max(1, getattr(bound.get(name), "element_size", lambda: 1)())
        # Footprint: each program's distinct bytes summed over the grid, shrunk by the sharing seen between the
        # sampled programs (union / sum), capped by the tensor's extent and by the bytes requested.
        shared = min(1.0, _union_elems(union[name]) / max(1, unique_n.get(name, 0))) if name in union else 1.0
        footprint = unique_w.get(name, 0.0) * elem * shared
        footprint = min(float(extents.get(name) or footprint), footprint, load + store)
        args_out.append({"name": name, "load_bytes": load, "store_bytes": store, "footprint_bytes": footprint,
                         "extent_bytes": float(extents.get(name, 0))})
    tensor: dict[str, float] = {}
    for cls, f in counts.tensor_flops.items():
        tensor[_dtype_class(cls)] = tensor.get(_dtype_class(cls), 0.0) + f
    return {
        "programs": programs, "grid": list(grid), "num_warps": int(launch.kwargs.get("num_warps") or 4),
        "num_stages": int(launch.kwargs.get("num_stages") or 3), "args": args_out, "tensor_flops": tensor,
        "vector_flops": counts.vector_flops, "sampled_programs": sampled_programs,
        "constexprs": [[k, v] for k, v in constexprs_of(launch).items()], "outside_lanes": counts.outside_lanes,
        "config_index": launch.config_index, "config_label": launch.config_label,
        "grid_callable": callable(launch.grid),
    }


def _dtype_class(name: str) -> str:
    from analyzers.hardware import dtype_class

    return dtype_class(name)


def _union_elems(intervals: list[tuple[int, int, int]]) -> int:
    """Elements covered by the union of [start, end) byte intervals."""
    total = 0
    span: tuple[int, int] | None = None  # the union's interval being extended
    ordered = sorted(intervals)
    elem = ordered[-1][2] if ordered else 1
    for lo, hi, _ in ordered:
        if span is None or lo > span[1]:
            if span is not None:
                total += span[1] - span[0]
            span = (lo, hi)
        else:
            span = (span[0], max(span[1], hi))
    if span is not None:
        total += span[1] - span[0]
    return total // max(1, elem)


# --- counting a reduced problem and scaling it ---------------------------------------------------------------------
#
# Interpreting a program costs about a millisecond per operation, so a 4096^3 matmul (128 K steps per program) takes
# minutes to count. Its work is a product of one factor per problem size (loads of A ~ M*K*N/BLOCK_N, flops
# ~ M*N*K, stores of C ~ M*N), so the work is counted at a reduced shape and at that shape with each reduced size
# grown once; the growth of each count along each size gives that size's factor, and the counts are carried to the
# full shape. A size that halves down to a multiple of the largest block size follows a power law (exact for
# M*N*K and for the N^2 of attention); any other size keeps its remainder modulo the largest block (the same
# ragged edge tile as at full size) and follows a straight line in the number of whole blocks (exact for work
# that is linear in that size, as tile counts and masked lanes are). Sizes are reduced only where the launches at
# the reduced shape keep the full shape's configuration (a launcher that sizes its block from the row length is
# not reduced along rows).

REDUCE_FLOOR = 128  # smallest reduced size
REDUCE_FROM = 4  # a size is reduced only from REDUCE_FROM x its floor up
REDUCED_SAMPLES = 32  # interior programs interpreted per launch at a reduced shape


@dataclass(frozen=True)
class Reduction:
    """One reduced size: counted at `size` and `grown`, carried to `full` by a power law or a straight line."""

    size: int
    grown: int
    full: int
    power: bool

    def growth(self, v0: float, v1: float) -> float | None:
        """Factor from the count at `size` (v0) to the count at `full`, given the count at `grown` (v1)."""
        if self.power:
            return (self.full / self.size) ** math.log2(v1 / v0)
        g = 1.0 + (v1 / v0 - 1.0) * (self.full - self.size) / (self.grown - self.size)
        return g if g > 0.0 else None


def reduced_shape(shape: tuple[int, ...], block: int) -> dict[int, Reduction]:
    """The sizes of `shape` worth counting smaller, by axis (empty: none). `block`: the largest block-size
    constexpr of the launches."""
    unit = max(1, int(block))
    floor = max(REDUCE_FLOOR, unit)
    out = {}
    for axis, size in enumerate(shape):
        size = int(size)
        if size < REDUCE_FROM * floor:
            continue
        r = size
        while r % 2 == 0 and r // 2 >= floor:
            r //= 2
        if r % unit == 0 and r < 2 * floor:
            out[axis] = Reduction(r, 2 * r, size, True)
        else:  # same remainder modulo the block as the full size, at least the floor
            r = size - unit * ((size - floor) // unit)
            out[axis] = Reduction(r, r + unit * max(1, r // unit), size, False)
    return out


def largest_block(works: list[dict]) -> int:
    vals = [v for w in works for _, v in w.get("constexprs") or () if isinstance(v, int) and not isinstance(v, bool)
            and v > 1 and v & (v - 1) == 0]
    return max(vals, default=1)


def same_configuration(a: list[dict], b: list[dict]) -> bool:
    """Whether two lists of counted launches launch the same configurations (constexprs, warps, stages)."""
    def key(w):
        return ([tuple(c) for c in w.get("constexprs") or ()], w.get("num_warps"), w.get("num_stages"),
                w.get("config_index"))
    return len(a) == len(b) and all(key(x) == key(y) for x, y in zip(a, b))


def _quantities(work: dict) -> dict[tuple, float]:
    out: dict[tuple, float] = {("vector_flops",): float(work.get("vector_flops") or 0.0),
                               ("outside_lanes",): float(work.get("outside_lanes") or 0)}
    for cls, f in (work.get("tensor_flops") or {}).items():
        out[("tensor_flops", cls)] = float(f)
    for a in work.get("args") or ():
        for k in ("load_bytes", "store_bytes", "footprint_bytes"):
            out[("arg", a["name"], k)] = float(a.get(k) or 0.0)
    return out


def scale_work(full: dict, base: dict, grown: list[tuple[int, dict]], reductions: dict[int, Reduction]
               ) -> dict | None:
    """The counts of `full` (a launch outlined at the full shape: grid, configuration, extents) from `base` (the
    same launch counted at the reduced shape) and `grown` ((axis, counted with that size grown)). None where the
    counts do not scale (a quantity that is zero at the reduced shape but not once a size grows)."""
    q0 = _quantities(base)
    qd = [(axis, _quantities(w)) for axis, w in grown]
    scaled: dict[tuple, float] = {}
    for key, v0 in q0.items():
        growth = 1.0
        for axis, q in qd:
            v1 = q.get(key, 0.0)
            if v0 <= 0.0:
                if v1 > 0.0:
                    return None
                continue
            g = reductions[axis].growth(v0, v1) if v1 > 0.0 else None
            if g is None:
                return None
            growth *= g
        scaled[key] = v0 * growth
    for _, q in qd:
        if any(k not in q0 and v > 0 for k, v in q.items()):
            return None
    out = dict(full)
    out["vector_flops"] = scaled[("vector_flops",)]
    out["outside_lanes"] = round(scaled[("outside_lanes",)])
    out["tensor_flops"] = {k[1]: v for k, v in scaled.items() if k[0] == "tensor_flops"}
    extents = {a["name"]: float(a.get("extent_bytes") or 0.0) for a in full.get("args") or ()}
    args = []
    for a in base.get("args") or ():
        name = a["name"]
        load, store = scaled[("arg", name, "load_bytes")], scaled[("arg", name, "store_bytes")]
        footprint = scaled[("arg", name, "footprint_bytes")]
        extent = extents.get(name, 0.0)
        footprint = min(extent or footprint, footprint, load + store)
        args.append({"name": name, "load_bytes": load, "store_bytes": store, "footprint_bytes": footprint,
                     "extent_bytes": extent})
    out["args"] = args
    out["sampled_programs"] = int(base.get("sampled_programs") or 0)
    return out


def extents_of(launch: Launch) -> dict[str, float]:
    return {name: float(ext) for _, _, name, ext in _Tensors(_bound_args(launch)).ranges}


def outline(launch: Launch) -> dict:
    """What a launch is without interpreting it: grid, programs, configuration and argument extents."""
    grid = grid_of(launch)
    return {"programs": grid[0] * grid[1] * grid[2], "grid": list(grid),
            "num_warps": int(launch.kwargs.get("num_warps") or 4),
            "num_stages": int(launch.kwargs.get("num_stages") or 3),
            "args": [{"name": n, "extent_bytes": e} for n, e in extents_of(launch).items()],
            "constexprs": [[k, v] for k, v in constexprs_of(launch).items()],
            "config_index": launch.config_index, "config_label": launch.config_label,
            "grid_callable": callable(launch.grid)}
