"""TR006 non-jit-call: A kernel calls a function Triton cannot compile: a plain Python function, math/numpy/torch on
tensors, or a builtin Triton does not provide.
"""

from __future__ import annotations

import ast

from ...model import Related, Severity, TextEdit
from ...resolve import resolve_in_file
from ...triton_names import NAMES
from .. import Rule, register
from .facts import _HINTS, _HOST_MODULES, RT, TL, KernelFacts, _once, _short, _span, kernel_check

register(Rule(
    code="TR006", name="non-jit-call", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A kernel calls a function Triton cannot compile: a plain Python function, math/numpy/torch on "
    "tensors, or a builtin Triton does not provide.",
    explanation="Inside a kernel only triton.language functions, other @triton.jit functions and a few builtins "
    "(range, len, min, max, int, float, isinstance, getattr, hasattr, print) can be called. A plain "
    "module-level function fails with 'Unsupported function referenced': decorate it with @triton.jit, "
    "or compute the value on the host and pass it in. `math.*` works only on compile-time constants "
    "(math.sqrt(2.0) is fine, math.sqrt(x) of a tensor is not: use tl.sqrt); numpy, torch and random never "
    "work. triton.cdiv / triton.next_power_of_2 and @triton.constexpr_function functions need constexpr "
    "arguments: use tl.cdiv for runtime values. int()/float() only convert constants: use x.to(tl.float32). "
    "An imported name is judged by the definition it leads to in the workspace or an installed package "
    "(read, never imported): torch._inductor's `libdevice` is triton's and its `welford_reduce` is @triton.jit, "
    "so both are fine; a host call on compile-time values only (`torch.finfo(torch.float32).max`) runs while the "
    "kernel compiles. A name that cannot be followed offline is information, never an error.",
    wrong="import math\n\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
    "def k(X, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    x = tl.load(X + offs)\n"
    "    tl.store(X + offs, math.exp(x))\n",
    right="import math\n\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
    "def k(X, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    x = tl.load(X + offs)\n"
    "    tl.store(X + offs, tl.exp(x) * math.sqrt(2.0))\n",
))

# The code generator provides range, len, min, max, float, int, isinstance, getattr, hasattr, list and print;
# any other builtin is a NameError at compile time.
_BANNED_BUILTINS = {
    "abs": "tl.abs(x)", "sum": "tl.sum(x, axis)", "pow": "x * x, or tl.exp2(y * tl.log2(x))",
    "round": "tl.floor(x + 0.5)",
    "enumerate": "tl.static_range(len(t)) and t[i]", "zip": "tl.static_range(len(a)) and a[i], b[i]",
    "str": "a string literal", "bool": "a comparison (x != 0)", "tuple": "a tuple literal (a, b)",
    "sorted": "tl.sort", "any": "tl.reduce_or or a comparison", "all": "a comparison", "divmod": "// and %",
    "map": "a tuple comprehension", "filter": "a tuple comprehension", "reversed": "tl.flip",
    **{n: "" for n in ("bin", "bytes", "callable", "chr", "complex", "dict", "dir", "eval", "exec", "format",
                       "frozenset", "hash", "hex", "id", "input", "iter", "next", "oct", "open", "ord", "repr",
                       "set", "slice", "super", "type", "vars")},
}
_FIXABLE_BUILTINS = {"abs": "abs"}
_MATH_TO_TL = {"sqrt": "sqrt", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sin": "sin",
               "cos": "cos", "floor": "floor", "ceil": "ceil", "erf": "erf", "fabs": "abs", "fma": "fma"}
# numpy/torch names that exist in triton.language with different meaning or signature: no automatic fix.
_NOT_ELEMENTWISE = {"arange", "zeros", "full", "load", "store", "dot", "where", "reshape", "view", "cast", "sort",
                    "split", "join", "flip", "max", "min", "sum", "argmax", "argmin", "cumsum", "cumprod", "rand",
                    "randn", "randint", "range", "tensor", "dtype", "zeros_like", "broadcast", "broadcast_to",
                    "permute", "trans", "cat", "gather", "histogram", "softmax", "topk", "squeeze", "unsqueeze",
                    "ravel"}
