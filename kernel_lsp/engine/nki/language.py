"""`nki.language` (and `neuronxcc.nki.language`) in the model: memory, indexing, loops, and the tile operations,
computed in float32 as the engines do and written in the result's dtype."""

from __future__ import annotations

import builtins
import math
import warnings

import numpy as np

from analyzers import nki_limits as limits
from analyzers.nki_estimate import matmul_class

from .tensor import (
    DTYPES,
    HBM,
    ON_CHIP,
    PSUM,
    SBUF,
    Access,
    NkiRuleError,
    Tensor,
    Unsupported,
    cast,
    current_run,
    dtype_name,
    dtype_of,
    is_float,
    mask_of,
    value_of,
)

# -- dtypes and buffers ----------------------------------------------------------------------------------------

float32, tfloat32, float16, bfloat16 = (DTYPES[n] for n in ("float32", "tfloat32", "float16", "bfloat16"))
float8_e4m3, float8_e5m2, float8_e4m3fn = (DTYPES[n] for n in ("float8_e4m3", "float8_e5m2", "float8_e4m3fn"))
int32, uint32, int16, uint16, int8, uint8 = (DTYPES[n] for n in ("int32", "uint32", "int16", "uint16", "int8",
                                                                 "uint8"))
bool_ = DTYPES["bool_"]

sbuf, psum, hbm, shared_hbm, private_hbm = "sbuf", "psum", "hbm", "shared_hbm", "private_hbm"


class tile_size:
    pmax = limits.PMAX
    gemm_stationary_fmax = limits.STATIONARY_FMAX
    gemm_moving_fmax = limits.MOVING_FMAX
    psum_fmax = limits.PSUM_BANK_BYTES // 4
    psum_bank_fmax = limits.PSUM_BANK_BYTES // 4
    bn_stats_fmax = 512


class NKIObject:
    """Base class of the plain objects NKI kernels pass around (tile descriptions, configs)."""


class _ParDim(int):
    """A size marked as the partition dimension (nl.par_dim): dimensions before it are blocks of tiles."""


def par_dim(n):
    return _ParDim(int(n))


def _buffer(buffer) -> str:
    buffer = getattr(buffer, "buffer", buffer)  # an allocator of nki.compiler names its memory
    if buffer is None or buffer == sbuf:
        return SBUF
    if buffer == psum:
        return PSUM
    if buffer in (hbm, shared_hbm, private_hbm):
        return HBM
    raise Unsupported(f"buffer {buffer!r}")


def _shape(shape) -> tuple[int, ...]:
    shape = shape if isinstance(shape, (tuple, list)) else (shape,)
    return tuple(int(s) for s in shape)


def _partition_axis(shape) -> int:
    shape = shape if isinstance(shape, (tuple, list)) else (shape,)
    return next((i for i, s in enumerate(shape) if isinstance(s, _ParDim)), 0)


def _allocate(shape, dtype, buffer, fill=None, name=None) -> Tensor:
    partition_axis = _partition_axis(shape)
    shape, dt, where = _shape(shape), dtype_of(dtype if dtype is not None else float32), _buffer(buffer)
    from .tensor import _uninitialized

    if where == HBM and buffer == shared_hbm:
        run = current_run()
        # Every SPMD instance allocates the same shared output: instances after the first get the first's.
        if run.program_id != tuple(0 for _ in run.program_id):
            i = run.shared_seen
            run.shared_seen += 1
            if i < len(run.shared):
                return run.shared[i]
    data = _uninitialized(shape, dt) if fill is None else np.full(shape, fill, dtype=np.float64).astype(dt)
    t = Tensor(data, where, init=fill is not None, name=name, partition_axis=partition_axis)
    if where == HBM and buffer == shared_hbm and builtins.all(p == 0 for p in current_run().program_id):
        current_run().shared.append(t)
    return t


def ndarray(shape, dtype=None, buffer=None, name="", **_):
    return _allocate(shape, dtype, buffer, name=name)


def empty(shape, dtype=None, buffer=None, name="", **_):
    return _allocate(shape, dtype, buffer, name=name)


def zeros(shape, dtype=None, buffer=None, name="", **_):
    return _allocate(shape, dtype, buffer, 0.0, name)


def ones(shape, dtype=None, buffer=None, name="", **_):
    return _allocate(shape, dtype, buffer, 1.0, name)


