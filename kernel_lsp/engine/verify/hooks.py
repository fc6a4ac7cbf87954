"""Instrumentation of one kernel inside the checking process (never imported by the server).

- Launch counting and control: the innermost jit function's `run` is replaced on the instance, so every launch
  of the spec's kernel, direct or through @autotune / @heuristics, passes here (interpreter and GPU alike). A
  launch can be made to raise once (the fallback probe) or to be skipped (the ablation run).
- Interpreter bounds guard: the interpreter's masked load/store/atomics are wrapped so that every active lane
  must lie inside the storage of one of the running launch's tensor arguments. Without it an out-of-bounds store
  corrupts the heap and an out-of-bounds load returns garbage.
- Write races (interpreter): programs run one after another there, so a race cannot show in the results; instead
  every plain store is recorded and two programs storing different values to one address is reported.
- The twin run (provenance): after each launch, every element the launch changed is overwritten with a different
  value, so that a launcher whose answer comes from the kernel returns a different answer; one that returns
  PyTorch's answer (gated on the kernel's buffer, or filling part of the output itself) returns the same one.
- Where each element was stored (interpreter): the line of the store that last wrote every address of the call,
  so that a mismatch can point at the store that wrote the first wrong element.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from kernel_lsp.spec import unwrap_kernel

from .interp_compat import patch_interpreter


class LaunchProbe(Exception):
    """Raised in place of one kernel launch: a launcher must let it propagate."""


class OutOfBounds(Exception):
    def __init__(self, message: str, line: int | None):
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass
class Race:
    message: str
    line: int | None


@dataclass
class Launch:
    names: list[str]
    tensors: dict[str, Any]  # argument name -> tensor
    constexprs: dict[str, int]
    ranges: list[tuple[int, int, str, int, int]] = field(default_factory=list)  # start, end, name, base, elsize
    stores: list[tuple[Any, Any, int, int | None]] = field(default_factory=list)  # addrs, bits, pid, line


def _tensors(name: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _tensors(f"{name}[{i}]", v, out)
        return
    if type(value).__name__ == "TensorWrapper" and hasattr(value, "base"):  # triton.reinterpret
        value = value.base
    if hasattr(value, "data_ptr") and hasattr(value, "untyped_storage"):
        out[name] = value


def _user_line(path: str) -> int | None:
    """0-based line of the innermost frame running code of the user's file (the kernel under the interpreter)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == path:
            return frame.f_lineno - 1
        frame = frame.f_back
    return None


