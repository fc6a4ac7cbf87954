"""TR004 runtime-value-needs-constexpr: A runtime value where Triton needs a compile-time constant (tl.arange bounds,
shapes, axes, tl.static_range bounds, tl.range options).
"""

from __future__ import annotations

import ast

from ...model import Severity, Span, TextEdit
from .. import Rule, register
from .facts import KERNEL_HEADER, CallSite, KernelFacts, _once, _span, constexpr_arg_calls, kernel_check

register(Rule(
    code="TR004", name="runtime-value-needs-constexpr", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A runtime value where Triton needs a compile-time constant (tl.arange bounds, shapes, axes, "
    "tl.static_range bounds, tl.range options).",
    explanation="Block shapes, `tl.arange` bounds, reduction axes, `tl.static_range` bounds and `tl.range`'s "
    "num_stages are fixed at compile time. A kernel parameter without a `tl.constexpr` annotation is a "
    "runtime scalar, even when autotune or the launch passes a literal for it: annotate it `: tl.constexpr`. "
    "A local assigned with a plain `=` is a runtime tensor too, even `half = BLOCK // 2` (triton 3.6 and 3.9 "
    "convert every assigned value): write `half: tl.constexpr = BLOCK // 2`. The quick fix adds the "
    "annotations. Unannotated parameters of @jit helpers are not reported: a caller may pass constexprs.",
    wrong=KERNEL_HEADER + "def fill(X, BLOCK):\n    offs = tl.arange(0, BLOCK)\n    tl.store(X + offs, 0.0)\n",
    right=KERNEL_HEADER + "def fill(X, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
    "    tl.store(X + offs, 0.0)\n",
))


def _constexpr_edit(k: KernelFacts, name: str) -> TextEdit | None:
    arg = k.args.get(name)
    if arg is None or not k.f.can_fix:
        return None
    ann = f"{k.f.tl}constexpr"
    if arg.annotation is not None:
        return TextEdit(_span(k, arg.annotation), ann)
    s = _span(k, arg)
    end = Span(s.start_line, s.start_col + len(name), s.start_line, s.start_col + len(name))
    default = k.defaults.get(name)
    if default is not None:
        d = _span(k, default)
        if d.start_line == end.start_line:  # `BLOCK=128` -> `BLOCK: tl.constexpr = 128`
            return TextEdit(Span(end.start_line, end.start_col, d.start_line, d.start_col), f": {ann} = ")
    return TextEdit(end, f": {ann}")


def _report_runtime(k: KernelFacts, c: CallSite, short: str, arg: ast.expr) -> None:
    tl = k.f.tl
    roots = k.runtime_roots(arg)
    order = list(k.args)
    params = sorted((n for kind, n in roots if kind == "param"), key=order.index)
    locals_ = [n for kind, n in roots if kind == "local"]
    others = [n for kind, n in roots if kind == "other"]
    fixable = bool(params or locals_) and not others
    parts = []
    if params:
        verb = "are runtime parameters" if len(params) > 1 else "is a runtime parameter"
        parts.append(f"{', '.join(f'`{p}`' for p in params)} {verb}")
    parts += [f"`{n}` is assigned with a plain `=`, which makes it a runtime tensor" for n in locals_]
    parts += [f"it depends on {o}" for o in others]
    why = "; ".join(parts) or "it is a runtime value"
    todo = (["annotate " + ", ".join(f"`{p}: {tl}constexpr`" for p in params)] if params else []) + \
        [f"write `{n}: {tl}constexpr = ...`" for n in locals_]
    if short == "static_assert":
        k.ctx.report("TR004", arg, f"{tl}static_assert needs a compile-time condition, but {why}: use "
                     f"{tl}device_assert(...) for a runtime check" + (f", or {' and '.join(todo)}" if fixable else ""),
                     kernel=k.name)
        return
    if short in ("max", "min") and len(c.node.args) == 2 and arg is c.node.args[1]:
        # tl.max(a, b) reads b as the axis: the elementwise maximum is tl.maximum.
        alt = f"{tl}{short}imum"
        fix = _once(k, f"Use {alt}", [TextEdit(_span(k, c.node.func), alt)]) if k.f.can_fix else None
        k.ctx.report("TR004", arg, f"the second argument of {tl}{short} is the axis, a compile-time constant, but "
                     f"this one is a runtime value: for the elementwise {short}imum of two values use "
                     f"{alt}(a, b)", fix=fix, kernel=k.name)
        return
    if short == "static_range" and arg in c.node.args and params and not locals_:
        fix = _once(k, f"Use {tl}range", [TextEdit(_span(k, c.node.func), f"{tl}range")]) if k.f.can_fix else None
        k.ctx.report("TR004", arg, f"{tl}static_range unrolls at compile time, but {why}: use {tl}range(...) for a "
                     f"runtime trip count", fix=fix, kernel=k.name)
        return
    what = f"{tl}{short} needs a compile-time constant here, but {why}"
    if fixable:
        edits = [e for e in [*(_constexpr_edit(k, p) for p in params), *(_local_constexpr_edit(k, n) for n in locals_)]
                 if e is not None]
        fix = _once(k, f"Make {', '.join(params + locals_)} {tl}constexpr", edits) if edits else None
        k.ctx.report("TR004", arg, f"{what}: {' and '.join(todo)}", fix=fix, kernel=k.name)
    else:
        hint = f"use {tl}static_range for an unrolled loop" if any(o.startswith("the loop variable") for o in others) \
            else f"use a {tl}constexpr block size and mask the lanes you do not need"
        k.ctx.report("TR004", arg, f"{what}: {hint}", kernel=k.name)


def _local_constexpr_edit(k: KernelFacts, name: str) -> TextEdit | None:
    binds = k.assigns.get(name, [])
    if len(binds) != 1 or binds[0][2] is None or not k.f.can_fix:
        return None
    s = _span(k, binds[0][2])
    return TextEdit(Span(s.end_line, s.end_col, s.end_line, s.end_col), f": {k.f.tl}constexpr")


@kernel_check
def _tr004_runtime_args(k: KernelFacts) -> None:
    """TR004 on every argument that must be constexpr and is a runtime value."""
    for c, short, runtime in constexpr_arg_calls(k):
        for a in runtime:
            _report_runtime(k, c, short, a)
