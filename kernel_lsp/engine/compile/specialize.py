"""Turns a kernel plus what the workspace tells about it into CompileJobs: types, specialization, configurations.

No triton import (this runs in the server process). The rules mirror triton's JIT for a typical launch
(`native_specialize_impl`, identical in 3.6 and 3.9): a tensor argument becomes `*<dtype>` with
tt.divisibility=16 (allocator pointers are 16-byte aligned; on AMD also tt.pointer_range=32 for tensors under
2 GB, since `AMDGCN_USE_BUFFER_OPS` is on by default), an int becomes i32 (i64 past 2**31) with tt.divisibility=16
when a multiple of 16 and a compile-time constant when equal to 1, floats are fp32 and bools u1 without
specialization. What cannot be known from source (dtypes, sizes) is assumed and written to `notes`.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from analyzers.model import LaunchArg, LaunchSite, Param, TritonKernel
from analyzers.sizes import spec_launch_cases
from analyzers.source import literal_value, parse_python, parsing
from analyzers.targets import parse_target
from analyzers.budget import Budget, analysis_budget
from analyzers.values import UNKNOWN as _UNKNOWN
from analyzers.values import Resolver as _Resolver
from analyzers.values import evaluate

from . import offline
from .extract import ExtractedModule, extract_module
from .jobs import NOT_COMPILED, NOT_IN_KERNELS, CompileJob, Target

KEY_SCHEMA = "kernel-lsp-compile-1"  # bump when the worker's output for the same inputs changes
DIVISIBILITY = "tt.divisibility=16"
# Starts the note of a launch option compiled with triton's default because the launch computes it at run time.
ASSUMED_OPTION = "assumed"
POINTER_RANGE = "tt.pointer_range=32"
EQUAL_TO_1 = "equal_to_1"
DEFAULT_POINTER = "*fp32"  # kernels without tl.dot: elementwise/reduction kernels are most often fp32
DEFAULT_DOT_POINTER = "*fp16"  # kernels calling tl.dot: tensor-core inputs are 16-bit

_DTYPE_WORDS = {
    "fp16": "fp16", "f16": "fp16", "half": "fp16", "float16": "fp16",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp32": "fp32", "f32": "fp32", "float32": "fp32", "float": "fp32",
    "fp64": "fp64", "f64": "fp64", "float64": "fp64", "double": "fp64",
    "fp8": "fp8e4nv", "float8": "fp8e4nv", "e4m3": "fp8e4nv", "e5m2": "fp8e5",
    "i8": "i8", "int8": "i8", "u8": "u8", "uint8": "u8", "i16": "i16", "int16": "i16",
    "i32": "i32", "int32": "i32", "i64": "i64", "int64": "i64", "u1": "i1", "bool": "i1", "i1": "i1",
}
# Pointer names whose element type is conventionally not the data type.
_FP32_POINTER_WORDS = {"mean", "rstd", "var", "std", "lse", "stats", "acc", "accum", "loss", "partial", "sums",
                       "norm"}
_INDEX_POINTER_WORDS = {"idx", "index", "indices", "ids", "offsets", "offs", "seqlens", "seqlen", "lens", "lengths",
                        "positions", "pos", "lock", "locks", "counter", "counters", "expert", "experts", "tokens"}
_FLOAT_SCALARS = {"eps", "epsilon", "scale", "sm_scale", "softmax_scale", "qk_scale", "alpha", "beta", "gamma",
                  "momentum", "temperature", "temp", "p", "dropout_p", "lr", "weight_decay", "softcap", "logit_cap",
                  "threshold", "negative_slope", "slope", "min_val", "max_val", "clip", "clamp", "factor", "decay"}
_BOOL_PREFIX_FALSE = ("HAS_", "USE_", "IS_", "ENABLE_", "RETURN_", "SAVE_", "STORE_")
_SCALAR_ANNOTATION = re.compile(
    r"^((tl|triton\.language)\.)?(int|float|bool|u?int\d+|float\d+|bfloat16|i\d+|fp\d+|bf16|u1)$")
_POINTER_CALLS = {"load", "store", "make_block_ptr", "make_tensor_descriptor", "prefetch", "atomic_add", "atomic_cas",
                  "atomic_xchg", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor"}
_STRIDE_CALL = re.compile(r"^(\w+)\.stride\((-?\d+)\)$")


@functools.lru_cache(maxsize=1)
def installed_triton_version() -> str:
    """The installed triton's version without importing it (the server process must not import triton)."""
    from importlib import metadata

    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return "none"


def make_target(name: str | Target) -> Target:
    if isinstance(name, Target):
        return name
    spec = parse_target(name)
    return Target(spec.name, spec.backend, spec.arch, spec.warp_size)


