"""What sets names in a Triton kernel apart for semantic highlighting: its constexpr parameters (compile-time
constants: each value is a new compile) and the values derived from `tl.program_id` (they differ between
program instances: what indexes a program's tile)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from analyzers.model import FileAnalysis, Span, TritonKernel
from analyzers.source import ImportMap, ParseCache, SourceText, parse_recovering, statements

from .code_at import names_tokens

CONSTEXPR, PROGRAM_ID = "constexpr", "programId"
_DATA_CALLS = (".load", ".atomic_add", ".atomic_cas", ".atomic_xchg", ".atomic_max", ".atomic_min",
               ".load_tensor_descriptor")


@dataclass(frozen=True)
class Highlight:
    span: Span  # one line
    kind: str  # CONSTEXPR or PROGRAM_ID
    declaration: bool = False


def _program_id_names(nodes: list[ast.AST], imports: ImportMap) -> set[str]:
    """Local names assigned from tl.program_id(...) or from names that are, transitively (`nodes`: every node of
    the kernel, walked once by the caller)."""
    derived: set[str] = set()

    def derives(expr: ast.AST) -> bool:
        stack = [expr]
        while stack:
            node = stack.pop()
            called = imports.resolve(node.func) or "" if isinstance(node, ast.Call) else ""
            if called.startswith("triton") and called.endswith(".program_id"):
                return True
            if called.startswith("triton") and called.endswith(_DATA_CALLS):
                continue  # what a load returns is data, not where the program is
            if isinstance(node, ast.Name) and node.id in derived:
                return True
            stack.extend(ast.iter_child_nodes(node))
        return False

    assigns = [n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))]
    assigns.sort(key=lambda n: (n.lineno, n.col_offset))
    for _ in range(3):  # loops may feed a name back: a few passes reach the fixed point in practice
        before = len(derived)
        for node in assigns:
            if node.value is None or not derives(node.value):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        derived.add(leaf.id)
        if len(derived) == before:
            break
    return derived


def _functions(body: list[ast.stmt]) -> dict[tuple[str, int], ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of the module, nested ones too (a kernel made by a factory), by (name, def line)."""
    out: dict[tuple[str, int], ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in statements(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[(node.name, node.lineno)] = node
    return out


def highlights(text: str, analysis: FileAnalysis, parse_cache: ParseCache | None = None,
               lines: tuple[int, int] | None = None) -> list[Highlight]:
    """Constexpr parameters and program-id-derived names of every Triton kernel of the file (of those that
    overlap `lines`, 0-based first and last, when given), in file order. `parse_cache`: the open document's,
    whose statement groups the analysis has already parsed."""
    kernels = [k for k in analysis.kernels
               if lines is None or (k.span.start_line <= lines[1] and k.span.end_line >= lines[0])]
    if not kernels:
        return []
    source = SourceText(text)
    if parse_cache is not None:
        with parse_cache.lock:  # its trees are renumbered in place by the next parse: read them under the lock
            return _highlights(source, kernels, parse_recovering(source, parse_cache).body)
    return _highlights(source, kernels, parse_recovering(source).body)


def _highlights(source: SourceText, kernels: list[TritonKernel], body: list[ast.stmt]) -> list[Highlight]:
    text = source.text
    functions = _functions(body)
    imports = ImportMap(body)
    lines = text.splitlines(keepends=True)
    out: set[Highlight] = set()
    for kernel in kernels:
        first, last = kernel.name_span.start_line, kernel.span.end_line
        chunk = "".join(lines[first:last + 1])
        constexprs = {p.name: p for p in kernel.params if p.is_constexpr}
        for name, found in names_tokens(chunk, set(constexprs)).items():
            p = constexprs[name]
            for line, col, keyword in found:
                if not keyword:
                    line += first
                    out.add(Highlight(Span(line, col, line, col + len(name)), CONSTEXPR,
                                      declaration=(line, col) == (p.span.start_line, p.span.start_col)))
        fn = functions.get((kernel.name, kernel.name_span.start_line + 1))
        if fn is None:
            continue
        nodes = list(ast.walk(fn))
        derived = _program_id_names(nodes, imports) - {p.name for p in kernel.params}
        for node in nodes:
            if isinstance(node, ast.Name) and node.id in derived:
                span = source.span(node)
                out.add(Highlight(span, PROGRAM_ID, declaration=isinstance(node.ctx, ast.Store)))
    return sorted(out, key=lambda h: (h.span.start_line, h.span.start_col))
