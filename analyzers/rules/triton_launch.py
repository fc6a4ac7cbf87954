"""Launch-site and autotuning rules (TR010-TR015): `kernel[grid](...)` calls checked against the kernel's
signature, and `@triton.autotune` / `@triton.heuristics` / `triton.Config` arguments checked against its parameters.

Behaviour these rules encode was checked against triton 3.9.0 (runtime/jit.py, runtime/autotuner.py, the CUDA and
HIP backend option dataclasses) and measured on triton 3.6.0 on an H200.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import re
from collections.abc import Iterable, Iterator

from ..discovery import AUTOTUNE_NAMES, CONFIG_NAMES, HEURISTICS_NAMES, KernelSyntax, module_assignments
from ..model import Fix, LaunchArg, LaunchSite, Param, Problem, Related, Severity, Span, TextEdit, TritonKernel
from ..source import is_power_of_2, literal_value
from . import FileContext, LaunchContext, Rule, file_check, launch_check, make_problem, register

# Keywords a launch accepts besides the kernel's parameters: JITFunction.run hands every keyword that is not a
# parameter to backend.parse_options and raises KeyError for names that are not fields of the backend's options
# dataclass. Union of CUDAOptions and HIPOptions fields of triton 3.0-3.9, so code written for either vendor passes
# (an AMD-only option such as waves_per_eu does raise on NVIDIA; the target is unknown here).
LAUNCH_OPTIONS = frozenset({
    "num_warps", "num_ctas", "num_stages", "warp_size", "maxnreg", "ptx_version", "ptx_options", "ir_override",
    "enable_fp_fusion", "sched4reg", "enable_reflect_ftz", "launch_cooperative_grid", "launch_pdl", "clc",
    "supported_fp8_dtypes", "deprecated_fp8_dot_operand_dtypes", "deprecated_fp8_dtypes",
    "default_dot_input_precision", "allowed_dot_input_precisions", "max_num_imprecise_acc_default", "extern_libs",
    "debug", "backend_name", "sanitize_overflow", "enable_assertions", "arch", "instrumentation_mode",
    "fpsan_homomorphic_casts", "min_shared_mem", "cluster_dims",
    # AMD
    "waves_per_eu", "matrix_instr_nonkdim", "kpack", "allow_flush_denorm", "schedule_hint", "llvm_fn_attrs",
    "wgp_cu_mode", "instruction_sched_variant",
})
# JITFunction.run asserts these away ("option is deprecated; current device will be used").
_DEPRECATED = {"device", "device_type", "stream"}
# Every triton.Config contributes these through Config.all_kwargs(), so passing one at the launch of an autotuned
# kernel is "got multiple values for keyword argument" (measured on 3.6 with one config and with several).
_CONFIG_OPTIONS = ("num_warps", "num_stages", "num_ctas")
# triton.Config(kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None, ir_override=None)
_CONFIG_DEFAULTS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None, "pre_hook": None,
                    "ir_override": None}
# Sizes that take only a handful of values: as constexprs they cost a few compiles at most.
_FEW_VALUES = re.compile(r"\.(element_size|dim)\(\)$")

_ADD = """\
import torch
import triton
import triton.language as tl

{decorators}@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    {launch}
    return out