def job_key(job: CompileJob, triton_version: str | None = None) -> str:
    """Content hash of everything that changes the compiled output, and nothing positional.

    module_source holds the sliced lines packed together, so an edit above the kernel (or moving it) leaves the
    key alone while any edit to the kernel, a helper or a constant it reads changes it.
    """
    t = job.target
    payload = [
        KEY_SCHEMA,
        triton_version if triton_version is not None else installed_triton_version(),
        job.kernel,
        job.module_source,
        [list(p) for p in job.signature],
        [[k, repr(v)] for k, v in job.constexprs],
        sorted([list(a) for a in job.attrs]),
        [t.backend, str(t.arch), t.warp_size],
        {"num_warps": job.num_warps, "num_stages": job.num_stages},
    ]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


# ----------------------------------------------------------------------------------------------------------------
# What the kernel body says about its parameters


def _leftmost(e: ast.AST) -> ast.AST:
    while isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        e = e.left
    while isinstance(e, ast.Subscript):
        e = e.value
    return e


def _pointer_params(node: ast.FunctionDef, params: set[str]) -> set[str]:
    """Parameters used as the base of a pointer: first argument of load/store/atomics/block pointers, through
    local pointer variables (`a_ptrs = a_ptr + offs`), or whose `.dtype.element_ty` is read."""
    assigned: dict[str, ast.AST] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
            assigned.setdefault(sub.targets[0].id, sub.value)

    def base(e: ast.AST, depth: int = 0) -> str | None:
        e = _leftmost(e)
        if isinstance(e, ast.Name):
            if e.id in params:
                return e.id
            if e.id in assigned and depth < 8:
                return base(assigned[e.id], depth + 1)
        return None

    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            name = sub.func.attr if isinstance(sub.func, ast.Attribute) else getattr(sub.func, "id", "")
            if name in _POINTER_CALLS:
                first = sub.args[0] if sub.args else next(
                    (k.value for k in sub.keywords if k.arg in ("pointer", "base", "ptr")), None)
                if first is not None and (b := base(first)):
                    out.add(b)
        elif isinstance(sub, ast.Attribute) and sub.attr == "element_ty":
            inner = sub.value
            if (isinstance(inner, ast.Attribute) and inner.attr == "dtype" and isinstance(inner.value, ast.Name)
                    and inner.value.id in params):
                out.add(inner.value.id)
    return out


_DESCRIPTOR_METHODS = frozenset({"load", "store", "atomic_add", "atomic_min", "atomic_max", "atomic_and",
                                 "atomic_or", "atomic_xor", "gather", "scatter"})


def _descriptor_params(node: ast.FunctionDef, params: set[str]) -> set[str]:
    """Parameters the kernel uses as tensor descriptors: `desc.load([m, k])`, `desc.store(...)`."""
    return {n.func.value.id for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _DESCRIPTOR_METHODS
            and isinstance(n.func.value, ast.Name) and n.func.value.id in params}


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"_|(?<=[a-z])(?=[A-Z])", name.lower()) if w]


def _dtype_from_text(text: str | None) -> str | None:
    if not text:
        return None
    t = text.strip().strip("'\"")
    if t.startswith("*"):
        return _DTYPE_WORDS.get(t[1:].removeprefix("k"), t[1:])
    m = re.search(r"pointer_type\(\s*(?:\w+\.)*(\w+)", t)
    if m:
        return _DTYPE_WORDS.get(m.group(1).lower())
    return None


def _pointer_dtype(p: Param, uses_dot: bool) -> tuple[str, bool]:
    """('*fp16', assumed?)"""
    if (d := _dtype_from_text(p.annotation)) is not None:
        return "*" + d, False
    words = _words(p.name)
    for w in words:
        if w in _DTYPE_WORDS:
            return "*" + _DTYPE_WORDS[w], False
    if any(w in _INDEX_POINTER_WORDS for w in words):
        return "*i32", True
    if any(w in _FP32_POINTER_WORDS for w in words[:-1] or words):
        return "*fp32", True
    return (DEFAULT_DOT_POINTER if uses_dot else DEFAULT_POINTER), True


def _scalar_type(p: Param, value: object) -> tuple[str, bool]:
    """Type of a non-pointer runtime parameter: ('i32' | 'i64' | 'fp32' | 'u1', assumed?)"""
    if isinstance(value, bool):
        return "u1", False
    if isinstance(value, int):
        return ("i64" if not -(2**31) <= value < 2**31 else "i32"), False
    if isinstance(value, float):
        return "fp32", False
    ann = (p.annotation or "").strip().strip("'\"").split(".")[-1]
    by_ann = {"int": "i32", "int32": "i32", "i32": "i32", "int64": "i64", "i64": "i64", "float": "fp32",
              "float32": "fp32", "fp32": "fp32", "bool": "u1", "int1": "u1", "float16": "fp16", "fp16": "fp16",
              "bfloat16": "bf16", "float64": "fp64"}
    if ann in by_ann:
        return by_ann[ann], False
    default = literal_value(parse_python(p.default, mode="eval").body) if p.default else None
    if isinstance(default, bool):
        return "u1", True
    if isinstance(default, float):
        return "fp32", True
    if p.name.lower() in _FLOAT_SCALARS or _words(p.name)[-1:] == ["scale"]:
        return "fp32", True
    return "i32", True


