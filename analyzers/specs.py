"""Correctness specs in source text: where the `@spec(...)` decorations are, and a starter spec for a kernel
that has none. Pure: no torch or triton import, never raises.
"""

from __future__ import annotations

import ast
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from .model import LaunchSite, Span, TritonKernel
from .source import ImportMap, SourceText, parse_recovering

log = logging.getLogger(__name__)

SPEC_DECORATOR = "kernel_lsp.spec.spec"
REFERENCE_TODO = "write the PyTorch reference"  # in the starter's reference: the check fails with this text


@dataclass(frozen=True)
class SpecSite:
    inputs: str  # the decorated inputs function
    kernel: str | None  # the name given as kernel= (dotted for attributes), None when it is not a name
    launcher: str | None  # launcher= / reference= when they are plain (possibly dotted) names
    reference: str | None
    span: Span  # the decorated function, decorators included
    decorator_span: Span  # the @spec(...) call
    def_line: int  # 0-based line of `def`


def _name(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def find_specs(text: str) -> list[SpecSite]:
    """Every `@spec(...)` decorated function at the top level or in classes, in source order."""
    try:
        source = SourceText(text)
        body = parse_recovering(source).body
        imports = ImportMap(body)
        out: list[SpecSite] = []
        for node in ast.walk(ast.Module(body=body, type_ignores=[])):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for dec in node.decorator_list:
                if not (isinstance(dec, ast.Call) and imports.resolve(dec.func) == SPEC_DECORATOR):
                    continue
                kw = {k.arg: k.value for k in dec.keywords if k.arg}
                whole = source.span(node)
                first = min([node.lineno - 1] + [d.lineno - 1 for d in node.decorator_list])
                out.append(SpecSite(
                    inputs=node.name, kernel=_name(kw.get("kernel")), launcher=_name(kw.get("launcher")),
                    reference=_name(kw.get("reference")),
                    span=Span(first, 0, whole.end_line, whole.end_col), decorator_span=source.span(dec),
                    def_line=node.lineno - 1))
                break
        return sorted(out, key=lambda s: s.def_line)
    except Exception:
        log.debug("find_specs failed", exc_info=True)
        return []


@functools.lru_cache(maxsize=16)
def specced_kernels(text: str) -> frozenset[str]:
    """Names of the kernels of a text that have a spec (the name given as `kernel=`, without a module prefix).
    Remembered per text: code lenses, code actions and commands ask it of the same buffer over and over, and each
    answer is a parse of the whole file."""
    return frozenset(site.kernel.rsplit(".", 1)[-1] for site in find_specs(text) if site.kernel)


def _enclosing_function(body: list[ast.stmt], line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    best = None
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = getattr(node, "end_lineno", node.lineno) - 1
            if node.lineno - 1 <= line <= end and (best is None or node.lineno > best.lineno):
                best = node
    return best


def _is_2d(kernel: TritonKernel) -> bool:
    names = " ".join(p.name.lower() for p in kernel.params)
    return any(w in names for w in ("stride", "row", "col", "_m", "_n", "ld"))


def _shapes(kernel: TritonKernel) -> str:
    # Ragged on purpose: sizes that are not multiples of a block size are where masks go wrong.
    return "[(7, 33), (64, 1000)]" if _is_2d(kernel) else "[(1,), (1000,), (4097,)]"


def starter_spec(kernel: TritonKernel, launch_sites: Sequence[LaunchSite], text: str) -> str:
    """The text of a starter spec for `kernel`, to insert after its launcher (or the kernel). The reference is
    a function that raises until the user writes it, so the check says what is missing instead of passing."""
    name = getattr(kernel, "name", "kernel")
    try:
        body = parse_recovering(SourceText(text)).body
        launcher = None
        for site in launch_sites:
            if site.target == name:
                launcher = _enclosing_function(body, site.span.start_line)
                if launcher is not None:
                    break
        if launcher is not None:
            params = [a.arg for a in launcher.args.posonlyargs + launcher.args.args]
            required = params[: len(params) - len(launcher.args.defaults)] or params[:1]
            launcher_name = launcher.name
            launcher_def = ""
        else:
            required = [p.name.removesuffix("_ptr") for p in kernel.params if p.name.endswith("_ptr")][:2] or ["x"]
            launcher_name = f"{name}_launcher"
            launcher_def = (
                f"\n\ndef {launcher_name}({', '.join(required)}):\n"
                f"    # Allocate the outputs, launch {name}[grid](...), return the output(s).\n"
                f"    raise NotImplementedError(\"kernel-lsp starter spec: write the launcher of {name}\")\n"
            )
        args = ", ".join(required)
        tensors = ",\n        ".join(
            "torch.randn(shape, dtype=dtype, device=device)" for _ in required)
        return (
            "from kernel_lsp.spec import spec  # noqa: E402\n"
            f"{launcher_def}\n\n"
            f"def {name}_reference({args}):\n"
            f"    # The same computation in plain PyTorch, returning what {launcher_name} returns.\n"
            f"    raise NotImplementedError(\"kernel-lsp starter spec: {REFERENCE_TODO} for {name}\")\n"
            "\n\n"
            "@spec(\n"
            f"    kernel={name},\n"
            f"    launcher={launcher_name},\n"
            f"    reference={name}_reference,\n"
            f"    shapes={_shapes(kernel)},\n"
            "    dtypes=[\"float32\", \"float16\"],\n"
            ")\n"
            f"def {name}_inputs(shape, dtype, device):\n"
            f"    # The positional arguments of {launcher_name}, built from one shape of `shapes`.\n"
            f"    return (\n        {tensors},\n    )\n"
        )
    except Exception:
        log.debug("starter_spec failed", exc_info=True)
        return (
            "from kernel_lsp.spec import spec  # noqa: E402\n\n\n"
            f"def {name}_reference(*args):\n"
            f"    raise NotImplementedError(\"kernel-lsp starter spec: {REFERENCE_TODO} for {name}\")\n\n\n"
            f"def {name}_launcher(*args):\n"
            f"    raise NotImplementedError(\"kernel-lsp starter spec: write the launcher of {name}\")\n\n\n"
            f"@spec(kernel={name}, launcher={name}_launcher, reference={name}_reference, shapes=[(1000,)])\n"
            f"def {name}_inputs(shape, dtype, device):\n"
            "    return ()\n"
        )