"""
_TUNED = """@triton.autotune(
    configs=[
        triton.Config({{"BLOCK": 1024}}, num_warps=4),
        triton.Config({{"BLOCK": 1024}}, num_warps=8),
        triton.Config({{"BLOCK": {b}}}),
    ],
    key=[{key}],
)
"""
_GRID = "grid = lambda meta: (triton.cdiv(n, meta['BLOCK']),)\n    "


def _example(launch: str, decorators: str = "") -> str:
    return _ADD.format(decorators=decorators, launch=launch)


register(Rule(
    code="TR010", name="launch-argument-count", language="triton", severity=Severity.ERROR, fixable=False,
    summary="A launch passes too many positional arguments, or leaves a required kernel parameter out.",
    wrong=_example("add_kernel[(triton.cdiv(n, 1024),)](x, y, out, BLOCK=1024)"),
    right=_example("add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)"),
    explanation="Triton binds launch arguments like a Python call and raises TypeError (\"missing 1 required "
    "positional argument\") when the kernel is launched. Parameters set by `@triton.autotune` configs or "
    "`@triton.heuristics`, and parameters with defaults, need not be passed. Launches that use `*args`/`**kwargs` "
    "are not checked, nor missing parameters of kernels whose autotune configs or heuristics are built by code, "
    "or that a decorator of the project's own wraps (it may pass them).",
))
register(Rule(
    code="TR011", name="launch-unknown-keyword", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A launch passes a keyword that is neither a kernel parameter nor a compile option, or passes a "
    "parameter twice.",
    wrong=_example("add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOK=1024, num_warp=4)"),
    right=_example("add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, num_warps=4)"),
    explanation="Keywords that are not parameters go to the backend's compile options (`num_warps`, `num_stages`, "
    "`num_ctas`, `maxnreg`, `enable_fp_fusion`, AMD's `waves_per_eu`, ...); any other name raises "
    "`KeyError: Keyword argument ... was specified but unrecognised` when the kernel compiles. `grid=` collides "
    "with the bracket argument, and `device=`/`stream=` are rejected (the current device and stream are used). "
    "A parameter passed positionally and again by keyword is a TypeError. The quick fix renames a misspelt keyword.",
))
register(Rule(
    code="TR012", name="launch-constexpr-value", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A launch passes a tensor or a runtime size for a `tl.constexpr` parameter, or passes a value that "
    "`@triton.autotune` or `@triton.heuristics` sets.",
    wrong=_example(_GRID + "add_kernel[grid](x, y, out, n, BLOCK=1024)",
                   _TUNED.format(b=2048, key='"n"')),
    right=_example(_GRID + "add_kernel[grid](x, y, out, n)", _TUNED.format(b=2048, key='"n"')),
    explanation="A constexpr is compiled into the kernel: a tensor cannot be one (compile error), and a runtime "
    "size such as `x.shape[0]` compiles a new kernel for every distinct value (information: the cost depends on "
    "how many sizes occur, which the code does not show; a warning when a `@spec` of the same file runs the "
    "launcher with several values, named in the message; a parameter the kernel needs as a constant, such as a "
    "block shape, is never advised to become a runtime value). A parameter set by the autotune "
    "configs must not be passed at the launch: Triton raises `Conflicting meta-parameters` (or `got multiple "
    "values`); every `triton.Config` also sets `num_warps`, `num_stages` and `num_ctas`, so those cannot be passed "
    "either. A `@triton.heuristics` value passed by keyword is silently overwritten (warning), passed "
    "positionally it is a TypeError. The quick fix removes the argument.",
))
register(Rule(
    code="TR013", name="autotune-unknown-name", language="triton", severity=Severity.ERROR, fixable=True,
    summary="`@triton.autotune` `key`/`reset_to_zero`/`restore_value`, a `triton.Config` kwarg or a "
    "`@triton.heuristics` key names something that is not a kernel parameter.",
    wrong=_example(_GRID + "add_kernel[grid](x, y, out, n)", _TUNED.format(b=2048, key='"N"')),
    right=_example(_GRID + "add_kernel[grid](x, y, out, n)", _TUNED.format(b=2048, key='"n"')),
    explanation="triton 3.9 raises ValueError at import for unknown `key`, `reset_to_zero` and `restore_value` "
    "names; 3.6 silently drops them, so the kernel tunes once and never re-tunes when the size changes. Config and "
    "heuristics names that are neither parameters nor compile options raise KeyError at compile time. A config "
    "value for a parameter without `tl.constexpr` is information: it reaches the kernel as a runtime value, which "
    "works but is rarely intended (a use that needs a constant is TR004's error). The quick fix renames to the "
    "closest parameter or adds the annotation.",
))
register(Rule(
    code="TR014", name="num-warps-not-power-of-2", language="triton", severity=Severity.ERROR, fixable=True,
    summary="`num_warps` is not a power of 2.",
    wrong=_example("add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, num_warps=6)"),
    right=_example("add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, num_warps=4)"),
    explanation="The CUDA and HIP backends assert `num_warps must be a power of 2` when they compile, for launch "
    "options and `triton.Config(num_warps=...)` alike. The quick fix uses the nearest power of 2 (the lower one "
    "on a tie).",
))
register(Rule(
    code="TR015", name="autotune-duplicate-config", language="triton", severity=Severity.WARNING, fixable=True,
    summary="An autotune config list holds the same `triton.Config` twice.",
    wrong=_example(_GRID + "add_kernel[grid](x, y, out, n)", _TUNED.format(b=1024, key='"n"')),
    right=_example(_GRID + "add_kernel[grid](x, y, out, n)", _TUNED.format(b=2048, key='"n"')),
    explanation="The autotuner benchmarks every listed config, so a duplicate (same kwargs and options, defaults "
    "counted: `num_warps=4`, `num_stages=3`, `num_ctas=1`) only adds tuning time; when all configs are equal the "
    "autotune is pointless. Often a value was meant to differ. The quick fix deletes the later copy. Configs built "
    "by code are not compared.",
))


# ---------------------------------------------------------------------------------------------------------------
# helpers


def _closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate a misspelt name most likely meant: same letters in another case, else a close match."""
    lower = {c.lower(): c for c in candidates}
    if name.lower() in lower:
        return lower[name.lower()]
    match = difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.75)
    if match:
        return lower[match[0]]
    # BLOCK for BLOCK_SIZE, out for out_ptr: one name extends the other by whole `_` parts; only if unambiguous.
    n = name.lower()
    longer = [c for lc, c in lower.items() if lc.startswith(n + "_") or n.startswith(lc + "_")]
    return longer[0] if len(longer) == 1 else None