def full(shape, fill_value, dtype=None, buffer=None, name="", **_):
    return _allocate(shape, dtype, buffer, float(fill_value), name)


def zeros_like(a, dtype=None, buffer=None, **_):
    return _allocate(a.shape, dtype or a.dtype, buffer, 0.0)


def ones_like(a, dtype=None, buffer=None, **_):
    return _allocate(a.shape, dtype or a.dtype, buffer, 1.0)


def empty_like(a, dtype=None, buffer=None, **_):
    return _allocate(a.shape, dtype or a.dtype, buffer)


def full_like(a, fill_value, dtype=None, buffer=None, **_):
    return _allocate(a.shape, dtype or a.dtype, buffer, float(fill_value))


def shared_constant(constant, dtype=None, **_):
    """A constant HBM tensor built from a NumPy array at trace time; read-only, like an input."""
    data = np.asarray(constant)
    data = cast(data, dtype_of(dtype)) if dtype is not None else data.copy()
    return Tensor(data, HBM, init=True, is_input=True, account=False)


# -- indices and loops -----------------------------------------------------------------------------------------

def arange(*args):
    return np.arange(*[int(a) for a in args])


class _Grid(tuple):
    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[1]

    @property
    def y(self):
        return self[2]

    @property
    def z(self):
        return self[3]


class _MGrid:
    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        return _Grid(np.ogrid[key]) if len(key) > 1 else _Grid((np.ogrid[key],))


mgrid = _MGrid()


def ds(start, size):
    return slice(int(start), int(start) + int(size))


def affine_range(*args, **_):
    return range(*[int(a) for a in args])


sequential_range = static_range = affine_range


