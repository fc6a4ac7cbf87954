"""A CPU model of NKI: NKI kernels of both API generations (`neuronxcc.nki`, and `nki` >= 0.4) run on NumPy, with
the NeuronCore's rules enforced at the kernel's line while it runs.

    from kernel_lsp.engine import nki as model
    model.install()                      # `import nki`, `import neuronxcc.nki` now resolve to the model
    out = model.run(kernel, a, b)        # -> Outcome(value=np.ndarray, counters=..., unwritten=...)

What it computes follows the NKI documentation: tiles in HBM, SBUF and PSUM, loads and stores with masks and index
arrays, float32 compute in the engines and casts (bf16 and fp8 through ml_dtypes) on write, matmuls as
stationary.T @ moving accumulated in float32 PSUM. It is a model, not AWS's simulator: every verdict built on it
says so ("kernel-lsp NKI model"). The limits come from analyzers/nki_limits.py, shared with the static rules.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sys
import types
from dataclasses import dataclass, field

import numpy as np

from . import isa, language
from .tensor import _RUN, HBM, Counters, NkiRuleError, Run, Tensor, Unsupported, UnsupportedName, dtype_name

MODEL_LABEL = "kernel-lsp NKI model"
LEGACY, CURRENT = "legacy", "current"


@dataclass
class Outcome:
    value: object  # the kernel's return value with tensors as NumPy arrays
    counters: Counters
    unwritten: int = 0  # elements of the returned tensors that nothing wrote
    writers: object = None  # like `value`: per element the kernel line (0-based) that wrote it, -1 for none
    written_inputs: list[int] = field(default_factory=list)  # positions of input arguments the kernel wrote


OUTCOMES: list[Outcome] = []  # the latest top-level runs: how a checker sees what a launcher's kernel did


class Kernel:
    """What `nki.jit` (or baremetal, benchmark, ...) makes of a function: called with arrays it runs in the model;
    called from inside a running kernel with tiles, it is a plain call."""

    __name__: str  # the function's, with its other attributes (functools.update_wrapper)

    def __init__(self, fn, generation: str):
        self.fn = fn
        self.generation = generation
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid):
        return BoundKernel(self, grid if isinstance(grid, tuple) else (grid,))

    def __call__(self, *args, **kwargs):
        if _RUN:
            return self.fn(*args, **kwargs)
        return run(self, *args, **kwargs).value

    def __repr__(self) -> str:
        return f"<NKI kernel {self.__name__} ({MODEL_LABEL})>"


class BoundKernel:
    def __init__(self, kernel: Kernel, grid: tuple):
        self.kernel, self.grid = kernel, tuple(int(g) for g in grid)

    def __call__(self, *args, **kwargs):
        if _RUN:
            raise Unsupported("an SPMD launch (kernel[grid]) from inside a running kernel")
        return run(self.kernel, *args, grid=self.grid, **kwargs).value


def to_numpy(x):
    """A NumPy array from an array, a torch tensor (bfloat16 through ml_dtypes), or the value unchanged."""
    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        import ml_dtypes
        import torch

        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        if t.dtype == torch.float8_e4m3fn:
            return t.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
        if t.dtype == torch.float8_e5m2:
            return t.view(torch.uint8).numpy().view(ml_dtypes.float8_e5m2)
        return t.numpy()
    return x


def run(kernel, *args, grid: tuple | None = None, allow_input_writes: bool = False, generation: str = "trn2",
        **kwargs) -> Outcome:
    """Run an NKI kernel (a model `Kernel` or a plain function) on NumPy arrays; inputs are never modified
    unless `allow_input_writes` (kernels that write their outputs into arguments), then they are written back."""
    fn = kernel.fn if isinstance(kernel, Kernel) else kernel
    if isinstance(kernel, BoundKernel):
        fn, grid = kernel.kernel.fn, kernel.grid
    state = Run(generation=generation, allow_input_writes=allow_input_writes)
    top = not _RUN
    _RUN.append(state)
    try:
        originals = [to_numpy(a) for a in args]
        tensors = [Tensor(np.array(a), HBM, init=True, is_input=True, account=False)
                   if isinstance(a, np.ndarray) else a for a in originals]
        kw = {k: to_numpy(v) for k, v in kwargs.items()}
        kw = {k: Tensor(np.array(v), HBM, init=True, is_input=True, account=False) if isinstance(v, np.ndarray)
              else v for k, v in kw.items()}
        grid = tuple(grid or (1,))
        state.grid = grid
        value = None
        for pid in itertools.product(*(range(g) for g in grid)):
            state.program_id, state.shared_seen = pid, 0
            got = fn(*tensors, **kw)
            if all(p == 0 for p in pid):
                value = got
        unwritten = [0]

        def convert(v, writers=False):
            if isinstance(v, Tensor):
                if writers:
                    return v.writer.copy() if v.writer is not None else np.full(v.shape, -1, np.int32)
                unwritten[0] += int((~v.init).sum())
                return v.data.copy()
            if isinstance(v, (tuple, list)):
                return type(v)(convert(x, writers) for x in v)
            return None if writers else v

        out = convert(value)
        written = [i for i, t in enumerate(tensors) if isinstance(t, Tensor) and t in state.written_inputs]
        for i in written:
            np.copyto(originals[i], tensors[i].data)
        outcome = Outcome(out, state.counters, unwritten[0], writers=convert(value, True), written_inputs=written)
        if top:
            OUTCOMES.append(outcome)
            del OUTCOMES[:-64]
        return outcome
    finally:
        _RUN.pop()


# -- the modules a kernel imports ----------------------------------------------------------------------------------

def _decorator(generation: str):
    def jit(fn=None, *args, **kwargs):
        if fn is None or not callable(fn):
            return lambda f: Kernel(f, generation)
        return Kernel(fn, generation)
    return jit


def _simulate_kernel(kernel, *args, **kwargs):
    if isinstance(kernel, BoundKernel):
        return run(kernel.kernel, *args, grid=kernel.grid, allow_input_writes=True, **kwargs).value
    return run(kernel, *args, allow_input_writes=True, **kwargs).value


def _simulate(kernel):
    return lambda *args, **kwargs: _simulate_kernel(kernel, *args, **kwargs)


class _AnyType:
    """nt.tensor[shape, dtype] and friends: annotations only."""

    def __getitem__(self, _key):
        return self

    def __call__(self, *args, **kwargs):
        return self


def _module(name: str, attrs: dict) -> types.ModuleType:
    m = types.ModuleType(name, f"{name} ({MODEL_LABEL})")

    def missing(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise UnsupportedName(f"the NKI model does not implement {name}.{attr}")
    # A module's own __getattr__ (PEP 562) answers for every name the model lacks.
    m.__dict__.update(attrs, __kernel_lsp_model__=True, __getattr__=missing)
    return m


def _language_module(name: str) -> types.ModuleType:
    attrs = {k: v for k, v in vars(language).items() if not k.startswith("_") and k not in (
        "annotations", "builtins", "math", "np", "limits", "result", "tensor_engine_matmul", "cast", "current_run",
        "mask_of",
        "matmul_class", "dtype_name", "dtype_of", "is_float", "value_of")}
    return _module(name, attrs)


def _isa_module(name: str, generation: str) -> types.ModuleType:
    skip = ("annotations", "np", "nl", "limits", "current", "value_of", "current_run", "matmul_class", "dtype_name")
    attrs = {k: v for k, v in vars(isa).items() if not k.startswith("_") and k not in skip
             and not isinstance(v, type) or k in ("engine",)}
    attrs.update(engine=isa.engine, reduce_cmd=isa.reduce_cmd, dge_mode=isa.dge_mode,
                 matmul_perf_mode=isa.matmul_perf_mode, nc_version=isa.nc_version)
    if generation == CURRENT:
        attrs.update({k: v for k, v in vars(isa.current).items() if not k.startswith("_")})
    return _module(name, attrs)


class _Allocator:
    """nki.compiler.sbuf / psum: allocation helpers whose result names the memory a tile lives in."""

    def __init__(self, buffer: str):
        self.buffer = buffer

    def __call__(self, *args, **kwargs):
        return self

    mod_alloc = alloc = auto_alloc = __call__


def _identity_decorator(fn=None, *args, **kwargs):
    return fn if callable(fn) else (lambda f: f)


def _compiler_module(name: str) -> types.ModuleType:
    return _module(name, {"sbuf": _Allocator("sbuf"), "psum": _Allocator("psum"),
                          "skip_middle_end_transformations": _identity_decorator,
                          "enable_stack_allocator": _identity_decorator, "force_auto_alloc": _identity_decorator,
                          "no_reorder": lambda *a, **k: None})


def modules() -> dict[str, types.ModuleType]:
    """The model's `nki` and `neuronxcc.nki` module trees, keyed by import name."""
    out = {}
    for root, generation in (("neuronxcc.nki", LEGACY), ("nki", CURRENT)):
        language_m = _language_module(f"{root}.language")
        isa_m = _isa_module(f"{root}.isa", generation)
        typing_m = _module(f"{root}.typing", {"tensor": _AnyType(), "mutable_tensor": _AnyType(),
                                              "scalar": _AnyType()})
        deco = _decorator(generation)
        compiler_m = _compiler_module(f"{root}.compiler")
        top = _module(root, {"jit": deco, "baremetal": deco, "benchmark": deco, "profile": deco, "trace": deco,
                             "simulate_kernel": _simulate_kernel, "simulate": _simulate, "language": language_m,
                             "isa": isa_m, "typing": typing_m, "tensor": _AnyType(),
                             "compiler": compiler_m})
        top.__path__ = []  # a package, so `import nki.language` works
        out.update({root: top, f"{root}.language": language_m, f"{root}.isa": isa_m, f"{root}.typing": typing_m,
                    f"{root}.compiler": compiler_m})
    out["neuronxcc"] = _module("neuronxcc", {"nki": out["neuronxcc.nki"]})
    out["neuronxcc"].__path__ = []
    return out


