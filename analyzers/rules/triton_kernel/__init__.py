"""Rules on the bodies of @triton.jit functions: TR001-TR009, one module per rule.

`facts.py` holds what the rules share (the file and kernel facts, a small dataflow over each kernel's names);
each `trNNN_*.py` module registers its rule's documentation and, with @kernel_check, the check that reports it.
This module runs them: per kernel, memoised per document, one rule's failure reported as KL900.
"""

from __future__ import annotations

import ast
import logging
from typing import cast

from ...budget import checkpoint
from ...model import Span
from ...source import StatementMemo
from .. import FileContext, file_check

# Importing a rule module registers its documentation and its check; checks run in this order.
from . import (  # noqa: F401  (registration)
    tr001_arange_not_power_of_2,
    tr002_unmasked_block_access,
    tr003_dot_tile_too_small,
    tr004_runtime_value_needs_constexpr,
    tr005_unsupported_python_construct,
    tr006_non_jit_call,
    tr007_unknown_triton_name,
    tr008_reduction_without_neutral_other,
    tr009_int32_offset_overflow,
    tr016_off_by_one_mask,
    tr017_swapped_strides,
    tr018_reduction_axis,
)
from .facts import _ALL_MODULES, KERNEL_CHECKS, FileFacts, KernelFacts
from .tr007_unknown_triton_name import _tr007_imports

log = logging.getLogger(__name__)



@file_check
def check_triton_kernels(ctx: FileContext) -> None:
    imports_tl = any(isinstance(n, ast.ImportFrom) and n.module in _ALL_MODULES for n in ctx.body)
    if not ctx.triton.kernels and not imports_tl:
        return
    f = FileFacts.build(ctx)
    if imports_tl:
        _guard(ctx, "imports", lambda: _tr007_imports(ctx, f))
    memo = ctx.memo
    built: dict[int, KernelFacts] = {}
    referenced: dict[int, frozenset[str]] = {}
    for ks in ctx.triton.kernels:
        checkpoint()
        names = memo.get("names", ks.node, None)[0] if memo else StatementMemo.MISSING
        if names is StatementMemo.MISSING:
            k = built[id(ks.node)] = KernelFacts(f, ks)
            called = frozenset(c.node.func.id for c in k.calls if isinstance(c.node.func, ast.Name))
            names = (called, frozenset(n.id for n in ast.walk(ks.node) if isinstance(n, ast.Name)))
            if memo:
                memo.put("names", ks.node, None, names)
        names = cast(tuple[frozenset[str], frozenset[str]], names)  # what the memo holds under "names"
        f.called.update(names[0])
        referenced[id(ks.node)] = names[1]
    shared = _file_fingerprint(ctx, f) if memo else None
    for ks in ctx.triton.kernels:
        checkpoint()

        def check(ks=ks) -> None:
            k = built.get(id(ks.node)) or KernelFacts(f, ks)
            if _guard(ctx, "dataflow", k.solve):
                for rule in KERNEL_CHECKS:
                    _guard(ctx, rule.__name__, lambda rule=rule, k=k: rule(k))

        # A kernel's problems depend on its own tree, on the file-level facts in `shared`, and on module-level
        # names only where it uses them: typing in one kernel (even a half-typed line that hides it from the
        # file for a moment) leaves the others' problems as they were.
        context = None
        if memo:
            refs = referenced[id(ks.node)]
            context = (shared, ks.kernel.name in f.launched, ks.kernel.name in f.called,
                       tuple(sorted((n, f.plain[n].lineno) for n in refs & f.plain.keys())),
                       refs & f.constexpr_fns, refs & f.module_names)
        ctx.memoized("kernel_problems", ks.node, context, ks.kernel.span.start_line, ks.kernel.span.end_line, check)


def _file_fingerprint(ctx: FileContext, f: FileFacts) -> tuple:
    """The file-level facts every kernel's rules read: imports, how triton.language is spelled, constants."""
    return (
        tuple(sorted(ctx.imports.names.items())),
        f.tl, f.can_fix,
        tuple(sorted((name, repr(value)) for name, value in f.module_env.items())),
        repr(sorted(ctx.triton.module_constants.items(), key=lambda kv: kv[0])),
    )


def _guard(ctx: FileContext, what: str, fn) -> bool:
    """One rule's bug must not hide the others' results: report it as KL900 and go on."""
    try:
        fn()
        return True
    except Exception as exc:  # one rule's bug must not hide the others' results
        log.exception("triton_kernel.%s failed", what)
        ctx.report("KL900", Span.point(0), f"internal error in triton_kernel.{what}: {type(exc).__name__}: {exc}")
        return False