def _related(kernel: TritonKernel, ctx: LaunchContext) -> tuple[Related, ...]:
    return (Related(kernel.name_span, "kernel defined here", ctx.kernel_path),)


def _with(problem: Problem, severity: Severity) -> Problem:
    return dataclasses.replace(problem, severity=severity)


def _keyword_span(arg: LaunchArg) -> Span:
    s = arg.span
    return Span(s.start_line, s.start_col, s.start_line, s.start_col + len(arg.keyword or ""))


def _tuned_names(kernel: TritonKernel) -> set[str]:
    return {name for cfg in kernel.autotune_configs for name in cfg.kwargs}


def _bound(site: LaunchSite, kernel: TritonKernel) -> list[tuple[LaunchArg, Param | None]]:
    """Each launch argument with the parameter it binds to; positional ones only when no *args hides positions."""
    out: list[tuple[LaunchArg, Param | None]] = []
    if not site.has_star_args:
        out += [(a, kernel.params[i] if i < len(kernel.params) else None) for i, a in enumerate(site.args)]
    out += [(k, kernel.param(k.keyword or "")) for k in site.kwargs]
    return out


def _remove_arg(site: LaunchSite, arg: LaunchArg) -> Fix | None:
    if site.has_star_args:  # starred arguments are not in site.args: removing up to a neighbour could eat one
        return None
    ordered = sorted(site.args + site.kwargs, key=lambda a: (a.span.start_line, a.span.start_col))
    i = ordered.index(arg)
    s = arg.span
    if i > 0:  # ", arg"
        prev = ordered[i - 1].span
        span = Span(prev.end_line, prev.end_col, s.end_line, s.end_col)
    elif len(ordered) > 1:  # "arg, "
        nxt = ordered[1].span
        span = Span(s.start_line, s.start_col, nxt.start_line, nxt.start_col)
    else:
        span = s
    label = f"{arg.keyword}=" if arg.keyword else arg.text
    return Fix(f"Remove `{label}`", (TextEdit(span, ""),))