def _stride_groups(params: list[Param]) -> dict[str, tuple[str, ...]]:
    """stride name -> the group (tensor) it belongs to: stride_am/stride_ak -> a; x_stride_row -> x."""
    out = {}
    for p in params:
        words = _words(p.name)
        if not any(w in ("stride", "strides") for w in words):
            continue
        rest = [w for w in words if w not in ("stride", "strides")]
        if len(rest) >= 2:
            out[p.name] = tuple(rest[:-1])
        elif len(rest) == 1 and len(rest[0]) == 2 and rest[0].isalpha():  # stride_am: tensor a, dimension m
            out[p.name] = (rest[0][0],)
        elif rest:
            out[p.name] = tuple(rest)
    return out


def _inner_strides(params: list[Param]) -> set[str]:
    """The last-declared stride of each tensor with several strides: contiguous tensors have it equal to 1."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, group in _stride_groups(params).items():
        groups.setdefault(group, []).append(name)
    return {names[-1] for names in groups.values() if len(names) >= 2}


def _constexpr_default(p: Param, text: str) -> tuple[object, str] | None:
    """(value, why) for a constexpr nobody gives a value: its default, when it is a literal or built from the
    file's literal constants (`max(16, WIDTH)`, `tl.constexpr(128)`), else None (unknown). A value is never made
    up: a kernel compiled with a guessed block size shows registers and spills of a kernel nobody runs."""
    if p.default is None:
        return None
    node = parse_python(p.default, mode="eval").body
    if p.default.strip() == "None":
        return None, "its default"
    tree = _parsed(text)
    value = evaluate(node, _Resolver(tree, 0).lookup if tree is not None else None)
    return None if value is _UNKNOWN else (value, "its default")


class ValueNotKnown(ValueError):
    """A constexpr the kernel needs has no value the tool could read: the kernel is not compiled (KC009)."""


class PinError(ValueError):
    """A pinned value the kernel cannot be compiled with (a num_warps that is not an integer)."""


def _pinned_options(pins: Mapping[str, object]) -> dict[str, int]:
    """The num_warps / num_stages that `pins` sets; PinError for one that is not an integer."""
    out: dict[str, int] = {}
    for name in ("num_warps", "num_stages"):
        if name in pins:
            value = pins[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise PinError(f"{name}: expected an integer, got {value!r}")
            out[name] = value
    return out


def _heuristics(node: ast.FunctionDef) -> dict[str, ast.Lambda]:
    """@triton.heuristics({"NAME": lambda args: ...}) entries of a kernel, as written."""
    out: dict[str, ast.Lambda] = {}
    for dec in node.decorator_list:
        if (isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("heuristics") and dec.args
                and isinstance(dec.args[0], ast.Dict)):
            for k, v in zip(dec.args[0].keys, dec.args[0].values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Lambda):
                    out[k.value] = v
    return out


def _heuristic_value(fn: ast.Lambda, known: dict[str, object]) -> tuple[object, bool]:
    """(value, assumed?) of a heuristic from the values known so far. A comparison on runtime sizes
    (`args["n"] % args["BLOCK"] == 0`) is a flag the launch decides: compiled as True, and said so."""
    arg = fn.args.args[0].arg if fn.args.args else None

    def lookup(n: ast.AST) -> object:
        if (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == arg
                and isinstance(n.slice, ast.Constant)):
            key = n.slice.value
            return known.get(key, _UNKNOWN) if isinstance(key, str) else _UNKNOWN
        return _UNKNOWN

    value = evaluate(fn.body, lookup)
    if value is not _UNKNOWN:
        return value, False
    boolean = isinstance(fn.body, (ast.Compare, ast.BoolOp)) or (
        isinstance(fn.body, ast.UnaryOp) and isinstance(fn.body.op, ast.Not))
    return (True, True) if boolean else (_UNKNOWN, False)


# ----------------------------------------------------------------------------------------------------------------
# Launch sites


@functools.lru_cache(maxsize=32)
def _parsed(text: str) -> ast.Module | None:
    try:
        return parse_python(text)
    except (SyntaxError, ValueError):
        return None


def _arg_value(arg: LaunchArg, site: LaunchSite, text: str | None) -> object | None:
    try:
        node = parse_python(arg.text, mode="eval").body
    except SyntaxError:
        return None
    value = literal_value(node)
    if value is not None:
        return value
    tree = _parsed(text) if text else None
    value = evaluate(node, _Resolver(tree, site.span.start_line + 1).lookup if tree is not None else None)
    return None if value is _UNKNOWN else value


def _site_bindings(site: LaunchSite, text: str | None, params: list[Param]) -> tuple[dict[str, LaunchArg], dict]:
    """Parameter -> launch argument, and the launch options (num_warps, num_stages) with literal values."""
    bound: dict[str, LaunchArg] = {}
    if not site.has_star_args:
        for p, a in zip(params, site.args):
            bound[p.name] = a
    options: dict[str, object] = {}
    for kw in site.kwargs:
        if kw.keyword in ("num_warps", "num_stages"):
            v = _arg_value(kw, site, text)
            # A value computed at run time is kept as None: the job then says that it compiled with the default.
            options[kw.keyword] = v if isinstance(v, int) and not isinstance(v, bool) else None
        elif kw.keyword:
            bound[kw.keyword] = kw
    return bound, options


# ----------------------------------------------------------------------------------------------------------------
# Jobs


@dataclass
class _Config:
    """One configuration to compile: constexpr values and options, plus what the launch said of each argument."""

    label: str
    values: dict[str, object]  # parameter -> literal value given at the launch (or by an autotune config)
    kinds: dict[str, str]  # parameter -> LaunchArg.kind, or "stride" for `t.stride(i)`
    options: dict[str, int | None]  # num_warps / num_stages (None: the launch computes it at run time)
    types: dict[str, str] = field(default_factory=dict)  # parameter -> Triton type a recorded launch passed
    unaligned: set[str] = field(default_factory=set)  # recorded tensors whose address was not 16-byte aligned
    recorded: bool = False  # every value of this configuration comes from one recorded launch


@dataclass
class _Assumed:
    """What one job assumed, to be told to the user in its notes."""

    pointers: dict[str, list[str]] = field(default_factory=dict)  # dtype -> parameters
    divisible: list[str] = field(default_factory=list)
    unit_stride: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _site_config(site: LaunchSite, text: str | None, site_path: str | None, path: str,
                 params: list[Param]) -> _Config:
    bound, options = _site_bindings(site, text, params)
    values = {n: _arg_value(a, site, text) for n, a in bound.items()}
    kinds = {n: a.kind for n, a in bound.items()}
    strides = {n: m for n, a in bound.items() if (m := _STRIDE_CALL.match(a.text.replace(" ", "")))}
    for n, m in strides.items():
        # `t.stride(-1)`, or the highest index asked of the same tensor at this launch: contiguous -> 1.
        highest = max(int(x.group(2)) for x in strides.values() if x.group(1) == m.group(1))
        index = int(m.group(2))
        values[n] = 1 if index == -1 or (index > 0 and index == highest) else None
        kinds[n] = "stride"
    where = f"{Path(site_path).name}:" if site_path and site_path != path else "line "
    return _Config(f"launch at {where}{site.span.start_line + 1}", values, kinds, options)


def _with_spec_cases(cfg: _Config, site: LaunchSite, text: str | None, params: list[Param],
                     pins: Mapping[str, object]) -> list[_Config]:
    """A launch whose constexpr values the launcher computes at run time, as compiled for each case of a spec that
    runs it: `BLOCK = triton.next_power_of_2(n_cols)` has a value at each of the spec's shapes. Read, not made up:
    the configuration is labelled with the spec and shape. Without such a spec the launch stays as it is."""
    unknown = [p.name for p in params if p.is_constexpr and p.name in cfg.values and cfg.values[p.name] is None
               and cfg.kinds.get(p.name) != "literal" and p.name not in pins]
    if not unknown or not text:
        return [cfg]
    bound, _ = _site_bindings(site, text, params)
    option_spans = {kw.keyword: kw.span for kw in site.kwargs if kw.keyword in cfg.options}
    out: list[_Config] = []
    seen: set[tuple] = set()
    for label, values in spec_launch_cases(text, site):
        filled = {n: values.get(bound[n].span) for n in unknown}
        ident = tuple(repr(v) for v in filled.values())
        if any(v is None for v in filled.values()) or ident in seen:
            continue
        seen.add(ident)
        # Runtime sizes keep the JIT's usual assumption (multiples of 16, said in the notes): a spec's ragged test
        # shapes are chosen to catch masking bugs, not the sizes the kernel is tuned for.
        options = {o: v if v is not None else _int_or_none(values.get(option_spans[o])) for o, v in cfg.options.items()}
        out.append(_Config(f"{cfg.label} with {label}", {**cfg.values, **filled},
                           {**cfg.kinds, **{n: "spec" for n in unknown}}, options))
    return out or [cfg]


# torch dtype names (as recorded) -> Triton's element type names
_TORCH_TO_TRITON = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64", "int8": "i8",
                    "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
                    "uint64": "u64", "bool": "i1", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
                    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16"}


def _recorded_config(launch: Any, params: list[Param]) -> _Config | None:
    """The configuration one recorded launch compiled as (record.store.Launch): every parameter's type and
    constexpr value as passed, the pointers' alignment as seen, num_warps/num_stages as given (or the autotuner's
    choice). None when an argument is something the compile cannot be given (a tuple, a dtype object)."""
    values: dict[str, object] = {}
    kinds: dict[str, str] = {}
    types: dict[str, str] = {}
    unaligned: set[str] = set()
    for p in params:
        a = launch.args.get(p.name)
        if a is None:
            return None  # the launch had another signature: recorded for another version of the kernel
        t = a.get("t")
        if t == "tensor":
            dtype = _TORCH_TO_TRITON.get(str(a.get("dtype")))
            if dtype is None or p.is_constexpr:
                return None
            types[p.name], kinds[p.name], values[p.name] = "*" + dtype, "tensor", None
            if a.get("align16") is False:
                unaligned.add(p.name)
        elif t == "tensordesc":
            dtype = _TORCH_TO_TRITON.get(str(a.get("dtype")))
            if dtype is None:
                return None
            block = ", ".join(str(b) for b in a.get("block_shape", []))
            types[p.name], kinds[p.name], values[p.name] = f"tensordesc<{dtype}[{block}]>", "tensor", None
        elif t in ("int", "bool", "float", "str") and not (t == "str" and not p.is_constexpr):
            values[p.name], kinds[p.name] = a.get("v"), "recorded"
            if t == "float" and not isinstance(a.get("v"), float):
                return None  # nan/inf recorded as text
        elif t == "none":
            values[p.name], kinds[p.name] = None, "none" if not p.is_constexpr else "literal"
        else:
            return None
    options: dict[str, int | None] = {}
    tuned = launch.autotune or {}
    for name in ("num_warps", "num_stages"):
        v = launch.options.get(name, tuned.get(name))
        if isinstance(v, int) and not isinstance(v, bool):
            options[name] = v
    run = launch.run
    what = "recorded autotune trial" if tuned.get("trial") else "recorded launch"
    command = run.command if len(run.command) <= 80 else run.command[:77] + "..."
    label = f"{what} {launch.index} (by `{command}` on {run.date}"
    shapes = launch.shapes()
    label += f"; {shapes})" if shapes else ")"
    return _Config(label, values, kinds, options, types, unaligned, recorded=True)


def _values_from(cfg: _Config, params: list[Param], pins: Mapping[str, object], values: dict[str, object],
                 assumed: _Assumed, signature: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Where each value of a job came from: (parameter or option, "recorded" | "pin" | "spec" | "code" |
    "autotune" | "default" | "assumed"). Types of runtime arguments count: an assumed pointer dtype is a guess."""
    guessed = {n for names in assumed.pointers.values() for n in names} | set(assumed.divisible) | set(
        assumed.unit_stride)
    for note in assumed.notes:
        guessed |= {p.name for p in params if note.startswith(p.name + " ") or note.startswith(p.name + ":")}
    out = []
    autotuned = cfg.label.startswith("autotune config")
    for name, ty in signature:
        if name in pins:
            src = "pin"
        elif name in guessed:
            src = "assumed"
        elif cfg.recorded:
            src = "recorded"
        elif ty != "constexpr":
            src = "code"
        elif cfg.kinds.get(name) == "spec":
            src = "spec"
        elif autotuned and name in cfg.values:
            src = "autotune"
        elif name in cfg.values and (cfg.values[name] is not None or cfg.kinds.get(name) == "literal"):
            src = "code"
        elif name in values:
            src = "default"
        else:
            continue
        out.append((name, src))
    for name in ("num_warps", "num_stages"):
        if name in pins:
            src = "pin"
        elif any(n.startswith(f"{name}: {ASSUMED_OPTION}") for n in assumed.notes):
            src = "assumed"
        elif cfg.options.get(name) is not None:
            src = "recorded" if cfg.recorded else "autotune" if autotuned else "code"
        else:
            src = "default"
        out.append((name, src))
    return tuple(out)


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _configs(info: TritonKernel, site_configs: list[_Config]) -> list[_Config]:
    if not (info.autotune_configs and info.autotune_configs_known):
        return site_configs or [_Config("default", {}, {}, {})]
    first = site_configs[0] if site_configs else _Config("", {}, {}, {})
    out = []
    for i, cfg in enumerate(info.autotune_configs):
        given = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
        # triton.Config's defaults are 4 warps and 3 stages, whatever the backend
        options: dict[str, int | None] = {"num_warps": 4, "num_stages": 3,
                                          **{k: v for k, v in given.items() if isinstance(v, int)}}
        kw = ", ".join(f"{k}={v}" for k, v in cfg.kwargs.items())
        out.append(_Config(f"autotune config {i + 1} ({kw})", {**first.values, **cfg.kwargs}, first.kinds, options))
    return out


