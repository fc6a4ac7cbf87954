"""Tensors of the NKI model: NumPy arrays that know their memory (HBM, SBUF, PSUM), which elements were written,
and the NeuronCore rules that hold while the kernel runs.

A rule broken while a kernel runs raises `NkiRuleError` whose `line` is the kernel's own line (the innermost frame
outside this package), so a user sees the rule where they wrote the call.
"""

from __future__ import annotations

import os
import sys
import weakref
from dataclasses import dataclass, field
from types import FrameType

import ml_dtypes
import numpy as np

from analyzers import nki_limits as limits

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

HBM, SBUF, PSUM = "hbm", "sbuf", "psum"
ON_CHIP = (SBUF, PSUM)

# nl dtype names -> NumPy dtypes; bf16 and fp8 from ml_dtypes, so casts round as the hardware's formats do.
DTYPES = {
    "float32": np.dtype(np.float32), "tfloat32": np.dtype(np.float32), "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16), "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn), "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int32": np.dtype(np.int32), "uint32": np.dtype(np.uint32), "int16": np.dtype(np.int16),
    "uint16": np.dtype(np.uint16), "int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8),
    "bool_": np.dtype(np.bool_), "float64": np.dtype(np.float64), "int64": np.dtype(np.int64),
}
_NAMES: dict[np.dtype, str] = {}
for _name, _dt in DTYPES.items():
    _NAMES.setdefault(_dt, _name)


def dtype_of(value) -> np.dtype:
    """A NumPy dtype from an nl dtype, a NumPy dtype or type, or a name."""
    if isinstance(value, str):
        if value not in DTYPES:
            raise NkiRuleError("dtype", f"unknown dtype {value!r}")
        return DTYPES[value]
    return np.dtype(value)


def dtype_name(dt) -> str:
    dt = np.dtype(dt)
    return _NAMES.get(dt, dt.name)


def is_float(dt) -> bool:
    dt = np.dtype(dt)
    return dt.kind == "f" or dt in (DTYPES["bfloat16"], DTYPES["float8_e4m3"], DTYPES["float8_e5m2"])


def user_line() -> int | None:
    """0-based line of the innermost frame outside the model: where the kernel made the call."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if os.path.dirname(os.path.abspath(frame.f_code.co_filename)) != _PACKAGE_DIR:
            return frame.f_lineno - 1
        frame = frame.f_back
    return None


class NkiRuleError(Exception):
    """A NeuronCore rule the kernel broke (or an NKI call the model cannot run), at the kernel's line."""

    def __init__(self, rule: str, message: str, code: str | None = None):
        super().__init__(message)
        self.rule = rule  # "partition-dim", "psum-bank", "sbuf-capacity", "matmul-shape", "dtype", ...
        self.code = code  # the static rule with the same meaning, when there is one (NK001...)
        self.message = message
        self.line = user_line()
        self.file = _user_file()

    def __str__(self) -> str:
        where = f"line {self.line + 1}: " if self.line is not None else ""
        return f"{where}{self.message} [{self.code or self.rule}]"


