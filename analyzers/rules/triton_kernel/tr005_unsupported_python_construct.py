"""TR005 unsupported-python-construct: A Python construct the Triton compiler rejects (try, with, lambda, break, dict,
list.append, ...).
"""

from __future__ import annotations

import ast

from ...model import Severity, Span, TextEdit
from .. import Rule, register
from .facts import _HOST_MODULES, KERNEL_HEADER, RT, TL, KernelFacts, _once, _short, _span, kernel_check

register(Rule(
    code="TR005", name="unsupported-python-construct", language="triton", severity=Severity.ERROR, fixable=True,
    summary="A Python construct the Triton compiler rejects (try, with, lambda, break, dict, list.append, ...).",
    explanation="The kernel body is compiled, not run: try/except, with, lambda, nested def/class, global, "
    "yield, del, raise, import, match, break/continue, for/while-else, dict/set literals and comprehensions, "
    "generator expressions, list mutation, item assignment, starred assignment, `in` tests, the `@` operator, "
    "`**` on tensors, loops over anything but range/tl.range/tl.static_range, and f-strings of runtime "
    "values all fail to compile (checked on triton 3.6 and 3.9). `raise` under a constexpr `if` (a dtype "
    "dispatch) compiles until the branch is taken (information level): tl.static_assert gives a better error. "
    "`print` is compiled as tl.device_print and needs a "
    "string first argument (information level). Walrus and chained comparisons need triton >= 3.9.",
    wrong=KERNEL_HEADER + "def k(X, n):\n    total = 0.0\n    for i in range(n):\n        if i > 4:\n"
    "            break\n"
    "        total += tl.load(X + i)\n    tl.store(X, total)\n",
    right=KERNEL_HEADER + "def k(X, n):\n    total = 0.0\n    for i in range(tl.minimum(n, 5)):\n"
    "        total += tl.load(X + i)\n    tl.store(X, total)\n",
))


@kernel_check
def _tr005_constructs(k: KernelFacts) -> None:
    tl = k.f.tl
    rep = k.ctx.report
    for node, what, ifs in k.unsupported:
        if what == "Raise":
            static = any(isinstance(t, ast.expr) and k.is_static(t) for t in ifs)
            rep("TR005", node, f"a kernel cannot raise: use {tl}static_assert(cond, \"message\") for a compile-time "
                f"check or {tl}device_assert(cond) at run time" + (" (this `raise` compiles only while its "
                "constexpr condition is false)" if static else ""),
                kernel=k.name, severity=Severity.INFO if static else None)
            continue
        if what in ("With", "AsyncWith") and isinstance(node, (ast.With, ast.AsyncWith)):
            items = node.items
            if all(isinstance(i.context_expr, ast.Call) and (k.callee(i.context_expr.func) or "").startswith("triton.")
                   for i in items):
                continue
        msg = _UNSUPPORTED_MSG.get(what, "this Python construct is not supported in a kernel")
        span = _span(k, node)
        if what in ("for-else", "while-else") and isinstance(node, (ast.For, ast.While)):  # at the `else:` line
            lines = k.ctx.src.lines
            last = node.body[-1].end_lineno or node.body[-1].lineno
            line = next((i for i in range(node.orelse[0].lineno - 1, last - 1, -1)
                         if lines[i].lstrip().startswith("else")), node.orelse[0].lineno - 1)
            col = len(lines[line]) - len(lines[line].lstrip())
            span = Span(line, col, line, col + 4)
        if isinstance(node, ast.stmt) and span.end_line > span.start_line:  # underline the keyword line only
            span = Span(span.start_line, span.start_col, span.start_line, len(k.ctx.src.line(span.start_line)))
        rep("TR005", span, msg.format(tl=tl), kernel=k.name)
    # list mutation on local lists
    lists = {n for n, vals in k.assigns.items() if any(isinstance(v, (ast.List, ast.ListComp)) for _, v, _ in vals)}
    for c in k.calls:
        f = c.node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in lists \
                and f.attr in _LIST_MUTATORS:
            rep("TR005", c.node, f"`{f.value.id}.{f.attr}(...)`: lists in a kernel are immutable tuples; build a new "
                f"tuple (`t = t + (x,)`) or use a tensor", kernel=k.name)
        if isinstance(f, ast.Name) and f.id == "print" and "print" not in k.bound and "print" not in k.f.module_names:
            first = c.node.args[0] if c.node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                edit = TextEdit(_span(k, f), f"{tl}device_print")
                fix = _once(k, f"Use {tl}device_print", [edit]) if k.f.can_fix else None
                rep("TR005", c.node, f"print(...) is compiled as {tl}device_print and prints from every program: "
                    f"write {tl}device_print to make that explicit", fix=fix, kernel=k.name, severity=Severity.INFO)
            else:
                label = _short(k.ctx.src.segment(first), 20) if first is not None else "value"
                edits = [TextEdit(_span(k, f), f"{tl}device_print")]
                if first is not None:
                    s = _span(k, first)
                    edits.append(TextEdit(Span(s.start_line, s.start_col, s.start_line, s.start_col), f"\"{label}\", "))
                fix = _once(k, f"Use {tl}device_print with a prefix", edits) if k.f.can_fix else None
                rep("TR005", c.node, f"print(...) in a kernel is {tl}device_print, whose first argument must be a "
                    f"string: write {tl}device_print(\"{label}\", ...)", fix=fix, kernel=k.name)
    for node, _ifs in k.ops:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            text = f"{tl}dot({k.ctx.src.segment(node.left)}, {k.ctx.src.segment(node.right)})"
            fix = _once(k, f"Use {tl}dot", [TextEdit(_span(k, node), text)]) if k.f.can_fix else None
            rep("TR005", node, f"the @ operator is not supported in a kernel: write {_short(text, 60)}", fix=fix,
                kernel=k.name)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            if k.expr_facts(node.left) & RT:
                rep("TR005", node, "`**` is not defined for tensors: multiply (x * x) or use "
                    f"{tl}exp2(y * {tl}log2(x))", kernel=k.name)
        elif isinstance(node, ast.Compare):
            if any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops):
                rep("TR005", node, "`in` / `not in` are not supported in a kernel: compare with == and combine "
                    "with `or` (or `|` on tensors)", kernel=k.name)
            else:
                rep("TR005", node, "chained comparisons need triton >= 3.9 (3.6 rejects them): write "
                    "`(a < b) & (b < c)`", kernel=k.name, severity=Severity.INFO)
        elif isinstance(node, ast.NamedExpr):
            rep("TR005", node, "`:=` needs triton >= 3.9 (3.6 rejects it): assign on its own line", kernel=k.name,
                severity=Severity.INFO)
    for node in k.fors:
        if not isinstance(node, (ast.ListComp, ast.For)):
            continue
        it = node.generators[0].iter if isinstance(node, ast.ListComp) else node.iter
        ok, name = False, None
        if isinstance(it, ast.Call):
            name = k.callee(it.func) or ""
            ok = name in (f"{TL}.range", f"{TL}.static_range") or (name == "range" and "range" not in k.bound) or \
                _unknown_import(k, name)
        if isinstance(node, ast.ListComp):
            # 3.9 runs comprehensions over tuples; range-like iterators are not tuples.
            if isinstance(it, ast.Call) and name in (f"{TL}.range", f"{TL}.static_range", "range"):
                rep("TR005", node, "a comprehension in a kernel can only iterate a tuple: write the tuple out or use "
                    f"a loop over {tl}static_range", kernel=k.name)
            continue
        if not ok:
            rep("TR005", it, f"a kernel can only loop over range(...), {tl}range(...) or {tl}static_range(...): "
                f"loop `for i in {tl}static_range(len(t))` and index t[i]", kernel=k.name)
    for node in k.fstrings:
        if any(isinstance(v, ast.FormattedValue) and k.expr_facts(v.value) & RT for v in node.values):
            rep("TR005", node, f"an f-string can only format compile-time values: pass runtime values as extra "
                f"arguments, {tl}device_print(\"x\", x)", kernel=k.name)