# ---------------------------------------------------------------------------------------------------------------
# launch checks


@launch_check
def check_argument_count(site: LaunchSite, kernel: TritonKernel, ctx: LaunchContext) -> Iterator[Problem]:
    if site.has_star_args or kernel.rebound:
        return
    related = _related(kernel, ctx)
    params = kernel.params
    if len(site.args) > len(params):
        extra = site.args[len(params):]
        span = Span(extra[0].span.start_line, extra[0].span.start_col, extra[-1].span.end_line, extra[-1].span.end_col)
        yield make_problem(
            "TR010", span, f"`{kernel.name}` takes {len(params)} argument(s) but the launch passes {len(site.args)} "
            f"positionally ({len(extra)} extra)", kernel=kernel.name, related=related)
    if "autotune" in kernel.decorators and not kernel.autotune_configs_known or not kernel.heuristics_known \
            or kernel.unknown_wrappers:
        return  # configs or heuristics built by code, or a wrapper of the project's own, may set any parameter
    given = {p.name for p in params[: len(site.args)]} | {k.keyword for k in site.kwargs}
    provided = kernel.provided_by_decorators
    # A misspelt keyword is reported by TR011 with its fix; do not report the parameter it meant as missing too.
    missing = [p.name for p in params if p.default is None and p.name not in given and p.name not in provided]
    if missing:  # only then is the did-you-mean search worth its cost
        declared = [p.name for p in params]
        meant = {_closest(k.keyword or "", declared) for k in site.kwargs if k.keyword not in declared}
        missing = [m for m in missing if m not in meant]
    if missing:
        listed = ", ".join(f"`{m}`" for m in missing)
        yield make_problem(
            "TR010", site.callee_span, f"launch of `{kernel.name}` is missing required argument(s) {listed}",
            kernel=kernel.name, related=related)


@launch_check
def check_keywords(site: LaunchSite, kernel: TritonKernel, ctx: LaunchContext) -> Iterator[Problem]:
    if kernel.rebound:
        return
    related = _related(kernel, ctx)
    names = [p.name for p in kernel.params]
    passed = {k.keyword for k in site.kwargs}
    positional = set() if site.has_star_args else set(names[: len(site.args)])
    for kw in site.kwargs:
        name = kw.keyword or ""
        if name in names:
            if name in positional:
                yield make_problem(
                    "TR011", _keyword_span(kw), f"`{name}` is passed positionally (argument {names.index(name) + 1}) "
                    "and again by keyword", kernel=kernel.name, related=related)
            continue
        if name in LAUNCH_OPTIONS:
            continue
        if name in _DEPRECATED:
            msg = f"`{name}=` is rejected at launch: Triton always uses the current device and stream"
        elif name in ("grid", "warmup"):
            msg = f"`{name}=` collides with the launcher's own argument: pass the grid in brackets, `kernel[grid](...)`"
        else:
            msg = f"`{name}` is not a parameter of `{kernel.name}` nor a launch option (Triton raises KeyError)"
        free = [n for n in names if n not in passed and n not in positional]
        guess = None if name in _DEPRECATED or name in ("grid", "warmup") else (
            _closest(name, free) or _closest(name, LAUNCH_OPTIONS - passed))
        fix = None
        if guess:
            msg += f"; did you mean `{guess}`?"
            fix = Fix(f"Rename to `{guess}`", (TextEdit(_keyword_span(kw), guess),))
        yield make_problem("TR011", _keyword_span(kw), msg, fix=fix, kernel=kernel.name, related=related)


