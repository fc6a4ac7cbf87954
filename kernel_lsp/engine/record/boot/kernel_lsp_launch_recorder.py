"""Launch recorder loaded into the processes of `kernel-lsp record -- CMD` (through sitecustomize.py beside it).

Stand-alone on purpose: the user's command may run a Python that does not have kernel-lsp installed, so this file
imports only the standard library, and triton once the user's code imports it. It never imports triton itself.

How launches are seen: when `triton.runtime.jit`, `triton.runtime.interpreter` and `triton.runtime.autotuner`
finish importing, `JITFunction.run`, `InterpretedFunction.run`, `Autotuner.run` and `Autotuner._bench` are wrapped.
triton's public hooks are not enough: under TRITON_INTERPRET=1 (how kernels are tested without a GPU) triton
compiles nothing and launches nothing, so neither `knobs.runtime.launch_enter_hook` nor `jit_post_compile_hook`
is ever called; and on a GPU `launch_enter_hook` receives the argument values only for kernels declared with a
`launch_metadata` function. The wrapped methods see every launch, compiled or interpreted, in triton 3.x.

Each process keeps its distinct launches in memory (deduplicated, counted, bounded per kernel) and writes one shard
file into $KERNEL_LSP_RECORD_DIR at exit; the `record` command merges the shards.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import traceback
from typing import Any

SHARD_FORMAT = "kernel-lsp-launch-shard-1"
_OUT = os.environ.get("KERNEL_LSP_RECORD_DIR", "")
_MAX_PER_KERNEL = int(os.environ.get("KERNEL_LSP_RECORD_MAX_PER_KERNEL", "32") or 32)
_STACK_FRAMES = 8
_WATCHED = ("triton.runtime.jit", "triton.runtime.interpreter", "triton.runtime.autotuner")

_lock = threading.Lock()
_state = threading.local()
_kernels: dict[tuple[str, str], dict] = {}  # (file, qualname) -> {"name", "line", "seen", "dropped", "launches"}
_functions: dict[int, tuple] = {}  # id(python function) -> (file, qualname, name, line, params)
_patched: list[str] = []
_errors: dict[str, int] = {}


# ------------------------------------------------------------------------------------------------------------
# Describing arguments


def _dtype_name(dtype: object) -> str:
    return str(dtype).removeprefix("torch.")


def _describe(value: Any, depth: int = 0) -> dict[str, Any]:
    if value is None:
        return {"t": "none"}
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": value}
    if isinstance(value, float):
        return {"t": "float", "v": value if value == value and value not in (float("inf"), float("-inf"))
                else repr(value)}
    if isinstance(value, str):
        return {"t": "str", "v": value[:200]}
    if hasattr(value, "data_ptr") and hasattr(value, "dtype") and hasattr(value, "shape"):
        out: dict[str, Any] = {"t": "tensor", "dtype": _dtype_name(value.dtype), "shape": [int(s) for s in value.shape]}
        try:
            out["strides"] = [int(s) for s in value.stride()]
        except Exception:  # noqa: BLE001 - a tensor-like without strides
            pass
        try:
            out["align16"] = value.data_ptr() % 16 == 0
        except Exception:  # noqa: BLE001
            pass
        device = getattr(value, "device", None)
        if device is not None:
            out["device"] = str(device)
        return out
    base = getattr(value, "base", None)
    if hasattr(value, "block_shape") and base is not None and hasattr(base, "dtype"):  # a host tensor descriptor
        out = _describe(base, depth + 1)
        out.update({"t": "tensordesc", "block_shape": [int(s) for s in value.block_shape],
                    "shape": [int(s) for s in getattr(value, "shape", out.get("shape", []))],
                    "strides": [int(s) for s in getattr(value, "strides", out.get("strides", []))]})
        return out
    if isinstance(value, (tuple, list)) and depth < 3:
        return {"t": "tuple", "items": [_describe(v, depth + 1) for v in list(value)[:64]]}
    type_name = type(value).__name__
    if type(value).__module__.startswith("triton") and type_name in ("dtype", "pointer_type"):
        return {"t": "dtype", "v": str(value)}
    if type_name == "constexpr" and hasattr(value, "value"):
        return _describe(value.value, depth + 1)
    if type(value).__module__ == "torch" and type_name == "dtype":
        return {"t": "dtype", "v": _dtype_name(value)}
    return {"t": "other", "type": f"{type(value).__module__}.{type_name}"}


def _is_constexpr(annotation: object) -> bool:
    if annotation is None:
        return False
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    return "constexpr" in str(text)


def _function(fn: Any) -> tuple | None:
    py: Any = getattr(fn, "fn", None)
    while py is not None and not hasattr(py, "__code__") and hasattr(py, "fn"):
        py = py.fn
    code = getattr(py, "__code__", None)
    if code is None:
        return None
    known = _functions.get(id(py))
    if known is None:
        import inspect

        params = []
        for p in inspect.signature(py).parameters.values():
            default = p.default if p.default is not inspect.Parameter.empty else _MISSING
            params.append((p.name, _is_constexpr(p.annotation), default))
        known = (os.path.abspath(code.co_filename), py.__qualname__, py.__name__, code.co_firstlineno, params)
        _functions[id(py)] = known
    return known


_MISSING = object()
# Frames of libraries say nothing about where the user's code launched: the stack keeps the user's own frames.
_INTERNAL = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep, os.sep + "triton" + os.sep,
             os.sep + "lib" + os.sep + "python3", os.path.abspath(__file__))


def _stack() -> list[dict]:
    frames = traceback.extract_stack()[:-3]
    out = []
    for f in reversed(frames):
        if any(part in f.filename for part in _INTERNAL) or f.filename.startswith("<"):
            continue
        out.append({"file": os.path.abspath(f.filename), "line": f.lineno, "function": f.name})
        if len(out) >= _STACK_FRAMES:
            break
    return out


_SCALARS = frozenset({int, float, bool, str, type(None)})
_TENSOR_TYPES: set[type] = set()  # types seen to have data_ptr and stride
_NO_KEY = object()
_fast: dict[tuple, tuple[dict | None, dict]] = {}  # cheap launch key -> (its launch or None if capped, kernel entry)


def _fast_value(value: Any) -> Any:
    """A hashable stand-in of an argument that decides the same launch description, cheap to compute (a launch
    on a GPU costs microseconds; describing it fully each time would slow launch-bound loops down)."""
    t = type(value)
    if t in _SCALARS:
        return (t, value)
    if t not in _TENSOR_TYPES:
        if not (hasattr(value, "data_ptr") and hasattr(value, "stride")):
            return _NO_KEY
        _TENSOR_TYPES.add(t)
    return (value.dtype, value.shape, value.stride(), value.data_ptr() % 16 == 0, value.device)


def _fast_key(fn: Any, args: tuple, kwargs: dict, grid: Any, interpreted: bool) -> tuple | None:
    parts: list[Any] = [id(fn), interpreted]  # the JITFunction object: alive as long as its module
    for value in args:
        key = _fast_value(value)
        if key is _NO_KEY:
            return None
        parts.append(key)
    for name, value in kwargs.items():
        key = _fast_value(value)
        if key is _NO_KEY:
            return None
        parts.append((name, key))
    if not callable(grid):  # a grid function's result follows from the arguments
        try:
            parts.append(("grid", tuple(grid) if isinstance(grid, (tuple, list)) else grid))
        except TypeError:
            return None
    tuner = getattr(_state, "autotuner", None)
    if tuner is not None:
        parts.append((id(tuner), getattr(_state, "benchmarking", False), id(getattr(tuner, "best_config", None))))
    try:
        return tuple(parts) if hash(tuple(parts)) is not None else None
    except TypeError:
        return None


def _record(fn: Any, args: tuple, kwargs: dict, grid: Any, interpreted: bool) -> None:
    key = _fast_key(fn, args, kwargs, grid, interpreted)
    if key is not None and key in _fast:
        known, kernel = _fast[key]
        with _lock:
            kernel["seen"] += 1
            if known is None:
                kernel["dropped"] += 1
            else:
                known["count"] += 1
        return
    info = _function(fn)
    if info is None:
        return
    file, qualname, name, line, params = info
    bound: dict[str, object] = {}
    for (pname, _, _), value in zip(params, args):
        bound[pname] = value
    options = {}
    for k, v in kwargs.items():
        if any(k == p[0] for p in params):
            bound[k] = v
        elif isinstance(v, (bool, int, float, str)) or v is None:
            options[k] = v
    described = {}
    for pname, constexpr, default in params:
        if pname in bound:
            d = _describe(bound[pname])
        elif default is not _MISSING:
            d = _describe(default)
            d["default"] = True
            bound[pname] = default
        else:
            continue
        if constexpr:
            d["constexpr"] = True
        described[pname] = d
    for k in ("debug", "instrumentation_mode", "fpsan_homomorphic_casts"):  # triton fills these in itself
        options.pop(k, None)
    grid_value = None
    try:
        g = grid(bound) if callable(grid) else grid
        grid_value = [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]
    except Exception:  # noqa: BLE001 - a grid function that needs more than the arguments
        pass
    launch: dict[str, Any] = {"args": described, "grid": grid_value, "options": options, "interpreted": interpreted}
    tuner = getattr(_state, "autotuner", None)
    if tuner is not None:
        if getattr(_state, "benchmarking", False):
            launch["autotune"] = {"trial": True}
        else:
            cfg = getattr(tuner, "best_config", None)
            kw = getattr(cfg, "kwargs", None)
            if isinstance(kw, dict):
                launch["autotune"] = {"chosen": {k: v for k, v in kw.items() if isinstance(v, (bool, int, float, str))},
                                      "num_warps": getattr(cfg, "num_warps", None),
                                      "num_stages": getattr(cfg, "num_stages", None),
                                      "configs": len(getattr(tuner, "configs", []) or [])}
    ident = json.dumps(launch, sort_keys=True, default=str)
    with _lock:
        entry = _kernels.get((file, qualname))
        if entry is None:
            entry = _kernels[(file, qualname)] = {"name": name, "line": line, "seen": 0, "dropped": 0, "launches": {}}
        entry["seen"] += 1
        known = entry["launches"].get(ident)
        if known is not None:
            known["count"] += 1
            if key is not None:
                _fast[key] = (known, entry)
            return
        if len(entry["launches"]) >= _MAX_PER_KERNEL:
            entry["dropped"] += 1
            if key is not None:
                _fast[key] = (None, entry)
            return
    launch["stack"] = _stack()
    launch["count"] = 1
    with _lock:
        launch = entry["launches"].setdefault(ident, launch)
        if key is not None:
            _fast[key] = (launch, entry)


# ------------------------------------------------------------------------------------------------------------
# Wrapping triton


def _note_error(where: str) -> None:
    _errors[where] = _errors.get(where, 0) + 1


def _wrap_run(orig, interpreted: bool):
    def run(self, *args, grid=None, warmup=False, **kwargs):
        if not warmup:
            try:
                _record(self, args, kwargs, grid, interpreted)
            except Exception:  # noqa: BLE001 - recording must never change what the user's code does
                _note_error("record")
        return orig(self, *args, grid=grid, warmup=warmup, **kwargs)

    run.__wrapped__ = orig  # type: ignore[attr-defined]
    run.__name__ = getattr(orig, "__name__", "run")
    run.__doc__ = getattr(orig, "__doc__", None)
    return run


def _holding(orig, attr: str, value, default):
    """`orig` wrapped so that, while it runs, `_state.<attr>` holds value(self) (then what it held before, or
    `default`): the autotuner whose run is under way, whether it is benchmarking."""
    def wrapper(self, *args, **kwargs):
        outer = getattr(_state, attr, default)
        setattr(_state, attr, value(self))
        try:
            return orig(self, *args, **kwargs)
        finally:
            setattr(_state, attr, outer)

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(orig, "__name__", "wrapper")
    return wrapper


def _patch(name: str, module: Any) -> None:
    try:
        if name == "triton.runtime.jit":
            cls = module.JITFunction
            if "run" in vars(cls) and not hasattr(cls.run, "__wrapped__"):
                cls.run = _wrap_run(cls.run, False)
                _patched.append("JITFunction.run")
        elif name == "triton.runtime.interpreter":
            cls = module.InterpretedFunction
            if "run" in vars(cls) and not hasattr(cls.run, "__wrapped__"):
                cls.run = _wrap_run(cls.run, True)
                _patched.append("InterpretedFunction.run")
        elif name == "triton.runtime.autotuner":
            cls = module.Autotuner
            if not hasattr(cls.run, "__wrapped__"):
                cls.run = _holding(cls.run, "autotuner", lambda tuner: tuner, None)
                _patched.append("Autotuner.run")
            if hasattr(cls, "_bench") and not hasattr(cls._bench, "__wrapped__"):
                cls._bench = _holding(cls._bench, "benchmarking", lambda _: True, False)
                _patched.append("Autotuner._bench")
    except Exception:  # noqa: BLE001 - a triton whose classes look different: recorded as missing, never fatal
        _note_error(f"patch {name}")


class _Loader:
    """Runs the real loader, then wraps what `_patch` wants of the module."""

    def __init__(self, loader, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        _patch(self._name, module)

    def __getattr__(self, attr: str):
        return getattr(self._loader, attr)


class _Watch:
    """A meta-path finder that only watches for triton's runtime modules and hands their loading to the others."""

    def find_spec(self, name, path=None, target=None):
        if name not in _WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, name)
                return spec
        return None