def _runtime_param(p: Param, cfg: _Config, target: Target, mod: ExtractedModule, pointer_params: set[str],
                   inner: set[str], dns: set[str], dns_align: set[str], pin: object,
                   assumed: _Assumed) -> tuple[str, list[str]]:
    """(type, attrs) of a non-constexpr parameter for one configuration and target."""
    given, kind = cfg.values.get(p.name), cfg.kinds.get(p.name)
    if pin is None and p.name in cfg.types:
        pin = cfg.types[p.name]
    if isinstance(pin, (int, float)):  # a pinned value (bool included) specializes like a launch-site literal
        given, kind = pin, "literal"
    is_ptr = p.name in pointer_params or kind == "tensor" or bool(re.search(r"(^|_)ptrs?$", p.name.lower()))
    if _SCALAR_ANNOTATION.match((p.annotation or "").strip().strip("'\"")):
        is_ptr = False  # `n: int` says so, whatever the body does with it
    if isinstance(pin, str) and pin:
        ty, is_ptr = pin, pin.startswith("*")
    elif is_ptr:
        ty, guessed = _pointer_dtype(p, mod.uses_dot)
        if guessed:
            assumed.pointers.setdefault(ty, []).append(p.name)
    else:
        ty, guessed = _scalar_type(p, given)
        if guessed and ty == "fp32":
            assumed.notes.append(f"{p.name} assumed a float (fp32)")
    attrs: list[str] = []
    if is_ptr:
        if p.name not in dns_align and p.name not in cfg.unaligned:
            attrs.append(DIVISIBILITY)
        if target.backend == "hip" and p.name not in dns:
            attrs.append(POINTER_RANGE)
    elif ty in ("i32", "i64") and p.name not in dns:
        if isinstance(given, int) and not isinstance(given, bool):  # a known value: exactly the JIT's rule
            if given == 1:
                attrs.append(EQUAL_TO_1)
            elif given % 16 == 0 and p.name not in dns_align:
                attrs.append(DIVISIBILITY)
        elif p.name in inner and kind != "stride":
            attrs.append(EQUAL_TO_1)
            assumed.unit_stride.append(p.name)
        elif p.name not in dns_align:
            attrs.append(DIVISIBILITY)
            assumed.divisible.append(p.name)
    return ty, attrs