def _bound(value, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise Unsupported(f"{what} of type {type(value).__name__} (a bound held in a register, read on the "
                          "device)")
    return int(value)


def dynamic_range(start, stop=None, step=1):
    """nl.dynamic_range: a loop on the device; here its bounds must be known when the kernel runs."""
    if stop is None:
        start, stop = 0, start
    if not isinstance(step, (int, np.integer)) or isinstance(step, bool) or step <= 0:
        raise NkiRuleError("loop", f"the step of a device loop must be a positive integer known at compile time, "
                           f"not {step!r}")
    return range(_bound(start, "a loop bound"), _bound(stop, "a loop bound"), int(step))


def fori_loop(lower, upper, body_fun, step=1):
    """nl.fori_loop (NKI >= 0.6): body_fun(i) for i in range(lower, upper, step); the body's side effects are
    the loop's only result, so carried state lives in tiles."""
    if not callable(body_fun):
        raise NkiRuleError("loop", f"nl.fori_loop's body must be a function of the iteration value, not "
                           f"{type(body_fun).__name__}")
    for i in dynamic_range(lower, upper, step):
        body_fun(i)


def program_id(axis=0):
    run = current_run()
    return run.program_id[axis] if axis < len(run.program_id) else 0


def num_programs(axis=None):
    run = current_run()
    if axis is None:
        return run.grid
    return run.grid[axis] if axis < len(run.grid) else 1


def program_ndim():
    return len(current_run().grid)


def device_print(prefix, value, **_):
    print(prefix, value_of(value) if isinstance(value, (Tensor, Access)) else value)


# -- data movement ---------------------------------------------------------------------------------------------

def _source(src, what):
    if not isinstance(src, (Tensor, Access)):
        raise Unsupported(f"{what} of a {type(src).__name__}")
    return src if isinstance(src, Access) else Access(src, ())


def load(src, mask=None, dtype=None, **_):
    """HBM (or SBUF) -> a new SBUF tile; elements outside the mask stay unwritten."""
    access = _source(src, "nl.load")
    values, m = access.read(mask)
    out = _allocate(access.shape, dtype or access.dtype, sbuf)
    out.data[m] = cast(values[m], out.dtype)
    out.init[...] = m
    current_run().counters.dma(access.buffer, SBUF, int(m.sum()) * access.dtype.itemsize)
    return out


def store(dst, value, mask=None, **_):
    """An SBUF tile -> HBM; only the elements inside the mask are written."""
    access = _source(dst, "nl.store")
    if access.buffer != HBM:
        raise NkiRuleError("buffer", "nl.store writes to HBM; this destination is an on-chip tile (assign to it, "
                           "or use nl.copy)")
    if isinstance(value, (Tensor, Access)) and value.buffer == HBM:
        raise NkiRuleError("buffer", "nl.store takes an SBUF tile as its value, not an HBM tensor (use "
                           "nisa.dma_copy for HBM to HBM)")
    if not isinstance(value, (Tensor, Access, int, float, bool, np.number)):
        raise NkiRuleError("host-value", f"nl.store of a {type(value).__module__.split('.')[0]} "
                           f"{type(value).__name__}: a value computed on the host inside the kernel (NumPy or torch "
                           "on a tensor's .data), not by the NeuronCore; store a tile the kernel computed")
    access.write(value_of(value, operand="value"), mask)
    n = int(np.prod(access.shape)) if mask is None else int(np.broadcast_to(mask, access.shape).sum())
    current_run().counters.dma(SBUF, HBM, n * access.dtype.itemsize)


def load_transpose2d(src, mask=None, dtype=None, **_):
    access = _source(src, "nl.load_transpose2d")
    values, m = access.read(mask)
    if len(access.shape) != 2:
        raise NkiRuleError("shape", f"nl.load_transpose2d loads a 2-D tile, got shape {access.shape}")
    out = _allocate(access.shape[::-1], dtype or access.dtype, sbuf)
    out.data[m.T] = cast(values.T[m.T], out.dtype)
    out.init[...] = m.T
    current_run().counters.dma(access.buffer, SBUF, int(m.sum()) * access.dtype.itemsize)
    return out


# -- results -----------------------------------------------------------------------------------------------------

def _result_dtype(dtype, *operands):
    if dtype is not None:
        return dtype_of(dtype)
    dts = [o.dtype for o in operands if isinstance(o, (Tensor, Access))]
    if not dts:
        return float32
    if builtins.any(d == float32 for d in dts):
        return float32
    return dts[0]


def result(values, dtype, mask=None, buffer=sbuf, engine: str | None = "vector", work=None) -> Tensor:
    """A new on-chip tile holding `values` (computed in float32), cast to `dtype`, counted as one instruction of
    `engine` ("vector", "scalar"; None: counted by the caller) over the shape `work` (default: the result's)."""
    values = np.asarray(values)
    out = _allocate(values.shape, dtype, buffer)
    if mask is not None:
        mask = mask_of(mask)
        try:
            np.broadcast_to(mask, values.shape)
        except ValueError:
            # A mask over a reduction's input space: keep the axes the result still has.
            squeezed = mask.reshape([d for d in mask.shape if d != 1] or [1])
            mask = squeezed if squeezed.ndim <= values.ndim and np.broadcast_shapes(
                _pad(squeezed.shape, values.ndim), values.shape) == values.shape else None
            if mask is not None:
                mask = mask.reshape(_pad(mask.shape, values.ndim))
    if mask is None:
        out.data[...] = cast(values, out.dtype)
        out.init[...] = True
    else:
        m = np.broadcast_to(mask_of(mask), values.shape)
        out.data[m] = cast(values[m], out.dtype)
        out.init[...] = m
    if engine is not None:
        current_run().counters.engine(engine, tuple(np.shape(work) if work is not None and not isinstance(
            work, tuple) else work or values.shape))
    return out


def _pad(shape, ndim):
    return tuple(shape) + (1,) * (ndim - len(shape))


def _f32(x, operand="operand", mask=None):
    v = value_of(x, operand=operand, mask=mask)
    if isinstance(v, np.ndarray):
        return v.astype(np.float32) if is_float(v.dtype) or v.dtype.kind in "iub" else v
    return np.float32(v) if isinstance(v, (float, np.floating)) else v


def _check_tile_args(*xs):
    for x in xs:
        if isinstance(x, (Tensor, Access)) and x.ndim and x.shape[0] > limits.PMAX and x.buffer in ON_CHIP:
            raise NkiRuleError("partition-dim", f"an operand has {x.shape[0]} partitions, more than "
                               f"{limits.PMAX}", code="NK001")


def align(a, b):
    """NKI broadcasts tiles from the partition axis: a [128] operand against [128, 512] is [128, 1]."""
    na, nb = np.ndim(a), np.ndim(b)
    if na and nb and na != nb:
        if na < nb and np.shape(b)[:na] == np.shape(a):
            a = np.reshape(a, np.shape(a) + (1,) * (nb - na))
        elif nb < na and np.shape(a)[:nb] == np.shape(b):
            b = np.reshape(b, np.shape(b) + (1,) * (na - nb))
    return a, b


def _binary(np_fn, name):
    def op(x, y, dtype=None, mask=None, **_):
        _check_tile_args(x, y)
        a, b = align(_f32(x, mask=mask), _f32(y, mask=mask))
        try:
            values = np_fn(a, b)
        except ValueError:
            raise NkiRuleError("shape", f"nl.{name}: operands of shapes {np.shape(a)} and {np.shape(b)} do not "
                               "broadcast") from None
        if not isinstance(x, (Tensor, Access)) and not isinstance(y, (Tensor, Access)):
            return values  # index arithmetic or scalars
        return result(values, _result_dtype(dtype, x, y), mask)
    op.__name__ = name
    op._np = np_fn
    return op


# Functions the Scalar Engine evaluates (its activation table); the rest of nl's arithmetic is Vector Engine work.
_ACTIVATIONS = {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh", "silu",
                "gelu_apprx_sigmoid", "softplus", "mish", "arctan", "tan", "sin", "cos", "erf", "square"}


def _unary(np_fn, name):
    engine = "scalar" if name in _ACTIVATIONS else "vector"

    def op(x, dtype=None, mask=None, **_):
        _check_tile_args(x)
        with np.errstate(all="ignore"):
            values = np_fn(np.asarray(_f32(x, mask=mask), np.float32))
        return result(values, _result_dtype(dtype, x), mask, engine=engine)
    op.__name__ = name
    op._np = np_fn
    return op


def _gelu(x):
    from math import sqrt

    erf = np.vectorize(math.erf, otypes=[np.float64])
    return (0.5 * x * (1.0 + erf(x / sqrt(2.0)))).astype(np.float32)


def _gelu_tanh(x):
    return (0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))).astype(np.float32)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float32])(x)


