"""TR017 swapped-strides: an address pairs each dimension's offsets with the other dimension's stride
(`offs_m[:, None] * stride_k + offs_k[None, :] * stride_m`).
"""

from __future__ import annotations

import ast

from ...model import Severity
from .. import Rule, register
from .facts import AR, KERNEL_HEADER, PID, TL, KernelFacts, kernel_check
from .tr002_unmasked_block_access import _terms

register(Rule(
    code="TR017", name="swapped-strides", language="triton", severity=Severity.WARNING,
    summary="An address pairs each dimension's offsets with the other dimension's stride "
    "(`offs_m[:, None] * stride_k + offs_k[None, :] * stride_m`).",
    explanation="Each offset vector of a 2-D address is multiplied by the stride of its own dimension. When "
    "the names say otherwise for both terms (offs_m with stride_ak, offs_k with stride_am), the tile is read "
    "transposed or from the wrong rows: the kernel compiles and computes a wrong result. Names are compared by "
    "the dimension they end in (`offs_am`/`rm`/`offs_m` with `stride_am`/`stride_m`, `rows` with "
    "`stride_row`); nothing is reported unless both pairings are wrong and both swapped ones match.",
    wrong=KERNEL_HEADER + "def tile(A, C, stride_am, stride_ak, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):\n"
    "    offs_am = tl.arange(0, BLOCK_M)\n    offs_k = tl.arange(0, BLOCK_K)\n"
    "    a = tl.load(A + offs_am[:, None] * stride_ak + offs_k[None, :] * stride_am)\n"
    "    tl.store(C + offs_am[:, None] * BLOCK_K + offs_k[None, :], a)\n",
    right=KERNEL_HEADER + "def tile(A, C, stride_am, stride_ak, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):\n"
    "    offs_am = tl.arange(0, BLOCK_M)\n    offs_k = tl.arange(0, BLOCK_K)\n"
    "    a = tl.load(A + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)\n"
    "    tl.store(C + offs_am[:, None] * BLOCK_K + offs_k[None, :], a)\n",
))

_OFFS_PREFIXES = ("offsets_", "offset_", "offs_", "off_", "idx_", "index_", "pid_", "program_")
_OFFS_SUFFIXES = ("_offsets", "_offset", "_offs", "_off", "_idx", "_index", "_ids", "_id")


def _token(name: str, stride: bool) -> str:
    """The dimension a name is of: `offs_am` -> `am`, `s_idx` -> `s`, `rm` -> `m`, `stride_x_seqlen` -> `seqlen`."""
    t = name.lower()
    if stride:
        t = t[len("stride"):].lstrip("_") if t.startswith("stride") else t.rsplit("_stride", 1)[0] \
            if "_stride" in t else t.split("stride_", 1)[1] if "stride_" in t else ""
    else:
        for p in _OFFS_PREFIXES:
            if t.startswith(p):
                t = t[len(p):]
                break
        else:
            if len(t) == 2 and t[0] == "r":  # rm, rn, rk of the triton tutorials
                t = t[1:]
        for p in _OFFS_SUFFIXES:
            if t.endswith(p) and len(t) > len(p):
                t = t[:-len(p)]
                break
    t = t.rsplit("_", 1)[-1]
    if len(t) > 3 and t.endswith("s"):
        t = t[:-1]
    return t


def _match(offs: str, stride: str) -> int:
    """Whether an offsets name and a stride name are of one dimension: the last parts of their names agree
    (`m` and `m`, `row` and `row`), one starts the other (`seq` and `seqlen`, `h` and `head`), one ends the
    other in three letters or more (`dim` and `vdim`), or one is the other with a one-letter tensor prefix (`m`
    and `am`, `am` and `cm`). `offs_m` and `stride_x_hdim` are not: a letter inside a word is no dimension."""
    a, b = _token(offs, False), _token(stride, True)
    if not a or not b or a.isdigit() or b.isdigit():
        return 0
    if a == b:
        return 3
    short, long = sorted((a, b), key=len)
    if long.startswith(short) and (len(short) >= 2 or len(long) >= 4):
        return 2
    if len(short) >= 3 and long.endswith(short):
        return 2
    if len(long) == 2 and len(short) <= 2 and long[1] == short[-1]:
        return 1
    return 0


def _base(o: ast.AST) -> ast.Name | None:
    """The offsets a factor is about: `offs[:, None]` -> offs, `pid_c * chunk_size` -> pid_c."""
    while isinstance(o, (ast.Subscript, ast.BinOp)):
        o = o.value if isinstance(o, ast.Subscript) else o.left
    return o if isinstance(o, ast.Name) else None


def _pair(k: KernelFacts, t: ast.AST) -> tuple[str, str, ast.AST] | None:
    """(offsets name, stride name, the product) for a summand `offs[...] * stride_x` or `pid_b * stride_b`."""
    if not (isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult)):
        return None
    for o, s in ((t.left, t.right), (t.right, t.left)):
        base = _base(o)
        if isinstance(s, ast.Name) and "stride" in s.id.lower() and s.id in k.args and base is not None \
                and "stride" not in base.id.lower() and k.expr_facts(base) & (AR | PID):
            return base.id, s.id, t
    return None


@kernel_check
def _tr017_swapped(k: KernelFacts) -> None:
    reported: set[int] = set()
    # Pairings written elsewhere in the kernel: a transposed load in one branch and the plain one in the other
    # (`if TRANSPOSED:`) is deliberate.
    written = {(p[0], p[1]) for n in ast.walk(k.fn) if (p := _pair(k, n)) is not None}
    for c in k.calls:
        if c.name not in (f"{TL}.load", f"{TL}.store") or not c.node.args:
            continue
        pairs = [p for t in _terms(k, c.node.args[0], set(), c.node.lineno) if (p := _pair(k, t)) is not None]
        for i, (a, sa, ta) in enumerate(pairs):
            for b, sb, tb in pairs[i + 1:]:
                if a == b or sa == sb or id(ta) in reported:
                    continue
                if _match(a, sa) == 0 and _match(b, sb) == 0 and _match(a, sb) > 0 and _match(b, sa) > 0 \
                        and (a, sb) not in written and (b, sa) not in written:
                    reported.update((id(ta), id(tb)))
                    k.ctx.report("TR017", ta, f"{a} is multiplied by {sa} and {b} by {sb}: by their names the "
                                 f"strides are swapped; write {a} * {sb} and {b} * {sa}", kernel=k.name)