def _notes(assumed: _Assumed, mod: ExtractedModule) -> tuple[str, ...]:
    notes = []
    for ty, names in assumed.pointers.items():
        why = ("default for kernels calling tl.dot" if ty == DEFAULT_DOT_POINTER and mod.uses_dot
               else "default" if ty in (DEFAULT_POINTER, DEFAULT_DOT_POINTER) else "from the name")
        notes.append(f"{', '.join(names)}: assumed {ty} ({why})")
    notes += assumed.notes
    if assumed.divisible:
        notes.append("assumed multiples of 16 (tt.divisibility=16), as for typical sizes: "
                     + ", ".join(assumed.divisible))
    if assumed.unit_stride:
        notes.append(f"assumed contiguous, stride == 1: {', '.join(assumed.unit_stride)}")
    if mod.info.autotune_configs and not mod.info.autotune_configs_known:
        notes.append("@triton.autotune configs are built by code: compiled with launch-site values")
    notes += [why.removeprefix(NOT_IN_KERNELS) for _, why in mod.unresolved]
    return tuple(notes)


def plan_jobs(
    text: str,
    kernel: str,
    targets: Sequence[str | Target],
    *,
    path: str = "<memory>",
    launch_sites: Sequence[LaunchSite | tuple[LaunchSite, str | None] | tuple[LaunchSite, str | None, str]] = (),
    pins: Mapping[str, object] | None = None,
    triton_version: str | None = None,
    max_configs: int = 16,
    extracted: ExtractedModule | None = None,
    recorded: Sequence[Any] = (),
    recorded_stale: str = "",
) -> list[CompileJob]:
    """Every CompileJob for one kernel: one per autotune config, else per distinct launch-site specialization,
    else one with defaults; each for every target.

    `launch_sites` are the workspace's launches of this kernel, each optionally with the text of the file it is in
    (lets `BLOCK=block` resolve to a literal default) and that file's path (for the label). `pins` fixes a
    parameter's type ("*bf16", "i64") or a constexpr's value, and may set "num_warps"/"num_stages".
    `recorded` are launches of this very kernel (record.store.Launch, its source unchanged since) recorded by the
    user's own runs: each gives every value, so they come first. `recorded_stale` says why launches recorded for
    an older version of the kernel were not used (told in the notes and when a value is missing).
    Raises extract.ExtractionError if the kernel is not in `text`. Constant folding is paid from one budget for
    the whole plan (analyzers.budget), as in the file's analysis.
    """
    with analysis_budget(Budget.for_text(text)):
        return _plan_jobs(text, kernel, targets, path, launch_sites, pins, triton_version, max_configs, extracted,
                          recorded, recorded_stale)


