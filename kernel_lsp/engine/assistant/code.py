"""From a model's answer to a candidate file: the code block, spliced into the user's text by definition name.

A candidate replaces whole top-level definitions of the file (decorators included) by name and adds new ones;
it may never touch a correctness spec nor the reference the spec names: `splice` refuses, and `spec_texts`
lets the caller prove afterwards that those are byte-for-byte unchanged. Pure: no torch, no triton.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from analyzers.model import Span, TextEdit
from analyzers.source import parse_python
from analyzers.specs import find_specs

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


class SpliceError(ValueError):
    """The candidate cannot be applied; str() says why, in words the model is told."""


class Refused(SpliceError):
    """The candidate could be applied but touches what it may not (the spec): refused, not merely inapplicable."""


def extract_code(answer: str) -> str | None:
    """The last fenced python block of an answer (models sometimes quote the old code first), else None."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(answer)]
    python = [body for lang, body in blocks if lang in ("python", "py", "python3")]
    plain = [body for lang, body in blocks if lang == ""]
    chosen = python or plain
    return chosen[-1].strip("\n") + "\n" if chosen else None


def extract_plan(answer: str) -> str:
    """A plan is the answer's prose; any code the model wrote anyway is dropped."""
    return _FENCE.sub("", answer).strip()


@dataclass(frozen=True)
class _Def:
    name: str
    start: int  # 0-based first line (decorators included)
    end: int  # 0-based line after the last


def _top_defs(tree: ast.Module) -> list[_Def]:
    out = []
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())]) - 1
        for name in names:
            out.append(_Def(name, first, node.end_lineno or node.lineno))
    return out


def protected_names(text: str, kernel: str | None = None) -> set[str]:
    """What no candidate may redefine: every spec's inputs function and the reference it names."""
    names = set()
    for site in find_specs(text):
        names.add(site.inputs)
        if site.reference and "." not in site.reference:
            names.add(site.reference)
    return names


def spec_texts(text: str) -> list[str]:
    """The source of every spec (decorator and inputs function) and of the references they name, in order."""
    lines = text.splitlines(keepends=True)
    try:
        defs = {d.name: d for d in _top_defs(parse_python(text))}
    except SyntaxError:
        defs = {}
    out = []
    for site in find_specs(text):
        out.append("".join(lines[site.span.start_line:site.span.end_line + 1]))
        ref = defs.get(site.reference or "")
        if ref is not None:
            out.append("".join(lines[ref.start:ref.end]))
    return out


def splice(text: str, code: str, *, protected: set[str], may_replace: bool = True,
           insert_before: str | None = None, may_add_spec: bool = False) -> tuple[str, list[str]]:
    """The file text with the candidate's definitions in place, and the names it replaced or added.

    Imports the file lacks go after its last top-level import. A definition whose name exists at the top level
    replaces it (only if `may_replace`); new ones go after the last replaced definition, else before the
    definition `insert_before` (for instance the first spec), else at the end.
    """
    try:
        tree = parse_python(code)
    except SyntaxError as exc:
        raise SpliceError(f"the code block is not valid Python: line {exc.lineno}: {exc.msg}") from None
    try:
        file_tree = parse_python(text)
    except SyntaxError as exc:
        raise SpliceError(f"the file itself does not parse (line {exc.lineno}: {exc.msg}); fix that first") \
            from None
    code_lines = code.splitlines(keepends=True)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    existing = {d.name: d for d in _top_defs(file_tree)}
    have_imports = {ast.unparse(n) for n in file_tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    new_imports: list[str] = []
    replacements: dict[int, tuple[int, str]] = {}  # start line -> (end line, new text)
    added: list[str] = []
    touched: list[str] = []
    for node in tree.body:
        chunk_start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())]) - 1
        chunk = "".join(code_lines[chunk_start:node.end_lineno])
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if ast.unparse(node) not in have_imports:
                new_imports.append(chunk if chunk.endswith("\n") else chunk + "\n")
            continue
        if _is_main_guard(node):
            continue  # an `if __name__ == "__main__":` demo never runs on import: left out
        # Statements that define nothing (`torch.randn = ...`, `setattr(...)`) are added like new definitions, so
        # that integrity.refusals sees them and says why the candidate is refused, at their line.
        names = [d.name for d in _top_defs(ast.Module(body=[node], type_ignores=[]))]
        bad = [n for n in names if n in protected]
        if bad:
            raise Refused(f"the candidate redefines {', '.join(bad)}, part of the correctness spec; the spec "
                          "and its reference may not change")
        if not may_add_spec and chunk.lstrip().startswith("@") and "spec(" in chunk.split("def", 1)[0]:
            raise Refused("the candidate adds a correctness spec; only the kernel code may change")
        chunk = chunk if chunk.endswith("\n") else chunk + "\n"
        known = [existing[n] for n in names if n in existing]
        if known:
            if not may_replace:
                raise SpliceError(f"the candidate redefines {', '.join(d.name for d in known)}, which this action "
                                  "must leave as it is; add new definitions only")
            target = known[0]
            if target.start in replacements:
                raise SpliceError(f"the candidate defines {target.name} twice")
            replacements[target.start] = (target.end, chunk)
            touched += names
        else:
            added.append(chunk)
            touched += names
    if not replacements and not added and not new_imports:
        raise SpliceError("the code block defines nothing that could go into the file")
    last_replaced = max((end for end, _ in replacements.values()), default=None)
    if last_replaced is not None:
        insert_at, block = last_replaced, "".join("\n\n" + a for a in added)
    elif (anchor := existing.get(insert_before or "")) is not None:
        insert_at = anchor.start
        while insert_at > 0 and lines[insert_at - 1].lstrip().startswith("#"):
            insert_at -= 1  # keep the comment above the anchor with it
        block = "".join(a + "\n\n" for a in added)
    else:
        insert_at, block = len(lines), "".join("\n\n" + a for a in added)
    out: list[str] = []
    i = 0
    while i <= len(lines):
        if i == insert_at and added:
            out.append(block)
        if i == len(lines):
            break
        if i in replacements:
            end, chunk = replacements[i]
            out.append(chunk)
            i = end
            continue
        out.append(lines[i])
        i += 1
    result = "".join(out)
    if new_imports:
        result = _add_imports(result, new_imports)
    return result, touched


def _is_main_guard(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


def _add_imports(text: str, imports: list[str]) -> str:
    tree = parse_python(text)
    last = max((n.end_lineno or n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                and n.lineno <= _first_def_line(tree)), default=0)
    lines = text.splitlines(keepends=True)
    return "".join(lines[:last]) + "".join(imports) + "".join(lines[last:])


def _first_def_line(tree: ast.Module) -> int:
    return min((n.lineno for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))), default=10**9)


def line_edits(old: str, new: str) -> list[TextEdit]:
    """Whole-line edits that turn `old` into `new` (each changed run of lines is one edit)."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        replacement = "".join(b[j1:j2])
        if i2 == len(a) and a and not a[-1].endswith("\n"):
            # The old text ends without a newline: end the edit at the end of that last line.
            edits.append(TextEdit(Span(i1, 0, i2 - 1, len(a[-1])), replacement.rstrip("\n")
                                  if not new.endswith("\n") else replacement))
            continue
        edits.append(TextEdit(Span(i1, 0, i2, 0), replacement))
    return edits
