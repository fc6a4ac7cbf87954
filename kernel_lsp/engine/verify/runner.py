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
import time
import traceback
from typing import Any

from kernel_lsp.spec import Spec, kernel_name_of, specs_in, unwrap_kernel
from kernel_lsp.spec import _def_line as _spec_def_line

from ..gpu import gpu_present
from .compare import DEFAULT_TOLERANCES, bitwise_equal, compare, prefill
from .hooks import KernelHooks, LaunchProbe
from .loading import UserModuleError, load_user_module, user_line
from .results import CaseResult, Verdict, verdict_to_dict

FD_ENV = "KERNEL_LSP_VERIFY_FD"
BF16_NOTE = ("bfloat16 cases ran with float32 inputs on the CPU interpreter (its bfloat16 arithmetic is wrong "
             "upstream); outputs were rounded to bfloat16 and compared at bfloat16 tolerance")


class Failure(Exception):
    """A case that ends the spec: rejected, out-of-bounds, error, out-of-memory."""

    def __init__(self, status: str, message: str, line: int | None = None):
        super().__init__(message)
        self.status, self.message, self.line = status, message, line


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


@contextlib.contextmanager
def _prefilled():
    """torch.empty & co. return NaN-filled tensors while the launcher runs: memory the kernel does not write
    cannot carry an earlier answer."""
    import torch

    def wrap(fn):
        def allocate(*args, **kwargs):
            t = fn(*args, **kwargs)
            return prefill(t) if isinstance(t, torch.Tensor) else t
        return allocate

    saved = {name: getattr(torch, name) for name in ("empty", "empty_like", "empty_strided")}
    saved_new = torch.Tensor.new_empty
    try:
        for name, fn in saved.items():
            setattr(torch, name, wrap(fn))
        torch.Tensor.new_empty = wrap(saved_new)
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
        torch.Tensor.new_empty = saved_new


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
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        found = user_line(exc.__traceback__, path)
        if found is not None:
            line = found
        exc = exc.__cause__ or exc.__context__
    return line