class KernelHooks:
    def __init__(self, kernel: Any, path: str, interpreter: bool):
        self.kernel = kernel
        self.jit = unwrap_kernel(kernel)
        self.path = path
        self.interpreter = interpreter
        self.launches = 0
        self.launch_args: list[Launch] = []
        self.probe = False
        self.skip = False
        self.twin = False
        self.provenance: Any = None  # a provenance.Provenance while a call's outputs are being traced
        self.stored: list[tuple[Any, int | None]] = []  # (addresses, line) of every store and atomic of the call
        self.violation: OutOfBounds | None = None
        self.race: Race | None = None
        self.notes: list[str] = []
        self._current: Launch | None = None
        self._orig_run: Callable[..., Any] | None = None  # the kernel's own run, while installed
        self.arg_names = list(getattr(self.jit, "arg_names", []) or [])

    # --- launches ---

    def install(self) -> None:
        if not hasattr(self.jit, "run"):
            raise TypeError(f"{type(self.jit).__name__} object is not a triton kernel (no run method)")
        self._orig_run = self.jit.run
        self.jit.run = self._run
        if self.interpreter:
            patch_interpreter()
            _Guard.install(self)

    def _original_run(self) -> Callable[..., Any]:
        if self._orig_run is None:  # only installed hooks see launches
            raise RuntimeError("the kernel's launch hooks are not installed")
        return self._orig_run

    def uninstall(self) -> None:
        if self._orig_run is not None:
            try:
                del self.jit.run
            except AttributeError:
                pass
        _Guard.active = None

    def reset(self) -> None:
        self.launches = 0
        self.launch_args = []
        self.stored = []

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("warmup"):
            return self._original_run()(*args, **kwargs)
        if self.probe:
            self.probe = False
            raise LaunchProbe("kernel-lsp probe: this launch was made to fail on purpose")
        self.launches += 1
        names = self.arg_names
        tensors: dict[str, Any] = {}
        for name, value in zip(names, args):
            _tensors(name, value, tensors)
        constexprs = {}
        for name, value in kwargs.items():
            if name in names:
                _tensors(name, value, tensors)
                if isinstance(value, int) and not isinstance(value, bool):
                    constexprs[name] = value
        launch = Launch(list(names), tensors, constexprs)
        self.launch_args.append(launch)
        if self.skip:
            return None
        if not self.twin and self.provenance is None:
            return self._launch(launch, args, kwargs)
        import torch

        with torch._C.DisableTorchFunction():  # the checker's own tensor work is not the launcher's
            # The interpreter records every address a launch stores to; on a GPU what changed shows against a copy.
            if self.provenance is not None:
                self.provenance.kernel_reads(list(tensors.values()), getattr(self.jit, "__name__", "the kernel"))
            before = None if self.interpreter else _storages(tensors)
            start = len(self.stored)
            result = self._launch(launch, args, kwargs)
            if before is None:
                written = _written_at(tensors, [addrs for addrs, _ in self.stored[start:]])
            else:
                written = _written_changed(before)
            if self.provenance is not None:
                self.provenance.kernel_wrote(written)
            if self.twin:
                _perturb(written)
        return result

    def _launch(self, launch: Launch, args: tuple, kwargs: dict) -> Any:
        tensors = launch.tensors
        if not self.interpreter:
            return self._original_run()(*args, **kwargs)
        for name, t in tensors.items():
            try:
                storage = t.untyped_storage()
                start = storage.data_ptr()
                launch.ranges.append((start, start + storage.nbytes(), name, t.data_ptr(), t.element_size()))
            except Exception:  # noqa: BLE001, S112 - a tensor without storage (meta, sparse) cannot be guarded
                continue
        _Guard.active = self
        self._current = launch
        try:
            return self._original_run()(*args, **kwargs)
        finally:
            _Guard.active = None
            self._current = None
            if self.race is None and launch.stores:
                self.race = _find_race(launch)
            launch.stores = []

    # --- the guard's callback ---

    def check(self, ptrs: Any, mask: Any, value: Any, kind: str) -> None:
        import numpy as np

        launch = self._current
        if launch is None or self.violation is not None:
            return
        addrs = np.asarray(ptrs.data)
        if addrs.dtype.kind not in "ui":
            return
        active_mask = None
        if mask is not None:
            active_mask = np.broadcast_to(np.asarray(mask.data).astype(bool), addrs.shape)
            active = addrs[active_mask]
        else:
            active = addrs.reshape(-1)
        if active.size == 0:
            return
        active = active.astype(np.uint64)
        try:
            elsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        except Exception:  # noqa: BLE001
            elsize = 1
        ok = np.zeros(active.shape, dtype=bool)
        for start, end, *_ in launch.ranges:
            ok |= (active >= np.uint64(start)) & (active + np.uint64(elsize) <= np.uint64(end))
        from triton.runtime import interpreter as interp

        pid = tuple(int(i) for i in (interp.interpreter_builder.grid_idx or (0, 0, 0)))
        line = _user_line(self.path)
        if not ok.all():
            bad = int(active[~ok][0])
            self.violation = OutOfBounds(self._describe(bad, elsize, kind, pid, line, launch), line)
            raise self.violation
        if kind != "load":
            self.stored.append((active, line))
        if kind == "store" and value is not None:
            bits = _bits(value, addrs.shape, active_mask)
            if bits is not None:
                grid = interp.interpreter_builder.grid_dim
                flat = (pid[0] * grid[1] + pid[1]) * grid[2] + pid[2]
                launch.stores.append((active, bits, flat, line))

    def _describe(self, addr: int, elsize: int, kind: str, pid: tuple, line: int | None, launch: Launch) -> str:
        # The argument the pointer most likely came from: the nearest tensor base at or below the address.
        below = [r for r in launch.ranges if r[3] <= addr]
        best = max(below, key=lambda r: r[3]) if below else (min(launch.ranges, key=lambda r: r[3])
                                                                 if launch.ranges else None)
        where = f" at line {line + 1}" if line is not None else ""
        op = {"load": "load", "store": "store", "atomic": "atomic"}[kind]
        if best is None:
            return f"out-of-bounds {op}{where} in program {pid}: the kernel has no tensor arguments"
        _, end, name, base, esize = best
        offset = (addr - base) // (esize or elsize)
        size = (end - base) // (esize or elsize)
        return (f"out-of-bounds {op}{where}: {name} + {offset} in program {pid}, "
                f"but {name} has {size} elements (missing or wrong mask?)")


