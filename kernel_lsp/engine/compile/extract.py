"""Slices a self-contained module out of a user's file for one kernel, without executing the file.

The module holds: the triton imports the file uses (same aliases), the module-level constants the kernel reads,
every @jit helper it calls (transitively, same file) and the kernel itself, each def under a plain `@triton.jit`.
Lines are copied verbatim (columns stay the user's) and packed without the gaps between them, so the module text,
and therefore the cache key, does not depend on where the kernel sits in the file; `line_map` maps back.

@jit helpers and literal constants imported from other modules of the workspace (`from .utils import helper`,
`from pkg.common import BLOCK`) are sliced from their files by the same rules and come first, with no line of the
user's file. Anything else a kernel reads (names imported from torch or from modules not found in the workspace,
constants computed by code, @triton.constexpr_function helpers) is left out and reported in `unresolved`: the worker never imports the user's
module and runs none of its code (offline.py says what may run, and the worker checks it again).
"""

from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass, field
from pathlib import Path

from analyzers.discovery import KernelSyntax, TritonDiscovery, discover_triton
from analyzers.model import TritonKernel
from analyzers.source import ImportMap, ParseResult, SourceText, literal_value, parse_python, parse_recovering

from . import offline
from .jobs import NOT_IN_KERNELS

_BUILTINS = frozenset(dir(builtins))
# Libraries of host code: a kernel that names them does not compile, whatever their value.
HOST_LIBRARIES = frozenset({"torch", "numpy", "jax", "cupy"})
_JIT_KEEP_KWARGS = {"noinline", "debug", "do_not_specialize", "do_not_specialize_on_alignment"}
_CONSTEXPR_FUNCTION = {"triton.constexpr_function", "triton.language.constexpr_function",
                       "triton.runtime.jit.constexpr_function", "triton.language.core.constexpr_function"}


_MAX_DEPTH = 3


class ExtractionError(ValueError):
    """The kernel is not in the file (or the file cannot be parsed around it)."""


@dataclass
class ExtractedModule:
    kernel: str
    source: str
    line_map: tuple[int, ...]  # module line (1-based, index + 1) -> user line (1-based); 0: a line we wrote
    functions: tuple[str, ...]  # the @jit functions included, in file order
    constants: tuple[str, ...]
    unresolved: tuple[tuple[str, str], ...]  # (name, why it was left out)
    info: TritonKernel  # the kernel as discovery sees it: params, autotune configs, heuristics
    node: ast.FunctionDef
    jit_options: dict[str, object] = field(default_factory=dict)  # literal @triton.jit(...) keywords
    uses_dot: bool = False  # the kernel or a helper calls tl.dot: tensor-core inputs are usually 16-bit


def _allowed_import(dotted: str) -> bool:
    """Imports the worker may re-create (offline.py): triton and a few pure standard modules. Anything else
    (torch, numpy, the user's packages, the rest of the standard library) is never imported."""
    return not dotted.startswith(".") and offline.allowed_import(dotted)