def _root(exc: BaseException) -> BaseException:
    seen = set()
    while (exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return exc


def _chain_named(exc: BaseException, name: str) -> bool:
    """Whether the exception or one it was raised from has this class name (triton's errors, by name: the
    checking process may not import every triton version's error module)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if any(cls.__name__ == name for cls in type(exc).__mro__):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _chain_has(exc: BaseException, kind: type) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
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
                 kernel_line: int):
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

    # --- one call of the launcher ---

    def _call(self, args: tuple, what: str) -> Any:
        self.hooks.reset()
        try:
            with _prefilled():
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
                raise Failure("out-of-bounds", v.message, v.line) from None
            if _is_oom(exc):
                raise Failure("out-of-memory", f"out of memory in the {what}: {_describe(exc)}",
                              _exception_line(exc, self.path)) from None
            line = _exception_line(exc, self.path)
            where = f" at line {line + 1}" if line is not None else ""
            if _chain_named(exc, "OutOfResources"):  # triton's: this configuration cannot launch on this device
                raise Failure("unlaunchable", f"the {what} raised{where}: {_describe(exc)}", line) from None
            assertion = _chain_has(exc, AssertionError) and self.hooks.launches
            kind = "device assertion failed" if assertion else f"the {what} raised"
            raise Failure("error", f"{kind}{where}: {_describe(exc)}", line) from None
        if self.hooks.violation is not None:  # raised inside the kernel and swallowed by the launcher
            v = self.hooks.violation
            raise Failure("out-of-bounds", v.message, v.line)
        if self.hooks.race is not None:
            raise Failure("rejected", self.hooks.race.message, self.hooks.race.line)
        return result

    # --- one case ---

    def case(self, shape: tuple, dtype: str, seed: int, config: str | None, first: bool) -> CaseResult:
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
        upcast = self.interpreter and dtype == "bfloat16"
        kernel_args = _tree(args, lambda v: v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16
                            else v) if upcast else args
        pristine = _clone(kernel_args)
        try:
            expected = self.spec.reference(*_clone(args))
        except Exception as exc:  # noqa: BLE001
            line = _exception_line(exc, self.path)
            raise Failure("error", f"the reference raised for {label}: {_describe(exc)}", line) from None
        first_out = self._call(kernel_args, "launcher")
        launches = self.hooks.launches
        blocks = sorted({v for launch in self.hooks.launch_args for v in launch.constexprs.values()})
        if launches == 0:
            raise Failure("rejected", f"the launcher returned without launching {self.kernel} ({label}); the "
                          "result must come from the kernel", self.launcher_line)
        for i, (now, before) in enumerate(zip(_tensors_of(kernel_args), _tensors_of(pristine))):
            if not bitwise_equal(now, before):
                raise Failure("rejected", f"the launcher modified input {i} ({label}); inputs must be left "
                              "unchanged", self.launcher_line)
        outs, refs = _outputs(first_out), _outputs(expected)
        if len(outs) != len(refs):
            raise Failure("mismatch", f"the launcher returned {len(outs)} output(s), the reference {len(refs)}",
                          self.launcher_line)
        for out in outs:
            if isinstance(out, torch.Tensor) and out.numel():
                ptr = out.untyped_storage().data_ptr()
                if any(ptr == p for p, _ in self.returned):
                    raise Failure("rejected", f"the launcher returned the same output memory as an earlier call "
                                  f"({label}): a cached result, not a fresh computation", self.launcher_line)
                self.returned.append((ptr, out))
        atol, rtol = self.spec.tolerance(dtype, DEFAULT_TOLERANCES)
        result = None
        cmps = []  # per tensor output; their maxima are the passing case's numbers
        for i, (out, ref) in enumerate(zip(outs, refs)):
            if not isinstance(ref, torch.Tensor):
                continue
            cmp = compare(out, ref, atol, rtol, blocks, cast_to=tdtype if upcast else None)
            cmps.append(cmp)
            which = f"output {i}: " if len(refs) > 1 else ""
            if cmp.message:
                raise Failure("mismatch", f"{which}{cmp.message} ({label})", self.launcher_line)
            if not cmp.ok and result is None:
                note = which + (f"{cmp.never_written} elements never written (still the NaN fill)"
                                if cmp.never_written else "") if (which or cmp.never_written) else None
                result = CaseResult(tuple(shape), dtype, seed, False, cmp.max_abs, cmp.max_rel, cmp.mismatched,
                                    cmp.total, cmp.first_index, cmp.tail_only, config, note or None)
        if result is not None:
            return result
        # Same inputs again: a race or nondeterminism shows as a difference; a memoised launcher as no launch.
        second = self._call(_clone(pristine), "launcher")
        if self.hooks.launches == 0:
            raise Failure("rejected", f"the second call with the same inputs did not launch {self.kernel} "
                          f"({label}): the launcher returns a cached result", self.launcher_line)
        for i, (a, b) in enumerate(zip(outs, _outputs(second))):
            if isinstance(a, torch.Tensor) and not bitwise_equal(a, b):
                raise Failure("rejected", f"two runs on the same inputs differ in output {i} ({label}): a race "
                              "between programs or nondeterminism", self.launcher_line)
        if first:
            self._probe(pristine, refs, atol, rtol, blocks, tdtype if upcast else None, label)
        total = sum(r.numel() for r in refs if isinstance(r, torch.Tensor))
        return CaseResult(tuple(shape), dtype, seed, True, max((c.max_abs or 0.0) for c in cmps) if cmps else 0.0,
                          max((c.max_rel or 0.0) for c in cmps) if cmps else 0.0, 0, total, None, None, config,
                          None)

    def _probe(self, pristine, refs, atol, rtol, blocks, cast_to, label) -> None:
        """Once per spec: a failing launch must fail the launcher, and the answer must depend on the kernel."""
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
                              "propagate", self.launcher_line)
        finally:
            self.hooks.probe = False
        self.hooks.skip = True
        try:
            ablated = self._call(_clone(pristine), "launcher")
        except Failure:
            return
        finally:
            self.hooks.skip = False
        outs = _outputs(ablated)
        if len(outs) != len(refs):
            return
        for out, ref in zip(outs, refs):
            if not isinstance(ref, self.torch.Tensor) or ref.numel() == 0:
                continue
            if not compare(out, ref, atol, rtol, blocks, cast_to).ok:
                return
        raise Failure("rejected", f"with {self.kernel}'s launches skipped the launcher still returns the "
                      f"reference's answer ({label}): the result is not computed by the kernel", self.launcher_line)

    # --- the whole spec ---

    def run(self) -> Verdict:
        started = time.monotonic()
        s = self.spec
        kernel_line = self.kernel_line
        base = {"kernel": self.kernel, "spec": s.name, "spec_line": max(s.line - 1, 0), "kernel_line": kernel_line,
                "device": self.device_label}
        cases: list[CaseResult] = []

        def verdict(status, message, line=None) -> Verdict:
            return Verdict(status=status, message=message, line=line, cases=tuple(cases),
                           notes=tuple(dict.fromkeys(self.notes + self.hooks.notes)),
                           duration_s=round(time.monotonic() - started, 3), **base)

        if not hasattr(unwrap_kernel(s.kernel), "run"):
            return verdict("error", f"spec {s.name}: kernel= must be a @triton.jit function or its autotuner, "
                           f"got {type(s.kernel).__name__}", base["spec_line"])
        self.hooks.install()
        autotuner = _autotuner(s.kernel)
        configs = list(getattr(autotuner, "configs", None) or [None]) if autotuner is not None else [None]
        if autotuner is not None:
            self.notes.append(f"autotuned: each of {len(configs)} configs launched on its own, without "
                              "benchmarking")
        if self.interpreter and "bfloat16" in s.dtypes:
            self.notes.append(BF16_NOTE)
        seed_base = secrets.randbits(30)
        self.notes.append(f"random seeds {seed_base}..{seed_base + len(s.shapes) * len(s.dtypes) * s.seeds - 1}")
        try:
            first = True
            skipped = 0  # configurations that could launch for no dtype
            for config in configs:
                label = _config_label(config) if config is not None else None
                counter = 0
                launched = 0
                with _forced_config(autotuner, config):
                    for dtype in s.dtypes:
                        before = len(cases)
                        try:
                            for shape in s.shapes:
                                for _ in range(s.seeds):
                                    seed = seed_base + counter
                                    counter += 1
                                    case = self.case(shape, dtype, seed, label, first)
                                    cases.append(case)
                                    first = first and not case.ok
                            launched += 1
                        except Failure as failure:
                            if failure.status != "unlaunchable" or autotuner is None:
                                raise
                            # The autotuner skips a configuration that cannot launch here (too much shared
                            # memory, too many registers) when it benchmarks; the others decide the verdict.
                            del cases[before:]
                            self.notes.append(f"config {label} skipped for {dtype}: it cannot launch on "
                                              f"{self.device_label} ({failure.message.split(': ', 1)[-1]}); the "
                                              "autotuner skips it too")
                    if launched and all(c.ok for c in cases):
                        self._unseen_shape(label, seed_base + counter, cases)
                skipped += launched == 0
            if not cases:
                raise Failure("error", f"no autotune config can launch on {self.device_label}")
        except Failure as failure:
            status = "error" if failure.status == "unlaunchable" else failure.status
            return verdict(status, failure.message, failure.line)
        finally:
            self.hooks.uninstall()
        bad = [c for c in cases if not c.ok]
        if bad:
            return verdict("mismatch", mismatch_message(bad[0], len(bad), len(cases)), kernel_line)
        launched = len(configs) - skipped
        configs_text = f", {launched} config{'' if launched == 1 else 's'}" if autotuner is not None else ""
        return verdict("correct", f"correct on {len(cases)} cases{configs_text} ({self.device_label})")

    def _unseen_shape(self, config: str | None, seed: int, cases: list[CaseResult]) -> None:
        """One shape the spec does not list, derived from a listed one: a launcher that handles only the listed
        shapes fails here. Shapes the inputs function or the reference cannot take are skipped with a note."""
        if any("unseen shape" in n for n in self.notes):
            return
        rng = random.Random(seed)
        shape = list(rng.choice(self.spec.shapes))
        if not shape:
            return
        shape[-1] += rng.randint(1, 9)
        shape = tuple(shape)
        dtype = self.spec.dtypes[0]
        try:
            case = self.case(shape, dtype, seed, config, False)
        except Failure as failure:
            if failure.status in ("error",):
                self.notes.append(f"unseen shape {shape} skipped: {failure.message}")
                return
            raise
        self.notes.append(f"also checked unseen shape {shape}")
        cases.append(case)


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
    if case.tail_only:
        text += "; all past the last full block: a missing or wrong mask?"
    if failed > 1:
        text += f" ({failed} of {total} cases fail)"
    return text


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


def main() -> int:
    out = os.fdopen(int(os.environ[FD_ENV]), "w", buffering=1)

    def emit(event: str, **data: Any) -> None:
        out.write(json.dumps({"event": event, **data}, allow_nan=False) + "\n")
        out.flush()

    request = json.loads(sys.stdin.read())
    os.dup2(2, 1)  # user prints must not mix with anything the parent reads
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    memory_mb = request.get("memory_mb")
    cpu_torch = torch_is_cpu_build()  # decided from files, before torch maps its libraries
    path = os.path.abspath(request["path"])
    try:
        device, interpreter, label = _device(request.get("device", "auto"))
    except Exception as exc:  # noqa: BLE001
        emit("errors", errors=[[None, f"could not set up {request.get('device', 'auto')!r}: {_describe(exc)}"]])
        emit("done")
        return 0
    if interpreter:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton and the user's module are imported
        with contextlib.suppress(Exception):  # a broken triton is the user module's import error, reported there
            import triton  # noqa: F401 - mapped before the address-space cap is measured
    if memory_mb and interpreter and (cpu_torch or not gpu_present()):
        cap_address_space(int(memory_mb))
    emit("device", device=label)
    try:
        module = load_user_module(path, request["source"], request.get("root"))
    except UserModuleError as exc:
        emit("errors", errors=[[exc.line, exc.message]])
        emit("done")
        return 0
    specs = specs_in(module)
    wanted = request.get("kernels")
    errors = []
    if wanted is not None:
        named = {kernel_name_of(s.kernel) for s in specs}
        errors += [[None, f"{name} has no correctness spec in this file"] for name in wanted if name not in named]
        specs = [s for s in specs if kernel_name_of(s.kernel) in wanted]
    if errors:
        emit("errors", errors=errors)
    skip = set(request.get("skip", ()))
    for s in specs:
        if s.name in skip:
            continue
        kernel_line = _def_line(_raw_function(s.kernel))
        emit("start", spec=s.name, kernel=kernel_name_of(s.kernel), spec_line=s.line - 1, kernel_line=kernel_line)
        try:
            v = SpecCheck(s, path, device, interpreter, label, kernel_line).run()
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