_LIST_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"}
_UNSUPPORTED_MSG = {
    "Try": "try/except is not supported in a kernel: guard with masks or {tl}where instead",
    "TryStar": "try/except* is not supported in a kernel: guard with masks or {tl}where instead",
    "With": "`with` is not supported in a kernel (only triton's own context managers): remove it",
    "AsyncWith": "`async with` is not supported in a kernel: remove it",
    "Lambda": "lambda is not supported in a kernel: define a @triton.jit function at module level",
    "FunctionDef": "nested functions are not supported in a kernel: move it to module level and decorate it with "
    "@triton.jit",
    "AsyncFunctionDef": "nested functions are not supported in a kernel: move it to module level",
    "ClassDef": "classes cannot be defined in a kernel: define it at module level",
    "Global": "global is not supported in a kernel: pass the value as a parameter, or read a module-level "
    "`NAME = {tl}constexpr(...)`",
    "Nonlocal": "nonlocal is not supported in a kernel: pass the value as a parameter",
    "Yield": "a kernel cannot yield: store results through a pointer",
    "YieldFrom": "a kernel cannot yield: store results through a pointer",
    "Await": "await is not supported in a kernel: remove it",
    "Delete": "del is not supported in a kernel: remove it (rebind the name if needed)",
    "Import": "imports are not supported inside a kernel: import at module level",
    "ImportFrom": "imports are not supported inside a kernel: import at module level",
    "Match": "match is not supported in a kernel: use if/elif on constexpr values",
    "Break": "break is not supported in a kernel: loop over the exact range ({tl}minimum on the bound), or use a "
    "while loop with the exit condition",
    "Continue": "continue is not supported in a kernel: put the rest of the loop body under an if",
    "for-else": "for-else is not supported in a kernel: move the else block after the loop",
    "while-else": "while-else is not supported in a kernel: move the else block after the loop",
    "Dict": "dict literals are not supported in a kernel: use a tuple or separate names",
    "Set": "set literals are not supported in a kernel: use a tuple",
    "DictComp": "dict comprehensions are not supported in a kernel: use a tuple",
    "SetComp": "set comprehensions are not supported in a kernel: use a tuple",
    "GeneratorExp": "generator expressions are not supported in a kernel: use a tuple comprehension [.. for x in t]",
    "Starred": "starred assignment is not supported in a kernel: unpack every element by name",
    "setitem": "item assignment is not supported in a kernel (tensors and tuples are immutable): build a new value, "
    "e.g. with {tl}where(idx == i, v, x)",
}


def _unknown_import(k: KernelFacts, name: str) -> bool:
    """A callee imported from a module we know nothing about: not our business."""
    if "." not in name or name.startswith("triton."):
        return False
    return name.split(".")[0] not in ("math", *_HOST_MODULES)