def _bound_names(fn: ast.AST) -> set[str]:
    """Names a function binds locally: parameters, assignment/loop/with targets, nested defs, comprehension vars."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            out.update(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs)
            out.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
            if node is not fn and not isinstance(node, ast.Lambda):
                out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
    return out


def _free_names(node: ast.AST, skip_decorators: bool = True) -> list[ast.Name]:
    """Names read by a def (or an expression) that are not bound inside it, in source order."""
    bound = _bound_names(node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else set()
    roots: list[ast.AST] = [node]
    if skip_decorators and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        roots = [node.args, *node.body] + ([node.returns] if node.returns else [])
    out = []
    for root in roots:
        for sub in ast.walk(root):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in bound:
                out.append(sub)
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _module_assignments(body: list[ast.stmt]) -> dict[str, tuple[ast.stmt, ast.expr]]:
    """Module-level `NAME = value` (annotated or not): the statement and its value, by name."""
    out: dict[str, tuple[ast.stmt, ast.expr]] = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = (node, node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = (node, node.value)
    return out


def _jit_options(imports: ImportMap, node: ast.FunctionDef) -> dict[str, object]:
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call) and (imports.resolve(dec.func) or "").endswith("jit"):
            return {k.arg: literal_value(k.value) for k in dec.keywords
                    if k.arg in _JIT_KEEP_KWARGS and literal_value(k.value) is not None}
    return {}


@functools.lru_cache(maxsize=8)
def _file_facts(text: str) -> tuple[SourceText, ParseResult, ImportMap, TritonDiscovery]:
    """Parse and discovery of a whole file, shared by the extraction of each of its kernels (read-only)."""
    src = SourceText(text)
    parsed = parse_recovering(src)
    imports = ImportMap(parsed.body)
    return src, parsed, imports, discover_triton(src, imports, parsed.body)


def _import_line(local: str, dotted: str) -> str:
    if "." not in dotted:
        return f"import {dotted}" + (f" as {local}" if local != dotted else "")
    parent, leaf = dotted.rsplit(".", 1)
    return f"from {parent} import {leaf}" + (f" as {local}" if local != leaf else "")


def _guarded_imports(body: list[ast.stmt]) -> dict[str, list[str]]:
    """Names bound by a version-guarded import (`try: from a import x / except ImportError: from b import x`):
    local name -> the dotted names it is tried as, in order. The slice keeps the whole guard, so the worker's
    Python picks what the installed triton has."""
    out: dict[str, list[str]] = {}
    for stmt in body:
        found = _import_alternatives(stmt)
        for local, dotted_names in (found or {}).items():
            for dotted in dotted_names:
                if dotted not in out.setdefault(local, []):
                    out[local].append(dotted)
    return {k: v for k, v in out.items() if len(v) > 1}


def _import_alternatives(stmt: ast.stmt, depth: int = 0) -> dict[str, list[str]] | None:
    """What one top-level statement may import, as alternatives in the order they are tried: imports, a `try` of
    imports whose handlers catch import errors, and an `if`/`else` of those (a version check such as `if
    compare_version("triton", ge, "3.0"): ... else: ...`: the `if` branch is tried first, and the worker's Python
    keeps the first that its triton has). None for any other statement."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {local: [dotted] for local, dotted in ImportMap([stmt]).names.items()}
    if isinstance(stmt, ast.Pass):
        return {}
    if depth > 4:
        return None
    if isinstance(stmt, ast.Try):
        if stmt.finalbody or stmt.orelse or not all(offline.catches_import_errors(h) for h in stmt.handlers):
            return None
        blocks = [stmt.body] + [h.body for h in stmt.handlers]
    elif isinstance(stmt, ast.If):
        blocks = [stmt.body, stmt.orelse]
    else:
        return None
    out: dict[str, list[str]] = {}
    for block in blocks:
        for sub in block:
            found = _import_alternatives(sub, depth + 1)
            if found is None:
                return None
            for local, dotted_names in found.items():
                out.setdefault(local, []).extend(d for d in dotted_names if d not in out[local])
    return out


def _guarded_import_lines(local: str, alternatives: list[str]) -> list[str]:
    """`try:` / `except (ImportError, AttributeError):` lines trying each alternative in turn."""
    lines: list[str] = []
    for depth, dotted in enumerate(alternatives):
        pad = "    " * depth
        if depth < len(alternatives) - 1:
            lines += [f"{pad}try:", f"{pad}    {_import_line(local, dotted)}",
                      f"{pad}except (ImportError, AttributeError):"]
        else:
            lines.append("    " * depth + _import_line(local, dotted))
    return lines


def _workspace_module(dotted: str, path: str) -> Path | None:
    """The file of the workspace module a name is imported from (`.utils.helper` next to `path`,
    `pkg.common.BLOCK` under a folder above it), or None. Only found, never imported."""
    if path.startswith("<"):
        return None
    here = Path(path).resolve().parent
    module = dotted.rsplit(".", 1)[0]
    if not module.strip("."):
        return None  # `from . import utils`: a module used as a value, not sliced
    if module.startswith("."):
        level = len(module) - len(module.lstrip("."))
        base = here
        for _ in range(level - 1):
            base = base.parent
        parts = [p for p in module.lstrip(".").split(".") if p]
        roots = [base]
    else:
        parts = module.split(".")
        roots = [here, *list(here.parents)[:6]]
    for root in roots:
        candidate = root.joinpath(*parts)
        for file in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if parts and file.is_file():
                return file
    return None


