"""Correctness specs: what "correct" means for a Triton kernel, declared next to it.

    from kernel_lsp.spec import spec

    @spec(kernel=add_kernel, launcher=add, reference=lambda x, y: x + y,
          shapes=[(1000,), (4096,)], dtypes=["float32", "float16"])
    def add_inputs(shape, dtype, device):
        return (torch.randn(shape, dtype=dtype, device=device), torch.randn(shape, dtype=dtype, device=device))

Standard library only: importing this module costs nothing and pulls in neither torch nor triton, so a kernel
file can declare specs whether or not it is being checked. docs/specs.md describes the fields and the checks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SPEC_ATTR = "__kernel_lsp_spec__"

# Accepted spellings of dtype names, normalised to torch's attribute names.
_DTYPE_ALIASES = {
    "float32": "float32", "fp32": "float32", "float": "float32", "f32": "float32",
    "float16": "float16", "fp16": "float16", "half": "float16", "f16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "fp64": "float64", "double": "float64", "f64": "float64",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "bool": "bool",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}
WRAPPER_TYPES = ("Autotuner", "Heuristics")  # triton's KernelInterface wrappers around a jit function


def dtype_name(dtype: Any) -> str:
    """"float16" for "fp16", "float16", torch.float16; ValueError for anything else."""
    if isinstance(dtype, str):
        key = dtype.strip().lower().removeprefix("torch.")
    elif type(dtype).__name__ == "dtype" and type(dtype).__module__ == "torch":
        key = str(dtype).removeprefix("torch.")
    else:
        raise ValueError(f"spec: dtypes: {dtype!r} is not a dtype name or a torch dtype")
    if key not in _DTYPE_ALIASES:
        raise ValueError(f"spec: dtypes: unknown dtype {dtype!r} (expected one of "
                         f"{', '.join(sorted(set(_DTYPE_ALIASES.values())))})")
    return _DTYPE_ALIASES[key]


def unwrap_kernel(kernel: Any) -> Any:
    """The jit function inside @triton.autotune / @triton.heuristics wrappers."""
    seen = 0
    while type(kernel).__name__ in WRAPPER_TYPES and hasattr(kernel, "fn") and seen < 16:
        kernel = kernel.fn
        seen += 1
    return kernel


def kernel_name_of(kernel: Any) -> str:
    inner = unwrap_kernel(kernel)
    name = getattr(inner, "__name__", None)
    if not isinstance(name, str):
        fn = getattr(inner, "fn", None)
        name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(inner).__name__


def _shape(value: Any, field: str) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                        for d in value):
        raise TypeError(f"spec: {field}: each shape must be a tuple of ints, got {value!r}")
    if any(d < 0 for d in value):
        raise ValueError(f"spec: {field}: negative size in shape {tuple(value)}")
    return tuple(value)


def _tolerance(value: Any, field: str) -> float | dict[str, float] | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"spec: {field} must not be negative, got {value}")
        return float(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                raise ValueError(f"spec: {field}[{k!r}] must be a non-negative number, got {v!r}")
            out[dtype_name(k)] = float(v)
        return out
    raise TypeError(f"spec: {field} must be None, a number or a {{dtype: number}} dict, got {value!r}")


@dataclass(frozen=True)
class Spec:
    kernel: Any
    launcher: Callable
    reference: Callable
    inputs: Callable
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    seeds: int
    atol: float | dict[str, float] | None
    rtol: float | dict[str, float] | None
    bench_shapes: tuple[tuple[int, ...], ...]
    name: str
    line: int  # 1-based line of the inputs function's def

    @property
    def kernel_name(self) -> str:
        return kernel_name_of(self.kernel)

    def tolerance(self, dtype: str, defaults: dict[str, tuple[float, float]]) -> tuple[float, float]:
        """(atol, rtol) for a dtype name: the spec's value, else `defaults[dtype]`."""
        d_atol, d_rtol = defaults.get(dtype, (0.0, 0.0))
        atol = self.atol.get(dtype, d_atol) if isinstance(self.atol, dict) else (
            d_atol if self.atol is None else self.atol)
        rtol = self.rtol.get(dtype, d_rtol) if isinstance(self.rtol, dict) else (
            d_rtol if self.rtol is None else self.rtol)
        return atol, rtol


