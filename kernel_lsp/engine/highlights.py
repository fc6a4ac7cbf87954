"""What sets names in a Triton kernel apart for semantic highlighting: its constexpr parameters (compile-time
constants: each value is a new compile) and the values derived from `tl.program_id` (they differ between
program instances: what indexes a program's tile)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from analyzers.model import FileAnalysis, Span, TritonKernel
from analyzers.source import ImportMap, SourceText, parse_recovering

from .code_at import name_tokens

CONSTEXPR, PROGRAM_ID = "constexpr", "programId"
_DATA_CALLS = (".load", ".atomic_add", ".atomic_cas", ".atomic_xchg", ".atomic_max", ".atomic_min",
               ".load_tensor_descriptor")


@dataclass(frozen=True)
class Highlight:
    span: Span  # one line
    kind: str  # CONSTEXPR or PROGRAM_ID
    declaration: bool = False


def _program_id_names(fn: ast.FunctionDef, imports: ImportMap) -> set[str]:
    """Local names assigned from tl.program_id(...) or from names that are, transitively."""
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

    assigns = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))]
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


def _function(body: list[ast.stmt], kernel: TritonKernel) -> ast.FunctionDef | None:
    line = kernel.name_span.start_line + 1
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == kernel.name \
                and node.lineno == line:
            return node  # type: ignore[return-value]
    return None


def highlights(text: str, analysis: FileAnalysis) -> list[Highlight]:
    """Constexpr parameters and program-id-derived names of every Triton kernel of the file, in file order."""
    if not analysis.kernels:
        return []
    source = SourceText(text)
    parsed = parse_recovering(source)
    imports = ImportMap(parsed.body)
    lines = text.splitlines(keepends=True)
    out: set[Highlight] = set()
    for kernel in analysis.kernels:
        first, last = kernel.name_span.start_line, kernel.span.end_line
        chunk = "".join(lines[first:last + 1])
        for p in kernel.params:
            if not p.is_constexpr:
                continue
            for line, col, keyword in name_tokens(chunk, p.name):
                if not keyword:
                    line += first
                    out.add(Highlight(Span(line, col, line, col + len(p.name)), CONSTEXPR,
                                      declaration=(line, col) == (p.span.start_line, p.span.start_col)))
        fn = _function(parsed.body, kernel)
        if fn is None:
            continue
        derived = _program_id_names(fn, imports) - {p.name for p in kernel.params}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id in derived:
                span = source.span(node)
                out.add(Highlight(span, PROGRAM_ID, declaration=isinstance(node.ctx, ast.Store)))
    return sorted(out, key=lambda h: (h.span.start_line, h.span.start_col))