def install() -> None:
    """Make `import nki` and `import neuronxcc.nki` (and their language, isa and typing modules) the model."""
    sys.modules.update(modules())


@contextlib.contextmanager
def installed():
    """The model installed for the block; the modules it replaced come back after it."""
    names = modules()
    saved = {k: sys.modules.get(k) for k in names}
    sys.modules.update(names)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def load_file(path: str, name: str | None = None) -> types.ModuleType:
    """Import a Python file whose NKI imports resolve to the model (a file of NKI kernels, not the user's
    workspace: the checker's loader does that in its own process)."""
    import importlib.util

    name = name or "nki_model_" + os.path.splitext(os.path.basename(path))[0]
    with installed():
        found = importlib.util.spec_from_file_location(name, path)
        if found is None or found.loader is None:  # not a path ending in .py
            raise ImportError(f"cannot import {path}", name=name, path=path)
        module = importlib.util.module_from_spec(found)
        sys.modules[name] = module
        try:
            found.loader.exec_module(module)
        finally:
            sys.modules.pop(name, None)
    return module


__all__ = ["CURRENT", "LEGACY", "MODEL_LABEL", "Counters", "Kernel", "NkiRuleError", "Outcome", "Unsupported", "dtype_name",
           "install", "installed", "load_file", "modules", "run", "to_numpy"]
