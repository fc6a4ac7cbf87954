"""Quick fixes for problems with a mechanical fix, and a suppression comment for any problem."""

from __future__ import annotations

import ast
import logging
import re
from typing import TYPE_CHECKING

from lsprotocol import types

from analyzers.model import Span, TextEdit
from analyzers.source import SourceText, parse_recovering

from .. import convert

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)
_SUPPRESS = re.compile(r"#\s*kernel-lsp:\s*ignore\[([^\]]*)\]")


def _overlaps(span: Span, start_line: int, end_line: int) -> bool:
    return span.start_line <= end_line and span.end_line >= start_line


def _suppress_edit(line_text: str, line: int, code: str) -> TextEdit:
    stripped = line_text.rstrip("\r\n")
    m = _SUPPRESS.search(stripped)
    if m:  # extend the existing comment's list
        codes = [c.strip() for c in m.group(1).split(",") if c.strip()] + [code]
        return TextEdit(Span(line, m.start(1), line, m.end(1)), ", ".join(codes))
    return TextEdit(Span(line, len(stripped), line, len(stripped)), f"  # kernel-lsp: ignore[{code}]")


def register(server: "KernelLanguageServer") -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.Refactor]),
    )
    def code_action(ls: "KernelLanguageServer", params: types.CodeActionParams):
        found = _own_actions(ls, params) or []
        for provider in ls.code_action_providers:
            try:
                found += provider(ls, params) or []
            except Exception:  # noqa: BLE001 - the other code actions must still be listed
                log.exception("a code action provider failed")
        return found or None


def _own_actions(ls: "KernelLanguageServer", params: types.CodeActionParams) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    path = ls.ensure_current(uri)
    doc = ls.workspace.text_documents.get(uri)
    if path is None or doc is None:
        return None
    only = params.context.only
    fixes = not only or any(k.startswith(types.CodeActionKind.QuickFix) for k in only)
    refactors = not only or any(k.startswith(types.CodeActionKind.Refactor) for k in only)
    if not fixes and not refactors:
        return None
    pos = convert.Positions(doc.lines, doc.position_codec)
    want = pos.span(params.range)
    ls.note_focus(path, want.start_line)  # editors ask for code actions where the cursor is
    spec_action = _starter_spec_action(ls, path, uri, doc, pos, want.start_line) if refactors else None
    tiling = _tiling_action(ls, path, uri, doc, want.start_line) if refactors else None
    extra = [a for a in (spec_action, tiling) if a]
    if not fixes:
        return extra or None
    sent = {(d.code, d.range.start.line): d for d in params.context.diagnostics}
    actions: list[types.CodeAction] = []
    suppressions: list[types.CodeAction] = []
    for problem in ls.state.index.problems(path):
        if not _overlaps(problem.span, want.start_line, want.end_line):
            continue
        diag = sent.get((problem.code, pos.range(problem.span).start.line))
        diags = [diag] if diag else None
        if problem.fix is not None:
            actions.append(convert.edit_action(problem.fix.title, types.CodeActionKind.QuickFix,
                                               convert.fix_edit(problem.fix, uri, doc.version, pos),
                                               diagnostics=diags, preferred=True))
        line = problem.span.start_line
        edit = _suppress_edit(doc.lines[line] if line < len(doc.lines) else "", line, problem.code)
        suppressions.append(convert.edit_action(f"Ignore {problem.code} on this line", types.CodeActionKind.QuickFix,
                                                convert.document_edit(uri, doc.version, pos, [edit]),
                                                diagnostics=diags))
    return actions + suppressions + extra or None


def _tiling_action(ls: "KernelLanguageServer", path: str, uri: str, doc, line: int) -> types.CodeAction | None:
    """"Optimize tiling" for a kernel at the cursor that has a spec: the search runs when the user picks it."""
    from ..commands import OPTIMIZE_TILING
    from analyzers.specs import specced_kernels

    if ls.state.settings.checks == "off":  # the search runs the launcher
        return None
    kernel = ls.kernel_at(path, line)
    if kernel is None or kernel.name not in specced_kernels(doc.source):
        return None
    title = f"Optimize tiling of {kernel.name}"
    return convert.command_action(title, types.CodeActionKind.RefactorRewrite, OPTIMIZE_TILING,
                                  [{"uri": uri, "line": line, "character": 0}])


def _starter_spec_action(ls: "KernelLanguageServer", path: str, uri: str, doc, pos: convert.Positions,
                         line: int) -> types.CodeAction | None:
    """"Write a correctness spec" for the kernel at the cursor when it has none: inserted after its launcher."""
    from analyzers.specs import specced_kernels, starter_spec

    kernel = ls.kernel_at(path, line)
    if kernel is None or kernel.name in specced_kernels(doc.source):
        return None
    analysis = ls.state.index.get(path).analysis
    sites = [s for s in analysis.launch_sites if s.target == kernel.name]
    text = starter_spec(kernel, sites, doc.source)
    after = kernel.span.end_line
    body = parse_recovering(SourceText(doc.source)).body
    for site in sites:  # after the top-level function that launches it, where the spec can name that launcher
        for node in body:
            if isinstance(node, ast.FunctionDef) and node.lineno - 1 <= site.span.start_line < node.end_lineno:
                after = max(after, node.end_lineno - 1)
    at = min(after + 1, len(doc.lines))
    if at < len(doc.lines):
        new_text = "\n\n" + text + "\n"
    else:  # at the end of the file
        new_text = ("" if doc.lines and doc.lines[-1].endswith("\n") else "\n") + "\n\n" + text
    edit = TextEdit(Span(at, 0, at, 0), new_text)
    return convert.edit_action(f"Write a correctness spec for {kernel.name}", types.CodeActionKind.Refactor,
                               convert.document_edit(uri, doc.version, pos, [edit]))
