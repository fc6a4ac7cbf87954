"""TR008 reduction-without-neutral-other: A masked `tl.load` without a neutral `other=` feeds
tl.max/tl.min/tl.sum/tl.argmax/tl.argmin/tl.reduce.
"""

from __future__ import annotations

import ast

from ...model import Related, Severity, Span, TextEdit
from .. import Rule, register
from .facts import CONSTEXPR, KERNEL_HEADER, PLAIN, TL, KernelFacts, _is_none, _once, _short, _span, kernel_check

register(Rule(
    code="TR008", name="reduction-without-neutral-other", language="triton", severity=Severity.WARNING,
    fixable=True,
    summary="A masked `tl.load` without a neutral `other=` feeds tl.max/tl.min/tl.sum/tl.argmax/tl.argmin/tl.reduce.",
    explanation="Masked-off lanes of a load hold undefined values unless `other=` is given, and a reduction reads "
    "every lane. Use the reduction's identity: float('-inf') for max/argmax, float('inf') for min/argmin, "
    "0 for sum. `other=0` feeding tl.max is also wrong for all-negative rows. The value is followed "
    "through names, casts, negation and arithmetic; functions such as tl.exp or tl.where end the trace. A load "
    "that reaches a sum only through arithmetic with other values (`x * g`, x loaded with other=0) is "
    "information: the masked lanes usually cancel there.",
    wrong=KERNEL_HEADER + "def rowmax(X, Y, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
    "    x = tl.load(X + offs, mask=offs < n)\n    tl.store(Y, tl.max(x, axis=0))\n",
    right=KERNEL_HEADER + "def rowmax(X, Y, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
    "    x = tl.load(X + offs, mask=offs < n, other=float(\"-inf\"))\n    tl.store(Y, tl.max(x, axis=0))\n",
))

# Calls that keep a traced value's lanes in place (TR008 follows them; anything else ends the trace).
_LANE_PRESERVING = {"reshape", "trans", "permute", "view", "broadcast_to", "expand_dims", "ravel", "cast"}
_NEUTRAL_TEXT = {"max": 'float("-inf")', "min": 'float("inf")', "sum": "0"}
_REDUCTIONS = {"max": "max", "min": "min", "sum": "sum", "argmax": "max", "argmin": "min", "reduce": "reduce"}


def _insert_kwarg(k: KernelFacts, call: ast.Call, text: str) -> TextEdit:
    arguments: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    last = max(arguments, key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0))
    s = _span(k, last)
    return TextEdit(Span(s.end_line, s.end_col, s.end_line, s.end_col), f", {text}")


@kernel_check
def _tr008_neutral(k: KernelFacts) -> None:
    tl = k.f.tl
    seen: set[int] = set()
    env = k.scenarios[0]
    for c in k.calls:
        node = c.node
        kind = None
        if c.name and c.name.startswith(TL + ".") and c.name[len(TL) + 1:] in _REDUCTIONS:
            kind, src = _REDUCTIONS[c.name[len(TL) + 1:]], (node.args[0] if node.args else None)
            label = c.name[len(TL) + 1:]
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _REDUCTIONS \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in k.assigns:
            kind, src, label = _REDUCTIONS[node.func.attr], node.func.value, node.func.attr
        if kind is None or src is None:
            continue
        for load, flipped, direct in _trace_loads(k, src, kind, node.lineno):
            if id(load) in seen:
                continue
            kw = {x.arg: x for x in load.keywords}
            mask = kw["mask"].value if "mask" in kw else (load.args[1] if len(load.args) > 1 else None)
            if mask is None or _is_none(mask):
                continue
            other = kw["other"].value if "other" in kw else (load.args[2] if len(load.args) > 2 else None)
            need = flipped
            if other is not None and not _is_none(other):
                # Only a value reaching the reduction as is must be its identity: in `qk + bias` a -inf in qk
                # already decides the masked lanes, whatever bias holds there.
                if need == "reduce" or not direct:
                    continue
                v = k.evaluate(other, env, [])
                if not isinstance(v, (int, float)) or _is_neutral(need, v):
                    continue
                seen.add(id(load))
                fix = _once(k, f"Use other={_NEUTRAL_TEXT[need]}", [TextEdit(_span(k, other), _NEUTRAL_TEXT[need])])
                k.ctx.report("TR008", load, f"other={_short(k.ctx.src.segment(other))} is not neutral for the "
                             f"{tl}{label} on line {node.lineno}: masked-off lanes would win the reduction; use "
                             f"other={_NEUTRAL_TEXT[need]}", fix=fix, kernel=k.name,
                             related=(Related(_span(k, node), "the reduction"),))
                continue
            seen.add(id(load))
            if need == "reduce":
                k.ctx.report("TR008", load, f"this masked {tl}load has no other= and feeds the {tl}reduce on line "
                             f"{node.lineno}: masked-off lanes hold undefined values; add other=<the combine "
                             f"function's identity>", kernel=k.name,
                             related=(Related(_span(k, node), "the reduction"),))
                continue
            fix = _once(k, f"Add other={_NEUTRAL_TEXT[need]}", [_insert_kwarg(k, load, f"other={_NEUTRAL_TEXT[need]}")])
            # Into a sum through arithmetic with other values (`x * z` with x loaded as 0 there), the masked lanes
            # usually cancel: a risk to look at (information), not a likely bug.
            soft = need == "sum" and not direct
            k.ctx.report("TR008", load, f"this masked {tl}load has no other= and feeds the {tl}{label} on line "
                         f"{node.lineno}{' through arithmetic' if soft else ''}: masked-off lanes hold undefined "
                         f"values; add other={_NEUTRAL_TEXT[need]}", fix=fix, kernel=k.name,
                         related=(Related(_span(k, node), "the reduction"),), severity=Severity.INFO if soft else None)