def extract_module(text: str, kernel: str, path: str = "<memory>", _depth: int = 0) -> ExtractedModule:
    """Build the self-contained module for `kernel` (a name or a qualname) in `text`. @jit helpers and literal
    constants imported from other modules of the workspace come along, sliced from their files by the same rules
    (at most `_MAX_DEPTH` modules deep)."""
    src, parsed, imports, found = _file_facts(text)
    by_qualname = {k.kernel.qualname: k for k in found.kernels}
    top_jit = {k.kernel.name: k for k in found.kernels if "." not in k.kernel.qualname}
    target = by_qualname.get(kernel) or top_jit.get(kernel)
    if target is None:
        target = next((k for k in found.kernels if k.kernel.name == kernel), None)
    if target is None:
        where = "" if parsed.error is None else f" (line {parsed.error[0] + 1} has a syntax error: {parsed.error[2]})"
        raise ExtractionError(f"no @triton.jit function named {kernel!r} in {path}{where}")

    assignments = _module_assignments(parsed.body)
    guarded = {local: alts for local, alts in _guarded_imports(parsed.body).items()
               if all(_allowed_import(d) for d in alts)}
    foreign_heads: list[str] = []  # import lines of helpers brought from other modules of the workspace
    foreign_body: list[str] = []  # their text (no line of the user's file: line_map 0)
    foreign_names: set[str] = set()
    scope = offline.Scope(parsed.body)
    module_defs = {n.name: n for n in parsed.body if isinstance(n, ast.FunctionDef)}

    functions: dict[str, KernelSyntax] = {}
    constants: dict[str, ast.stmt] = {}
    import_names: set[str] = set()
    unresolved: dict[str, str] = {}
    uses_dot = False

    def need(name: str, record: bool = True) -> bool:
        """Make `name` available in the module; False when it cannot be (recorded in unresolved)."""
        if name in functions or name in constants or name in import_names:
            return True
        if name == target.kernel.name and "." not in target.kernel.qualname:
            return True  # recursion into the kernel itself
        if name in top_jit and top_jit[name].node is not target.node:
            functions[name] = top_jit[name]
            visit_def(top_jit[name].node)
            return True
        if name in module_defs:
            fn = module_defs[name]
            if record and any(imports.resolve(d) in _CONSTEXPR_FUNCTION for d in fn.decorator_list):
                unresolved[name] = (f"`{name}` is a @triton.constexpr_function (line {fn.lineno}): Python that the "
                                    "offline compile does not run")
                return False
            if record:
                unresolved[name] = f"`{name}` is a plain Python function, not a @triton.jit function"
            return False
        if name in assignments:
            stmt, value = assignments[name]
            constants[name] = stmt  # before recursing: constants may refer to each other
            # A constant's own dependencies are not reported, the constant is: the kernel reads it, not them.
            bad = [n.id for n in _free_names(value) if not need(n.id, record=False)]
            why = offline.unsafe_expression(value, scope) or (
                f"it reads `{bad[0]}`, which the offline compile cannot provide" if bad else None)
            if why:
                del constants[name]
                unresolved[name] = (f"`{name}` (line {stmt.lineno}) cannot be computed offline: {why}; a literal "
                                    "or tl.constexpr(literal) can be compiled")
                return False
            return True
        if name in guarded:
            import_names.add(name)
            return True
        if name in imports.names:
            dotted = imports.names[name]
            if _allowed_import(dotted):
                import_names.add(name)
                return True
            why = None
            if dotted.split(".")[0].lstrip(".") not in HOST_LIBRARIES and _depth < _MAX_DEPTH:
                found_in = _workspace_module(dotted, path)
                why = "not found in the workspace" if found_in is None else take_foreign(name, dotted, found_in)
                if why is None:
                    return True
            if record and why and why != "not found in the workspace":
                unresolved[name] = (f"`{name}` is imported from `{dotted}`, which kernel-lsp could not bring "
                                    f"along: {why}")
                return False
            if record:
                if dotted.split(".")[0] in HOST_LIBRARIES:
                    unresolved[name] = (f"{NOT_IN_KERNELS}`{name}` is imported from `{dotted}`, a host library: "
                                        "triton compiles only triton.language and constexpr values")
                else:
                    unresolved[name] = (f"`{name}` is imported from `{dotted}`: the offline compile imports only "
                                        "triton and math, so its value is not known")
            return False
        # Builtins are fine; a name defined nowhere fails the compile with triton's own NameError.
        return name in _BUILTINS

    def take_foreign(local: str, dotted: str, file: Path) -> str | None:
        """Slice `local` (a @jit function or a literal constant) out of another module of the workspace, by the
        same rules, never importing it; None when it came along, else why not."""
        leaf = dotted.rsplit(".", 1)[-1]
        try:
            other = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return f"it cannot be read ({type(exc).__name__})"
        _, o_parsed, o_imports, o_found = _file_facts(other)
        if any(k.kernel.name == leaf and "." not in k.kernel.qualname for k in o_found.kernels):
            try:
                sub = extract_module(other, leaf, str(file), _depth=_depth + 1)
            except ExtractionError as exc:
                return str(exc)
            if sub.unresolved:
                return sub.unresolved[0][1]
            lines = sub.source.splitlines()
            heads = [ln for ln, user in zip(lines, sub.line_map) if user == 0 and ln.startswith(("import ", "from "))]
            body = [ln for ln, user in zip(lines, sub.line_map)
                    if not (user == 0 and ln.startswith(("import ", "from ")))]
            if local != leaf:
                body.append(f"{local} = {leaf}")
        else:
            assigned = _module_assignments(o_parsed.body).get(leaf)
            if assigned is None:
                return f"`{leaf}` there is neither a @triton.jit function nor a constant"
            value = assigned[1]
            names = {n.id for n in _free_names(value)} - _BUILTINS
            if (any(not _allowed_import(o_imports.names.get(n, ".")) for n in names)
                    or offline.unsafe_expression(value, offline.Scope(o_parsed.body))):
                return f"`{leaf}` there is not a literal"
            heads = [_import_line(n, o_imports.names[n]) for n in sorted(names)]  # `tl` of tl.constexpr(128)
            body = [f"{local} = {ast.unparse(value)}"]
        chunk = "\n".join(heads + body)
        try:
            chunk_scope = offline.Scope(parse_python(chunk).body)
        except SyntaxError:
            return "its text does not parse on its own"
        bound = set(chunk_scope.count)

        def means_else(n: str) -> bool:  # an import of the same module under the same name is no clash
            if n in chunk_scope.imports:
                same = imports.names.get(n, chunk_scope.imports[n]) == chunk_scope.imports[n]
                return not same or n in assignments or n in module_defs
            return n != local and (n in assignments or n in module_defs or n in imports.names
                                   or n in foreign_names)

        clash = sorted(n for n in bound if means_else(n))
        if clash:
            return f"`{clash[0]}` means something else in this file"
        foreign_heads.extend(h for h in heads if h not in foreign_heads)
        foreign_body.extend(body)
        foreign_names.update(bound)
        return None

    def visit_def(fn: ast.FunctionDef) -> None:
        nonlocal uses_dot
        for n in _free_names(fn):
            need(n.id)
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Call) and (imports.resolve(sub.func) or "").split(".")[-1] in ("dot", "dot_scaled"):
                uses_dot = True

    visit_def(target.node)

    # Emit in file order: imports, then constants / helpers / kernel as they appear in the user's file.
    out_lines: list[str] = []
    line_map: list[int] = []

    def emit(line: str, user_line: int = 0) -> None:
        out_lines.append(line)
        line_map.append(user_line)

    triton_alias = "triton" if imports.names.get("triton", "triton") == "triton" else "_kernel_lsp_triton"
    emit(f"import triton as {triton_alias}" if triton_alias != "triton" else "import triton")
    for local in sorted(import_names):
        if local in guarded:
            for line in _guarded_import_lines(local, guarded[local]):
                emit(line)
            continue
        stmt = _import_line(local, imports.names[local])
        if stmt != "import triton":
            emit(stmt)

    for line in foreign_heads:
        if line != "import triton" and line not in out_lines:
            emit(line)
    for line in foreign_body:  # before the file's own pieces: its constants may read them
        emit(line)

    def_name = target.node.name
    pieces: list[tuple[int, ast.stmt]] = [(s.lineno, s) for s in constants.values()]
    pieces += [(k.node.lineno, k.node) for k in functions.values()]
    pieces.append((target.node.lineno, target.node))
    for _, node in sorted(pieces, key=lambda p: p[0]):
        first, last = node.lineno, node.end_lineno or node.lineno
        indent = len(src.line(first - 1)) - len(src.line(first - 1).lstrip())
        if indent:
            emit("if True:")  # a def nested in a class or block keeps its columns inside a dummy block
        if isinstance(node, ast.FunctionDef):
            opts = _jit_options(imports, node)
            args = ", ".join(f"{k}={v!r}" for k, v in sorted(opts.items()))
            dec_line = next((d.lineno for d in node.decorator_list
                             if (imports.resolve(d) or "").endswith("jit")), first)
            emit(" " * indent + f"@{triton_alias}.jit" + (f"({args})" if args else ""), dec_line)
        for i in range(first, last + 1):
            emit(src.line(i - 1), i)
        if node is target.node and target.kernel.name != def_name and not indent:
            emit(f"{target.kernel.name} = {def_name}")  # `k = triton.jit(f)`: the kernel is called k

    return ExtractedModule(
        kernel=target.kernel.name,
        source="\n".join(out_lines) + "\n",
        line_map=tuple(line_map),
        functions=tuple(k.kernel.name for k in sorted([*functions.values(), target], key=lambda k: k.node.lineno)),
        constants=tuple(constants),
        unresolved=tuple(sorted(unresolved.items())),
        info=target.kernel,
        node=target.node,
        jit_options=_jit_options(imports, target.node),
        uses_dot=uses_dot,
    )