@launch_check
def check_constexpr_values(site: LaunchSite, kernel: TritonKernel, ctx: LaunchContext) -> Iterator[Problem]:
    if kernel.rebound:
        return
    related = _related(kernel, ctx)
    autotuned = "autotune" in kernel.decorators
    tuned = _tuned_names(kernel) if autotuned else set()
    for arg, param in _bound(site, kernel):
        name = param.name if param else arg.keyword
        where = _keyword_span(arg) if arg.keyword else arg.span
        if name in tuned:
            cfg = next(c for c in kernel.autotune_configs if name in c.kwargs)
            yield make_problem(
                "TR012", where, f"`{name}` is set by the autotune configs of `{kernel.name}`: passing it at the "
                "launch raises a conflict error; remove it, the autotuner sets it", fix=_remove_arg(site, arg),
                kernel=kernel.name, related=related + (Related(cfg.span, f"`{name}` tuned here", ctx.kernel_path),))
        elif autotuned and arg.keyword in _CONFIG_OPTIONS and param is None:
            yield make_problem(
                "TR012", where, f"`{name}` is set by every `triton.Config` of the autotuned `{kernel.name}`: passing "
                "it at the launch raises TypeError (multiple values); set it in the configs instead",
                fix=_remove_arg(site, arg), kernel=kernel.name, related=related)
        elif name in kernel.heuristics:
            if arg.keyword:
                yield _with(make_problem(
                    "TR012", where, f"`{name}` is computed by `@triton.heuristics`, which overwrites the value passed "
                    "here; remove it", fix=_remove_arg(site, arg), kernel=kernel.name, related=related),
                    Severity.WARNING)
            else:
                yield make_problem(
                    "TR012", where, f"`{name}` is computed by `@triton.heuristics`: passing it positionally raises "
                    "TypeError (multiple values); remove it", fix=_remove_arg(site, arg), kernel=kernel.name,
                    related=related)
        elif param is not None and param.is_constexpr:
            if arg.kind == "tensor":
                yield make_problem(
                    "TR012", arg.span, f"a tensor is passed for the constexpr parameter `{name}`: constexpr values "
                    "are compiled into the kernel; pass a Python scalar, or drop `tl.constexpr`",
                    kernel=kernel.name, related=related)
            elif arg.kind == "shape" and not _FEW_VALUES.search(arg.text):
                # A recompile per distinct value is a cost that depends on sizes this code does not show: information,
                # unless a spec shows the values.
                shown = ctx.spec_values.get(arg.span)
                many = "" if shown else "if many values occur, "
                if name in kernel.needed_constexprs:
                    # Needed as a constant (a block shape, a static_range bound): never advise a runtime value, nor a
                    # bucketing that changes what the kernel computes.
                    advice = (f"`{name}` sets a block shape, so it must stay a compile-time constant; {many}"
                              f"add a padded block parameter (`triton.next_power_of_2({arg.text})`) for the "
                              f"shape and keep `{name}`'s exact value as a runtime size for the mask")
                else:
                    advice = f"{many}drop `tl.constexpr` from the parameter so that one compile serves all"
                if shown is None:
                    yield _with(make_problem(
                        "TR012", arg.span, f"the runtime size `{arg.text}` is passed for the constexpr parameter "
                        f"`{name}`: every distinct value compiles a new kernel; {advice}",
                        kernel=kernel.name, related=related), Severity.INFO)
                else:
                    # A spec shows the values: the recompiles are not a guess any more.
                    values = ", ".join(str(v) for v in shown.values)
                    yield _with(make_problem(
                        "TR012", arg.span, f"the runtime size `{arg.text}` is passed for the constexpr parameter "
                        f"`{name}`, and {shown.source} runs it with {len(shown.values)} values ({values}): each "
                        f"compiles a new kernel; {advice}", kernel=kernel.name,
                        related=(*related, Related(shown.span, f"{name} = {values}"))), Severity.WARNING)