add = _binary(np.add, "add")
subtract = _binary(np.subtract, "subtract")
multiply = _binary(np.multiply, "multiply")
divide = _binary(np.divide, "divide")
maximum = _binary(np.maximum, "maximum")
minimum = _binary(np.minimum, "minimum")
power = _binary(np.power, "power")
equal = _binary(np.equal, "equal")
not_equal = _binary(np.not_equal, "not_equal")
greater = _binary(np.greater, "greater")
greater_equal = _binary(np.greater_equal, "greater_equal")
less = _binary(np.less, "less")
less_equal = _binary(np.less_equal, "less_equal")
logical_and = _binary(np.logical_and, "logical_and")
logical_or = _binary(np.logical_or, "logical_or")
logical_xor = _binary(np.logical_xor, "logical_xor")
bitwise_and = _binary(lambda a, b: np.bitwise_and(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)),
                      "bitwise_and")
bitwise_or = _binary(lambda a, b: np.bitwise_or(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)),
                     "bitwise_or")
mod = fmod = _binary(np.mod, "mod")

exp = _unary(np.exp, "exp")
log = _unary(np.log, "log")
sqrt = _unary(np.sqrt, "sqrt")
rsqrt = _unary(lambda x: 1.0 / np.sqrt(x), "rsqrt")
tanh = _unary(np.tanh, "tanh")
sigmoid = _unary(lambda x: 1.0 / (1.0 + np.exp(-x)), "sigmoid")
relu = _unary(lambda x: np.maximum(x, 0.0), "relu")
gelu = _unary(_gelu, "gelu")
gelu_apprx_tanh = _unary(_gelu_tanh, "gelu_apprx_tanh")
silu = _unary(lambda x: x / (1.0 + np.exp(-x)), "silu")
gelu_apprx_sigmoid = _unary(lambda x: x / (1.0 + np.exp(-1.702 * x)), "gelu_apprx_sigmoid")
softplus = _unary(lambda x: np.logaddexp(0.0, x), "softplus")
mish = _unary(lambda x: x * np.tanh(np.logaddexp(0.0, x)), "mish")
arctan = _unary(np.arctan, "arctan")
tan = _unary(np.tan, "tan")
square = _unary(np.square, "square")
abs = _unary(np.abs, "abs")
negative = _unary(np.negative, "negative")
reciprocal = _unary(lambda x: 1.0 / x, "reciprocal")
sin = _unary(np.sin, "sin")
cos = _unary(np.cos, "cos")
erf = _unary(_erf, "erf")
sign = _unary(np.sign, "sign")
floor = _unary(np.floor, "floor")
ceil = _unary(np.ceil, "ceil")
trunc = _unary(np.trunc, "trunc")
logical_not = _unary(np.logical_not, "logical_not")
copy_values = _unary(lambda x: x, "copy")
identity = copy_values


