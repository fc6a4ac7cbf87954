"""TR007 unknown-triton-name: `tl.X` names something triton.language does not have (with a did-you-mean), or a block-
pointer API that triton 3.9 removed.
"""

from __future__ import annotations

import ast

from ...model import Fix, Severity, Span, TextEdit
from ...triton_names import MISSING, NAMES
from .. import FileContext, Rule, register
from .facts import (
    _ALL_MODULES,
    _HINTS,
    KERNEL_HEADER,
    TL,
    FileFacts,
    KernelFacts,
    _iter_expr,
    _once,
    _short,
    _suggest,
    kernel_check,
)

register(Rule(
    code="TR007", name="unknown-triton-name", language="triton", severity=Severity.ERROR, fixable=True,
    summary="`tl.X` names something triton.language does not have (with a did-you-mean), or a block-pointer "
    "API that triton 3.9 removed.",
    explanation="An unknown attribute of triton.language fails when the kernel compiles. The list of known names "
    "is the union over the supported triton versions (analyzers/triton_names.py). `tl.make_block_ptr` and "
    "`tl.advance` exist in 3.6 but raise NotImplementedError in 3.9: use `tl.make_tensor_descriptor` "
    "(information: which triton runs the code is not known here). Names older triton releases had "
    "(`tl._experimental_descriptor_load`, `tl.math.pow`, `tl.libdevice`, ...) are information too: the "
    "code works on the triton it was written for; a compile for a target (`--target`) reports the failure "
    "on the installed triton as KC001.",
    wrong=KERNEL_HEADER + "def k(X, BLOCK: tl.constexpr):\n    offs = tl.arrange(0, BLOCK)\n"
    "    tl.store(X + offs, 0.0)\n",
    right=KERNEL_HEADER + "def k(X, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
    "    tl.store(X + offs, 0.0)\n",
))

_REMOVED = {"make_block_ptr": "tl.make_tensor_descriptor(base, shape, strides, block_shape) and desc.load/desc.store",
            "advance": "tensor descriptors (desc.load([offsets]) with new offsets)"}


@kernel_check
def _tr007_names(k: KernelFacts) -> None:
    attrs = list(k.attrs)
    # Annotations and defaults in the signature (`BLOCK: tl.constexr`) are checked too.
    for arg in k.args.values():
        if arg.annotation is not None:
            attrs.extend(n for n in _iter_expr(arg.annotation) if isinstance(n, ast.Attribute))
    for node in attrs:
        module = k.callee(node.value)
        known = _ALL_MODULES.get(module) if module else None
        if known is None or module is None or module == f"{TL}.extra" or node.attr.startswith("_") and node.attr not in _HINTS:
            continue  # tl.extra.<backend> depends on the installed backends (vendor forks add their own)
        _check_name(k.ctx, k.f, node, module, node.attr, known, k)