def _is_neutral(kind: str, v: float) -> bool:
    # Large sentinels (-1e30, -3.4e38) are accepted as practical neutrals; 0 or -1 feeding a max are not.
    if kind == "max":
        return v <= -1e4
    if kind == "min":
        return v >= 1e4
    return v == 0


def _trace_loads(k: KernelFacts, e: ast.AST, kind: str, line: int):
    """The tl.load calls whose lanes reach `e` (used on `line`) in place: (load, reduction kind as seen there,
    whether it arrives directly, without arithmetic with other values). A name is followed to its nearest
    binding before the use: kernels often reuse names across loops."""
    flip = {"max": "min", "min": "max", "sum": "sum", "reduce": "reduce"}
    stack = [(e, kind, 0, line, True)]
    seen: set[tuple[int, str]] = set()
    while stack:
        n, kd, depth, at, direct = stack.pop()
        if depth > 20 or (id(n), kd) in seen:
            continue
        seen.add((id(n), kd))
        if isinstance(n, ast.Name):
            binds = [(getattr(b[2] or b[1], "lineno", 0), b) for b in k.assigns.get(n.id, ())
                     if b[0] in (PLAIN, CONSTEXPR)]
            before = [lb for lb in binds if lb[0] < at]
            if before:
                last = max(ln for ln, _ in before)
                binds = [lb for lb in before if lb[0] == last]
            for ln, (_, v, _) in binds:
                if isinstance(v, ast.AST):
                    stack.append((v, kd, depth + 1, ln or at, direct))
        elif isinstance(n, ast.Call):
            name = k.callee(n.func) or ""
            short = name[len(TL) + 1:] if name.startswith(TL + ".") else None
            if short == "load":
                yield n, kd, direct
            elif short in _LANE_PRESERVING and n.args:
                stack.append((n.args[0], kd, depth + 1, at, direct))
            elif isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "cast", "reshape", "trans", "permute",
                                                                         "view", "broadcast_to", "expand_dims"):
                stack.append((n.func.value, kd, depth + 1, at, direct))
        elif isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.USub):
                stack.append((n.operand, flip[kd], depth + 1, at, direct))
            elif isinstance(n.op, ast.UAdd):
                stack.append((n.operand, kd, depth + 1, at, direct))
        elif isinstance(n, ast.BinOp) and type(n.op) in (ast.Add, ast.Sub, ast.Mult, ast.Div):
            stack.append((n.left, kd, depth + 1, at, False))
            stack.append((n.right, flip[kd] if isinstance(n.op, ast.Sub) else kd, depth + 1, at, False))
        elif isinstance(n, ast.Subscript):
            stack.append((n.value, kd, depth + 1, at, direct))
