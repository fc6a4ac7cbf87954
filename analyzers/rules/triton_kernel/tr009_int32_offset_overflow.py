"""TR009 int32-offset-overflow: `tl.program_id` times a runtime stride in 32-bit arithmetic: offsets overflow past
2**31 elements.
"""

from __future__ import annotations

import ast

from collections.abc import Mapping

from ...model import Problem, Related, Severity, ShownSizes, TextEdit
from .. import Rule, register
from .facts import AR, I64, KERNEL_HEADER, PID, PLAIN, RTP, TL, KernelFacts, _once, _short, _span, kernel_check

register(Rule(
    code="TR009", name="int32-offset-overflow", language="triton", severity=Severity.INFO, fixable=True,
    summary="`tl.program_id` times a runtime stride in 32-bit arithmetic: offsets overflow past 2**31 elements.",
    explanation="Program ids and integer arguments are int32, so `row * stride` wraps around once the tensor "
    "has more than 2**31 elements and the kernel reads the wrong memory. Whether that happens depends on sizes "
    "the code does not show, so this is information: a risk to weigh for tensors that large. Cast the program "
    "id where it is "
    "bound, `tl.program_id(0).to(tl.int64)`, or an operand at the multiplication. `pid * BLOCK` with a "
    "constexpr BLOCK is not reported, nor are vector offsets (pid * BLOCK + tl.arange) times a stride. When a "
    "`@spec` of the same file makes tensors of more than 2**31 elements for the kernel, or a launch in that file "
    "passes it one allocated with a constant shape that large, the overflow is no longer a guess: the finding is a "
    "warning that names the spec or launch and the size. The risk is one finding per kernel, at its first offset "
    "expression, with the others counted and listed (one quick fix casts them all).",
    wrong=KERNEL_HEADER + "def softmax(X, Y, stride, n, BLOCK: tl.constexpr):\n    row = tl.program_id(0)\n"
    "    cols = tl.arange(0, BLOCK)\n    x = tl.load(X + row * stride + cols, mask=cols < n, other=0.0)\n"
    "    tl.store(Y + row * stride + cols, x, mask=cols < n)\n",
    right=KERNEL_HEADER + "def softmax(X, Y, stride, n, BLOCK: tl.constexpr):\n"
    "    row = tl.program_id(0).to(tl.int64)\n"
    "    cols = tl.arange(0, BLOCK)\n    x = tl.load(X + row * stride + cols, mask=cols < n, other=0.0)\n"
    "    tl.store(Y + row * stride + cols, x, mask=cols < n)\n",
))


@kernel_check
def _tr009_overflow(k: KernelFacts) -> None:
    tl = k.f.tl
    found: list[tuple[ast.AST, str, str, TextEdit | None]] = []
    for node, _ifs in k.ops:
        pairs: tuple[tuple[ast.expr, ast.expr], ...]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            pairs = ((node.left, node.right), (node.right, node.left))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            pairs = ((ast.Name(node.target.id, ast.Load()), node.value),)
        else:
            continue
        for p, o in pairs:
            pf, of = k.expr_facts(p), k.expr_facts(o)
            if not (pf & PID) or pf & (I64 | AR) or not (of & RTP) or of & (I64 | AR | PID):
                continue
            # The name bound by an augmented assignment was made here: it has no position in the text.
            pid_text = p.id if isinstance(p, ast.Name) and not hasattr(p, "lineno") else _short(k.ctx.src.segment(p), 30)
            o_text = _short(k.ctx.src.segment(o), 30)
            edit = _pid_cast_edit(k, p)
            where = "where it is bound" if edit is not None and edit.span != _span(k, p) else "at the multiplication"
            found.append((node, f"{pid_text} * {o_text}", where, edit))
            break
    if not found:
        return
    # One note per kernel: the same risk at every offset expression is one thing to decide.
    node, product, where, _ = found[0]
    rest = found[1:]
    also = ""
    if rest:
        lines = sorted({getattr(n, "lineno", 0) for n, _, _, _ in rest})
        shown = ", ".join(map(str, lines[:6])) + (", ..." if len(lines) > 6 else "")
        also = f" (and {len(rest)} other offset expression{'s' * (len(rest) > 1)} of this kernel, line" \
               f"{'s' * (len(lines) > 1)} {shown})"
    edits: list[TextEdit] = []
    for _, _, _, e in found:
        if e is not None and all(e.span != x.span for x in edits):
            edits.append(e)
    fix = _once(k, f"Cast to {tl}int64", edits) if edits and k.f.can_fix else None
    related = tuple(Related(_span(k, n), f"{text} in int32") for n, text, _, _ in rest if hasattr(n, "lineno"))
    k.ctx.report("TR009", node, f"{product}{also} is computed in int32 and {_RISK}, cast the program id to int64 "
                 f"{where}, e.g. {tl}program_id(0).to({tl}int64)", fix=fix, kernel=k.name, related=related)


_RISK = "would overflow if the offset passed 2**31 elements: if tensors that large are possible"
_INT32_MAX = 2**31 - 1


def raise_with_sizes(problems: list[Problem], sizes: Mapping[str, ShownSizes]) -> list[Problem]:
    """TR009 findings as warnings where a spec makes tensors past int32 offsets for the kernel (kernel -> sizes)."""
    out = []
    for p in problems:
        shown = sizes.get(p.kernel or "") if p.code == "TR009" else None
        # Sizes shown below the limit are some of those that run, not all: the risk stays information then.
        if shown is None or shown.values[-1] - 1 <= _INT32_MAX or _RISK not in p.message:
            out.append(p)
            continue

        fact = f"overflows: {shown.source} {shown.values[-1]:,} elements (past 2**31); to fix it"
        related = (*p.related, Related(shown.span, f"{shown.values[-1]:,} elements"))
        out.append(Problem(p.code, p.message.replace(_RISK, fact), Severity.WARNING, p.span, p.fix, related,
                           p.kernel))
    return out


def _pid_cast_edit(k: KernelFacts, p: ast.AST) -> TextEdit | None:
    tl = k.f.tl
    if isinstance(p, ast.Name) and p.id not in k.args:
        vals = k.assigns.get(p.id, [])
        if len(vals) == 1 and vals[0][0] == PLAIN and isinstance(vals[0][1], ast.Call) and \
                k.callee(vals[0][1].func) == f"{TL}.program_id":
            call = vals[0][1]
            return TextEdit(_span(k, call), f"{k.ctx.src.segment(call)}.to({tl}int64)")
    if not hasattr(p, "lineno"):
        return None
    text = k.ctx.src.segment(p)
    if not isinstance(p, (ast.Name, ast.Call, ast.Attribute, ast.Subscript)):
        text = f"({text})"
    return TextEdit(_span(k, p), f"{text}.to({tl}int64)")