_TRITON_CONSTEXPR_HELPERS = {"triton.cdiv": "cdiv", "triton.next_power_of_2": None}


@kernel_check
def _tr006_calls(k: KernelFacts) -> None:
    tl = k.f.tl
    # Loops over enumerate/zip and `with open(...)` are TR005's: one problem per mistake.
    for_iters = {id(n.iter) for n in k.fors if isinstance(n, ast.For)}
    for_iters.update(id(i.context_expr) for n, what, _ in k.unsupported
                     if what in ("With", "AsyncWith") and isinstance(n, (ast.With, ast.AsyncWith)) for i in n.items)
    for c in k.calls:
        node, f = c.node, c.node.func
        if id(node) in for_iters:
            continue
        name = c.name or ""
        if isinstance(f, ast.Name) and f.id not in k.bound:
            fid = f.id
            if fid in k.f.plain:
                k.ctx.report("TR006", node, f"{fid}() is a plain Python function and cannot be called from a kernel: "
                             f"decorate it with @triton.jit, or compute the value on the host and pass it in",
                             kernel=k.name, related=(Related(_span(k, k.f.plain[fid]), f"{fid} is defined here"),))
                continue
            if fid in k.f.constexpr_fns:
                if any(not k.is_static(a) for a in [*node.args, *(kw.value for kw in node.keywords)]):
                    k.ctx.report("TR006", node, f"{fid}() is a constexpr function and runs at compile time, but gets a "
                                 f"runtime value: make it @triton.jit, or pass constexpr arguments", kernel=k.name)
                continue
            if fid in ("float", "int") and fid not in k.f.module_names and len(node.args) == 1 \
                    and k.expr_facts(node.args[0]) & RT and not isinstance(node.args[0], ast.Constant):
                # int()/float() run at compile time; on a tensor they raise TypeError.
                arg = node.args[0]
                text = k.ctx.src.segment(arg)
                if not isinstance(arg, (ast.Name, ast.Call, ast.Attribute, ast.Subscript)):
                    text = f"({text})"
                dtype = f"{tl}{'float32' if fid == 'float' else 'int32'}"
                edit = TextEdit(_span(k, node), f"{text}.to({dtype})")
                fix = _once(k, f"Use .to({dtype})", [edit]) if k.f.can_fix else None
                k.ctx.report("TR006", node, f"{fid}() converts compile-time values only; this argument is a runtime "
                             f"tensor: write {_short(text, 30)}.to({dtype})", fix=fix, kernel=k.name)
                continue
            if fid in _BANNED_BUILTINS and fid not in k.f.module_names:
                alt: str | None = _BANNED_BUILTINS[fid]
                fix = None
                if fid in _FIXABLE_BUILTINS and k.f.can_fix:
                    new = f"{tl}{_FIXABLE_BUILTINS[fid]}"
                    fix = _once(k, f"Use {new}", [TextEdit(_span(k, f), new)])
                k.ctx.report("TR006", node, f"the builtin {fid}() is not available in a kernel" +
                             (f": use {alt.replace('tl.', tl)}" if alt else ": compute it on the host"),
                             fix=fix, kernel=k.name)
                continue
        top = name.split(".")[0]
        if top == "math" and "." in name and (not isinstance(f, ast.Name) or f.id not in k.bound):
            if all(k.is_static(a) for a in [*node.args, *(kw.value for kw in node.keywords)]):
                continue  # math on compile-time constants is evaluated by the compiler
            attr = name.rsplit(".", 1)[1]
            alt = _MATH_TO_TL.get(attr)
            fix = _once(k, f"Use {tl}{alt}", [TextEdit(_span(k, f), f"{tl}{alt}")]) if alt and k.f.can_fix else None
            k.ctx.report("TR006", node, f"{name}() only works on compile-time constants, not on tensors: " +
                         (f"use {tl}{alt}" if alt else
                          f"use {_HINTS.get(attr, 'the libdevice equivalent')}".replace("tl.", tl)),
                         fix=fix, kernel=k.name)
        elif top in _HOST_MODULES and "." in name and (not isinstance(f, ast.Name) or f.id not in k.bound):
            # Judged by where the name leads, not by its spelling: torch._inductor's `libdevice` is triton's,
            # its `welford_reduce` a @triton.jit def.
            target = resolve_in_file(name, k.ctx.path)
            if target.device_ok:
                continue
            given = [*node.args, *(kw.value for kw in node.keywords)]
            if given and all(k.is_static(a) for a in given):
                # triton calls a host function on compile-time values while compiling (torch.finfo(...)); one
                # without arguments (random.random()) would bake a single value into the kernel.
                continue
            if target.kind == "unresolved" and any(p.startswith("_") for p in name.split(".")):
                k.ctx.report("TR006", node, f"could not resolve {name}() offline (its module is not installed "
                             f"here or builds the name at import time): a kernel can call it only if it is a "
                             f"@triton.jit function or a triton builtin", kernel=k.name, severity=Severity.INFO)
                continue
            attr = name.rsplit(".", 1)[1]
            alt = attr if top in ("numpy", "torch") and attr in NAMES[TL] and attr not in _NOT_ELEMENTWISE else None
            fix = _once(k, f"Use {tl}{alt}", [TextEdit(_span(k, f), f"{tl}{alt}")]) if alt and k.f.can_fix else None
            advice = f"use {tl}{alt}" if alt else f"use {tl}rand(seed, offsets)" if top == "random" else \
                "use the triton.language equivalent, or compute the value on the host and pass it in"
            k.ctx.report("TR006", node, f"{name}() is host code and cannot be called from a kernel: {advice}",
                         fix=fix, kernel=k.name)
        elif name and "." in name and top not in ("triton", "math") and _imported_root(k, f):
            # An imported function of the workspace or an installed package, read where it is defined.
            target = resolve_in_file(name, k.ctx.path)
            if target.kind == "plain" and not all(
                    k.is_static(a) for a in [*node.args, *(kw.value for kw in node.keywords)]):
                where = target.where.rsplit(":", 1)
                k.ctx.report("TR006", node, f"{name}() is a plain Python function ({where[0]} line {where[-1]}) "
                             f"and cannot be called from a kernel on tensors: decorate it with @triton.jit, or "
                             f"compute the value on the host and pass it in", kernel=k.name)
        elif name in _TRITON_CONSTEXPR_HELPERS:
            if all(k.is_static(a) for a in [*node.args, *(kw.value for kw in node.keywords)]):
                continue
            alt = _TRITON_CONSTEXPR_HELPERS[name]
            if alt:
                fix = _once(k, f"Use {tl}{alt}", [TextEdit(_span(k, f), f"{tl}{alt}")]) if k.f.can_fix else None
                k.ctx.report("TR006", node, f"{name}() runs at compile time and needs constexpr arguments: use "
                             f"{tl}{alt}(...) for runtime values", fix=fix, kernel=k.name)
            else:
                k.ctx.report("TR006", node, f"{name}() runs at compile time and needs constexpr arguments: compute "
                             f"it on the host and pass it as a {tl}constexpr parameter", kernel=k.name)


def _imported_root(k: KernelFacts, f: ast.expr) -> bool:
    """Whether a called name starts at a module-level import (not a local, a parameter or a def of this file)."""
    while isinstance(f, ast.Attribute):
        f = f.value
    return isinstance(f, ast.Name) and f.id not in k.bound and f.id in k.imports.names