def _plan_jobs(text: str, kernel: str, targets: Sequence[str | Target], path: str, launch_sites: Sequence,
               pins: Mapping[str, object] | None, triton_version: str | None, max_configs: int,
               extracted: ExtractedModule | None, recorded: Sequence[Any], recorded_stale: str) -> list[CompileJob]:
    pins = dict(pins or {})
    pinned_options = _pinned_options(pins)
    mod = extracted or extract_module(text, kernel, path)
    info, params = mod.info, mod.info.params
    pointer_params = _pointer_params(mod.node, {p.name for p in params})
    inner = _inner_strides(params)
    dns = _name_set(mod.jit_options.get("do_not_specialize"), params)
    dns_align = _name_set(mod.jit_options.get("do_not_specialize_on_alignment"), params) | dns
    site_configs = []
    for item in launch_sites:
        if isinstance(item, tuple):
            site, site_text = item[0], item[1]
            site_path = item[2] if len(item) == 3 else None
        else:
            site, site_text, site_path = item, None, None
        if site.target == info.name:
            site_configs += _with_spec_cases(_site_config(site, site_text, site_path, path, params), site,
                                             site_text, params, pins)

    descriptors = sorted(_descriptor_params(mod.node, {p.name for p in params if not p.is_constexpr}) - set(pins))
    if descriptors:
        # A host-built tensor descriptor's block shape and dtype are not in the kernel: typing it as a pointer would
        # be a made-up type that fails to compile, and the failure would look like the user's.
        names = ", ".join(f"`{n}`" for n in descriptors)
        raise ValueNotKnown(
            f"{NOT_COMPILED}the type of {names} is not known (a tensor descriptor the launcher builds; its block "
            f"shape and dtype are not in the kernel); pin it with the `pins` setting, e.g. "
            f"\"{descriptors[0]}\": \"tensordesc<fp16[64, 64]>\"")
    heuristics = _heuristics(mod.node)
    # A slice the worker will refuse (KC008, offline.py) is never compiled: a missing value does not matter there.
    with parsing():  # offline.py parses with ast.parse (it also runs in the worker, which imports no analyzers)
        refused = bool(offline.unsafe_statements(mod.source))
    jobs: list[CompileJob] = []
    seen: set[tuple] = set()
    missing: dict[str, str] = {}  # constexpr -> why its value is not known, for configurations left out
    recorded_configs = [c for c in (_recorded_config(launch, params) for launch in recorded) if c is not None]
    if recorded and not recorded_configs:
        missing.setdefault("", "the recorded launches pass values kernel-lsp cannot rebuild (tuples, dtypes)")
    recorded_counts: dict[int, int] = {}  # position in jobs -> recorded launches it stands for
    for target in [make_target(t) for t in targets]:
        count = 0
        by_ident: dict[tuple, int] = {}
        for cfg in [*recorded_configs, *_configs(info, site_configs)]:
            assumed = _Assumed()
            signature, attrs = [], []
            values: dict[str, object] = {}
            for p in params:
                if not p.is_constexpr and cfg.kinds.get(p.name) == "none":
                    signature.append((p.name, "constexpr"))  # the JIT makes a None argument a constexpr
                    values[p.name] = None
                    continue
                if not p.is_constexpr:
                    ty, p_attrs = _runtime_param(p, cfg, target, mod, pointer_params, inner, dns, dns_align,
                                                 pins.get(p.name), assumed)
                    signature.append((p.name, ty))
                    attrs += [(p.name, a) for a in p_attrs]
                    continue
                signature.append((p.name, "constexpr"))
                if p.name in pins:
                    values[p.name] = pins[p.name]
                elif cfg.recorded:
                    if p.name in cfg.values:
                        values[p.name] = cfg.values[p.name]
                    else:
                        missing.setdefault(p.name, "a recorded launch passed a value kernel-lsp cannot rebuild")
                elif p.name in heuristics or p.name in info.heuristics:
                    continue  # computed below, from the values known
                elif p.name in cfg.values and (cfg.values[p.name] is not None or cfg.kinds.get(p.name) == "literal"):
                    values[p.name] = cfg.values[p.name]
                elif p.name in cfg.values:
                    missing.setdefault(p.name, f"the {cfg.label} passes a value computed at run time")
                elif (default := _constexpr_default(p, text)) is not None:
                    values[p.name] = default[0]
                else:
                    missing.setdefault(p.name, "no launch site, autotune config or default gives it")
            known = {**{k: v for k, v in cfg.values.items() if v is not None}, **values}
            for name in [p.name for p in params if p.is_constexpr and p.name not in values]:
                if name not in heuristics and name in info.heuristics:
                    missing.setdefault(name, "@triton.heuristics computes it with code kernel-lsp does not read")
                    continue
                if name not in heuristics:
                    continue
                value, guessed = _heuristic_value(heuristics[name], known)
                if value is _UNKNOWN:
                    missing.setdefault(name, "@triton.heuristics computes it from values known only at launch")
                    continue
                values[name] = known[name] = value
                if guessed:
                    assumed.notes.append(f"{name} = {value!r} (@triton.heuristics decides it at launch)")
            if any(p.is_constexpr and p.name not in values for p in params):
                if not refused:
                    continue  # never compiled with a made-up value
                values.update({p.name: None for p in params if p.is_constexpr and p.name not in values})
            constexprs = [(name, values[name]) for name, ty in signature if ty == "constexpr"]
            # Defaults of CUDAOptions (4 warps, 3 stages) and HIPOptions (4 warps, 2 stages).
            options = {"num_warps": 4, "num_stages": 2 if target.backend == "hip" else 3}
            for name, given in cfg.options.items():
                if given is not None:
                    options[name] = given
                elif name not in pins:
                    assumed.notes.append(f"{name}: {ASSUMED_OPTION} {options[name]} (triton's default; the launch "
                                         "computes its value at run time)")
            num_warps = pinned_options.get("num_warps", options["num_warps"])
            num_stages = pinned_options.get("num_stages", options["num_stages"])
            ident = (target, tuple(signature), tuple((k, repr(v)) for k, v in constexprs), tuple(attrs), num_warps,
                     num_stages)
            if ident in seen:
                if cfg.recorded and ident in by_ident:
                    recorded_counts[by_ident[ident]] = recorded_counts.get(by_ident[ident], 1) + 1
                continue
            if count >= max_configs:
                break
            seen.add(ident)
            count += 1
            notes = _notes(assumed, mod) + ((recorded_stale,) if recorded_stale else ())
            job = CompileJob(
                path=path, kernel=info.name, module_source=mod.source, line_map=mod.line_map,
                signature=tuple(signature), constexprs=tuple(constexprs), attrs=tuple(attrs), target=target,
                num_warps=num_warps, num_stages=num_stages, config_label=cfg.label, notes=notes,
                unresolved=mod.unresolved,
                values_from=_values_from(cfg, params, pins, values, assumed, signature),
            )
            if cfg.recorded:
                by_ident[ident] = len(jobs)
                recorded_counts.setdefault(len(jobs), 1)
            jobs.append(replace(job, key=job_key(job, triton_version)))
    for i, n in recorded_counts.items():
        head = jobs[i].config_label
        if n > 1:
            head = head.replace("recorded launch ", f"{n} recorded launches like launch ", 1)
        jobs[i] = replace(jobs[i], config_label=head)
    if not jobs and missing:
        stale = f" ({recorded_stale})" if recorded_stale else ""
        if set(missing) == {""}:
            raise ValueNotKnown(f"{NOT_COMPILED}{missing['']}{stale}")
        missing.pop("", None)
        unknown = sorted(missing)
        which = f"`{unknown[0]}`" if len(unknown) == 1 else ", ".join(f"`{n}`" for n in unknown)
        raise ValueNotKnown(
            f"{NOT_COMPILED}the value{'s' * (len(unknown) > 1)} of {which} {'are' if len(unknown) > 1 else 'is'} not "
            f"known ({missing[unknown[0]]}){stale}; record a run that launches it (`kernel-lsp record -- "
            "pytest ...`), pin it with the `pins` setting or launch the kernel with a literal value")
    return jobs


def _name_set(value: object, params: list[Param]) -> set[str]:
    """@triton.jit(do_not_specialize=[...]) entries (names or indices) -> parameter names."""
    if not isinstance(value, (list, tuple)):
        return set()
    out = set()
    for v in value:
        if isinstance(v, int) and 0 <= v < len(params):
            out.add(params[v].name)
        elif isinstance(v, str):
            out.add(v)
    return out
