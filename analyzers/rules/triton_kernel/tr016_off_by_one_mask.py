"""TR016 off-by-one-mask: a load/store mask lets the offset equal to the size through (`offs <= n`,
`offs < n + 1`).
"""

from __future__ import annotations

import ast
import re

from ...model import Severity
from .. import Rule, register
from .facts import AR, CONSTEXPR, KERNEL_HEADER, PLAIN, TL, KernelFacts, _iter_expr, _short, kernel_check

register(Rule(
    code="TR016", name="off-by-one-mask", language="triton", severity=Severity.WARNING,
    summary="A load/store mask lets the offset equal to the size through (`offs <= n`, `offs < n + 1`).",
    explanation="Offsets of a dimension of size n run from 0 to n - 1, so a bounds mask is `offs < n`. "
    "`offs <= n` (or `offs < n + 1`) also lets offset n through: one element past the end is read or written. "
    "Reported where the mask of a tl.load, tl.store or atomic compares offsets built with tl.arange against a "
    "size (a name such as n, N, seqlen, hdim, or what remains of one, `chunk_size - start`). Bounds named as an "
    "inclusive index (`last`, `end_idx`, `max_pos`), bounds with `- 1`, pointers, strides and comparisons "
    "between two offset tiles (causal selectors) are not reported.",
    wrong=KERNEL_HEADER + "def copy(X, Y, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    tl.store(Y + offs, tl.load(X + offs, mask=offs <= n), mask=offs <= n)\n",
    right=KERNEL_HEADER + "def copy(X, Y, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)\n",
))

# Names of an inclusive index (`last`, `end_idx`, `max_pos`): `offs <= last` is right for those.
_INCLUSIVE = re.compile(r"(?i)idx|index|last|end|max|pos|stop|upper|^hi$|^hi_|_hi$|incl")
_NOT_A_SIZE = re.compile(r"(?i)stride|ptr|offs|offset|^pid|program|seed|eps|scale|thresh")
_ACCESS = ("load", "store")


def _masks(k: KernelFacts):
    """(access call, mask expression) for every tl.load/tl.store/atomic with a mask."""
    for c in k.calls:
        short = c.name[len(TL) + 1:] if c.name and c.name.startswith(TL + ".") else None
        if short is None or not (short in _ACCESS or short.startswith("atomic_")):
            continue
        pos = 1 if short == "load" else 2
        kw = {x.arg: x.value for x in c.node.keywords}
        mask = kw.get("mask", c.node.args[pos] if len(c.node.args) > pos else None)
        if mask is not None:
            yield c.node, mask


def _expand(k: KernelFacts, e: ast.AST, depth: int = 0) -> list[ast.AST]:
    """The mask's nodes, through names bound once (`mask = offs < n`)."""
    out: list[ast.AST] = []
    for n in _iter_expr(e):
        out.append(n)
        if isinstance(n, ast.Name) and depth < 4:
            binds = k.assigns.get(n.id, ())
            if len(binds) == 1 and binds[0][0] in (PLAIN, CONSTEXPR) and isinstance(binds[0][1], ast.expr):
                out += _expand(k, binds[0][1], depth + 1)
    return out


def _size_name(k: KernelFacts, e: ast.AST) -> str | None:
    """The size a bound names: a name that is not an offset tile, an inclusive index, a pointer or a stride; or
    `S - start` (what remains of a size S), but not `S - 1`."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and not (
            isinstance(e.right, ast.Constant) and e.right.value == 1):
        inner = _size_name(k, e.left)
        return f"{inner} - {_short(k.ctx.src.segment(e.right), 20)}" if inner else None
    if isinstance(e, ast.Name) and (e.id in k.args or e.id in k.assigns) and not _INCLUSIVE.search(e.id) \
            and not _NOT_A_SIZE.search(e.id) and not k.expr_facts(e) & AR:
        return e.id
    return None


def off_by_one(k: KernelFacts, c: ast.Compare) -> tuple[str, str] | None:
    """(what is wrong, what to write) for `offs <= n`, `n >= offs` or `offs < n + 1`; None otherwise."""
    if len(c.ops) != 1:
        return None
    left, op, right = c.left, c.ops[0], c.comparators[0]
    if isinstance(op, (ast.GtE, ast.Gt)):  # `n >= offs` reads as `offs <= n`
        left, right = right, left
        op = ast.LtE() if isinstance(op, ast.GtE) else ast.Lt()
    if not k.expr_facts(left) & AR:
        return None
    offs = _short(k.ctx.src.segment(left), 30)
    if isinstance(op, ast.LtE):
        size = _size_name(k, right)
        if size:
            return f"{offs} <= {size}", f"{offs} < {size}"
    if isinstance(op, ast.Lt) and isinstance(right, ast.BinOp) and isinstance(right.op, ast.Add) \
            and isinstance(right.right, ast.Constant) and right.right.value == 1:
        size = _size_name(k, right.left)
        if size:
            return f"{offs} < {size} + 1", f"{offs} < {size}"
    return None


@kernel_check
def _tr016_off_by_one(k: KernelFacts) -> None:
    seen: set[int] = set()
    for _call, mask in _masks(k):
        for n in _expand(k, mask):
            if not isinstance(n, ast.Compare) or id(n) in seen:
                continue
            found = off_by_one(k, n)
            if found is None:
                continue
            seen.add(id(n))
            wrong, right = found
            k.ctx.report("TR016", n, f"the mask `{wrong}` lets the offset equal to the size through: that element "
                         f"is one past the end of the dimension; write `{right}`", kernel=k.name)