@launch_check
def check_launch_block_sizes(site: LaunchSite, kernel: TritonKernel, ctx: LaunchContext) -> Iterator[Problem]:
    """A literal passed at the launch for a parameter the body uses as a block dimension must be a power of 2."""
    if kernel.rebound or not kernel.shape_params:
        return
    for arg, param in _bound(site, kernel):
        if param is None or param.name not in kernel.shape_params:
            continue
        literal = arg.kind == "literal"
        value = _literal_text(arg.text) if literal else ctx.values.get(arg.span)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0 or is_power_of_2(value):
            continue
        p2 = 1 << (value - 1).bit_length()
        span = arg.value_span or arg.span
        # A value read from the launcher's code (`BLOCK_M, BLOCK_N = 16, 100`) is fixed where it is computed.
        shown = "at this launch" if literal else f"at this launch (the value of `{arg.text}`)"
        yield make_problem(
            "TR001", span, f"`{param.name}` = {value} {shown} is a block dimension of `{kernel.name}` "
            f"(a tl.arange extent or block shape), not a power of 2: it fails to compile; use {p2} and mask the "
            "extra lanes", fix=Fix(f"Use {p2}", (TextEdit(span, str(p2)),)) if literal else None,
            kernel=kernel.name, related=_related(kernel, ctx))


# ---------------------------------------------------------------------------------------------------------------
# decorator and config checks


def _strings(node: ast.expr | None) -> list[ast.Constant]:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _rename_string(ctx: FileContext, node: ast.Constant, new: str) -> Fix | None:
    text = ctx.src.segment(node)
    if len(text) < 2 or text[0] not in "'\"" or text[-1] != text[0] or text.startswith(text[0] * 3):
        return None  # prefixed, triple-quoted or implicitly concatenated: leave it to the user
    return Fix(f"Rename to `{new}`", (TextEdit(ctx.src.span(node), text[0] + new + text[0]),))


def _decorator_calls(ctx: FileContext, ks: KernelSyntax, names: set[str]) -> list[ast.Call]:
    return [d for d in ks.node.decorator_list
            if isinstance(d, ast.Call) and ctx.imports.resolve(d.func) in names]


def _argument(call: ast.Call, keyword: str, position: int) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == keyword:
            return k.value
    return call.args[position] if len(call.args) > position else None


def _config_list_node(call: ast.Call, module: dict[str, ast.expr]) -> ast.List | ast.Tuple | None:
    """The list or tuple of configs an autotune names, written in place or as a module-level name."""
    node = _argument(call, "configs", 0)
    if isinstance(node, ast.Name):
        node = module.get(node.id)
    return node if isinstance(node, (ast.List, ast.Tuple)) else None


def _config_list(call: ast.Call, module: dict[str, ast.expr]) -> list[ast.expr] | None:
    node = _config_list_node(call, module)
    return list(node.elts) if node is not None else None


def _config_dict(ctx: FileContext, node: ast.expr) -> ast.Dict | None:
    if isinstance(node, ast.Call) and ctx.imports.resolve(node.func) in CONFIG_NAMES:
        d = _argument(node, "kwargs", 0)
        return d if isinstance(d, ast.Dict) else None
    return None


def _constexpr_fix(ctx: FileContext, param: Param) -> Fix | None:
    if param.annotation is not None:
        return None
    alias = sorted(ctx.imports.aliases_of("triton.language"))
    ann = f"{alias[0]}.constexpr" if alias else (
        "constexpr" if ctx.imports.names.get("constexpr", "").endswith(".constexpr") else None)
    if ann is None:
        return None
    line, col = param.name_end
    return Fix(f"Annotate `{param.name}: {ann}`", (TextEdit(Span(line, col, line, col), f": {ann}"),))


