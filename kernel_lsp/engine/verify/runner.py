"""The checking process: `python -m kernel_lsp.engine.verify.runner`, one per request (see process.py).

Reads the request (JSON) on stdin and writes events, one JSON object per line, to the file descriptor named by
KERNEL_LSP_VERIFY_FD: {"event": "start", ...} before each spec, {"event": "verdict", ...} after it, "errors" for
import and spec problems, "done" at the end. Whatever the user's code prints goes to stderr. The parent kills
this process on a timeout, memory overuse or cancellation; faulthandler writes the Python stack to stderr on a
fatal signal or SIGUSR1, which is where the parent finds the line a crash or hang belongs to.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import random
import secrets
import signal
import sys
import threading
import time
import traceback
from typing import Any

from kernel_lsp.spec import Spec, kernel_name_of, specs_in, unwrap_kernel
from kernel_lsp.spec import _def_line as _spec_def_line

from ..gpu import gpu_present
from .compare import DEFAULT_TOLERANCES, bitwise_equal, compare, not_following, prefill
from .hooks import KernelHooks, LaunchProbe, stored_line
from .integrity import Snapshot, describe_findings, describe_replaced, patch_line, scan
from .loading import UserModuleError, load_user_module, user_line
from .results import CaseResult, Verdict, verdict_to_dict

FD_ENV = "KERNEL_LSP_VERIFY_FD"
BF16_NOTE = ("bfloat16 cases ran with float32 inputs on the CPU interpreter (its bfloat16 arithmetic is wrong "
             "upstream); outputs were rounded to bfloat16 and compared at bfloat16 tolerance")


class Failure(Exception):
    """A case that ends the spec: rejected, out-of-bounds, error, out-of-memory."""

    def __init__(self, status: str, message: str, line: int | None = None, failed_check: str | None = None):
        super().__init__(message)
        self.status, self.message, self.line, self.failed_check = status, message, line, failed_check
        self.case: CaseResult | None = None


def _def_line(fn: Any) -> int:
    """0-based def line of a function (skipping its decorators), 0 when unknown."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return 0
    return max(_spec_def_line(fn, code.co_firstlineno) - 1, 0)


def _raw_function(kernel: Any) -> Any:
    inner = unwrap_kernel(kernel)
    return getattr(inner, "fn", inner)


def _autotuner(kernel: Any) -> Any:
    while kernel is not None and type(kernel).__name__ in ("Autotuner", "Heuristics"):
        if type(kernel).__name__ == "Autotuner":
            return kernel
        kernel = getattr(kernel, "fn", None)
    return None


def _config_label(config: Any) -> str:
    parts = [f"{k}={v}" for k, v in getattr(config, "kwargs", {}).items()]
    for attr in ("num_warps", "num_stages"):
        if getattr(config, attr, None) is not None:
            parts.append(f"{attr}={getattr(config, attr)}")
    return ", ".join(parts)


@contextlib.contextmanager
def _forced_config(autotuner: Any, config: Any):
    """The autotuner launches exactly `config`: with a single config it neither benchmarks nor needs a driver."""
    if autotuner is None or config is None:
        yield
        return
    saved = autotuner.configs
    autotuner.configs = [config]
    try:
        yield
    finally:
        autotuner.configs = saved


_ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty"}


def _fill_mode(nan: bool):
    """A torch-function mode (not a replaced name: `torch.empty` stays the object the file imported) that fills
    memory the launcher allocates: with the NaN fill on a call whose outputs are compared, so that memory the kernel
    does not write cannot carry an earlier answer and shows as "never written"; with random finite values on the
    other calls. Which fill a call gets is the checker's secret: a launcher that reads its fresh memory to tell a
    checked call from another finds a call of the other kind among the ones it is judged on."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Fill(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if getattr(func, "__name__", "") in _ALLOCATIONS and isinstance(result, torch.Tensor):
                with torch._C.DisableTorchFunction():
                    if nan:
                        prefill(result)
                    elif result.numel() and result.device.type != "meta":
                        with torch.no_grad():
                            if result.dtype.is_floating_point:
                                result.uniform_(-4.0, 4.0)
                            elif result.dtype == torch.bool:
                                result.random_(0, 2)
                            elif not result.is_complex():
                                result.random_(0, 100)
            return result

    return Fill()


def _source_of(kernel: Any) -> str | None:
    """A jit function's body, without decorators and its name: the same code under any name compares equal."""
    import inspect
    import textwrap

    fn = getattr(kernel, "fn", kernel)
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    lines = text.splitlines()
    while lines and not lines[0].lstrip().startswith(("def ", "async def ")):
        lines.pop(0)
    if not lines:
        return None
    return "\n".join([lines[0].split("(", 1)[-1]] + lines[1:])


@contextlib.contextmanager
def _triton_launches(launched: list):
    """While the reference runs, every Triton launch (of any jit function, under any name) is recorded as
    (name, code). Class-level for the duration of the reference only: the launcher never runs under it."""
    classes = []
    with contextlib.suppress(Exception):
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
    with contextlib.suppress(Exception):
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    saved = [(cls, cls.__dict__.get("run")) for cls in classes if "run" in cls.__dict__]

    def wrap(original):
        def run(self, *args, **kwargs):
            if not kwargs.get("warmup"):
                fn = getattr(self, "fn", None)
                launched.append((getattr(fn, "__name__", type(self).__name__), _source_of(self)))
            return original(self, *args, **kwargs)
        return run

    try:
        for cls, original in saved:
            cls.run = wrap(original)
        yield
    finally:
        for cls, original in saved:
            cls.run = original


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _lower_precision(dtype: Any) -> Any:
    """The next coarser float dtype, to test whether a tolerance can tell the two apart."""
    import torch

    return {torch.float64: torch.float32, torch.float32: torch.float16, torch.float16: torch.float8_e4m3fn,
            torch.bfloat16: torch.float8_e5m2}.get(dtype)


