"""`nki.isa` in the model. The legacy generation returns each instruction's result as a new tile; the current one
(NKI >= 0.4) writes it into `dst`. Both share one implementation per instruction: the current form writes the
legacy form's result into its destination, with the destination's rules (engines write SBUF/PSUM, DMA writes any)."""

from __future__ import annotations

import numpy as np

from analyzers import nki_limits as limits
from analyzers.nki_estimate import matmul_class

from . import language as nl
from .tensor import HBM, PSUM, Access, NkiRuleError, Tensor, Unsupported, current_run, dtype_name, value_of


class _Enum:
    def __init__(self, **names):
        self.__dict__.update(names)


engine = _Enum(tensor="tensor", vector="vector", scalar="scalar", gpsimd="gpsimd", unknown="unknown", act="scalar",
               pool="gpsimd")
reduce_cmd = _Enum(idle="idle", reset="reset", reduce="reduce", reset_reduce="reset_reduce")
dge_mode = _Enum(none="none", swdge="swdge", hwdge="hwdge", unknown="unknown")
matmul_perf_mode = _Enum(none="none", double_row="double_row")
nc_version = _Enum(gen2="gen2", gen3="gen3", gen4="gen4")


tensor_engine, vector_engine, scalar_engine, gpsimd_engine, unknown_engine = (
    "tensor", "vector", "scalar", "gpsimd", "unknown")


def get_nc_version():
    return nc_version.gen3


def _raw(op, where):
    """The NumPy function of an `op=` argument (nl.add, nl.exp, np.add, ...)."""
    fn = getattr(op, "_np", None)
    if fn is not None:
        return fn
    if isinstance(op, np.ufunc) or callable(op) and getattr(op, "__module__", "") == "numpy":
        return op
    raise Unsupported(f"{where}: op {op!r}")


def _f32(x, operand, mask=None):
    v = value_of(x, operand=operand, mask=mask)
    return np.asarray(v, np.float32) if isinstance(v, np.ndarray) else np.float32(v)


def nc_matmul(stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              mask=None, **_):
    # is_transpose (moving = identity) is stationary.T @ identity: the product is the transpose.
    return nl.result(nl.tensor_engine_matmul(stationary, moving, "nisa.nc_matmul"), nl.float32, mask,
                     buffer=nl.psum, engine=None)


def nc_transpose(data, engine=None, mask=None, dtype=None, **_):
    if not isinstance(data, (Tensor, Access)) or data.ndim != 2:
        raise Unsupported("nisa.nc_transpose of a non-2-D tile")
    limit = 32 if engine == "vector" else limits.PMAX
    if max(data.shape) > limit:
        raise NkiRuleError("transpose-shape", f"nisa.nc_transpose of shape {data.shape}: both sizes must be at "
                           f"most {limit} on the {engine or 'tensor'} engine", code="NK001")
    values = np.asarray(value_of(data)).T
    if engine == "vector":
        return nl.result(values, dtype or data.dtype, mask, buffer=nl.sbuf)
    # On the Tensor Engine a transpose is a matmul by the identity: the tile's partitions stream through it.
    current_run().counters.tensor(matmul_class(dtype_name(data.dtype)), int(data.shape[0]), 0)
    return nl.result(values, dtype or data.dtype, mask, buffer=nl.psum, engine=None)


def activation(op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, dtype=None, mask=None, **_):
    x = _f32(data, "data", mask)
    s = nl.align(_f32(scale, "scale"), x)[0]
    b = 0.0 if bias is None else nl.align(_f32(bias, "bias"), x)[0]
    try:
        with np.errstate(all="ignore"):
            values = np.asarray(_raw(op, "nisa.activation")(x * s + b), np.float32)
    except ValueError:
        raise NkiRuleError("shape", f"nisa.activation: bias/scale of shapes {np.shape(b)}, {np.shape(s)} do not "
                           f"broadcast over data {x.shape}") from None
    if reduce_op is not None and reduce_res is not None:
        red = _raw(reduce_op, "nisa.activation reduce")
        _write(reduce_res, red.reduce(values.reshape(values.shape[0], -1), axis=1, keepdims=True)
               if isinstance(red, np.ufunc) else red(values.reshape(values.shape[0], -1), axis=1, keepdims=True))
    return nl.result(values, nl._result_dtype(dtype, data), mask, engine="scalar")