def copy(x, dtype=None, mask=None, **_):
    if isinstance(x, (Tensor, Access)) and x.buffer == HBM:
        raise NkiRuleError("buffer", "nl.copy copies on-chip tiles; load HBM data with nl.load", code="NK006")
    values = value_of(x)
    dt = dtype_of(dtype) if dtype is not None else (x.dtype if isinstance(x, (Tensor, Access)) else float32)
    return result(values, dt, mask)


def _reducer(np_fn, name, nan_fn=None):
    def op(x, axis, dtype=None, keepdims=False, mask=None, **_):
        _check_tile_args(x)
        axes = _axes(axis, x, name)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # rows the mask leaves empty
            # Under a mask, the elements it leaves out are NaN and are left out of the reduction.
            fn = nan_fn if mask is not None and nan_fn is not None else np_fn
            values = fn(np.asarray(_f32(x, mask=mask), np.float32), axis=axes, keepdims=keepdims)
        return result(values, _result_dtype(dtype, x), mask, work=tuple(x.shape))
    op.__name__ = name
    op._np = np_fn
    return op


def _axes(axis, x, name):
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(int(a) + (x.ndim if int(a) < 0 else 0) for a in axes)
    if 0 in axes and x.buffer in ON_CHIP:
        raise NkiRuleError("reduce-axis", f"nl.{name} along axis 0 reduces across partitions; engines reduce "
                           "along free axes (transpose first, or use nisa.tensor_partition_reduce)")
    return axes


sum = _reducer(np.sum, "sum", np.nansum)
max = _reducer(np.max, "max", np.nanmax)
min = _reducer(np.min, "min", np.nanmin)
mean = _reducer(np.mean, "mean", np.nanmean)
prod = _reducer(np.prod, "prod", np.nanprod)
all = _reducer(np.all, "all")
any = _reducer(np.any, "any")


def softmax(x, axis, dtype=None, mask=None, **_):
    axes = _axes(axis, x, "softmax")
    v = np.asarray(_f32(x), np.float32)
    e = np.exp(v - v.max(axis=axes, keepdims=True))
    return result(e / e.sum(axis=axes, keepdims=True), _result_dtype(dtype, x), mask)


def where(condition, x, y, dtype=None, mask=None, **_):
    values = np.where(np.asarray(_f32(condition)).astype(bool), _f32(x), _f32(y))
    return result(values, _result_dtype(dtype, x, y), mask)


def broadcast_to(x, shape, **_):
    shape = _shape(shape)
    v = np.asarray(value_of(x))
    v = v.reshape(_pad(v.shape, len(shape))) if v.ndim < len(shape) and v.shape == shape[:v.ndim] else v
    try:
        return result(np.broadcast_to(v, shape), x.dtype if hasattr(x, "dtype") else float32)
    except ValueError:
        raise NkiRuleError("shape", f"a tile of shape {v.shape} does not broadcast to {shape}") from None


def expand_dims(x, axis, **_):
    return result(np.expand_dims(value_of(x), axis), x.dtype)