def _tree(value: Any, fn) -> Any:
    if isinstance(value, tuple):
        return tuple(_tree(v, fn) for v in value)
    if isinstance(value, list):
        return [_tree(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _tree(v, fn) for k, v in value.items()}
    return fn(value)


def _clone(value: Any) -> Any:
    import torch

    return _tree(value, lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v)


def _tensors_of(value: Any) -> list:
    import torch

    out: list = []
    _tree(value, lambda v: out.append(v) if isinstance(v, torch.Tensor) else None)
    return out


def _outputs(value: Any) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _exception_line(exc: BaseException, path: str) -> int | None:
    """The innermost line of the user's file among the exception and its causes (the kernel line for errors
    raised inside an interpreted kernel, which the interpreter re-raises from the launcher)."""
    line = None
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = user_line(current.__traceback__, path)
        if found is not None:
            line = found
        current = current.__cause__ or current.__context__
    return line


def _root(exc: BaseException) -> BaseException:
    seen = set()
    while (cause := exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = cause
    return exc


def _chain_named(exc: BaseException, name: str) -> bool:
    """Whether the exception or one it was raised from has this class name (triton's errors, by name: the
    checking process may not import every triton version's error module)."""
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if any(cls.__name__ == name for cls in type(current).__mro__):
            return True
        current = current.__cause__ or current.__context__
    return False


def _chain_has(exc: BaseException, kind: type) -> bool:
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _is_oom(exc: BaseException) -> bool:
    root = _root(exc)
    text = str(root)
    return (_chain_has(exc, MemoryError) or type(root).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in text or "out of memory" in text.lower())


def _describe(exc: BaseException) -> str:
    root = _root(exc)
    text = str(root).strip().splitlines()[0] if str(root).strip() else ""
    return f"{type(root).__name__}: {text}" if text else type(root).__name__


class SpecCheck:
    def __init__(self, spec: Spec, path: str, device: str, interpreter: bool, device_label: str,
                 kernel_line: int, snapshot: Snapshot | None = None, source: str = ""):
        import torch

        self.spec, self.path, self.device, self.interpreter = spec, path, device, interpreter
        self.device_label = device_label
        self.torch = torch
        self.hooks = KernelHooks(spec.kernel, path, interpreter)
        self.kernel = spec.kernel_name
        self.launcher_line = _def_line(spec.launcher) if _in_file(spec.launcher, path) else None
        self.kernel_line = kernel_line  # 0-based def line of the kernel
        self.returned: list = []  # earlier outputs, kept alive so that their addresses stay unique
        self.notes: list[str] = []
        self.snapshot, self.source = snapshot, source
        self.blocks: set[int] = set()  # constexpr values of the kernel's launches: block sizes the checker can see
        self.chosen: set[tuple] = set()  # (shape, dtype) of the cases kernel-lsp derived itself
        self.trivial: list[bool] = []  # per case with elements: an all-zero output would have passed too
        self.loose: dict[str, str | None] = {}  # dtype -> why its tolerance is looser than it warrants (None: not)
        self.loose_elements: dict[str, int] = {}  # dtype -> elements the rounding test of `loose` saw
        self.compared = 0  # elements compared over every case

    def _untouched(self, what: str) -> None:
        """The functions the checker relies on are still the ones it started with, after user code ran."""
        changed = self.snapshot.changed() if self.snapshot is not None else []
        if changed:
            raise Failure("not-checked", patched_message(changed, f"while the {what} ran"),
                          patch_line(self.source, changed[0]), "patched")

    # --- one call of the launcher ---

    def _call(self, args: tuple, what: str, provenance: Any = None, nan: bool = False) -> Any:
        self.hooks.reset()
        self.hooks.provenance = provenance
        try:
            with _fill_mode(nan), \
                    provenance if provenance is not None else contextlib.nullcontext():
                result = self.spec.launcher(*args)
            if self.device == "cuda":
                self.torch.cuda.synchronize()
        except LaunchProbe:
            raise
        except Failure:
            raise
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            if self.hooks.violation is not None:
                v = self.hooks.violation
                raise Failure("out-of-bounds", v.message, v.line, "bounds") from None
            self._untouched(what)
            if _is_oom(exc):
                raise Failure("out-of-memory", f"out of memory in the {what}: {_describe(exc)}",
                              _exception_line(exc, self.path)) from None
            line = _exception_line(exc, self.path)
            where = f" at line {line + 1}" if line is not None else ""
            if _chain_named(exc, "OutOfResources"):  # triton's: this configuration cannot launch on this device
                raise Failure("unlaunchable", f"the {what} raised{where}: {_describe(exc)}", line) from None
            assertion = _chain_has(exc, AssertionError) and self.hooks.launches
            kind = "device assertion failed" if assertion else f"the {what} raised"
            raise Failure("error", f"{kind}{where}: {_describe(exc)}", line,
                          "device-assert" if assertion else None) from None
        finally:
            self.hooks.provenance = None
        if self.hooks.violation is not None:  # raised inside the kernel and swallowed by the launcher
            v = self.hooks.violation
            raise Failure("out-of-bounds", v.message, v.line, "bounds")
        if self.hooks.race is not None:
            raise Failure("rejected", self.hooks.race.message, self.hooks.race.line, "race")
        return result

    # --- one case ---

    def case(self, shape: tuple, dtype: str, seed: int, config: str | None, first: bool,
             twin: bool = True) -> CaseResult:
        try:
            return self._case(shape, dtype, seed, config, first, twin)
        except Failure as failure:
            if failure.case is None:
                failure.case = CaseResult(tuple(shape), dtype, seed, False, config=config,
                                          note=failure.failed_check or failure.status)
            raise

    def _case(self, shape: tuple, dtype: str, seed: int, config: str | None, first: bool,
              twin: bool) -> CaseResult:
        """Every call of the launcher comes before the reference runs, on clones made before the first call: the
        reference's answer exists nowhere the launcher could reach (frames, globals, gc) while it runs. `twin`:
        also the twin run (once per shape, dtype and config: the provenance of every case's answer is checked
        by what the kernel stored in any case)."""
        torch = self.torch
        tdtype = getattr(torch, dtype)
        label = f"shape {shape} {dtype} seed {seed}" + (f" [{config}]" if config else "")
        random.seed(seed)
        torch.manual_seed(seed)
        try:
            args = self.spec.inputs(shape, tdtype, self.device)
        except Exception as exc:  # noqa: BLE001
            line = _exception_line(exc, self.path)
            raise Failure("error", f"the inputs function raised for {label}: {_describe(exc)}", line) from None
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        if first and twin:
            self._inputs_follow_seed(shape, dtype, args)
        upcast = self.interpreter and dtype == "bfloat16"
        kernel_args = _tree(args, lambda v: v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16
                            else v) if upcast else args
        pristine = _clone(kernel_args)
        reference_args = _clone(args)
        from .provenance import Provenance  # imports torch: only ever in the checking process

        early: Any = None
        if twin:  # the reference once before any launcher call on these inputs: it must not need the launcher
            try:
                with _triton_launches([]):
                    early = _outputs(self.spec.reference(*_clone(args)))
            except Exception as exc:  # noqa: BLE001
                early = exc
        traced = Provenance(_tensors_of(kernel_args))
        first_out = self._call(kernel_args, "launcher", traced, nan=True)
        if self.hooks.launches == 0:
            raise Failure("rejected", f"the launcher returned without launching {self.kernel} ({label}); the "
                          "result must come from the kernel", self.launcher_line, "no-launch")
        blocks = sorted({v for launch in self.hooks.launch_args for v in launch.constexprs.values()})
        self.blocks.update(b for b in blocks if 1 < b <= 1 << 16)
        work = list(traced.work)
        stored = self.hooks.stored
        for i, (now, before) in enumerate(zip(_tensors_of(kernel_args), _tensors_of(pristine))):
            if not bitwise_equal(now, before):
                raise Failure("rejected", f"the launcher modified input {i} ({label}); inputs must be left "
                              "unchanged", self.launcher_line, "input-modified")
        outs = _outputs(first_out)
        relayed = traced.relayed(outs)
        if relayed:
            work.append(relayed)
        handed = {t.untyped_storage().data_ptr() for launch in self.hooks.launch_args
                  for t in launch.tensors.values()}
        unproduced = [traced.unproduced(o) if isinstance(o, torch.Tensor) else None for o in outs]
        self._fresh_memory(outs, label)
        again = _clone(pristine)
        # Once per shape, dtype and config: a launcher that replays an earlier answer shows here.
        retraced = Provenance(_tensors_of(again)) if twin else None
        second = self._call(again, "launcher", retraced)
        if retraced is not None:
            work += [w for w in retraced.work if w not in work]
        second_launches = self.hooks.launches
        twin_out = self._twin(pristine, label) if twin else None
        ablated = self._probe(pristine) if first else None
        refs = _outputs(self._reference(reference_args, label))
        if early is not None:
            self._reference_stands_alone(early, refs, dtype, label)
        launcher_memory = set(traced.regions) | set(retraced.regions if retraced is not None else ())
        if any(isinstance(r, torch.Tensor) and r.numel() and r.untyped_storage().data_ptr() in launcher_memory
               for r in refs):
            raise Failure("not-checked", f"not checked: the reference returned memory the launcher wrote ({label}); "
                          "a reference computes its own answer", max(self.spec.line - 1, 0), "self-reference")

        if len(outs) != len(refs):
            raise Failure("mismatch", f"the launcher returned {len(outs)} output(s), the reference {len(refs)}",
                          self.launcher_line)
        atol, rtol = self.spec.tolerance(dtype, DEFAULT_TOLERANCES)
        cast_to = tdtype if upcast else None
        self._spec_sound(refs, atol, rtol, dtype, label)
        if first and twin and len(outs) == len(refs):
            self._inputs_matter(kernel_args, reference_args, refs, handed, label)
        cmps = []  # per tensor output; their maxima are the passing case's numbers
        for i, (out, ref) in enumerate(zip(outs, refs)):
            if not isinstance(ref, torch.Tensor):
                continue
            cmp = compare(out, ref, atol, rtol, blocks, cast_to=cast_to)
            which = f"output {i}: " if len(refs) > 1 else ""
            if cmp.message:
                raise Failure("mismatch", f"{which}{cmp.message} ({label})", self.launcher_line)
            if not cmp.ok:
                return self._failed_case(cmp, out, which, stored, shape, dtype, seed, config)
            cmps.append(cmp)
        # The answer is right. Now whether it is the kernel's, fresh, and the same every time.
        if second_launches == 0:
            raise Failure("rejected", f"the second call with the same inputs did not launch {self.kernel} "
                          f"({label}): the launcher returns a cached result", self.launcher_line, "cached")
        for i, (a, b) in enumerate(zip(outs, _outputs(second))):
            if isinstance(a, torch.Tensor) and not self._same(a, b, atol, rtol):
                raise Failure("rejected", f"two runs on the same inputs differ in output {i} ({label}): a race "
                              "between programs or nondeterminism", self.launcher_line, "nondeterministic")
        # Again now: a write after the launcher returned (a thread it left running) shows as a changed value.
        later = [traced.unproduced(o) if isinstance(o, torch.Tensor) else None for o in outs]
        self._stored_by_kernel([a if a is not None and a.count else b for a, b in zip(unproduced, later)],
                               len(refs), pristine, label)
        if twin:
            exempt = [u.provided if u is not None else None for u in unproduced]
            self._provenance(outs, twin_out, refs, atol, rtol, pristine, label, exempt)
        if work:
            raise Failure("rejected", f"the work is not {self.kernel}'s: {work[0]}; the launcher computes with "
                          "PyTorch (or replays earlier values) and the kernel only relays or starts it "
                          f"({label})", self.launcher_line, "work")
        if ablated is not None and len(ablated) == len(refs) and all(
                compare(out, ref, atol, rtol, blocks, cast_to).ok for out, ref in zip(ablated, refs)
                if isinstance(ref, torch.Tensor) and ref.numel()):
            raise Failure("rejected", f"with {self.kernel}'s launches skipped the launcher still returns the "
                          f"reference's answer ({label}): the result is not computed by the kernel",
                          self.launcher_line, "not-from-kernel")
        total = sum(r.numel() for r in refs if isinstance(r, torch.Tensor))
        return CaseResult(tuple(shape), dtype, seed, True, max((c.max_abs or 0.0) for c in cmps) if cmps else 0.0,
                          max((c.max_rel or 0.0) for c in cmps) if cmps else 0.0, 0, total, None, None, config,
                          None)

    def _spec_sound(self, refs: list, atol: float, rtol: float, dtype: str, label: str) -> None:
        """What the spec itself must give for a comparison to mean something: tensors with elements and finite
        values from the reference, a tolerance no looser than the dtype warrants, and inputs that follow the seed
        (checked once, on the first case)."""
        torch = self.torch
        line = max(self.spec.line - 1, 0)
        tensors = [r for r in refs if isinstance(r, torch.Tensor)]
        if not tensors:
            got = type(refs[0]).__name__ if len(refs) == 1 else f"{len(refs)} values"
            raise Failure("not-checked", f"not checked: the reference returned no tensor ({got}; {label}); "
                          "nothing can be compared", line, "spec")
        odd = next((r for r in tensors if type(r) is not torch.Tensor and not isinstance(r, torch.nn.Parameter)),
                   None)
        if odd is not None:
            raise Failure("not-checked", f"not checked: the reference returned a {type(odd).__name__}, a subclass "
                          f"of torch.Tensor whose methods could decide the comparison ({label}); return a plain "
                          "tensor", line, "spec")
        for r in tensors:
            if r.numel() and r.dtype.is_floating_point and not bool(torch.isfinite(r).any()):
                raise Failure("not-checked", f"not checked: every element of the reference is NaN or infinite "
                              f"({label}): any output compares equal or none does; inputs that give finite values "
                              "are needed", line, "spec")
        elements = [r for r in tensors if r.numel()]
        self.compared += sum(r.numel() for r in elements)
        if elements:
            self.trivial.append(all(compare(torch.zeros_like(r), r, atol, rtol, []).ok for r in elements))
        lower = _lower_precision(elements[0].dtype) if elements else None
        if lower is not None and self._spec_tolerance(dtype):
            # Loose when, on every case of the dtype, the reference rounded to the next coarser dtype passes.
            judged = [r for r in elements
                      if bool(torch.isfinite(r).all()) and float(r.abs().max()) < torch.finfo(lower).max]
            passes = all(compare(r.to(lower).to(r.dtype), r, atol, rtol, []).ok for r in judged)
            self.loose_elements[dtype] = self.loose_elements.get(dtype, 0) + sum(r.numel() for r in judged)
            if passes and self.loose.get(dtype, "") is not None:
                d_atol, d_rtol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
                self.loose[dtype] = (f"atol={atol:g}, rtol={rtol:g} for {dtype} (looser than {dtype}'s default "
                                     f"{d_atol:g}/{d_rtol:g}: the reference rounded to {str(lower)[6:]} passes it)")
            elif not passes:
                self.loose[dtype] = None

    def _spec_tolerance(self, dtype: str) -> bool:
        """Whether the spec sets its own tolerance for this dtype (the defaults are never loose)."""
        return any(v is not None and (not isinstance(v, dict) or dtype in v) for v in (self.spec.atol, self.spec.rtol))

    def _inputs_follow_seed(self, shape: tuple, dtype: str, args: tuple) -> None:
        """Inputs drawn for another seed must differ somewhere: inputs that ignore it are the same on every case
        and run, and an answer for them can be written down in advance."""
        torch = self.torch
        seed = secrets.randbits(63)
        random.seed(seed)
        torch.manual_seed(seed)
        try:
            other = self.spec.inputs(shape, getattr(torch, dtype), self.device)
        except Exception:  # noqa: BLE001 - it ran for this shape a moment ago; the case reports any error
            return
        other = tuple(other) if isinstance(other, (tuple, list)) else (other,)
        mine, theirs = _tensors_of(args), _tensors_of(other)
        if not any(t.numel() > 1 for t in mine) or len(mine) != len(theirs):
            return
        if all(a.shape == b.shape and bitwise_equal(a, b) for a, b in zip(mine, theirs)):
            raise Failure("not-checked", f"not checked: the inputs function returns the same values for every "
                          f"seed (shape {shape} {dtype}); draw them from torch's random generator (torch.randn, "
                          "torch.rand), which the checker seeds afresh for every case",
                          max(self.spec.line - 1, 0), "spec")

    def _reference_stands_alone(self, early: Any, refs: list, dtype: str, label: str) -> None:
        """The reference's answer computed before the launcher ever ran on these inputs must be the one it gives
        after: a reference that reads what the launcher left behind (a stash of its output) certifies the kernel."""
        torch = self.torch
        why = None
        if isinstance(early, BaseException):
            why = f"it raised ({_describe(early)}) when it ran before the launcher"
        else:
            atol, rtol = self.spec.tolerance(dtype, DEFAULT_TOLERANCES)
            pairs = [(a, r) for a, r in zip(early, refs) if isinstance(r, torch.Tensor)]
            if len(early) != len(refs) or any(
                    not isinstance(a, torch.Tensor) or a.shape != r.shape
                    or not (bitwise_equal(a, r) or compare(a, r, atol, rtol, []).ok) for a, r in pairs):
                why = "its answer before the launcher ran differs from its answer after"
        if why:
            raise Failure("not-checked", f"not checked: the reference depends on the launcher: {why} ({label}); a "
                          "reference computes its answer from the inputs alone", max(self.spec.line - 1, 0),
                          "self-reference")

    def _inputs_matter(self, args: tuple, reference_args: tuple, refs: list, handed: set, label: str) -> None:
        """Every input a launch reads must matter to the reference: an input the reference's answer does not depend
        on can carry the answer to the kernel (inputs that return the expected output as one more argument)."""
        torch = self.torch
        originals = _tensors_of(args)
        for i, t in enumerate(originals):
            if t.numel() < 2 or t.untyped_storage().data_ptr() not in handed:
                continue
            changed = _clone(reference_args)
            target = _tensors_of(changed)[i]
            with torch.no_grad():
                if target.dtype.is_floating_point:
                    target.add_(torch.rand_like(target) + 0.5)
                elif target.dtype == torch.bool:
                    target.logical_not_()
                else:
                    target.add_(1)
            try:
                again = _outputs(self.spec.reference(*changed))
            except Exception:  # noqa: BLE001, S112 - an input the reference rejects changed is one it reads
                continue
            if len(again) == len(refs) and all(
                    isinstance(a, torch.Tensor) and isinstance(r, torch.Tensor) and bitwise_equal(a, r)
                    for a, r in zip(again, refs) if isinstance(r, torch.Tensor)):
                raise Failure("rejected", f"{self.kernel} reads input {i} (shape {tuple(t.shape)}), which the "
                              f"reference's answer does not depend on ({label}): an input the reference ignores "
                              "can carry the answer to the kernel", max(self.spec.line - 1, 0), "work")

    def _same(self, a: Any, b: Any, atol: float, rtol: float) -> bool:
        """Two runs' outputs agree: bit for bit on the interpreter (programs run in order there); within the
        tolerance on a GPU, where float atomics add in a different order each run."""
        if bitwise_equal(a, b):
            return True
        if self.interpreter or not isinstance(b, self.torch.Tensor) or a.shape != b.shape:
            return False
        if not compare(b, a, atol, rtol, []).ok:
            return False
        if not any("float atomics add" in n for n in self.notes):
            self.notes.append("two runs on the same inputs differ in their last bits on the GPU (float atomics add "
                              "in a different order each run); they were compared within the tolerance")
        return True

    def _failed_case(self, cmp, out, which, stored, shape, dtype, seed, config) -> CaseResult:
        """A mismatching case, with the line of the store that wrote its first wrong element where known."""
        note = which + (f"{cmp.never_written} elements never written (still the NaN fill)"
                        if cmp.never_written else "") if (which or cmp.never_written) else None
        line = None
        if stored and cmp.first_index is not None and out.dim() == len(cmp.first_index):
            offset = sum(i * s for i, s in zip(cmp.first_index, out.stride()))
            line = stored_line(stored, out.data_ptr() + offset * out.element_size())
        return CaseResult(tuple(shape), dtype, seed, False, cmp.max_abs, cmp.max_rel, cmp.mismatched, cmp.total,
                          cmp.first_index, cmp.tail_only, config, note or None, line)

    def _fresh_memory(self, outs: list, label: str) -> None:
        """No output may reuse the memory of an earlier call's output (outputs of this call may share theirs)."""
        earlier = {p for p, _ in self.returned}
        for out in outs:
            if isinstance(out, self.torch.Tensor) and out.numel() and out.untyped_storage().data_ptr() in earlier:
                raise Failure("rejected", f"the launcher returned the same output memory as an earlier call "
                              f"({label}): a cached result, not a fresh computation", self.launcher_line, "cached")
        self.returned += [(o.untyped_storage().data_ptr(), o) for o in outs
                          if isinstance(o, self.torch.Tensor) and o.numel()]

    def _reference(self, args: tuple, label: str) -> Any:
        self.hooks.reset()
        launched: list[tuple[str, str | None]] = []
        try:
            with _triton_launches(launched):
                expected = self.spec.reference(*args)
        except Exception as exc:  # noqa: BLE001
            line = _exception_line(exc, self.path)
            raise Failure("error", f"the reference raised for {label}: {_describe(exc)}", line) from None
        self._untouched("inputs function, the launcher or the reference")  # all of them ran by now
        if launched:
            mine = _source_of(self.hooks.jit)
            which = launched[0][0]
            copy = (f" (its code is {self.kernel}'s, the kernel under test)"
                    if mine and any(src == mine for _, src in launched) else "")
            raise Failure("not-checked", f"not checked: the reference launches the Triton kernel {which}{copy}; a "
                          f"reference must compute in plain PyTorch, or a kernel can certify itself ({label})",
                          max(self.spec.line - 1, 0), "self-reference")
        if self.hooks.launches:
            raise Failure("rejected", f"the reference launches {self.kernel} (directly or through the launcher): "
                          f"a kernel cannot certify itself; write the reference in plain PyTorch ({label})",
                          max(self.spec.line - 1, 0), "self-reference")
        return expected

    def _stored_by_kernel(self, unproduced: list, outputs: int, pristine: tuple, label: str) -> None:
        """Every element of the answer was produced by the kernel in this call, or provided by the launcher as a
        constant fill or a copy of an input (provenance.py); the latter is noted."""
        for i, u in enumerate(unproduced):
            if u is None:
                continue
            which = f"output {i}" if outputs > 1 else "the answer"
            if not u.count:
                if u.provided is not None and not any(n.startswith(f"{which}: ") for n in self.notes):
                    self.notes.append(f"{which}: {int(u.provided.sum())} of {u.total} elements come from the "
                                      "launcher (a constant fill or a copy of an input that the kernel did not "
                                      "overwrite), not from the kernel")
                continue
            by = f"PyTorch computed or wrote ({u.by})" if u.by else "computed or written outside the kernel"
            why = (f"; the launcher read other tensors' values into Python ({u.laundered}), after which nothing it "
                   "computes counts as the kernel's") if u.laundered else ""
            raise self._not_computed(
                which, f"{u.count} of {u.total} elements (first at {u.index}) do not hold what {self.kernel} "
                f"produced in this call", f"{by} (a fallback gated on the kernel's output, or part of the output "
                f"filled outside the kernel?){why}", pristine, label)

    def _twin(self, pristine: tuple, label: str) -> Any:
        """The launcher's answer when every launch's writes are replaced by other values (hooks.py)."""
        self.hooks.twin = True
        try:
            return self._call(_clone(pristine), "launcher")
        except Failure as failure:
            if failure.status == "not-checked":
                raise
            raise Failure("rejected", f"when {self.kernel}'s launches wrote other values, the launcher did not "
                          f"return a different answer but failed ({failure.message}; {label}): the checker cannot "
                          "tell that the answer comes from the kernel", failure.line or self.launcher_line,
                          "provenance") from None
        finally:
            self.hooks.twin = False

    def _provenance(self, outs, twin, refs, atol, rtol, pristine, label, exempt) -> None:
        """Every element of the answer must follow the kernel's writes (twin run): what stays the same when the
        kernel writes other values was computed some other way."""
        twins = _outputs(twin)
        for i, (out, ref) in enumerate(zip(outs, refs)):
            if not isinstance(ref, self.torch.Tensor) or not isinstance(out, self.torch.Tensor):
                continue
            other = twins[i] if i < len(twins) else None
            stuck, judged, index = not_following(out, other, atol, rtol, exempt[i] if i < len(exempt) else None)
            if not stuck:
                continue
            which = f"output {i}" if len(refs) > 1 else "the answer"
            raise self._not_computed(
                which, f"{stuck} of {judged} elements (first at {index}) stay the same when {self.kernel}'s launches "
                "write other values", "computed another way (a PyTorch fallback gated on the kernel's output, or "
                "part of the output filled outside the kernel?)", pristine, label)

    def _not_computed(self, which: str, evidence: str, how: str, pristine: tuple, label: str) -> Failure:
        """The rejection of an answer that is not the kernel's, at the line the launcher returned it from."""
        line = self._return_line(pristine)
        where = f"line {line + 1} returns" if line is not None else "the launcher returns"
        return Failure("rejected", f"{which} is not computed by the kernel: {evidence}; {where} values {how} "
                       f"({label})", line, "provenance")

    def _return_line(self, pristine: tuple) -> int | None:
        """The line of the user's file where the launcher returned, from one more call under a profile hook
        (only when a check has already failed: the hook slows every call down)."""
        code = getattr(self.spec.launcher, "__code__", None)
        if code is None or not _in_file(self.spec.launcher, self.path):
            return self.launcher_line
        seen: list[int] = []

        def profile(frame, event, _arg):
            if event == "return" and frame.f_code is code:
                seen.append(frame.f_lineno - 1)

        sys.setprofile(profile)
        try:
            self._call(_clone(pristine), "launcher")
        except Failure:
            pass
        finally:
            sys.setprofile(None)
        return seen[-1] if seen else self.launcher_line

    def _probe(self, pristine) -> list | None:
        """Once per spec: a failing launch must fail the launcher; then the answer with every launch skipped,
        which the caller compares with the reference once that has run."""
        self.hooks.probe = True
        try:
            self._call(_clone(pristine), "launcher")
        except LaunchProbe:
            pass
        except Failure as failure:
            if failure.status not in ("error",):
                raise
        else:
            if not self.hooks.probe:  # the probe fired and was swallowed
                raise Failure("rejected", f"the launcher swallowed the exception of a failing {self.kernel} "
                              "launch and returned a result anyway (a fallback path?); let launch errors "
                              "propagate", self.launcher_line, "fallback")
        finally:
            self.hooks.probe = False
        self.hooks.skip = True
        try:
            return _outputs(self._call(_clone(pristine), "launcher"))
        except Failure as failure:
            if failure.status == "not-checked":
                raise
            return None
        finally:
            self.hooks.skip = False

    # --- the whole spec ---

    def run(self) -> Verdict:
        started = time.monotonic()
        s = self.spec
        kernel_line = self.kernel_line
        spec_line = max(s.line - 1, 0)
        cases: list[CaseResult] = []

        def verdict(status: str, message: str, line: int | None = None, failed_check: str | None = None) -> Verdict:
            return Verdict(kernel=self.kernel, spec=s.name, spec_line=spec_line, kernel_line=kernel_line,
                           device=self.device_label, status=status, message=message, line=line, cases=tuple(cases),
                           notes=tuple(dict.fromkeys(self.notes + self.hooks.notes)),
                           duration_s=round(time.monotonic() - started, 3), failed_check=failed_check)

        if not hasattr(unwrap_kernel(s.kernel), "run"):
            return verdict("error", f"spec {s.name}: kernel= must be a @triton.jit function or its autotuner, "
                           f"got {type(s.kernel).__name__}", spec_line)
        self.hooks.install()
        autotuner = _autotuner(s.kernel)
        configs = list(getattr(autotuner, "configs", None) or [None]) if autotuner is not None else [None]
        if autotuner is not None:
            self.notes.append(f"autotuned: each of {len(configs)} configs launched on its own, without "
                              "benchmarking")
        if self.interpreter and "bfloat16" in s.dtypes:
            self.notes.append(BF16_NOTE)
        # Every case, repetition and derived shape draws its own 63-bit seed from the system's secret source (each
        # case records its own, to replay it): nothing the launcher can read tells a checked call's seed apart.
        self.notes.append("random seeds drawn afresh for every case (each case records its own)")
        try:
            first = True
            skipped = 0  # configurations that could launch for no dtype
            for config in configs:
                label = _config_label(config) if config is not None else None
                launched: list[str] = []  # the dtypes this config launches with
                with _forced_config(autotuner, config):
                    for dtype in s.dtypes:
                        before = len(cases)
                        try:
                            for shape in s.shapes:
                                for repeat in range(s.seeds):
                                    case = self.case(shape, dtype, secrets.randbits(63), label, first,
                                                     twin=repeat == 0)
                                    cases.append(case)
                                    first = first and not case.ok
                            launched.append(dtype)
                        except Failure as failure:
                            if failure.status != "unlaunchable" or autotuner is None:
                                raise
                            # The autotuner skips a configuration that cannot launch here (too much shared
                            # memory, too many registers) when it benchmarks; the others decide the verdict.
                            del cases[before:]
                            self.notes.append(f"config {label} skipped for {dtype}: it cannot launch on "
                                              f"{self.device_label} ({failure.message.split(': ', 1)[-1]}); the "
                                              "autotuner skips it too")
                    if launched and all(c.ok for c in cases) and not self.chosen:
                        self._chosen_shapes(label, cases, launched)
                skipped += not launched
            if not cases:
                raise Failure("error", f"no autotune config can launch on {self.device_label}")
        except Failure as failure:
            status = "error" if failure.status == "unlaunchable" else failure.status
            if failure.case is not None:  # the case it happened on, in the JSON as well as in the message
                cases.append(failure.case)
            return verdict(status, failure.message, failure.line, failure.failed_check)
        finally:
            self.hooks.uninstall()
        bad = [c for c in cases if not c.ok]
        if bad:
            line = bad[0].line if bad[0].line is not None else kernel_line
            text = mismatch_message(bad[0], len(bad), len(cases))
            if (bad[0].shape, bad[0].dtype) in self.chosen:
                text = "mismatch on a shape kernel-lsp chose: " + text.removeprefix("mismatch: ")
            return verdict("mismatch", text, line)
        if not self.compared:
            return verdict("not-checked", "not checked: no case compared any element (the reference returned only "
                           "empty tensors); list shapes with elements", spec_line, "spec")
        if self.trivial and all(self.trivial):
            return verdict("not-checked", "not checked: an all-zero output would have matched the reference on "
                           "every case (its values lie within the tolerance of zero); inputs that give a reference "
                           "away from zero are needed", spec_line, "spec")
        ran = len(configs) - skipped
        configs_text = f", {ran} config{'' if ran == 1 else 's'}" if autotuner is not None else ""
        # A few elements (a one-element sum) can round close by chance: the verdict needs enough of them.
        loose = [why for dtype, why in self.loose.items()
                 if why and self.loose_elements.get(dtype, 0) >= self.LOOSE_EVIDENCE_ELEMENTS]
        if loose:
            return verdict("correct", f"correct at {'; '.join(loose)} on {len(cases)} "
                           f"cases{configs_text} ({self.device_label})", spec_line, "loose-tolerance")
        return verdict("correct", f"correct on {len(cases)} cases{configs_text} ({self.device_label})")

    # Elements of a dtype whose rounding to the next coarser dtype must pass before its tolerance is called loose.
    LOOSE_EVIDENCE_ELEMENTS = 256

    # Cases on the interpreter at a derived or bench shape cost up to this many times the largest listed case.
    INTERPRETER_GROWTH = 8

    def _chosen_shapes(self, config: str | None, cases: list[CaseResult], dtypes: list[str]) -> None:
        """Shapes the spec does not list, derived by kernel-lsp (once per spec, with the first config that
        launches): each dimension of the largest listed shape grown (at least doubled and past the largest block
        size seen, to an odd size) in the first dtype, one dimension of it shrunk (to a size that is no multiple of
        any block size seen), one shrunk shape for every other dtype, and the bench shapes, which are what gets
        timed. Only `dtypes`, those the config launched with at the listed shapes (an autotune config too big for
        one dtype's shared memory is skipped for it, as the autotuner skips it). A shape the inputs function, the
        reference or the launcher refuses (raises) is skipped with a note; a wrong answer is a mismatch "on a shape
        kernel-lsp chose"."""
        s = self.spec
        base = max(s.shapes, key=_numel)
        if not base:
            return
        rng = random.Random(secrets.randbits(64))
        block = max(self.blocks, default=1)
        budget = max(self.INTERPRETER_GROWTH * _numel(base), 1 << 14)

        def affordable(shape: tuple) -> bool:
            return not self.interpreter or _numel(shape) <= budget

        def grown(dim: int, i: int) -> int:
            size = max(2 * dim, block) + rng.choice((1, 3, 5, 7))
            if not affordable(base[:i] + (size,) + base[i + 1:]):
                size = 2 * dim + rng.choice((1, 3, 5, 7))  # past the block needs too big a case here
            return size + 1 if size % 2 == 0 else size

        def shrunk(dim: int) -> int | None:
            for step in rng.sample(range(1, 8), 7):
                size = dim - step
                if size >= 1 and not any(size % b == 0 for b in self.blocks):
                    return size
            return None

        wanted: list[tuple[tuple, str]] = []
        for i, dim in enumerate(base):
            wanted.append((base[:i] + (grown(dim, i),) + base[i + 1:], dtypes[0]))
        for i in rng.sample(range(len(base)), len(base)):
            if (small := shrunk(base[i])) is not None:
                wanted.append((base[:i] + (small,) + base[i + 1:], dtypes[0]))
                break
        for dtype in dtypes[1:]:
            i = rng.randrange(len(base))
            size = shrunk(base[i])
            wanted.append((base[:i] + (size if size is not None else grown(base[i], i),) + base[i + 1:], dtype))
        listed = {tuple(x) for x in s.shapes}
        for bench in s.bench_shapes:
            if tuple(bench) in listed or _numel(tuple(bench)) == 0:  # no element to compare, nothing to launch
                continue
            if not affordable(tuple(bench)):
                self.notes.append(f"bench shape {tuple(bench)} not checked on the CPU interpreter "
                                  f"({_numel(bench)} elements); it is checked where it is timed")
                continue
            wanted.append((tuple(bench), dtypes[0]))
        ran = []
        for shape, dtype in wanted:
            if not affordable(shape):
                continue
            self.chosen.add((shape, dtype))
            try:
                # Without the twin run: what a launch is handed and what PyTorch computes is still traced.
                case = self.case(shape, dtype, secrets.randbits(63), config, False, twin=False)
            except Failure as failure:
                if failure.status == "error":
                    self.notes.append(f"shape {shape} {dtype} (chosen by kernel-lsp) skipped: {failure.message}")
                    continue
                raise
            cases.append(case)
            ran.append(f"{shape} {dtype}")
            if not case.ok:
                break
        if ran:
            self.notes.append(f"also checked shapes kernel-lsp chose: {', '.join(ran)}")


def mismatch_message(case: CaseResult, failed: int, total: int) -> str:
    where = f" [{case.config}]" if case.config else ""
    parts = [f"mismatch: shape {case.shape} {case.dtype} seed {case.seed}{where}:"]
    if case.note:
        parts.append(f"{case.note};")
    parts.append(f"{case.mismatched} of {case.total} elements differ")
    if case.max_abs is not None:
        parts.append(f"(max abs {case.max_abs:.3g}, max rel {case.max_rel:.3g})")
    if case.first_index is not None:
        parts.append(f"first at {case.first_index}")
    text = " ".join(parts)
    if case.line is not None:
        text += f"; line {case.line + 1} stored the first wrong element"
    if case.tail_only:
        text += "; all past the last full block: a missing or wrong mask?"
    if failed > 1:
        text += f" ({failed} of {total} cases fail)"
    return text


def patched_message(changed: list[str], when: str) -> str:
    return (f"not checked: {describe_replaced(changed)} replaced {when}; the inputs, the reference or the "
            "comparison would no longer be what the spec says (and the replacement would apply to every program "
            "that imports this file)")


def _in_file(fn: Any, path: str) -> bool:
    return getattr(getattr(fn, "__code__", None), "co_filename", None) == path


# --- the process ----------------------------------------------------------------------------------------------


def _device(requested: str) -> tuple[str, bool, str]:
    """(torch device, interpreter?, label)."""
    import torch

    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "interpreter"
    if requested == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' requested but torch sees no CUDA device")
        return "cuda", False, torch.cuda.get_device_name()
    if requested in ("interpreter", "cpu"):
        return "cpu", True, "CPU interpreter"
    raise RuntimeError(f"unknown device {requested!r} (expected auto, cuda or interpreter)")


def torch_is_cpu_build() -> bool:
    """Whether the importable torch has no CUDA or ROCm libraries, known without importing it."""
    import importlib.util

    try:
        found = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return False
    folders = list(getattr(found, "submodule_search_locations", None) or ()) if found else []
    if not folders:
        return False
    lib = os.path.join(folders[0], "lib")
    try:
        names = os.listdir(lib)
    except OSError:
        return False
    return not any(n.startswith(("libtorch_cuda", "libtorch_hip", "libc10_cuda", "libc10_hip")) for n in names)


def _vm_size_mb() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# Address space a thread may reserve beyond resident memory: its stack and a malloc arena (64 MiB, reserved
# twice over while it is aligned). torch starts one intra-op thread per core.
THREAD_RESERVE_MB = 200


def cap_address_space(memory_mb: int) -> int | None:
    """Cap this process's address space at what it maps now plus `memory_mb` and room for one thread per core:
    a backstop to the parent's resident-memory watch, which polls. Only where that is safe: a CPU build of torch,
    or no GPU on the machine (a CUDA build maps several GB at import and reserves far more once a CUDA context
    exists, and fails in native code, even with exit code 1, when the cap is hit; there the watch alone applies).
    Returns the cap in MB, or None where the current size cannot be read."""
    import resource

    now = _vm_size_mb()
    if now is None:
        return None
    cap = int(now + memory_mb + 1024 + THREAD_RESERVE_MB * (os.cpu_count() or 1))
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard // 2**20)
    resource.setrlimit(resource.RLIMIT_AS, (cap * 2**20, hard))
    return cap


def _static_verdicts(source: str, label: str, status: str, message: str, line: int | None,
                     failed_check: str, wanted: list[str] | None) -> list[Verdict]:
    """One verdict per spec the text declares (of the `wanted` kernels, when given), found without importing it
    (the file is not run)."""
    from analyzers.specs import find_specs

    lines = source.splitlines()
    out = []
    for site in find_specs(source):
        kernel = (site.kernel or "?").rsplit(".", 1)[-1]
        if wanted is not None and kernel not in wanted:
            continue
        kernel_line = next((i for i, text in enumerate(lines) if text.lstrip().startswith(f"def {kernel}(")),
                           site.def_line)
        out.append(Verdict(kernel, site.inputs, site.def_line, kernel_line, status, label, message, line,
                           failed_check=failed_check))
    return out


def _end_with_parent(parent: int, getppid=os.getppid, sleep=time.sleep, end=os._exit) -> None:
    """Ends this process once the process that started it is gone (killed, or ended without cancelling the check):
    nobody reads its verdicts any more, and the time limit that process enforced no longer applies. The functions
    are bound before the user's code runs, which could replace them."""
    while getppid() == parent:
        sleep(0.5)
    end(3)


def main() -> int:
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), name="kernel-lsp-parent-watch",
                     daemon=True).start()
    fd = int(os.environ.pop(FD_ENV))
    out = os.fdopen(fd, "w", buffering=1)
    request = json.loads(sys.stdin.read())
    nonce = request.get("nonce")  # the parent accepts only events that carry it

    def emit(event: str, **data: Any) -> None:
        out.write(json.dumps({"event": event, "nonce": nonce, **data}, allow_nan=False) + "\n")
        out.flush()

    os.dup2(2, 1)  # user prints must not mix with anything the parent reads
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    memory_mb = request.get("memory_mb")
    cpu_torch = torch_is_cpu_build()  # decided from files, before torch maps its libraries
    path = os.path.abspath(request["path"])
    source = request["source"]
    try:
        device, interpreter, label = _device(request.get("device", "auto"))
    except Exception as exc:  # noqa: BLE001
        emit("errors", errors=[[None, f"could not set up {request.get('device', 'auto')!r}: {_describe(exc)}"]])
        emit("done")
        return 0
    emit("device", device=label)
    findings = scan(source)
    if findings:  # the file is not run at all
        message = (f"not checked: {describe_findings(findings)}; a file that reaches into the checker is not run, "
                   "so its verdict could not be trusted")
        verdicts = _static_verdicts(source, label, "not-checked", message, findings[0].line, "introspection",
                                    request.get("kernels"))
        for v in verdicts:
            emit("verdict", verdict=verdict_to_dict(v))
        if not verdicts:
            emit("errors", errors=[[findings[0].line, message]])
        emit("done")
        return 0
    if interpreter:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton and the user's module are imported
        with contextlib.suppress(Exception):  # a broken triton is the user module's import error, reported there
            import triton  # noqa: F401 - mapped before the address-space cap is measured

            from .interp_compat import patch_interpreter

            patch_interpreter()  # the checker's own change to the interpreter, before the snapshot
    if memory_mb and interpreter and (cpu_torch or not gpu_present()):
        cap_address_space(int(memory_mb))
    with contextlib.suppress(Exception):  # a broken torch is the user module's import error, reported there
        import numpy  # noqa: F401
        import torch  # noqa: F401
    if "nki" in source:  # NKI specs run in kernel-lsp's NKI model (engine/nki); verdicts say so
        from kernel_lsp.engine import nki as nki_model

        nki_model.install()
    snapshot = Snapshot()
    try:
        module = load_user_module(path, source, request.get("root"))
    except UserModuleError as exc:
        emit("errors", errors=[[exc.line, exc.message]])
        emit("done")
        return 0
    specs = specs_in(module)
    changed = snapshot.changed()
    snapshot.add_module(os.path.splitext(os.path.basename(path))[0], module)
    wanted = request.get("kernels")
    errors = []
    if wanted is not None:
        named = {kernel_name_of(s.kernel) for s in specs}
        errors += [[None, f"{name} has no correctness spec in this file"] for name in wanted if name not in named]
        specs = [s for s in specs if kernel_name_of(s.kernel) in wanted]
    if errors:
        emit("errors", errors=errors)
    if changed:
        message = patched_message(changed, "when the file was imported")
        line = patch_line(source, changed[0])
        for s in specs:
            v = Verdict(kernel_name_of(s.kernel), s.name, s.line - 1, _def_line(_raw_function(s.kernel)),
                        "not-checked", label, message, line, failed_check="patched")
            emit("verdict", verdict=verdict_to_dict(v))
        if not specs:
            emit("errors", errors=[[line, message]])
        emit("done")
        return 0
    skip = set(request.get("skip", ()))
    for s in specs:
        if s.name in skip:
            continue
        kernel_line = _def_line(_raw_function(s.kernel))
        emit("start", spec=s.name, kernel=kernel_name_of(s.kernel), spec_line=s.line - 1, kernel_line=kernel_line)
        try:
            from kernel_lsp.engine.nki.check import is_nki_kernel, spec_verdict

            if is_nki_kernel(s.kernel):
                v = spec_verdict(s, kernel_line)
            else:
                v = SpecCheck(s, path, device, interpreter, label, kernel_line, snapshot, source).run()
        except BaseException as exc:  # noqa: BLE001 - a checker bug must not hide the other specs' verdicts
            if isinstance(exc, MemoryError) or _is_oom(exc):
                emit("oom", spec=s.name, message=_describe(exc))
                continue
            v = Verdict(kernel_name_of(s.kernel), s.name, s.line - 1, kernel_line, "error", label,
                        f"the check itself failed: {_describe(exc)}", notes=(traceback.format_exc()[-2000:],))
        emit("verdict", verdict=verdict_to_dict(v))
    emit("done")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # The user's module may have started threads (or triton's) that would keep the process alive.
    os._exit(code)
