"""Which bytes of memory hold values the kernel produced during one launcher call (checking process only).

An answer counts only if the kernel's launches in that call produced it. Per storage, a byte mask records what the
kernel wrote (every element its launches changed, and on the interpreter every address they stored to) and a copy
of the values it wrote. While the launcher runs, a torch-function mode follows what PyTorch does with them (a
dispatch mode would see more, but entering one imports torch._dynamo: seconds per checking process):
- a result computed only from kernel-produced tensors is kernel-produced too: a dtype cast, a copy, a view, a
  final reduction over the kernel's partial results (`partials.sum(0)`), a combination of its outputs;
- anything that also reads another tensor (`x + y + 0 * out`, `torch.where(out == x - y, x + y, out)`) is not,
  and a PyTorch write into kernel memory (`out[256:] = ...`, `out.copy_(x + y)`) clears the mark there;
- once the launcher reads the values of a tensor the kernel did not produce into Python (`.item()`, `.tolist()`,
  `torch.equal`, `bool(...)`), nothing it computes afterwards counts as the kernel's: such numbers can carry any
  answer into an expression that looks like it only uses the kernel's output.
The launcher may also provide elements itself, which are reported, not refused: a constant fill of a whole new
tensor (`torch.zeros`, `torch.full`) and a copy of one of its inputs (`x.clone()`), which the kernel then writes
into in part. At return every element of every output must be kernel-produced or launcher-provided and still hold
the value recorded for it (a write around PyTorch, through NumPy or another thread, shows there). Elements still
holding the allocation's NaN fill are left to the comparison ("never written"); zeros cannot carry a wrong answer
that the comparison would miss, and a zero-initialised output the kernel stores only nonzero values into is common.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .compare import never_written
from .hooks import storage_view

# Results that do not depend on their tensor arguments' values (shapes and dtypes only).
_FACTORIES = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like",
              "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "empty", "zeros", "ones", "full",
              "rand", "randn", "randint", "arange", "tensor", "as_tensor", "from_numpy", "empty_strided", "linspace",
              "eye", "randperm", "normal", "bernoulli", "multinomial"}
_CONSTANT_FILLS = {"zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones",
                   "new_full", "fill_", "zero_"}
# Writes that do not read what they overwrite.
_PURE_WRITES = {"copy_", "__setitem__", "fill_", "zero_", "normal_", "uniform_", "random_", "exponential_",
                "geometric_", "log_normal_", "cauchy_", "bernoulli_", "set_", "resize_", "index_put_",
                "masked_fill_", "scatter_", "index_copy_", "index_fill_", "masked_scatter_", "put_"}
# Calls that turn a tensor's values into Python values.
_TO_PYTHON = {"item", "tolist", "__float__", "__int__", "__bool__", "__index__", "__complex__", "numpy",
              "equal", "allclose", "__array__", "__format__", "__repr__", "__str__", "__reduce_ex__"}
# The launcher's own copies of its inputs (reported, not refused): casts, copies, and rearrangements that compute
# nothing (a pad, a reshape that copies, a concatenation of inputs).
_COPIES = {"clone", "contiguous", "to", "copy_", "float", "half", "bfloat16", "double", "detach", "cpu", "cuda",
           "pad", "constant_pad_nd", "reshape", "flatten", "view", "permute", "transpose", "t", "expand", "repeat",
           "cat", "concat", "concatenate", "stack", "narrow", "flip", "roll", "squeeze", "unsqueeze", "type",
           "movedim", "tile", "__getitem__", "split", "chunk", "unbind", "select", "index_select",
           "gather", "unfold", "as_strided", "expand_as", "view_as", "reshape_as", "broadcast_to", "swapaxes"}
# Factories that turn values from outside PyTorch (NumPy arrays, Python lists) into a tensor: what they hold was
# computed somewhere, so they count as computed values, not as an allocation.
_FROM_VALUES = {"tensor", "as_tensor", "from_numpy", "frombuffer", "asarray"}
# A kernel's tensor argument, or the kernel-produced operands of one PyTorch call in the launcher, larger than this
# share of the launcher's input elements is work, not a pre- or post-step (a one-element max, a sum of per-block
# partials, per-row statistics of a matrix with at least this many columns).
WORK_SHARE = 1 / 8
# Below this many elements nothing is judged as work: at tiny shapes a legitimate step is as large as the work.
WORK_FLOOR = 64


@dataclass
class Region:
    data: Any  # the storage's bytes (uint8, kept alive so that its address is not reused during the call)
    marked: Any  # bool per byte: produced by the kernel (stored, or computed from what it produced)
    provided: Any  # bool per byte: the launcher's own constant fill or copy of an input
    expected: Any  # the value of each marked or provided byte when it was marked


@dataclass
class Unproduced:
    count: int  # elements neither produced by the kernel nor provided by the launcher
    total: int
    index: tuple[int, ...] | None
    by: str | None  # the PyTorch operation that last wrote or made the memory, "torch.where"
    provided: Any  # bool per element of the output: the launcher's own (not the kernel's), or None
    laundered: str | None  # the call that read other values into Python, "item"


def _tensors(values: list | tuple) -> list:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += [t for t in v if isinstance(t, torch.Tensor)]
    return out


def _destination(t: Any, key: Any) -> Any:
    """The elements `t[key] = value` writes: a view for basic indexing; the whole tensor when the key selects
    elements by a tensor (no view exists: every element is treated as overwritten)."""
    try:
        with torch._C.DisableTorchFunction():
            view = t[key]
        if isinstance(view, torch.Tensor) and view.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            return view
    except Exception:  # noqa: BLE001, S110 - an index torch rejects raised already in the real call
        pass
    return t


def _per_element(byte_mask: Any, t: Any) -> Any:
    """A per-byte mask of t's storage as one bool per element of `t` (all of the element's bytes)."""
    size = t.element_size()
    usable = byte_mask.numel() // size * size
    elements = byte_mask[:usable].view(-1, size).all(1)
    return torch.as_strided(elements, t.shape, t.stride(), t.storage_offset())


def _byte_index(t: Any) -> Any:
    """Byte offsets within its storage of every byte of every element of `t`, shape (*t.shape, element size)."""
    size = t.element_size()
    starts = torch.as_strided(torch.arange(t.untyped_storage().nbytes() // size + 1, device=t.device),
                              t.shape, t.stride(), t.storage_offset()) * size
    return starts.unsqueeze(-1) + torch.arange(size, device=t.device)


class Provenance(TorchFunctionMode):
    def __init__(self, inputs: list | None = None) -> None:
        super().__init__()
        self.regions: dict[int, Region] = {}
        self.made_by: dict[int, str] = {}  # storage address -> the last PyTorch op that made or wrote it
        self.inputs = {t.untyped_storage().data_ptr() for t in inputs or () if isinstance(t, torch.Tensor)}
        self.input_elements = sum(t.numel() for t in inputs or () if isinstance(t, torch.Tensor))
        self.laundered: str | None = None
        self.computed: dict[int, str] = {}  # storage address -> the PyTorch op that computed values into it
        self.work: list[str] = []  # the launcher's PyTorch work that a kernel relayed or finished: one line each
        self.handed: list[tuple[str, Any]] = []  # (op, copy) of smaller PyTorch-computed tensors a launch read

    def _region(self, t: Any) -> Region:
        ptr = t.untyped_storage().data_ptr()
        region = self.regions.get(ptr)
        if region is None:
            data = storage_view(t, torch.uint8)
            region = Region(data, torch.zeros_like(data, dtype=torch.bool), torch.zeros_like(data, dtype=torch.bool),
                            data.clone())
            self.regions[ptr] = region
        return region

    # --- what the kernel wrote ---

    def kernel_wrote(self, written: list[tuple[Any, Any]]) -> None:
        """After a launch: (whole storage as elements, bool per element it wrote) for each of its tensors."""
        for whole, mask in written:
            region = self._region(whole)
            size = whole.element_size()
            marks = torch.zeros_like(region.marked)
            marks[: mask.numel() * size] = mask.repeat_interleave(size)
            region.marked |= marks
            region.provided &= ~marks
            region.expected[marks] = region.data[marks]
            self.made_by.pop(whole.untyped_storage().data_ptr(), None)

    # --- what PyTorch does with it ---

    def _produced(self, t: Any) -> bool:
        if t.numel() == 0:
            return True
        region = self.regions.get(t.untyped_storage().data_ptr())
        return region is not None and bool(_per_element(region.marked, t).all())

    def _set(self, t: Any, state: str, op: str) -> None:
        """state: "kernel" (produced from the kernel's values), "provided" (the launcher's own fill or copy of an
        input) or "other" (anything else PyTorch computed)."""
        if not isinstance(t, torch.Tensor) or t.numel() == 0 or t.device.type == "meta":
            return
        ptr = t.untyped_storage().data_ptr()
        if state == "computed":
            self.computed[ptr] = op
            state = "other"
        else:
            self.computed.pop(ptr, None)
        if state != "kernel":
            self.made_by[ptr] = op
            if state == "other" and ptr not in self.regions:
                return
        region = self._region(t)
        if t.is_contiguous():  # one run of bytes: no index tensor (32 bytes per element) for large outputs
            start = t.storage_offset() * t.element_size()
            index = slice(start, start + t.numel() * t.element_size())
        else:
            index = _byte_index(t).reshape(-1)
        region.marked[index] = state == "kernel"
        region.provided[index] = state == "provided"
        region.expected[index] = region.data[index]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name == "__get__":  # a property (.T, .mT, .data): a view of the same memory
            return result
        op = f"torch.{name}" if name else "torch"
        tensors_in = _tensors(args) + _tensors(list(kwargs.values()))
        if name in _TO_PYTHON:
            if self.laundered is None and not all(self._produced(t) for t in tensors_in):
                self.laundered = name
            return result
        written = []
        if name == "__setitem__" and args and isinstance(args[0], torch.Tensor):
            written = [_destination(args[0], args[1])]
            tensors_in = tensors_in[1:]
        elif (name.endswith("_") and not name.startswith("__")) or name.startswith("__i"):
            written = [args[0]] if args and isinstance(args[0], torch.Tensor) else []
            if name in _PURE_WRITES:
                tensors_in = tensors_in[1:]
        if isinstance(kwargs.get("out"), torch.Tensor):
            written.append(kwargs["out"])
            tensors_in = [t for t in tensors_in if t is not kwargs["out"]]
        state = self._state(name, tensors_in, written)
        for t in written:
            self._set(t, state, op)
        if not written:
            ins = {t.untyped_storage().data_ptr() for t in tensors_in if t.device.type != "meta"}
            for t in _tensors(result if isinstance(result, (list, tuple)) else [result]):
                if t.device.type != "meta" and t.untyped_storage().data_ptr() not in ins:
                    self._set(t, state, op)  # a new tensor; views share their input's storage and marks
        return result

    def _state(self, name: str, sources: list, written: list) -> str:
        if name in _CONSTANT_FILLS and not sources or (name in _CONSTANT_FILLS and name.endswith("_like")):
            whole = all(w.numel() * w.element_size() == w.untyped_storage().nbytes() for w in written)
            return "provided" if whole else "other"
        if name in _FROM_VALUES:
            return "computed"
        if name in _FACTORIES:
            return "other"
        if (name in _COPIES and sources and all(self._input_like(t) for t in sources)
                and all(w.numel() * w.element_size() == w.untyped_storage().nbytes() for w in written)):
            return "provided"
        if sources and self.laundered is None and all(self._produced(t) for t in sources):
            if name not in _COPIES and name not in _PURE_WRITES:
                used = sum(t.numel() for t in sources)
                if used > max(WORK_SHARE * self.input_elements, WORK_FLOOR):
                    self.work.append(f"torch.{name} computed on {used} kernel-produced elements")
            return "kernel"
        if name in _COPIES and sources and all(self._input_like(t) or self._produced(t) for t in sources):
            return "other"
        return "computed"

    def _input_like(self, t: Any) -> bool:
        """An input of the launcher, or the launcher's own copy of one (a cast, a pad)."""
        if t.device.type == "meta":
            return False
        ptr = t.untyped_storage().data_ptr()
        if ptr in self.inputs:
            return ptr not in self.computed
        region = self.regions.get(ptr)
        return region is not None and bool(_per_element(region.provided, t).all())

    # --- what the kernel reads ---

    def kernel_reads(self, tensors: list, kernel: str) -> None:
        """Before a launch: its tensor arguments. One that PyTorch computed in the launcher, or that existed before
        the call (a cache, a global), and is large next to the inputs carries work the kernel only relays."""
        limit = max(WORK_SHARE * self.input_elements, WORK_FLOOR)
        seen = set()
        for t in tensors:
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            ptr = t.untyped_storage().data_ptr()
            if ptr in seen:
                continue
            seen.add(ptr)
            if ptr in self.computed and t.numel() <= limit:
                if t.numel() >= 2 and sum(c.numel() for _, c in self.handed) < 1 << 20:
                    self.handed.append((self.computed[ptr], t.detach().clone()))
            elif ptr in self.computed:
                self.work.append(f"{kernel} was handed {t.numel()} elements that {self.computed[ptr]} computed "
                                 "in the launcher")
            elif t.numel() > limit and ptr not in self.inputs and ptr not in self.regions and ptr not in self.made_by:
                self.work.append(f"{kernel} was handed {t.numel()} elements of a tensor that existed before this "
                                 "call (a cache or a global, not the inputs)")

    def relayed(self, outputs: list) -> str | None:
        """A smaller PyTorch-computed tensor a launch read whose nonzero values reappear, bit for bit, as at least
        half of its values in an output: the kernel relayed PyTorch's answer for part of the output (a tail)."""
        with torch._C.DisableTorchFunction():
            for op, values in self.handed:
                flat = values.reshape(-1)
                flat = flat[flat != 0]
                if flat.numel() < 2:
                    continue
                for out in outputs:
                    if not isinstance(out, torch.Tensor) or out.dtype != flat.dtype or not out.numel():
                        continue
                    found = int(torch.isin(flat, out.reshape(-1)).sum())
                    if 2 * found >= flat.numel():
                        return (f"{found} of the output's values are ones that {op} computed in the launcher and a "
                                "launch was handed")
        return None

    # --- the verdict on one output ---

    def unproduced(self, t: Any) -> Unproduced:
        """Elements of `t` neither produced by the kernel nor provided by the launcher (the module's docstring)."""
        total = t.numel()
        if total == 0 or t.device.type == "meta":
            return Unproduced(0, total, None, None, None, self.laundered)
        with torch._C.DisableTorchFunction():
            ptr = t.untyped_storage().data_ptr()
            region = self.regions.get(ptr)
            if region is None:
                kernel = torch.zeros(t.shape, dtype=torch.bool, device=t.device)
                provided = kernel.clone()
            else:
                intact = region.data == region.expected
                kernel = _per_element(region.marked & intact, t).clone()
                provided = _per_element(region.provided & intact, t).clone() & ~kernel
            zero = t == 0
            ok = kernel | provided | zero
            unwritten = never_written(t)
            if unwritten is not None:
                ok |= unwritten
            judged = total - (int(unwritten.sum()) if unwritten is not None else 0)
            bad = ~ok
            count = int(bad.sum())
            index_bad = tuple(int(i) for i in bad.nonzero()[0]) if count else None
            provided &= ~zero
        return Unproduced(count, judged, index_bad, self.made_by.get(ptr), provided if bool(provided.any()) else None,
                          self.laundered)


__all__ = ["Provenance", "Unproduced"]
