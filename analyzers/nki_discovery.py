"""Finds AWS NKI kernels of both API generations (legacy neuronxcc.nki and current nki).

The two generations share their vocabulary (`nki.jit`, `nl.ndarray`, `nisa.nc_matmul`) and differ in where the
names come from: `neuronxcc.nki...` is the legacy API, `nki...` (NKI >= 0.4) the current one. Every name is
therefore classified through the file's imports, never by its spelling, so aliases and `from` imports work.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from .model import NkiKernel, Span
from .source import ImportMap, SourceText

LEGACY, CURRENT = "legacy", "current"

# Decorators that turn a function into an NKI kernel (last component of the dotted name).
KERNEL_DECORATORS = {"jit", "baremetal", "trace", "benchmark", "profile"}
# Decorators that run the kernel from the host themselves, so its arguments come from the host.
HOST_DECORATORS = {"baremetal", "benchmark", "profile"}
# Calls that take a kernel function as their first argument and run it.
KERNEL_RUNNERS = {"simulate_kernel", "simulate"}
# Framework entry points that wrap a kernel without saying which NKI generation it is written in.
FRAMEWORK_WRAPPERS = {
    "torch_neuronx.nki_jit": "jit",
    "torch_neuronx.xla_impl.ops.nki_jit": "jit",
    "jax_neuronx.nki_call": "nki_call",
}
# Submodules that only describe types (annotations); AWS's own current-API code imports neuronxcc.nki.typing.
_TYPE_ONLY = ("typing",)


def classify(dotted: str | None) -> tuple[str, str] | None:
    """(api, name inside the package) for a dotted name from either generation, e.g. ("legacy", "language.ndarray")."""
    if not dotted:
        return None
    for root, api in (("neuronxcc.nki", LEGACY), ("nki", CURRENT)):
        if dotted == root:
            return api, ""
        if dotted.startswith(root + "."):
            return api, dotted[len(root) + 1 :]
    return None


def is_type_only(inner: str) -> bool:
    return inner.split(".")[0] in _TYPE_ONLY


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def nki_name(imports: ImportMap, node: ast.AST) -> tuple[str, str] | None:
    """Classify an expression (name, attribute chain, or call of one) that refers to an NKI API.

    The root name must be imported: an unimported `nki` is a local variable or a missing import, not an API.
    """
    root = _root_name(node.func if isinstance(node, ast.Call) else node)
    if root is None or root not in imports.names:
        return None
    return classify(imports.resolve(node))


@dataclass(frozen=True)
class NkiImport:
    api: str
    module: str  # the dotted module or name imported
    node: ast.stmt  # the import statement
    span: Span
    # Inside try/except ImportError: a compatibility shim that picks whichever generation is installed.
    guarded: bool = False


@dataclass
class NkiDiscovery:
    kernels: list[NkiKernel] = field(default_factory=list)
    nodes: dict[str, ast.FunctionDef] = field(default_factory=dict)
    # Each kernel with its own definition (names may repeat across scopes; `nodes` keeps the last).
    items: list[tuple[NkiKernel, ast.FunctionDef]] = field(default_factory=list)
    # Local name -> API generation it was imported from, e.g. {"nl": "legacy", "nisa": "current"}.
    # Type-only imports (neuronxcc.nki.typing) are left out: they are used beside both generations.
    aliases: dict[str, str] = field(default_factory=dict)
    imports: list[NkiImport] = field(default_factory=list)
    # Kernels called from another kernel of this file, or jitted with mode="trace": their arguments are
    # on-chip tiles handed over by the caller, not the HBM tensors a top-level kernel receives.
    subkernels: set[str] = field(default_factory=set)
    # Kernels this file runs from the host (nki.simulate(k), simulate_kernel(k, ...), k[grid](...),
    # @nki.baremetal/benchmark/profile): their tensor arguments are in HBM.
    entry_points: set[str] = field(default_factory=set)

    @property
    def apis(self) -> set[str]:
        return {i.api for i in self.imports}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in types}
    return bool(names & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _nki_imports(src: SourceText, body: list[ast.stmt]) -> list[NkiImport]:
    found: list[NkiImport] = []

    def add(dotted: str, node: ast.stmt, guarded: bool) -> None:
        c = classify(dotted)
        if c and not is_type_only(c[1]):
            found.append(NkiImport(c[0], dotted, node, src.span(node), guarded))

    # Blocks in source order, with a stack of its own: an `elif` chain nests as deep as it is long.
    pending: list[tuple[Iterator[ast.stmt], bool]] = [(iter(body), False)]
    while pending:
        nodes, guarded = pending[-1]
        node = next(nodes, None)
        if node is None:
            pending.pop()
        elif isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, guarded)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                add(f"{node.module}.{alias.name}", node, guarded)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            shim = any(_catches_import_error(h) for h in node.handlers)  # type: ignore[attr-defined]
            blocks = [(node.body, guarded or shim)]  # type: ignore[attr-defined]
            blocks += [(h.body, guarded or shim) for h in node.handlers]  # type: ignore[attr-defined]
            blocks.append((node.orelse + node.finalbody, guarded))  # type: ignore[attr-defined]
            pending.extend((iter(b), g) for b, g in reversed(blocks))
        else:
            inner = [[n for n in getattr(node, name, []) if isinstance(n, ast.stmt)]
                     for name in ("body", "orelse", "finalbody")]
            pending.extend((iter(b), guarded) for b in reversed(inner))
    # One record per statement and generation is enough for reporting.
    unique: dict[tuple[int, str], NkiImport] = {}
    for imp in found:
        unique.setdefault((id(imp.node), imp.api), imp)
    return sorted(unique.values(), key=lambda i: (i.span.start_line, i.span.start_col))


def _entry_kind(imports: ImportMap, node: ast.AST, names: set[str]) -> tuple[str | None, str] | None:
    """(api, kind) when node names one of `names` (e.g. nki.jit, neuronxcc.nki.baremetal), called or not.

    The api is None for framework wrappers (torch_neuronx.nki_jit), which serve either generation.
    """
    target = node.func if isinstance(node, ast.Call) else node
    root = _root_name(target)
    full = imports.resolve(target) if root is not None and root in imports.names else None
    if full in FRAMEWORK_WRAPPERS:
        kind = FRAMEWORK_WRAPPERS[full]
        return (None, kind) if kind in names else None
    c = classify(full)
    if c is None:
        return None
    kind = c[1].rsplit(".", 1)[-1]
    return (c[0], kind) if kind in names else None


def _kernel_function(node: ast.AST) -> str | None:
    """The function name passed to a wrapper: `f`, or `f[2]` (a kernel indexed by its launch grid)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _body_api(fn: ast.FunctionDef, aliases: dict[str, str]) -> str:
    """The generation of the first NKI name a kernel uses (for kernels wrapped by a framework decorator)."""
    names = sorted((n.lineno, n.col_offset, n.id) for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in aliases)
    return aliases[names[0][2]] if names else LEGACY  # framework wrappers predate the current API