def _check_name(ctx: FileContext, f: FileFacts, node: ast.AST, module: str, attr: str, known: frozenset[str],
                k: KernelFacts | None) -> None:
    if attr in known and attr not in _REMOVED and not any(attr in m.get(module, ()) for m in MISSING.values()):
        return  # the common case, kept cheap
    tl = f.tl
    kernel = k.name if k else None
    if k is not None and (attr in known or _older_triton(module, attr) is not None):
        if (module, attr) in k.noted:  # a version note once per kernel and name, not at every call site
            return
        k.noted.add((module, attr))
    # Spell the name the way the user wrote it (`tl.arrange`, `libdevice.tanhh`); imports name the module.
    written = _short(ctx.src.segment(node), 60) if isinstance(node, ast.Attribute) else attr
    prefix = written[: len(written) - len(attr)]
    where = f" ({module} has no such name)" if not isinstance(node, ast.Attribute) else ""
    if attr in known:
        if module == TL and attr in _REMOVED:
            # Works on 3.6: whether 3.9 runs the code is not known here (information).
            ctx.report("TR007", node, f"{written} raises NotImplementedError in triton 3.9 (block pointers were "
                       f"removed): use {_REMOVED[attr].replace('tl.', tl)} to support 3.9", kernel=kernel,
                       severity=Severity.INFO)
            return
        lacking = [v for v, mods in MISSING.items() if attr in mods.get(module, ())]
        if lacking:
            ctx.report("TR007", node, f"{written} does not exist in triton {', '.join(lacking)}: keep it only if "
                       f"those versions need not be supported", kernel=kernel, severity=Severity.INFO)
        return
    older = _older_triton(module, attr)
    if older is not None:
        # It worked on the triton the code was written for; which triton runs it is not known here, and a compile
        # for a target (KC001) reports the failure on the installed one.
        ctx.report("TR007", node, f"{written} is from an older triton ({older}): it fails on triton 3.6 and 3.9; "
                   "keep it "
                   "only if the project pins that older triton", kernel=kernel, severity=Severity.INFO)
        return
    guess = _suggest(attr, known)
    hint = _HINTS.get(attr) if module == TL else None
    fix = None
    if guess is not None and isinstance(node, ast.Attribute):
        s = ctx.src.span(node)
        edit = TextEdit(Span(s.end_line, s.end_col - len(attr), s.end_line, s.end_col), guess)
        fix = _once(k, f"Replace with {guess}", [edit]) if k else Fix(f"Replace with {guess}", (edit,))
    if guess is not None:
        msg = f"{written} does not exist{where}: did you mean {prefix}{guess}?"
    elif hint:
        msg = f"{written} does not exist{where}: use {hint.replace('tl.', tl)}"
    else:
        msg = f"{written} does not exist{where}: check the name in the {module} documentation"
    ctx.report("TR007", node, msg, fix=fix, kernel=kernel)


# Names older triton releases had and 3.6/3.9 do not: module -> name -> where it lived and what replaced it.
_OLDER = {
    TL: {
        "_experimental_descriptor_load": "triton 3.0-3.3; now desc.load with tl.make_tensor_descriptor",
        "_experimental_descriptor_store": "triton 3.0-3.3; now desc.store with tl.make_tensor_descriptor",
        "_experimental_make_tensor_descriptor": "triton 3.2-3.3; now tl.make_tensor_descriptor",
        "libdevice": "triton 2.0; now `from triton.language.extra import libdevice`",
    },
    f"{TL}.extra.cuda": {
        "experimental_device_tensormap_create1d": "triton 3.0-3.3; now tl.make_tensor_descriptor",
        "experimental_device_tensormap_create2d": "triton 3.0-3.3; now tl.make_tensor_descriptor",
        "experimental_tensormap_fenceproxy_acquire": "triton 3.0-3.3; tensor descriptors need no fence",
    },
    f"{TL}.math": {
        "max": "triton 2.1-2.3 tl.math.max; now tl.maximum",
        "min": "triton 2.1-2.3 tl.math.min; now tl.minimum",
    },
}


def _older_triton(module: str, attr: str) -> str | None:
    if attr in _OLDER.get(module, {}):
        return _OLDER[module][attr]
    # triton 2.1-2.3 exposed libdevice functions as tl.math.<name>; 3.0 moved them to libdevice.
    if module == f"{TL}.math" and attr in NAMES.get(f"{TL}.extra.cuda.libdevice", ()):
        return f"triton 2.x tl.math; now `from triton.language.extra import libdevice`, libdevice.{attr}"
    return None


def _tr007_imports(ctx: FileContext, f: FileFacts) -> None:
    """`from triton.language import arnage` fails at import time, anywhere in the file."""
    for node in ctx.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in _ALL_MODULES:
            for alias in node.names:
                if alias.name != "*" and alias.name not in _ALL_MODULES[node.module] \
                        and f"{node.module}.{alias.name}" not in _ALL_MODULES:
                    _check_name(ctx, f, node, node.module, alias.name, _ALL_MODULES[node.module], None)