def _user_site() -> tuple:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if os.path.dirname(os.path.abspath(frame.f_code.co_filename)) != _PACKAGE_DIR:
            return (frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return (None, 0)


def _user_file() -> str | None:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if os.path.dirname(os.path.abspath(frame.f_code.co_filename)) != _PACKAGE_DIR:
            return frame.f_code.co_filename
        frame = frame.f_back
    return None


class Unsupported(NkiRuleError):
    """An NKI call or argument the model does not implement: a limit of the tool, never the user's error."""

    def __init__(self, message: str):
        super().__init__("unsupported", message)


class UnsupportedName(Unsupported, AttributeError):
    """A name of the NKI API that the model does not implement (AttributeError too, so hasattr() answers)."""


@dataclass
class Counters:
    """Work the model saw, per engine: the input of the Trainium2 latency estimate (analyzers/nki_estimate.py)
    and of the benchmarks. A "step" is one element per partition: an engine works on all partitions of a tile at
    once, so a [1, 512] tile costs it as many steps as a [128, 512] one."""

    dma_bytes: int = 0  # all bytes moved by DMA (loads, stores, dma_copy)
    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    on_chip_dma_bytes: int = 0  # SBUF/PSUM to SBUF/PSUM
    matmul_flops: int = 0  # 2*K*M*N of each Tensor Engine matmul
    matmul_instructions: int = 0
    tensor_columns: dict = field(default_factory=dict)  # columns streamed through the Tensor Engine, per rate class
    vector_elements: int = 0
    vector_steps: int = 0
    scalar_elements: int = 0
    scalar_steps: int = 0
    instructions: int = 0

    def to_json(self) -> dict:
        return {k: dict(v) if isinstance(v, dict) else v for k, v in self.__dict__.items()}

    def add(self, other: Counters) -> None:
        for k, v in other.__dict__.items():
            if isinstance(v, dict):
                mine = getattr(self, k)
                for key, n in v.items():
                    mine[key] = mine.get(key, 0) + n
            else:
                setattr(self, k, getattr(self, k) + v)

    def dma(self, src_buffer: str, dst_buffer: str, nbytes: int) -> None:
        self.dma_bytes += nbytes
        if src_buffer == HBM:
            self.hbm_read_bytes += nbytes
        if dst_buffer == HBM:
            self.hbm_write_bytes += nbytes
        if src_buffer != HBM and dst_buffer != HBM:
            self.on_chip_dma_bytes += nbytes
        self.instructions += 1

    def engine(self, engine: str, shape: tuple[int, ...]) -> None:
        """One Vector or Scalar Engine instruction over a tile of `shape` (partitions first)."""
        elements = int(np.prod(shape, dtype=np.int64)) if shape else 1
        steps = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
        if engine == "scalar":
            self.scalar_elements += elements
            self.scalar_steps += steps
        else:
            self.vector_elements += elements
            self.vector_steps += steps
        self.instructions += 1

    def tensor(self, rate_class: str, columns: int, flops: int) -> None:
        self.tensor_columns[rate_class] = self.tensor_columns.get(rate_class, 0) + columns
        self.matmul_flops += flops
        self.matmul_instructions += 1
        self.instructions += 1


@dataclass
class Run:
    """The state of one kernel run: live on-chip bytes per partition, inputs, SPMD shared outputs, counters."""

    generation: str = limits.DEFAULT_GENERATION
    allow_input_writes: bool = False
    # Live on-chip bytes per partition by (buffer, allocation line): a tile allocated again at the same line
    # (the next loop iteration) takes the place of the one before, as the compiler reuses its space.
    live: dict = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)
    program_id: tuple[int, ...] = (0,)
    grid: tuple[int, ...] = (1,)
    shared: list = field(default_factory=list)  # shared_hbm tensors of the first SPMD instance, in order
    shared_seen: int = 0
    written_inputs: list = field(default_factory=list)


_RUN: list[Run] = []


def current_run() -> Run:
    if not _RUN:
        _RUN.append(Run())
    return _RUN[-1]


def _free(run: Run, key: tuple, token: object) -> None:
    if run.live.get(key, (None, 0))[0] is token:
        del run.live[key]


def _live(run: Run, buffer: str, without: tuple) -> int:
    return sum(n for (b, line), (_, n) in run.live.items() if b == buffer and (b, line) != without)