def activation_reduce(op, data, reduce_op, reduce_res, bias=None, scale=1.0, dtype=None, mask=None, **_):
    return activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res, dtype=dtype,
                      mask=mask)


def tensor_tensor(data1, data2, op, dtype=None, mask=None, **_):
    a, b = _f32(data1, "data1", mask), _f32(data2, "data2", mask)
    if np.shape(a) != np.shape(b):
        raise NkiRuleError("shape", f"nisa.tensor_tensor: operands of shapes {np.shape(a)} and {np.shape(b)}; "
                           "the two tiles must have the same shape")
    with np.errstate(all="ignore"):
        values = _raw(op, "nisa.tensor_tensor")(a, b)
    return nl.result(values, nl._result_dtype(dtype, data1, data2), mask)


def _scalar_step(values, op, operand, reverse, where):
    if op is None:
        return values
    fn = _raw(op, where)
    o = _f32(operand, "operand")
    if isinstance(o, np.ndarray) and o.ndim and o.shape[1:] and int(np.prod(o.shape[1:])) != 1:
        raise NkiRuleError("shape", f"{where}: a per-partition operand has shape {o.shape}; it must be a scalar or "
                           "[partitions, 1]")
    if isinstance(o, np.ndarray) and o.ndim:
        o = o.reshape((o.shape[0],) + (1,) * (values.ndim - 1))
    with np.errstate(all="ignore"):
        return fn(o, values) if reverse else fn(values, o)


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, dtype=None,
                  mask=None, **_):
    values = _f32(data, "data", mask)
    values = _scalar_step(values, op0, operand0, reverse0, "nisa.tensor_scalar")
    values = _scalar_step(values, op1, operand1, reverse1, "nisa.tensor_scalar")
    return nl.result(values, nl._result_dtype(dtype, data), mask)


def _reduce_rows(op, values, where):
    fn = _raw(op, where)
    rows = values.reshape(values.shape[0], -1)
    return fn.reduce(rows, axis=1, keepdims=True) if isinstance(fn, np.ufunc) else fn(rows, axis=1, keepdims=True)


def tensor_scalar_reduce(data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None, **_):
    """tensor_scalar with one operator, and its result reduced along the free axes into `reduce_res`."""
    values = _scalar_step(_f32(data, "data", mask), op0, operand0, reverse0, "nisa.tensor_scalar_reduce")
    _write(reduce_res, _reduce_rows(reduce_op, values, "nisa.tensor_scalar_reduce"))
    return nl.result(values, nl._result_dtype(dtype, data), mask)


def scalar_tensor_tensor(data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None, mask=None,
                         **_):
    values = _scalar_step(_f32(data, "data"), op0, operand0, reverse0, "nisa.scalar_tensor_tensor")
    other = _f32(operand1, "operand1")
    with np.errstate(all="ignore"):
        fn = _raw(op1, "nisa.scalar_tensor_tensor")
        values = fn(other, values) if reverse1 else fn(values, other)
    return nl.result(values, nl._result_dtype(dtype, data), mask)


def tensor_reduce(op, data, axis, negate=False, keepdims=False, dtype=None, mask=None, **_):
    axes = nl._axes(axis, data, "tensor_reduce")
    fn = _raw(op, "nisa.tensor_reduce")
    x = _f32(data, "data")
    values = fn.reduce(x, axis=axes, keepdims=keepdims) if isinstance(fn, np.ufunc) else \
        fn(x, axis=axes, keepdims=keepdims)
    if negate:
        values = -values
    return nl.result(values, nl._result_dtype(dtype, data), mask, work=tuple(data.shape))


def tensor_partition_reduce(op, data, dtype=None, mask=None, **_):
    fn = _raw(op, "nisa.tensor_partition_reduce")
    x = _f32(data, "data")
    values = fn.reduce(x, axis=0, keepdims=True) if isinstance(fn, np.ufunc) else fn(x, axis=0, keepdims=True)
    return nl.result(values, nl._result_dtype(dtype, data), mask, work=tuple(data.shape))


def tensor_copy(src, dtype=None, engine=None, mask=None, **_):
    return nl.copy(src, dtype=dtype, mask=mask)


