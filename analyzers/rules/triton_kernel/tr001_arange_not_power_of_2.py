"""TR001 arange-not-power-of-2: A `tl.arange` extent or block shape that is not a power of 2."""

from __future__ import annotations

import ast

from ...model import Severity, TextEdit
from ...source import is_power_of_2, next_power_of_2
from .. import Rule, register
from .facts import KERNEL_HEADER, KernelFacts, _more_configs, _once, _short, _span, constexpr_arg_calls, kernel_check

register(Rule(
    code="TR001", name="arange-not-power-of-2", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A `tl.arange` extent or block shape that is not a power of 2.",
    explanation="Every Triton block dimension must be a power of 2: `tl.arange(0, 10)` or `tl.zeros((48,), ...)` "
    "fails to compile. Round the extent up to the next power of 2 and mask the extra lanes "
    "(`offs < n`). The value is checked for literals, module constants, parameter defaults, each "
    "autotune config, and values passed at launch sites: literals (`kernel[grid](..., BLOCK=100)`) and values the "
    "launcher's code shows (`BLOCK_M, BLOCK_N = 16, 100`, `cfg[\"BLOCK\"]` of a dict literal, a class attribute, "
    "`min`/`max` and `triton.next_power_of_2` of constants; a launcher parameter's default is not its value); the "
    "quick fix rounds a literal up.",
    wrong=KERNEL_HEADER + "def copy(X, Y, n):\n    offs = tl.arange(0, 10)\n    x = tl.load(X + offs, mask=offs < n)\n"
    "    tl.store(Y + offs, x, mask=offs < n)\n",
    right=KERNEL_HEADER + "def copy(X, Y, n):\n    offs = tl.arange(0, 16)\n    x = tl.load(X + offs, mask=offs < n)\n"
    "    tl.store(Y + offs, x, mask=offs < n)\n",
))


def _check_extent(k: KernelFacts, call: ast.Call, end: ast.expr, start: ast.expr | None, what: str = "") -> None:
    tl = k.f.tl
    failing = []
    for env in k.scenarios:
        used: list = []
        e = k.evaluate(end, env, used)
        s = k.evaluate(start, env, used) if start is not None else 0
        if isinstance(e, int) and isinstance(s, int) and e - s > 0 and not is_power_of_2(e - s):
            failing.append((e, e - s, used))
    if not failing:
        return
    e, n, used = failing[0]
    p2 = next_power_of_2(n)
    more = _more_configs(len(failing))
    literal = isinstance(end, ast.Constant) and (start is None or isinstance(start, ast.Constant))
    start_value = start.value if isinstance(start, ast.Constant) and isinstance(start.value, int) else 0
    fix = None
    if literal:
        new_end = p2 + start_value
        fix = _once(k, f"Round up to {new_end}", [TextEdit(_span(k, end), str(new_end))])
    names = list(dict.fromkeys(u[0] for u in used))
    if isinstance(end, ast.Name) and names == [end.id]:
        advice = f"make {end.id} a power of 2 such as {p2}"
    else:
        advice = f"use a power of 2 such as {p2}"
    if start is None:  # a zeros/full shape element
        desc = k.describe(end, e, used)
        k.ctx.report("TR001", end, f"{what} {desc}{more} is not a power of 2: "
                     f"{advice if not literal else f'use {p2}'}", fix=fix, kernel=k.name)
        return
    seg = k.ctx.src.segment
    subject = f"{tl}arange({_short(seg(start))}, {_short(seg(end))}) has {n} elements"
    if literal:
        advice = f"use {tl}arange({start_value}, {new_end})"
    else:
        subject += f" ({k.describe(end, e, used)})"
    # Name the offsets the way the code does (`cols = tl.arange(0, 100)`); never a name it does not have.
    owner = next((name for name, binds in k.assigns.items() for _, v, _ in binds if v is call), None)
    tail = (f"mask the lanes past {n}" + (f" ({owner} < {n})" if owner else "")) if literal else "mask the extra lanes"
    k.ctx.report("TR001", end, f"{subject}{more}, not a power of 2: {advice} and {tail}", fix=fix, kernel=k.name)


@kernel_check
def _tr001_block_extents(k: KernelFacts) -> None:
    """TR001 on arange extents and zeros/full shapes whose constexpr arguments are all compile-time values."""
    tl = k.f.tl
    for c, short, runtime in constexpr_arg_calls(k):
        if runtime:
            continue  # TR004's
        if short == "arange" and len(c.node.args) == 2:
            _check_extent(k, c.node, c.node.args[1], c.node.args[0])
        elif short in ("zeros", "full"):
            shp = c.node.args[0] if c.node.args else \
                next((kw.value for kw in c.node.keywords if kw.arg == "shape"), None)
            for dim in shp.elts if isinstance(shp, (ast.Tuple, ast.List)) else ():
                _check_extent(k, c.node, dim, None, what=f"{tl}{short} shape element")