def _uninitialized(shape, dt) -> np.ndarray:
    """Fresh memory: NaN for floats (so a value never written cannot pass a comparison), a pattern for ints."""
    if is_float(dt):
        return np.full(shape, np.nan, dtype=dt)
    if dt == np.bool_:
        return np.zeros(shape, dtype=dt)
    return np.full(shape, np.iinfo(dt).min // 3 if np.iinfo(dt).min else np.iinfo(dt).max // 3, dtype=dt)


class _Operators:
    """Element-wise Python operators (legacy tiles) of a tensor and of an access to one: the nl functions do the
    work and the checks."""

    def _op(self, name, other, reverse=False):
        from . import language

        fn = getattr(language, name)
        return fn(other, self) if reverse else fn(self, other)

    def __add__(self, o): return self._op("add", o)
    def __radd__(self, o): return self._op("add", o, True)
    def __sub__(self, o): return self._op("subtract", o)
    def __rsub__(self, o): return self._op("subtract", o, True)
    def __mul__(self, o): return self._op("multiply", o)
    def __rmul__(self, o): return self._op("multiply", o, True)
    def __truediv__(self, o): return self._op("divide", o)
    def __rtruediv__(self, o): return self._op("divide", o, True)
    def __pow__(self, o): return self._op("power", o)
    def __neg__(self): return self._op("multiply", -1.0)
    def __lt__(self, o): return self._op("less", o)
    def __le__(self, o): return self._op("less_equal", o)
    def __gt__(self, o): return self._op("greater", o)
    def __ge__(self, o): return self._op("greater_equal", o)

    def __matmul__(self, o):
        from . import language
        return language.matmul(self, o)


class Tensor(_Operators):
    """A tensor in HBM or a tile in SBUF/PSUM. The first dimension of an on-chip tile is its partition axis."""

    # A reshaped view keeps the tile it views alive: the tile's SBUF/PSUM stays counted while the view is in use.
    _base: Tensor | None = None

    def __init__(self, data: np.ndarray, buffer: str, *, init: np.ndarray | bool = False, is_input: bool = False,
                 name: str | None = None, account: bool = True, partition_axis: int = 0):
        self.data = data
        self.partition_axis = partition_axis  # > 0 after leading block dimensions (nl.par_dim)
        self.buffer = buffer
        self.init = np.broadcast_to(np.asarray(init, bool), data.shape).copy()
        self.is_input = is_input
        self.name = name
        # For HBM tensors: the kernel line (0-based) that last wrote each element, -1 for none. A wrong value in
        # an output is then reported at the store that wrote it.
        self.writer = np.full(data.shape, -1, np.int32) if buffer == HBM else None
        # For PSUM tiles: which elements a matmul wrote last (nc_matmul(accumulate=True) may add only onto those).
        self.by_matmul = np.zeros(data.shape, bool) if buffer == PSUM else None
        run = current_run()
        if buffer in ON_CHIP and account:
            self._check_on_chip(run)

    def _check_on_chip(self, run: Run) -> None:
        shape = self.data.shape
        if not shape:
            return
        p = self.partition_axis
        if shape[p] > limits.PMAX:
            article = "an" if self.buffer == SBUF else "a"
            raise NkiRuleError("partition-dim", f"{article} {self.buffer.upper()} tile of shape {shape} has "
                               f"{shape[p]} partitions; SBUF and PSUM have {limits.PMAX}: split the first dimension into tiles "
                               f"of {limits.PMAX}", code="NK001")
        # Capacity is checked on what must be live at least: one block of a blocked tile (nl.par_dim after
        # block dimensions), since the compiler may rotate blocks through fewer buffers; so the error is certain.
        per_partition = int(np.prod(shape[p + 1:], dtype=np.int64)) * self.data.dtype.itemsize
        key = (self.buffer, _user_site())
        if self.buffer == PSUM:
            # Dimensions before the partition axis are separate tiles: each must fit a bank.
            tile = int(np.prod(shape[p + 1:], dtype=np.int64)) * self.data.dtype.itemsize
            if tile > limits.PSUM_BANK_BYTES:
                raise NkiRuleError("psum-bank", f"a PSUM tile of shape {shape[p:]} ({dtype_name(self.data.dtype)}) "
                                   f"needs {tile} bytes per partition; one PSUM bank holds "
                                   f"{limits.PSUM_BANK_BYTES}", code="NK002")
            live = _live(run, PSUM, key) + per_partition
            if live > limits.PSUM_PARTITION_BYTES:
                raise NkiRuleError("psum-capacity", f"live PSUM tiles need {live} bytes "
                                   f"per partition; PSUM holds {limits.PSUM_PARTITION_BYTES} "
                                   f"({limits.PSUM_BANKS} banks of {limits.PSUM_BANK_BYTES})")
        else:
            cap = limits.SBUF_PARTITION_BYTES[run.generation]
            live = _live(run, SBUF, key) + per_partition
            if live > cap:
                raise NkiRuleError("sbuf-capacity", f"live SBUF tiles need {live} bytes "
                                   f"per partition; SBUF holds {cap} per partition on {run.generation}")
        token = object()
        run.live[key] = (token, per_partition)
        weakref.finalize(self, _free, run, key, token)

    # -- array protocol ------------------------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    def __len__(self) -> int:
        return self.data.shape[0]

    def __array__(self, dtype=None, copy=None):
        # Without this NumPy would take a tile for a sequence and build an object array one Access at a time.
        raise NkiRuleError("shape", "a tile used where the kernel needs a value known when it is traced (an "
                           "index, a mask, a bound); tile values are known only on the device")

    def __repr__(self) -> str:
        return f"<NKI model {self.buffer} tensor {self.shape} {dtype_name(self.dtype)}>"

    def __getitem__(self, key) -> Access:
        return Access(self, key)

    def __setitem__(self, key, value) -> None:
        access = Access(self, key)
        if self.buffer == HBM:
            raise NkiRuleError("buffer", "an HBM tensor is written only by a DMA: use nl.store / nisa.dma_copy, "
                               "not an assignment")
        reduce = getattr(value, "loop_reduce_op", None)
        if reduce is not None:  # nl.loop_reduce: combined with what earlier iterations wrote
            new = np.asarray(value_of(value.value), np.float32)
            old, _ = access.read()
            init = self.init[access.index]
            new = np.broadcast_to(new.reshape(new.shape + (1,) * (len(access.shape) - new.ndim))
                                  if new.ndim < len(access.shape) else new, access.shape)
            access.write(np.where(init, reduce(old.astype(np.float32), new), new))
            return
        access.write(value_of(value))

    def reshape(self, shape) -> Tensor:
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        view = Tensor.__new__(Tensor)
        view.data = self.data.reshape(shape)
        view.init = self.init.reshape(shape)
        view.writer = self.writer.reshape(shape) if self.writer is not None else None
        view.by_matmul = self.by_matmul.reshape(shape) if self.by_matmul is not None else None
        view.buffer, view.is_input, view.name = self.buffer, self.is_input, self.name
        view.partition_axis = 0
        view._base = self
        return view

    def broadcast_to(self, shape):
        from . import language

        return language.broadcast_to(self, shape)

    def view(self, dtype) -> Tensor:
        return Tensor(self.data.view(dtype_of(dtype)), self.buffer, init=True, account=False)

    def ap(self, *args, **kwargs):
        raise Unsupported("access patterns (.ap); index the tensor instead")

    # Besides the element-wise operators of _Operators, a whole tensor combines masks.
    def __and__(self, o): return self._op("logical_and", o)
    def __or__(self, o): return self._op("logical_or", o)

    def __iadd__(self, other):
        """`psum_tile += nl.matmul(...)`: accumulate in place (the PSUM accumulation of the Tensor Engine)."""
        value = value_of(other)
        current = self.data.astype(np.float32)
        fresh = ~self.init  # accumulation into fresh memory starts from the value itself
        summed = np.where(fresh, 0.0, current) + np.asarray(value, np.float32)
        self.data[...] = summed.astype(self.dtype)
        self.init[...] = True
        return self

    __hash__ = object.__hash__


class Access(_Operators):
    """An indexed view of a tensor (`a[i * 128:(i + 1) * 128, 0:512]`, `a[ix, iy]`): what load, store, DMA and
    instruction operands name. Indices are resolved at once into full index arrays, NKI-style: every index array
    broadcasts against the others and each slice adds its own axis."""

    def __init__(self, tensor: Tensor, key):
        self.tensor = tensor
        self.index, self.shape = _resolve(tensor.shape, key)

    @property
    def dtype(self) -> np.dtype:
        return self.tensor.dtype

    @property
    def buffer(self) -> str:
        return self.tensor.buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"<NKI model access {self.shape} of {self.tensor!r}>"

    def _masked(self, mask):
        m = np.ones(self.shape, bool) if mask is None else np.broadcast_to(mask_of(mask), self.shape)
        for axis, (idx, size) in enumerate(zip(self.index, self.tensor.shape)):
            bad = m & ((idx < 0) | (idx >= size))
            if bad.any():
                where = tuple(int(i[0]) for i in np.nonzero(bad))
                raise NkiRuleError("out-of-bounds", f"index {int(idx[where])} on axis {axis} of a tensor of shape "
                                   f"{self.tensor.shape} is out of bounds (element {where} of the access); mask it "
                                   "or shorten the tile")
        index = tuple(np.where(m, idx, 0) for idx in self.index)
        return m, index

    def read(self, mask=None) -> tuple[np.ndarray, np.ndarray]:
        """(values, which of them the mask lets through); values outside the mask are not read."""
        m, index = self._masked(mask)
        values = self.tensor.data[index]
        init = self.tensor.init[index]
        if (m & ~init).any() and self.tensor.buffer in ON_CHIP:
            pass  # reading fresh on-chip memory yields garbage, as on the device: NaN here, caught by the check
        return values, m

    def write(self, values, mask=None) -> None:
        t = self.tensor
        if t.is_input and t.buffer == HBM:
            run = current_run()
            if not run.allow_input_writes:
                raise NkiRuleError("input-write", "the kernel writes into one of its input tensors; inputs are "
                                   "read-only: allocate an output with nl.ndarray(..., buffer=nl.shared_hbm)")
            if t not in run.written_inputs:
                run.written_inputs.append(t)
        m, index = self._masked(mask)
        values = np.asarray(values)
        if 0 < values.ndim < len(self.shape) and values.shape == tuple(self.shape[:values.ndim]):
            values = values.reshape(values.shape + (1,) * (len(self.shape) - values.ndim))  # partition-aligned
        try:
            values = np.broadcast_to(values, self.shape)
        except ValueError:
            raise NkiRuleError("shape", f"a value of shape {values.shape} cannot be written to an access of shape "
                               f"{self.shape}") from None
        sel = tuple(i[m] for i in index)
        t.data[sel] = _cast(values[m], t.dtype)
        t.init[sel] = True
        if t.by_matmul is not None:
            t.by_matmul[sel] = False
        if t.writer is not None:
            line = user_line()
            t.writer[sel] = -1 if line is None else line

    # An access used as a value (legacy `x = tile[i_p, i_f]` in an expression, through _Operators) reads the whole
    # of it; `+=` on one accumulates into what it covers.
    def __iadd__(self, other):
        values, _ = self.read()
        init = self.tensor.init[tuple(np.where(True, i, 0) for i in self.index)]
        summed = np.where(init, values.astype(np.float32), 0.0) + np.asarray(value_of(other), np.float32)
        self.write(summed)
        return self

    def __setitem__(self, key, value):
        raise Unsupported("assignment into an indexed access; index the tensor once")

    def __getitem__(self, key):
        raise Unsupported("indexing an indexed access; index the tensor once")

    @property
    def T(self):
        raise Unsupported("`.T` of a tile; use nl.transpose or nisa.nc_transpose")


def _cast(values: np.ndarray, dt: np.dtype) -> np.ndarray:
    """A cast as the engines write: float -> int rounds to nearest and saturates; float -> bf16/fp8 rounds."""
    if values.dtype == dt:
        return values
    if not is_float(dt) and dt != np.bool_ and is_float(values.dtype):
        info = np.iinfo(dt)
        with np.errstate(invalid="ignore"):
            return np.clip(np.rint(values.astype(np.float64)), info.min, info.max).astype(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dt)


def cast(values, dt) -> np.ndarray:
    return _cast(np.asarray(values), np.dtype(dt))


def mask_of(mask) -> np.ndarray:
    """An instruction's mask as booleans. NKI masks are predicates on indices (nl.arange, program ids, loop
    variables, constants), fixed when the kernel is traced; a mask made of tile values is not NKI."""
    if isinstance(mask, (Tensor, Access)):
        raise NkiRuleError("mask", "a mask computed from tile values; an NKI mask is a predicate on indices "
                           "(nl.arange, program ids, loop variables) fixed when the kernel is traced: select "
                           "values with nl.where, nisa.affine_select or nisa.tensor_copy_predicated instead")
    return np.asarray(mask, bool)


def value_of(x, *, operand: str = "operand", mask=None) -> np.ndarray | np.number | float | int:
    """The values of an instruction operand: a tile, an access of a tile, a scalar or an index expression.
    Compute engines read SBUF and PSUM only: an HBM operand is a rule error. Under an instruction's mask only the
    elements it selects are read (the others are NaN for floats: they must not reach a result)."""
    if isinstance(x, Tensor):
        if x.buffer == HBM:
            raise NkiRuleError("buffer", f"the {operand} is an HBM tensor; compute engines read SBUF/PSUM tiles: "
                               "load it (nl.load / nisa.dma_copy) first", code="NK006")
        return x.data
    if isinstance(x, Access):
        if x.buffer == HBM:
            raise NkiRuleError("buffer", f"the {operand} is a slice of an HBM tensor; compute engines read "
                               "SBUF/PSUM tiles: load it (nl.load / nisa.dma_copy) first", code="NK006")
        if mask is not None:
            try:
                np.broadcast_to(mask_of(mask), x.shape)
            except ValueError:
                mask = None  # a mask over the result's space only
        if mask is None:
            return x.read()[0]
        values, m = x.read(mask)
        if is_float(values.dtype):
            return np.where(m, values, np.nan).astype(values.dtype)
        return values
    if isinstance(x, (bool, int, float, np.number, np.ndarray)):
        return x
    raise Unsupported(f"an operand of type {type(x).__name__}")


def _resolve(shape: tuple[int, ...], key) -> tuple[tuple[np.ndarray, ...], tuple[int, ...]]:
    if not isinstance(key, tuple):
        key = (key,)
    key = tuple(k.tensor_index() if hasattr(k, "tensor_index") else k for k in key)
    if any(k is Ellipsis for k in key):
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1:]
    if len(key) > len(shape):
        raise NkiRuleError("shape", f"{len(key)} indices for a tensor of {len(shape)} dimensions {shape}")
    key = key + (slice(None),) * (len(shape) - len(key))
    parts = []
    for k, size in zip(key, shape):
        if isinstance(k, slice):
            start, stop, step = k.start, k.stop, k.step
            step = 1 if step is None else int(step)
            start = (0 if step > 0 else size - 1) if start is None else int(start)
            stop = (size if step > 0 else -1) if stop is None else int(stop)
            if start < 0 and k.start is not None:
                start += size
            if stop < 0 and k.stop is not None:
                stop += size
            parts.append(("slice", np.arange(start, stop, step)))  # not clipped: past the end is an error
        elif isinstance(k, (bool, np.bool_)):
            raise Unsupported("a boolean index")
        elif isinstance(k, (int, np.integer)):
            parts.append(("int", np.asarray(int(k) + (size if int(k) < 0 else 0))))
        else:
            arr = np.asarray(value_of(k) if isinstance(k, (Tensor, Access)) else k)
            if arr.dtype.kind not in "iu":
                if arr.dtype.kind == "f" and np.all(arr == np.floor(arr)):
                    arr = arr.astype(np.int64)
                else:
                    raise Unsupported(f"an index of dtype {arr.dtype}")
            parts.append(("array", arr))
    free = [p for p in parts if p[0] != "int"]
    if not any(kind == "array" for kind, _ in parts):
        n = len(free)
        out, axis = [], 0
        for kind, arr in parts:
            if kind == "int":
                out.append(arr)
            else:
                shape_j = [1] * n
                shape_j[axis] = arr.size
                out.append(arr.reshape(shape_j))
                axis += 1
    else:
        ndim = max([len(free)] + [arr.ndim for kind, arr in parts if kind == "array"])
        out, axis = [], 0
        for kind, arr in parts:
            if kind == "slice":
                shape_j = [1] * ndim
                shape_j[axis] = arr.size
                out.append(arr.reshape(shape_j))
            else:
                out.append(arr)
            if kind != "int":
                axis += 1
    full = np.broadcast_arrays(*out)
    return tuple(np.asarray(f, np.int64) for f in full), full[0].shape if full else ()