def storage_view(t: Any, dtype: Any = None) -> Any:
    """The tensor's whole storage as a flat tensor of `dtype` (its own by default): views and offsets included."""
    import torch

    dtype = dtype or t.dtype
    storage = t.untyped_storage()
    whole = torch.empty(0, dtype=dtype, device=t.device)
    whole.set_(storage, 0, (storage.nbytes() // whole.element_size(),), (1,))
    return whole


def _distinct_storages(tensors: dict[str, Any]) -> list[Any]:
    out, seen = [], set()
    for t in tensors.values():
        try:
            key = t.untyped_storage().data_ptr()
            if key in seen or t.dtype.is_complex or t.untyped_storage().nbytes() < t.element_size():
                continue
            seen.add(key)
            out.append(storage_view(t))
        except Exception:  # noqa: BLE001, S112 - a tensor without plain storage (meta, sparse) is not followed
            continue
    return out


def _storages(tensors: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(whole storage, a copy of it) for each distinct storage among the launch's tensors."""
    return [(whole, whole.clone()) for whole in _distinct_storages(tensors)]


def _written_changed(storages: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """(whole storage, bool per element) of what a GPU launch changed."""
    import torch

    from .compare import changed_mask

    out = []
    for whole, before in storages:
        if whole.device.type == "cuda":
            torch.cuda.synchronize(whole.device)
        out.append((whole, changed_mask(whole, before)))
    return out


def _written_at(tensors: dict[str, Any], addresses: list[Any]) -> list[tuple[Any, Any]]:
    """(whole storage, bool per element) of the elements an interpreted launch stored to."""
    import numpy as np
    import torch

    everything = np.unique(np.concatenate(addresses)).astype(np.int64) if addresses else np.zeros(0, np.int64)
    out = []
    for whole in _distinct_storages(tensors):
        size = whole.element_size()
        offsets = everything - whole.untyped_storage().data_ptr()
        offsets = offsets[(offsets >= 0) & (offsets % size == 0) & (offsets // size < whole.numel())] // size
        mask = torch.zeros(whole.shape, dtype=torch.bool)
        mask[torch.from_numpy(offsets)] = True
        out.append((whole, mask))
    return out


_twin_launches = [0]


def _perturb(written: list[tuple[Any, Any]]) -> None:
    """Overwrite every element the launch wrote with another value. Floats grow by a random 0.5 to 1.5 times
    1 + |v|: any rounding keeps them apart, and as every offset is positive, a later launch that adds what an
    earlier one wrote (a running sum across launches) cannot cancel it out. Integers grow by 1 to 7, bools flip,
    infinities and NaN become 1."""
    import torch

    _twin_launches[0] += 1
    for whole, mask in written:
        if not bool(mask.any()):
            continue
        values = whole[mask]
        generator = torch.Generator(device=whole.device).manual_seed(0x7E1 + _twin_launches[0])
        size = (values.numel(),)
        if whole.dtype == torch.bool:
            other = ~values
        elif whole.dtype.is_floating_point:
            v = values.float()
            scale = torch.rand(size, generator=generator, device=whole.device) + 0.5
            moved = v + scale * (1 + v.abs())
            other = torch.where(torch.isfinite(v), moved, torch.ones_like(v)).to(whole.dtype)
            other = torch.where(other == values, -values - 1, other)  # rounded back onto the value (overflow)
        else:
            step = torch.randint(1, 8, size, generator=generator, device=whole.device)
            other = (values.long() + step).to(whole.dtype)
        whole[mask] = other


def stored_line(stored: list[tuple[Any, int | None]], address: int) -> int | None:
    """The line of the last store of the call that wrote `address` (None when no store did)."""
    import numpy as np

    for addrs, line in reversed(stored):
        if line is not None and bool((addrs == np.uint64(address)).any()):
            return line
    return None


def _bits(value: Any, shape: tuple, mask: Any) -> Any:
    import numpy as np

    try:
        data = np.broadcast_to(np.asarray(value.data), shape)
        data = data[mask] if mask is not None else data.reshape(-1)
        size = data.dtype.itemsize
        if size not in (1, 2, 4, 8):
            return None
        return np.ascontiguousarray(data).view(f"u{size}").astype(np.uint64)
    except Exception:  # noqa: BLE001 - an odd value type: no race record, the guard itself still applies
        return None


def _find_race(launch: Launch) -> Race | None:
    import numpy as np

    if len({s[2] for s in launch.stores}) < 2:
        return None
    addrs = np.concatenate([s[0] for s in launch.stores])
    bits = np.concatenate([s[1] for s in launch.stores])
    pids = np.concatenate([np.full(s[0].shape, s[2], dtype=np.int64) for s in launch.stores])
    recs = np.concatenate([np.full(s[0].shape, i, dtype=np.int64) for i, s in enumerate(launch.stores)])
    order = np.lexsort((recs, addrs))
    a, b, p, r = addrs[order], bits[order], pids[order], recs[order]
    clash = (a[1:] == a[:-1]) & (p[1:] != p[:-1]) & (b[1:] != b[:-1])
    if not clash.any():
        return None
    i = int(np.argmax(clash))
    first, second = launch.stores[r[i]], launch.stores[r[i + 1]]
    addr = int(a[i])
    name, offset = "memory", None
    for start, end, arg, base, esize in launch.ranges:
        if start <= addr < end:
            name, offset = arg, (addr - base) // esize
            break
    line = second[3]
    where = f" at line {line + 1}" if line is not None else ""
    target = f"{name}[{offset}]" if offset is not None else f"address {addr:#x}"
    return Race(f"write race{where}: programs {first[2]} and {second[2]} both store to {target} without atomics "
                "(on a GPU they run concurrently and one update is lost)", line)


class _Guard:
    """Wraps the interpreter builder's memory operations once per process; they act only while `active` is set."""

    active: KernelHooks | None = None
    installed = False

    @classmethod
    def install(cls, hooks: KernelHooks) -> None:
        if cls.installed:
            return
        from triton.runtime import interpreter as interp

        builder = getattr(interp, "interpreter_builder", None)
        if builder is None:
            hooks.notes.append("bounds guard unavailable in this triton version; out-of-bounds accesses may "
                               "crash the check or read garbage")
            return
        options = getattr(builder, "options", None)
        if dataclasses.is_dataclass(options) and not isinstance(options, type) and hasattr(options, "debug"):
            builder.options = dataclasses.replace(options, debug=True)  # tl.device_assert is a no-op otherwise
        wrapped = 0
        for name, kind, ptr_i, mask_i, value_i in (
            ("create_masked_load", "load", 0, 1, None),
            ("create_masked_store", "store", 0, 2, 1),
            ("create_atomic_rmw", "atomic", 1, 3, None),
            ("create_atomic_cas", "atomic", 0, None, None),
        ):
            original = getattr(builder, name, None)
            if original is None:
                continue
            setattr(builder, name, cls._wrap(original, kind, ptr_i, mask_i, value_i))
            wrapped += 1
        if wrapped < 2:
            hooks.notes.append("bounds guard incomplete in this triton version")
        cls.installed = True

    @classmethod
    def _wrap(cls, original, kind, ptr_i, mask_i, value_i):
        def guarded(*args, **kwargs):
            hooks = cls.active
            if hooks is not None:
                ptrs = args[ptr_i] if len(args) > ptr_i else None
                mask = args[mask_i] if mask_i is not None and len(args) > mask_i else None
                value = args[value_i] if value_i is not None and len(args) > value_i else None
                if ptrs is not None and hasattr(ptrs, "data"):
                    hooks.check(ptrs, mask if hasattr(mask, "data") else None, value, kind)
            return original(*args, **kwargs)

        return guarded


__all__ = ["KernelHooks", "Launch", "LaunchProbe", "OutOfBounds", "Race", "storage_view", "stored_line"]