def _write() -> None:
    if not _OUT:
        return
    triton = sys.modules.get("triton")
    kernels = []
    with _lock:
        for (file, qualname), entry in _kernels.items():
            kernels.append({"file": file, "qualname": qualname, "name": entry["name"], "line": entry["line"],
                            "seen": entry["seen"], "dropped": entry["dropped"],
                            "launches": list(entry["launches"].values())})
    shard = {"format": SHARD_FORMAT, "pid": os.getpid(), "argv": list(sys.argv)[:20],
             "triton": getattr(triton, "__version__", None) if triton is not None else None,
             "interpret": os.environ.get("TRITON_INTERPRET", "") not in ("", "0"),
             "patched": _patched, "errors": _errors, "kernels": kernels}
    try:
        os.makedirs(_OUT, exist_ok=True)
        path = os.path.join(_OUT, f"shard-{os.getpid()}-{id(shard):x}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(shard, f, default=str)
        os.replace(path + ".tmp", path)
    except OSError:
        pass


def install() -> None:
    """Start recording in this process: patch triton if it is loaded, else when it is."""
    if getattr(sys, "_kernel_lsp_recording", False):
        return
    sys._kernel_lsp_recording = True  # type: ignore[attr-defined]
    for name in _WATCHED:
        if name in sys.modules:
            _patch(name, sys.modules[name])
    sys.meta_path.insert(0, _Watch())
    atexit.register(_write)