@file_check
def check_decorator_names(ctx: FileContext) -> None:
    module = module_assignments(ctx.body)
    seen: set[Span] = set()  # a config list shared by several kernels is reported once
    runtime_tuned: set[tuple[str, str]] = set()

    def report(node: ast.AST, message: str, fix: Fix | None, kernel: TritonKernel, severity: Severity | None = None):
        span = ctx.src.span(node)
        if span not in seen:
            seen.add(span)
            related = (Related(kernel.name_span, "kernel defined here"),)
            ctx.report("TR013", span, message, fix=fix, kernel=kernel.name, severity=severity, related=related)

    def unknown(node: ast.Constant, what: str, kernel: TritonKernel, params: list[str], allow_options: bool) -> None:
        name = node.value
        if not isinstance(name, str) or name in params or (allow_options and name in LAUNCH_OPTIONS):
            return
        guess = _closest(name, params)
        msg = f"{what} `{name}` is not a parameter of `{kernel.name}`"
        if guess:
            msg += f"; did you mean `{guess}`?"
        report(node, msg, _rename_string(ctx, node, guess) if guess else None, kernel)

    for ks in ctx.triton.kernels:
        kernel = ks.kernel
        params = [p.name for p in kernel.params]
        for call in _decorator_calls(ctx, ks, AUTOTUNE_NAMES):
            # autotune(configs, key, prune_configs_by, reset_to_zero, restore_value, ...)
            for arg, pos in (("key", 1), ("reset_to_zero", 3), ("restore_value", 4)):
                for node in _strings(_argument(call, arg, pos)):
                    unknown(node, f"autotune `{arg}` entry", kernel, params, allow_options=False)
            for cfg in _config_list(call, module) or []:
                d = _config_dict(ctx, cfg)
                for key in d.keys if d else []:
                    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                        continue
                    param = kernel.param(key.value)
                    if param is None:
                        unknown(key, "config kwarg", kernel, params, allow_options=True)
                    elif not param.is_constexpr and (kernel.name, param.name) not in runtime_tuned:
                        runtime_tuned.add((kernel.name, param.name))  # once per parameter, not per config
                        # It works (a tuned runtime value); only a use that needs a constant fails (TR004 says so).
                        report(key, f"config kwarg `{key.value}` sets `{kernel.name}`'s parameter `{key.value}`, which "
                               "is not `tl.constexpr`: the tuned value reaches the kernel as a runtime value",
                               _constexpr_fix(ctx, param), kernel, Severity.INFO)
        for call in _decorator_calls(ctx, ks, HEURISTICS_NAMES):
            values = _argument(call, "values", 0)
            for key in values.keys if isinstance(values, ast.Dict) else []:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    unknown(key, "heuristics key", kernel, params, allow_options=True)


def _nearest_power_of_2(value: int) -> int:
    if value <= 1:
        return 1
    low = 1 << (value.bit_length() - 1)
    return low if value - low <= 2 * low - value else 2 * low


