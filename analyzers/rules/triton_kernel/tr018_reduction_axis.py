"""TR018 reduction-axis: a 2-D reduction's result is broadcast back along the axis it was not reduced over
(`x - tl.max(x, axis=0)[:, None]`).
"""

from __future__ import annotations

import ast

from ...model import Severity
from .. import Rule, register
from .facts import KERNEL_HEADER, PLAIN, TL, KernelFacts, _is_none, _iter_expr, _short, kernel_check

register(Rule(
    code="TR018", name="reduction-axis", language="triton", severity=Severity.WARNING,
    summary="A 2-D reduction's result is broadcast back along the axis it was not reduced over "
    "(`x - tl.max(x, axis=0)[:, None]`).",
    explanation="Reducing a 2-D tile along axis 1 gives one value per row, which broadcasts back as "
    "`r[:, None]`; reducing along axis 0 gives one per column, `r[None, :]`. When a result is expanded the "
    "other way and combined with the tile it came from, stored at offsets as long as the reduced axis, or "
    "combined with a vector that long, the reduction ran along the wrong axis. Only tiles whose two dimensions "
    "have different names (BLOCK_M x BLOCK_N) are judged. An axis past the tensor's rank (`axis=1` of a 1-D "
    "tensor) does not compile: an error.",
    wrong=KERNEL_HEADER + "def softmax(X, Y, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):\n"
    "    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]\n"
    "    x = tl.load(X + offs)\n    x = x - tl.max(x, axis=0)[:, None]\n    tl.store(Y + offs, x)\n",
    right=KERNEL_HEADER + "def softmax(X, Y, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):\n"
    "    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]\n"
    "    x = tl.load(X + offs)\n    x = x - tl.max(x, axis=1)[:, None]\n    tl.store(Y + offs, x)\n",
))

_REDUCE = {"sum", "max", "min", "argmax", "argmin", "xor_sum", "reduce_or"}
_PAIRWISE = {"maximum", "minimum", "where", "fma"}


def _axis(call: ast.Call) -> int | None:
    kw = {x.arg: x.value for x in call.keywords}
    a = kw.get("axis", call.args[1] if len(call.args) > 1 else None)
    if isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub) and isinstance(a.operand, ast.Constant):
        return -a.operand.value if isinstance(a.operand.value, int) else None
    return a.value if isinstance(a, ast.Constant) and isinstance(a.value, int) else None


def _expanded_axis(sub: ast.Subscript) -> int | None:
    """`r[:, None]` keeps the values along axis 0 (returns 1, the axis that was reduced); `r[None, :]` 0."""
    items = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else None
    if not items or len(items) != 2:
        return None
    if isinstance(items[0], ast.Slice) and _is_none(items[1]):
        return 1
    if _is_none(items[0]) and isinstance(items[1], ast.Slice):
        return 0
    return None


def _dim(d) -> str:
    return ast.dump(d) if isinstance(d, ast.AST) else repr(d)


def _one_dim(k: KernelFacts, e: ast.AST) -> str | None:
    shape = k.shape(e)
    return _dim(shape[0]) if shape is not None and len(shape) == 1 else None


@kernel_check
def _tr018_axis(k: KernelFacts) -> None:
    # (reduction call, its axis, the dims it keeps and removes) of each 2-D reduction with distinct dims.
    found: dict[int, tuple[ast.Call, int, tuple, str, str]] = {}
    for c in k.calls:
        short = c.name[len(TL) + 1:] if c.name and c.name.startswith(TL + ".") else None
        if short not in _REDUCE or not c.node.args:
            continue
        axis = _axis(c.node)
        shape = k.shape(c.node.args[0])
        if axis is None or shape is None or not shape:
            continue
        # Shapes are read flow-insensitively: a name bound twice (`a = a.reshape(G, S)`) may change rank, so an
        # axis out of range is only certain where every name of the argument is bound once.
        rebound = any(len(k.assigns.get(n.id, ())) > 1 for n in _iter_expr(c.node.args[0]) if isinstance(n, ast.Name))
        if axis >= len(shape) or axis < -len(shape):
            if rebound:
                continue
            k.ctx.report("TR018", c.node, f"{k.ctx.src.segment(c.node.func)}(..., axis={axis}) of a "
                         f"{len(shape)}-D tensor: the axis is out of range and the kernel does not compile; use "
                         f"axis=0{' or axis=1' if len(shape) == 2 else ''}", kernel=k.name,
                         severity=Severity.ERROR)
            continue
        axis %= len(shape)
        if len(shape) == 2 and _dim(shape[0]) != _dim(shape[1]):
            found[id(c.node)] = (c.node, axis, shape, _dim(shape[1 - axis]), _dim(shape[axis]))
    if not found:
        return
    # Names bound to an expression whose only reduction is one of these (`mean = tl.sum(x, axis=0) / N`).
    result_of: dict[str, int] = {}
    for name, binds in k.assigns.items():
        if len(binds) == 1 and binds[0][0] == PLAIN and isinstance(binds[0][1], ast.expr):
            inner = [id(n) for n in _iter_expr(binds[0][1]) if id(n) in found]
            if len(inner) == 1:
                result_of[name] = inner[0]

    def source(e: ast.AST) -> int | None:
        if id(e) in found:
            return id(e)
        return result_of.get(e.id) if isinstance(e, ast.Name) else None

    reported: set[int] = set()

    def report(key: int, why: str) -> None:
        if key in reported:
            return
        reported.add(key)
        call, axis, _, _, _ = found[key]
        k.ctx.report("TR018", call, f"{k.ctx.src.segment(call.func)}(..., axis={axis}) keeps one value per "
                     f"{'column' if axis == 0 else 'row'}, but {why}: reduce along axis={1 - axis}",
                     kernel=k.name)

    for node in ast.walk(k.fn):
        operands: list[ast.AST] = []
        if isinstance(node, ast.BinOp):
            operands = [node.left, node.right]
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):  # `acc += tl.sum(x, 0)`
            operands = [ast.copy_location(ast.Name(node.target.id, ast.Load()), node.target), node.value]
        elif isinstance(node, ast.Call):
            short = (k.callee(node.func) or "").rsplit(".", 1)[-1]
            if short in _PAIRWISE:
                operands = list(node.args)
            elif short == "store" and len(node.args) >= 2:
                key = source(node.args[1])
                ptr = _one_dim(k, node.args[0]) if key is not None else None
                if key is not None and ptr is not None and ptr == found[key][4] != found[key][3]:
                    report(key, f"line {node.lineno} stores it at offsets as long as the reduced axis")
                continue
        for i, side in enumerate(operands):
            others = operands[:i] + operands[i + 1:]
            if isinstance(side, ast.Subscript):
                key, want = source(side.value), _expanded_axis(side)
                if key is None or want is None or found[key][1] == want:
                    continue
                shape2 = [k.shape(o) for o in others]
                if any(s is not None and len(s) == 2 and tuple(map(_dim, s)) == tuple(map(_dim, found[key][2]))
                       for s in shape2):
                    report(key, f"line {side.lineno} broadcasts it back per {'row' if want == 1 else 'column'} "
                           f"(`{k.ctx.src.segment(side)}`) against the tile it came from")
                continue
            key = source(side)
            if key is None:
                continue
            for o in others:
                d = _one_dim(k, o)
                if d is not None and d == found[key][4] != found[key][3]:
                    report(key, f"line {getattr(side, 'lineno', 0)} combines it with `{_short(k.ctx.src.segment(o), 30)}`, "
                           f"as long as the reduced axis")
