"""TR003 dot-tile-too-small: `tl.dot` with a K tile under 16 (K < 8 is an error, 8 <= K < 16 a warning, M/N under 16
information).
"""

from __future__ import annotations

import ast

from ...model import Related, Severity
from .. import Rule, register
from .facts import PLAIN, TL, KernelFacts, _more_configs, kernel_check

register(Rule(
    code="TR003", name="dot-tile-too-small", language="triton", severity=Severity.ERROR,
    summary="`tl.dot` with a K tile under 16 (K < 8 is an error, 8 <= K < 16 a warning, M/N under 16 information).",
    explanation="On NVIDIA GPUs `tl.dot` needs K >= 16 (32 for 8-bit inputs; triton 3.9 accepts K >= 8 for fp32, "
    "3.6 does not): smaller K fails to compile with 'Input shapes should have ... K >= 16'. M and N under 16 "
    "compile (information: small tiles waste tensor-core throughput). Tile sizes are traced from tl.arange extents, "
    "tl.zeros shapes and block shapes, through defaults, autotune configs and module constants.",
    wrong="import triton\nimport triton.language as tl\n\n\n@triton.autotune(\n"
    "    configs=[triton.Config({'BK': 32}), triton.Config({'BK': 8})], key=['K'])\n@triton.jit\n"
    "def mm(A, B, C, K, BK: tl.constexpr):\n    rm = tl.arange(0, 16)\n    rk = tl.arange(0, BK)\n"
    "    a = tl.load(A + rm[:, None] * K + rk[None, :]).to(tl.float16)\n"
    "    b = tl.load(B + rk[:, None] * 16 + rm[None, :]).to(tl.float16)\n"
    "    tl.store(C + rm[:, None] * 16 + rm[None, :], tl.dot(a, b))\n",
    right="import triton\nimport triton.language as tl\n\n\n@triton.autotune(\n"
    "    configs=[triton.Config({'BK': 32}), triton.Config({'BK': 16})], key=['K'])\n@triton.jit\n"
    "def mm(A, B, C, K, BK: tl.constexpr):\n    rm = tl.arange(0, 16)\n    rk = tl.arange(0, BK)\n"
    "    a = tl.load(A + rm[:, None] * K + rk[None, :]).to(tl.float16)\n"
    "    b = tl.load(B + rk[:, None] * 16 + rm[None, :]).to(tl.float16)\n"
    "    tl.store(C + rm[:, None] * 16 + rm[None, :], tl.dot(a, b))\n",
))


@kernel_check
def _tr003_dot(k: KernelFacts) -> None:
    tl = k.f.tl
    for c in k.calls:
        if c.name != f"{TL}.dot" or len(c.node.args) < 2:
            continue
        a, b = c.node.args[:2]
        sa, sb = k.shape(a), k.shape(b)
        # NVIDIA minimum K: 32 for 8-bit inputs, 16 for 16-bit; fp32 accepts K >= 8 since triton 3.9 (not 3.6).
        bits = _operand_bits(k, a) or _operand_bits(k, b)
        k_min = 32 if bits == 8 else 16
        dims = []
        if sa is not None and len(sa) >= 2:
            dims += [("K", sa[-1]), ("M", sa[-2])]
        elif sb is not None and len(sb) >= 2:
            dims.append(("K", sb[-2]))
        if sb is not None and len(sb) >= 2:
            dims.append(("N", sb[-1]))
        for label, dim in dims:
            minimum = k_min if label == "K" else 16
            failing = []
            for env in k.scenarios:
                used: list = []
                v = _eval_dim(k, dim, env, used)
                if isinstance(v, int) and 0 < v < minimum:
                    failing.append((v, used))
            if not failing:
                continue
            v, used = failing[0]
            node = dim if isinstance(dim, ast.AST) else dim[1] if isinstance(dim, tuple) else None
            desc = k.describe(node, v, used) if node is not None else str(v)
            more = _more_configs(len(failing))
            if label == "K":
                maybe_fp32 = bits is None or bits >= 32
                if bits in (8, 16):
                    need = f"needs K >= {k_min} for {bits}-bit inputs"
                else:
                    need = "needs K >= 16 (32 for 8-bit inputs)"
                k.ctx.report("TR003", c.node, f"{tl}dot {need}, but K is {desc}{more}: use a K tile of {k_min} or "
                             "more" + (" (triton 3.9 accepts K = 8 for fp32 inputs)" if maybe_fp32 and v >= 8 else ""),
                             kernel=k.name, related=_related(k, used),
                             severity=Severity.WARNING if maybe_fp32 and v >= 8 else None)
            else:
                k.ctx.report("TR003", c.node, f"{tl}dot with {label} = {desc}{more} compiles, but tiles under 16 "
                             f"waste tensor-core throughput: use {label} >= 16 if the data allows it", kernel=k.name,
                             severity=Severity.INFO, related=_related(k, used))


_DTYPE_BITS = {"float16": 16, "bfloat16": 16, "int16": 16, "float32": 32, "int32": 32, "float64": 64, "int8": 8,
               "uint8": 8, "float8e4nv": 8, "float8e5": 8, "float8e4b15": 8, "float8e4b8": 8, "float8e5b16": 8}


def _operand_bits(k: KernelFacts, e: ast.AST, depth: int = 0) -> int | None:
    """The element width of a tl.dot operand when the code states it (`.to(tl.float16)`, `tl.zeros(..., dtype)`)."""
    if depth > 8:
        return None
    if isinstance(e, ast.Name):
        binds = k.assigns.get(e.id, ())
        value = binds[0][1] if len(binds) == 1 and binds[0][0] == PLAIN else None
        return _operand_bits(k, value, depth + 1) if isinstance(value, ast.AST) else None
    if not isinstance(e, ast.Call):
        return None
    dtypes = [*e.args, *(kw.value for kw in e.keywords if kw.arg in ("dtype", "dst_ty"))]
    if isinstance(e.func, ast.Attribute) and e.func.attr == "to" or k.callee(e.func) in (
            f"{TL}.cast", f"{TL}.zeros", f"{TL}.full"):
        for d in dtypes:
            name = k.callee(d) if isinstance(d, (ast.Name, ast.Attribute)) else None
            if name and name.startswith(TL + "."):
                bits = _DTYPE_BITS.get(name[len(TL) + 1:])
                if bits:
                    return bits
    return None


def _eval_dim(k: KernelFacts, dim, env: dict, used: list):
    if isinstance(dim, int):
        return dim
    if isinstance(dim, tuple):
        e, s = k.evaluate(dim[1], env, used), k.evaluate(dim[2], env, used)
        return e - s if isinstance(e, int) and isinstance(s, int) else None
    return k.evaluate(dim, env, used)


def _related(k: KernelFacts, used: list) -> tuple[Related, ...]:
    out = []
    for name, value, origin in used:
        if origin.startswith("in autotune config"):
            idx = int(origin.split()[3]) - 1
            cfg = k.kernel.autotune_configs[idx]
            out.append(Related(cfg.span, f"{name} = {value} here"))
    return tuple(out[:3])