def _matmul_checks(stat_shape, mov_shape, stat_dt, mov_dt, where):
    k, m = stat_shape[0], int(np.prod(stat_shape[1:]))
    k2, n = mov_shape[0], int(np.prod(mov_shape[1:]))
    if k != k2:
        raise NkiRuleError("matmul-shape", f"{where}: the operands' partition (contraction) sizes differ: {k} and "
                           f"{k2}", code="NK003")
    if k > limits.PMAX:
        raise NkiRuleError("matmul-shape", f"{where}: contraction size {k} is more than {limits.PMAX}: split K "
                           "into tiles of 128 and accumulate in PSUM", code="NK003")
    if m > limits.STATIONARY_FMAX:
        raise NkiRuleError("matmul-shape", f"{where}: the stationary operand's free size {m} is more than "
                           f"{limits.STATIONARY_FMAX}", code="NK003")
    if n > limits.MOVING_FMAX:
        raise NkiRuleError("matmul-shape", f"{where}: the moving operand's free size {n} is more than "
                           f"{limits.MOVING_FMAX}", code="NK003")
    from .tensor import dtype_name

    for dt in (stat_dt, mov_dt):
        if dtype_name(dt) not in limits.MATMUL_INPUT_DTYPES:
            raise NkiRuleError("dtype", f"{where}: the Tensor Engine does not read {dtype_name(dt)} operands "
                               f"(it reads {', '.join(sorted(limits.MATMUL_INPUT_DTYPES))})")
    return k, m, n


def tensor_engine_matmul(stationary, moving, where, strict=True) -> np.ndarray:
    """stationary.T @ moving in float32, after the Tensor Engine's checks: [K, M] x [K, N] -> [M, N]. `strict`:
    operands must already be in SBUF (nisa); nl.matmul leaves the copy out of PSUM to the compiler."""
    for name, x in (("stationary", stationary), ("moving", moving)):
        if not isinstance(x, (Tensor, Access)):
            raise Unsupported(f"{where}: a {type(x).__name__} as the {name} operand")
        if x.buffer != SBUF and (strict or x.buffer == HBM):
            raise NkiRuleError("buffer", f"{where}: the {name} operand must be an SBUF tile, not "
                               f"{x.buffer.upper()}", code="NK006" if x.buffer == HBM else None)
    k, m, n = _matmul_checks(stationary.shape, moving.shape, stationary.dtype, moving.dtype, where)
    s = np.asarray(value_of(stationary), np.float32).reshape(k, m)
    v = np.asarray(value_of(moving), np.float32).reshape(k, n)
    rate = builtins.max((matmul_class(dtype_name(x.dtype)) for x in (stationary, moving)),
               key=("fp8", "bf16", "fp32").index)  # the slower operand sets the rate
    current_run().counters.tensor(rate, n, 2 * k * m * n)
    return (s.astype(np.float64).T @ v.astype(np.float64)).astype(np.float32)


def matmul(x, y, transpose_x=False, mask=None, **_):
    """Legacy nl.matmul: x @ y (or x.T @ y with transpose_x) into a new float32 PSUM tile."""
    if transpose_x:
        values = tensor_engine_matmul(x, y, "nl.matmul", strict=False)
    else:
        if not isinstance(x, (Tensor, Access)) or x.ndim != 2:
            raise Unsupported("nl.matmul of a non-2-D operand")
        # x [M, K] is transposed onto the partitions first, as the compiler does.
        if x.shape[0] > limits.STATIONARY_FMAX or x.shape[1] > limits.PMAX:
            raise NkiRuleError("matmul-shape", f"nl.matmul: x of shape {x.shape} exceeds the Tensor Engine's "
                               f"[{limits.STATIONARY_FMAX}, {limits.PMAX}] stationary limit", code="NK003")
        xt = Tensor(np.ascontiguousarray(np.asarray(value_of(x)).T), SBUF, init=True, account=False)
        values = tensor_engine_matmul(xt, y, "nl.matmul", strict=False)
    return result(values, float32, mask, buffer=psum, engine=None)


def transpose(x, dtype=None, mask=None, **_):
    if not isinstance(x, (Tensor, Access)) or x.ndim != 2:
        raise Unsupported("nl.transpose of a non-2-D operand")
    if builtins.max(x.shape) > limits.PMAX:
        raise NkiRuleError("transpose-shape", f"a transpose of shape {x.shape}: both sizes must be at most "
                           f"{limits.PMAX}", code="NK001")
    return result(np.asarray(value_of(x)).T, _result_dtype(dtype, x), mask)


class _LoopReduced:
    def __init__(self, value, op):
        self.value, self.loop_reduce_op = value, op


def loop_reduce(x, op, loop_indices=None, dtype=None, mask=None, **_):
    """The value of `x` combined by `op` with what earlier iterations assigned to the same destination."""
    from .isa import _raw

    return _LoopReduced(x, _raw(op, "nl.loop_reduce"))


def static_cast(x, dtype):
    return copy(x, dtype=dtype)
