"""The file a port to NKI lands in: `<name>_nki.py` beside the Triton file.

It holds the candidate's NKI kernel with its imports, and a correctness spec of its own: the Triton kernel's spec
(its inputs function, reference, shapes, dtypes, tolerances and whatever they read, copied as written) with
`kernel=` and `launcher=` naming the NKI kernel. `kernel-lsp check --run-checks` and the editor's lens then verify
the port in that file, and the Triton file is left as it was: no `import nki` there, so it still imports wherever
Neuron is not installed. Pure: no torch, no triton.

    path = port_path("/ws/vector_add.py")                           # "/ws/vector_add_nki.py", or the next free
    text = port_file(triton_text, code, "add_kernel", "add_kernel_nki", "vector_add.py")
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Sequence

from analyzers.source import parse_python
from analyzers.specs import find_specs

from .code import SpliceError
from .integrity import _binds, _Module, spec_closure


def port_path(path: str, exists: Callable[[str], bool] = os.path.exists) -> str:
    """`<name>_nki.py` beside `path`; where that exists, `<name>_nki_2.py`, `_3`, ...: an existing file is never
    the target of a port."""
    stem = os.path.splitext(path)[0]
    candidate, n = f"{stem}_nki.py", 2
    while exists(candidate):
        candidate, n = f"{stem}_nki_{n}.py", n + 1
    return candidate


def _segment(lines: list[str], node: ast.stmt) -> str:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())]) - 1
    return "".join(lines[first:node.end_lineno or node.lineno])


def _replace(text: str, edits: Sequence[tuple[ast.expr, str]]) -> str:
    """`text` (the source of one statement, starting at line `base`) with each expression's span replaced."""
    raw = text.encode()
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line.encode()))
    for node, new in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        a = starts[node.lineno - 1] + node.col_offset
        b = starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
        raw = raw[:a] + new.encode() + raw[b:]
    return raw.decode()


def _spec_statements(text: str, kernel: str, nki_kernel: str) -> tuple[list[str], list[str]]:
    """(the imports, the statements) of the Triton file that the spec of `kernel` needs, its decorator naming
    `nki_kernel`; empty when the kernel has no spec."""
    site = next((s for s in find_specs(text) if s.kernel and s.kernel.rsplit(".", 1)[-1] == kernel), None)
    if site is None:
        return [], []
    module = _Module.parse(text)
    needed = set(spec_closure(module, site.inputs)) | {site.inputs}
    lines = text.splitlines(keepends=True)
    imports: list[str] = []
    statements: list[str] = []
    for node in module.tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kept = [a for a in node.names if (a.asname or a.name.split(".")[0]) in needed]
            if kept:
                imports.append(ast.unparse(type(node)(**{**node.__dict__, "names": kept})) + "\n")
            continue
        if not set(_binds(node)) & needed:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == site.inputs:
            # The decorator names the NKI kernel as both kernel and launcher: it takes the spec's inputs.
            decorator = next(d for d in node.decorator_list if isinstance(d, ast.Call) and any(
                k.arg == "kernel" for k in d.keywords))
            first = min(d.lineno for d in node.decorator_list)
            shifted = []
            for kw in decorator.keywords:
                if kw.arg in ("kernel", "launcher"):
                    value = kw.value
                    moved = ast.Name(nki_kernel, lineno=value.lineno - first + 1, col_offset=value.col_offset,
                                     end_lineno=(value.end_lineno or value.lineno) - first + 1,
                                     end_col_offset=value.end_col_offset)
                    shifted.append((moved, nki_kernel))
            statements.append(_replace(_segment(lines, node), shifted))
        else:
            statements.append(_segment(lines, node))
    return imports, statements


def port_file(text: str, code: str, kernel: str, nki_kernel: str, triton_name: str) -> str:
    """The text of the port's own file: the candidate's imports and definitions, then the Triton kernel's spec
    (and what it reads) naming `nki_kernel`. Raises SpliceError where the candidate's code does not parse."""
    try:
        tree = parse_python(code)
    except SyntaxError as exc:
        raise SpliceError(f"the code does not parse: {exc.msg} at line {exc.lineno}") from None
    code_lines = code.splitlines(keepends=True)
    imports: list[str] = []
    definitions: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(ast.unparse(node) + "\n")
        elif isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            continue  # a demo under `if __name__ == "__main__":` never runs on import: left out
        else:
            definitions.append(_segment(code_lines, node).rstrip() + "\n")
    spec_imports, spec_statements = _spec_statements(text, kernel, nki_kernel)
    defined = {name for node in tree.body for name in _binds(node)}
    seen: set[str] = set()
    header = []
    for line in imports + spec_imports:
        if line not in seen:
            seen.add(line)
            header.append(line)
    spec_part = [s.rstrip() + "\n" for s in spec_statements]
    clash = next((n for s in spec_statements for n in _binds(parse_python(s).body[0]) if n in defined), None)
    if clash:
        raise SpliceError(f"the code defines {clash}, which the correctness spec of {kernel} reads; the port's "
                          "file copies that spec as it is: name the NKI code's definitions differently")
    doc = f'"""{nki_kernel}: {kernel} of {triton_name} ported to NKI, with that kernel\'s correctness spec."""\n\n'
    parts = [doc + "".join(header)] + definitions + spec_part
    return "\n\n".join(p.rstrip("\n") + "\n" for p in parts)