def _report_num_warps(ctx: FileContext, value: object, span: Span, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or is_power_of_2(value):
        return
    best = _nearest_power_of_2(value)
    ctx.report("TR014", span, f"num_warps={value} in a {where} is not a power of 2 (Triton asserts when it "
               f"compiles); use {best}", fix=Fix(f"Use num_warps={best}", (TextEdit(span, str(best)),)))


@file_check
def check_num_warps(ctx: FileContext) -> None:
    for node in ctx.walk_statements_containing("Config", decorators_only=True):
        if isinstance(node, ast.Call) and ctx.imports.resolve(node.func) in CONFIG_NAMES:
            value = _argument(node, "num_warps", 1)
            if value is not None:
                _report_num_warps(ctx, literal_value(value), ctx.src.span(value), "triton.Config")
    for site in ctx.triton.launch_sites:  # kernel[grid](..., num_warps=...)
        for arg in site.kwargs:
            if arg.keyword == "num_warps" and arg.kind == "literal" and arg.value_span is not None:
                _report_num_warps(ctx, _literal_text(arg.text), arg.value_span, "launch")


def _literal_text(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _config_identity(ctx: FileContext, node: ast.expr) -> tuple | None:
    """What makes two triton.Config calls equal (as Config.__eq__ sees it), or None when it cannot be told."""
    d = _config_dict(ctx, node)
    if d is None or any(k is None for k in d.keys) or not isinstance(node, ast.Call):
        return None
    if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
        return None

    # Structural comparison of the expressions (ast.dump leaves positions out); equal text means equal values.
    kwargs = sorted((ast.dump(k), ast.dump(v)) for k, v in zip(d.keys, d.values) if k is not None)
    options = {name: ast.dump(ast.Constant(value)) for name, value in _CONFIG_DEFAULTS.items()}
    options.update((name, ast.dump(arg)) for name, arg in zip(_CONFIG_DEFAULTS, node.args[1:]))
    options.update((k.arg, ast.dump(k.value)) for k in node.keywords if k.arg and k.arg != "kwargs")
    return tuple(kwargs), tuple(sorted(options.items()))


def _delete_element(ctx: FileContext, elts: list[ast.expr], i: int) -> Fix:
    s = ctx.src.span(elts[i])
    line = ctx.src.line(s.start_line)
    rest = ctx.src.line(s.end_line)[s.end_col:]
    if not line[: s.start_col].strip() and re.fullmatch(r"\s*,?\s*(#.*)?", rest):  # on its own line(s): drop them
        span = Span(s.start_line, 0, s.end_line + 1, 0)
    else:  # drop ", element"
        p = ctx.src.span(elts[i - 1])
        span = Span(p.end_line, p.end_col, s.end_line, s.end_col)
    return Fix("Remove the duplicate config", (TextEdit(span, ""),))


@file_check
def check_duplicate_configs(ctx: FileContext) -> None:
    module = module_assignments(ctx.body)
    done: set[int] = set()  # a config list shared by several kernels is checked once
    imports = tuple(sorted(ctx.imports.names.items()))
    for ks in ctx.triton.kernels:
        calls = list(_decorator_calls(ctx, ks, AUTOTUNE_NAMES))
        if all(isinstance(_argument(c, "configs", 0), (ast.List, ast.Tuple)) for c in calls):
            # Configs written in the decorator: the result depends on this kernel's tree and the imports only.
            ctx.memoized("duplicate_configs", ks.node, imports, ks.kernel.span.start_line, ks.kernel.span.end_line,
                         functools.partial(_check_duplicates, ctx, ks, calls, module, done))
        else:
            _check_duplicates(ctx, ks, calls, module, done)


def _config_identities(ctx: FileContext, configs: ast.List | ast.Tuple) -> tuple[tuple | None, ...]:
    """Each config's identity; position independent, so remembered per config list while it is unchanged."""
    context = tuple(sorted(ctx.imports.names.items()))
    if ctx.memo is not None:
        known, _ = ctx.memo.get("config_identities", configs, context)
        if isinstance(known, tuple):  # put below by an earlier analysis
            return known
    idents = tuple(_config_identity(ctx, e) for e in configs.elts)
    if ctx.memo is not None:
        ctx.memo.put("config_identities", configs, context, idents)
    return idents


def _check_duplicates(ctx: FileContext, ks: KernelSyntax, calls: list[ast.Call], module: dict, done: set[int]) -> None:
    for call in calls:
        configs = _config_list_node(call, module)
        if configs is None or not configs.elts or id(configs.elts[0]) in done:
            continue
        elts = list(configs.elts)
        done.add(id(elts[0]))
        idents = _config_identities(ctx, configs)
        first: dict[tuple, ast.expr] = {}
        for i, (elt, ident) in enumerate(zip(elts, idents)):
            if ident is None:
                continue
            if ident in first:
                all_same = len(elts) > 1 and all(other == ident for other in idents)
                msg = ("all autotune configs are identical: the autotune has nothing to choose from" if all_same
                       else "this config duplicates an earlier one: it only adds tuning time")
                ctx.report("TR015", elt, msg, fix=_delete_element(ctx, elts, i), kernel=ks.kernel.name,
                           related=(Related(ctx.src.span(first[ident]), "first listed here"),))
            else:
                first[ident] = elt