def spec(*, kernel: Any, launcher: Callable, reference: Callable, shapes: Any, dtypes: Any = ("float32",),
         seeds: int = 2, atol: Any = None, rtol: Any = None, bench_shapes: Any = None) -> Callable:
    """Declare a correctness spec; decorates the inputs function `(shape, dtype, device) -> tuple of arguments`."""
    if kernel is None or isinstance(kernel, (str, int, float, tuple, list, dict)):
        raise TypeError(f"spec: kernel must be the @triton.jit function (or its autotuner), got {kernel!r}")
    if not callable(launcher):
        raise TypeError(f"spec: launcher must be callable, got {launcher!r}")
    if not callable(reference):
        raise TypeError(f"spec: reference must be callable, got {reference!r}")
    if isinstance(shapes, (tuple, list)) and shapes and all(isinstance(d, int) for d in shapes):
        raise TypeError(f"spec: shapes must be a list of shapes, e.g. [{tuple(shapes)!r}], got {shapes!r}")
    if not isinstance(shapes, (tuple, list)) or not shapes:
        raise ValueError(f"spec: shapes must be a non-empty list of shapes, got {shapes!r}")
    shape_list = tuple(_shape(s, "shapes") for s in shapes)
    if isinstance(dtypes, str) or type(dtypes).__module__ == "torch":
        dtypes = (dtypes,)
    if not isinstance(dtypes, (tuple, list)) or not dtypes:
        raise ValueError(f"spec: dtypes must be a non-empty list of dtype names, got {dtypes!r}")
    dtype_list = tuple(dict.fromkeys(dtype_name(d) for d in dtypes))
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"spec: seeds must be a positive int, got {seeds!r}")
    atol_v = _tolerance(atol, "atol")
    rtol_v = _tolerance(rtol, "rtol")
    if bench_shapes is None:
        bench: tuple[tuple[int, ...], ...] = (max(shape_list, key=lambda s: _numel(s)),)
    else:
        if not isinstance(bench_shapes, (tuple, list)) or not bench_shapes:
            raise ValueError(f"spec: bench_shapes must be a non-empty list of shapes, got {bench_shapes!r}")
        bench = tuple(_shape(s, "bench_shapes") for s in bench_shapes)

    def decorate(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"spec: decorates the inputs function, got {fn!r}")
        code = getattr(fn, "__code__", None)
        line = code.co_firstlineno if code is not None else 0
        # co_firstlineno points at the first decorator; the def line is what the user looks for.
        line = _def_line(fn, line)
        fn.__kernel_lsp_spec__ = Spec(  # type: ignore[attr-defined]  # any function takes attributes
            kernel, launcher, reference, fn, shape_list, dtype_list, seeds, atol_v, rtol_v, bench,
            getattr(fn, "__name__", "inputs"), line)
        return fn

    return decorate


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _def_line(fn: Callable, first: int) -> int:
    try:
        import linecache

        lines = linecache.getlines(fn.__code__.co_filename)
    except Exception:  # noqa: BLE001 - the decorator line is a fine fallback
        return first
    for i in range(max(first - 1, 0), min(len(lines), first + 200)):
        stripped = lines[i].lstrip()
        if stripped.startswith(("def ", "async def ")):
            return i + 1
    return first


def specs_in(module: Any) -> list[Spec]:
    """The specs declared at the top level of an imported module, in source order."""
    found = []
    seen = set()
    for value in list(vars(module).values()):
        s = getattr(value, SPEC_ATTR, None) if callable(value) else None
        if isinstance(s, Spec) and id(s) not in seen:
            seen.add(id(s))
            found.append(s)
    found.sort(key=lambda s: s.line)
    return found


__all__ = ["SPEC_ATTR", "Spec", "dtype_name", "kernel_name_of", "spec", "specs_in", "unwrap_kernel"]