def reciprocal(data, dtype=None, mask=None, **_):
    return nl.reciprocal(data, dtype=dtype, mask=mask)


def memset(shape, value, dtype=None, mask=None, **_):
    return nl.full(shape, value, dtype=dtype)


def iota(expr, dtype=None, mask=None, **_):
    return nl.result(np.asarray(expr, np.float64), dtype or nl.int32, mask)


def affine_select(pred, on_true_tile, on_false_value, dtype=None, mask=None, **_):
    values = np.where(np.asarray(pred, bool), _f32(on_true_tile, "on_true_tile"), np.float32(on_false_value))
    return nl.result(values, nl._result_dtype(dtype, on_true_tile), mask)


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, dtype=None, mask=None,
                       **_):
    """Along the free axis: r[i] = (r[i-1] op0 data0[i]) op1 data1[i], from r[-1] = initial (per partition)."""
    a, b = _f32(data0, "data0"), _f32(data1, "data1")
    f0, f1 = _raw(op0, "nisa.tensor_tensor_scan"), _raw(op1, "nisa.tensor_tensor_scan")
    a2, b2 = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    prev = np.broadcast_to(np.asarray(_f32(initial, "initial"), np.float32).reshape(-1, 1)
                           if np.ndim(initial) else np.float32(initial), (a2.shape[0], 1)).astype(np.float32)
    out = np.empty_like(a2)
    for i in range(a2.shape[1]):
        step = f0(a2[:, i:i + 1], prev) if reverse0 else f0(prev, a2[:, i:i + 1])
        prev = f1(b2[:, i:i + 1], step) if reverse1 else f1(step, b2[:, i:i + 1])
        out[:, i:i + 1] = prev
    return nl.result(out.reshape(a.shape), nl._result_dtype(dtype, data0, data1), mask)


def bn_stats(data, dtype=None, mask=None, **_):
    """Per partition, the (count, mean, variance) of the even and of the odd free elements: 6 values that only
    bn_aggr reads (their exact layout on the device is not observable through it)."""
    x = _f32(data, "data", mask).reshape(np.shape(value_of(data, mask=mask))[0], -1).astype(np.float64)
    if x.shape[1] > 512:
        raise NkiRuleError("shape", f"nisa.bn_stats reads at most 512 free elements per partition "
                           f"(nl.tile_size.bn_stats_fmax), got {x.shape[1]}")
    out = []
    for half in (x[:, 0::2], x[:, 1::2]):
        n = (~np.isnan(half)).sum(axis=1)  # elements under the mask
        with np.errstate(all="ignore"):
            out += [n, np.where(n > 0, np.nanmean(np.where(n[:, None] > 0, half, 0.0), axis=1), 0.0),
                    np.where(n > 0, np.nanvar(np.where(n[:, None] > 0, half, 0.0), axis=1), 0.0)]
    return nl.result(np.stack(out, axis=1), dtype or nl.float32)


def bn_aggr(data, dtype=None, mask=None, **_):
    """(mean, variance) per partition from bn_stats groups, combined as the parallel variance formula does."""
    s = _f32(data, "data").astype(np.float64)
    s = s.reshape(s.shape[0], -1, 3)
    n, mean, var = s[..., 0], s[..., 1], s[..., 2]
    total = n.sum(axis=1, keepdims=True)
    mu = (n * mean).sum(axis=1, keepdims=True) / np.maximum(total, 1)
    m2 = (n * (var + (mean - mu) ** 2)).sum(axis=1, keepdims=True) / np.maximum(total, 1)
    return nl.result(np.concatenate([mu, m2], axis=1), dtype or nl.float32, mask)


def dma_copy(dst, src, mask=None, dge_mode=None, **_):
    """Any memory to any memory (the DMA engines): the one instruction that writes HBM besides nl.store."""
    d = dst if isinstance(dst, Access) else Access(dst, ())
    s = src if isinstance(src, Access) else Access(src, ())
    values, m = s.read(mask)
    if int(np.prod(s.shape)) != int(np.prod(d.shape)):
        raise NkiRuleError("shape", f"nisa.dma_copy: source of shape {s.shape} and destination of shape {d.shape} "
                           "hold different numbers of elements")
    if s.shape != d.shape:
        values, m = values.reshape(d.shape), m.reshape(d.shape)
    d.write(values, m)
    current_run().counters.dma(s.buffer, d.buffer, int(m.sum()) * s.dtype.itemsize)