def discover_nki(src: SourceText, imports: ImportMap, body: list[ast.stmt]) -> NkiDiscovery:
    found = NkiDiscovery()
    if "nki" not in src.text:
        return found  # every NKI import spells it: nothing to find (and most Triton files are large)
    found.imports = _nki_imports(src, body)
    wrappers_imported = False
    for local, full in imports.names.items():
        c = classify(full)
        if c and not is_type_only(c[1]):
            found.aliases[local] = c[0]
        wrappers_imported |= full in FRAMEWORK_WRAPPERS or full.split(".")[0] in ("torch_neuronx", "jax_neuronx")
    if not found.aliases and not wrappers_imported:
        return found  # no NKI import: nothing here can be an NKI kernel

    functions: list[ast.FunctionDef] = []
    # Functions wrapped or run by call rather than decorated: nki.jit(f), nki.simulate(f)(...), simulate_kernel(f, x).
    wrapped: dict[str, list[tuple[str | None, str]]] = {}
    launched: set[str] = set()
    for b in body:
        for call in ast.walk(b):
            if isinstance(call, ast.FunctionDef):
                functions.append(call)
            if not isinstance(call, ast.Call):
                continue
            if isinstance(call.func, ast.Subscript) and (name := _kernel_function(call.func)):
                launched.add(name)  # kernel[grid](...)
            if not call.args or (isinstance(call.func, ast.Call) and call.func.args):
                continue  # nki.simulate(k)(a, b): the arrays are not kernels; the inner call names k
            kind = _entry_kind(imports, call.func, KERNEL_DECORATORS | KERNEL_RUNNERS | {"nki_call"})
            name = _kernel_function(call.args[0])
            if kind and name:
                wrapped.setdefault(name, []).append(kind)
                if kind[1] != "jit":
                    launched.add(name)

    for fn in functions:
        decorated = [k for k in (_entry_kind(imports, d, KERNEL_DECORATORS) for d in fn.decorator_list) if k]
        kinds = decorated + wrapped.get(fn.name, [])
        if not kinds:
            continue
        decorators: list[str] = []
        for _, decorator in kinds:
            if decorator not in decorators:
                decorators.append(decorator)
        api = next((a for a, _ in kinds if a is not None), None) or _body_api(fn, found.aliases)
        start = min([d.lineno for d in fn.decorator_list] + [fn.lineno]) - 1
        end = (fn.end_lineno or fn.lineno) - 1
        def_line = fn.lineno - 1
        col = max(src.line(def_line).find(fn.name, src.col(def_line, fn.col_offset)), 0)
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        kernel = NkiKernel(
            name=fn.name,
            span=Span(start, 0, end, len(src.line(end))),
            name_span=Span(def_line, col, def_line, col + len(fn.name)),
            api=api,  # the first decorator decides; mixing generations is reported by NK005
            decorators=decorators,
            params=[a.arg for a in args],
        )
        found.kernels.append(kernel)
        found.nodes[fn.name] = fn
        found.items.append((kernel, fn))
        if any(isinstance(d, ast.Call) and any(k.arg == "mode" and getattr(k.value, "value", None) == "trace"
                                               for k in d.keywords) for d in fn.decorator_list):
            found.subkernels.add(fn.name)
        if fn.name in launched or any(kind in HOST_DECORATORS for _, kind in decorated):
            found.entry_points.add(fn.name)
    names = {k.name for k in found.kernels}
    for _, fn in found.items:
        for node in ast.walk(fn):
            callee = _kernel_function(node.func) if isinstance(node, ast.Call) else None
            if callee in names and callee != fn.name:
                found.subkernels.add(callee)  # type: ignore[arg-type]
    return found