def _write(dst, value, accumulate=False):
    """Write an instruction's result tile into `dst` (a tile or an access of one), cast to its dtype."""
    if not isinstance(dst, (Tensor, Access)):
        raise Unsupported(f"a destination of type {type(dst).__name__}")
    if dst.buffer == HBM:
        raise NkiRuleError("buffer", "compute engines write SBUF/PSUM tiles; this destination is in HBM: write a "
                           "tile, then nisa.dma_copy it out", code="NK006")
    access = dst if isinstance(dst, Access) else Access(dst, ())
    values = value.data if isinstance(value, Tensor) else np.asarray(value)
    if values.shape != tuple(access.shape):
        if values.size == int(np.prod(access.shape)) and values.squeeze().shape == np.empty(access.shape).squeeze(
        ).shape:
            values = values.reshape(access.shape)
        else:
            try:
                np.broadcast_to(values, access.shape)
            except ValueError:
                raise NkiRuleError("shape", f"a result of shape {values.shape} written to a destination of shape "
                                   f"{tuple(access.shape)}") from None
    if accumulate:
        old, _ = access.read()
        init = access.tensor.init[access.index]
        values = np.where(init, old.astype(np.float32), 0.0) + values.astype(np.float32)
    access.write(values)


# -- the current generation (NKI >= 0.4): results go to `dst` ---------------------------------------------------

class current:
    engine, reduce_cmd, dge_mode, matmul_perf_mode, nc_version = engine, reduce_cmd, dge_mode, matmul_perf_mode, \
        nc_version
    get_nc_version = staticmethod(get_nc_version)
    dma_copy = staticmethod(dma_copy)

    @staticmethod
    def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
                  is_transpose=False, accumulate=None, **_):
        if dst.buffer != PSUM:
            raise NkiRuleError("buffer", "nisa.nc_matmul writes its result to a PSUM tile; dst is in "
                               f"{dst.buffer.upper()}")
        from .tensor import dtype_name

        if dtype_name(dst.dtype) not in limits.PSUM_ACCUMULATE_DTYPES:
            raise NkiRuleError("dtype", f"nisa.nc_matmul accumulates in float32 (or bfloat16) PSUM; dst is "
                               f"{dtype_name(dst.dtype)}")
        values = nl.tensor_engine_matmul(stationary, moving, "nisa.nc_matmul")
        access = dst if isinstance(dst, Access) else Access(dst, ())
        tile = access.tensor
        if accumulate is True and tile.by_matmul is not None:
            index = tuple(np.where(True, i, 0) for i in access.index)
            other = tile.init[index] & ~tile.by_matmul[index]
            if other.any():
                raise NkiRuleError("psum-accumulate", "nisa.nc_matmul(accumulate=True) onto PSUM that another "
                                   "instruction wrote (memset, nl.zeros, a copy): undefined on the Tensor Engine; "
                                   "the first matmul of an accumulation group must overwrite (accumulate=False)")
        # Successive matmuls into one PSUM tile accumulate; fresh PSUM starts from zero.
        _write(dst, values, accumulate=accumulate is not False)
        if tile.by_matmul is not None:
            tile.by_matmul[tuple(np.where(True, i, 0) for i in access.index)] = True

    @staticmethod
    def memset(dst, value, **_):
        _write(dst, np.full(dst.shape, float(value), np.float32))


def _current_form(name):
    legacy = globals()[name]

    def instruction(dst, *args, **kwargs):
        # The engine writes its float32 result straight in dst's dtype: no rounding through the inputs' dtype.
        if isinstance(dst, (Tensor, Access)):
            kwargs.setdefault("dtype", dst.dtype)
        _write(dst, legacy(*args, **kwargs))
    instruction.__name__ = name
    return staticmethod(instruction)


for _name in ("nc_transpose", "activation", "activation_reduce", "tensor_tensor", "tensor_scalar",
              "scalar_tensor_tensor", "tensor_reduce", "tensor_partition_reduce", "tensor_copy", "reciprocal",
              "iota", "affine_select", "tensor_tensor_scan", "bn_stats", "bn_aggr", "tensor_scalar_reduce"):
    setattr(current, _name, _current_form(_name))
