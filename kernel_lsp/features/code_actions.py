"""Quick fixes for problems with a mechanical fix, and a suppression comment for any problem."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lsprotocol import types

from analyzers.model import Span, TextEdit

from .. import convert

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

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
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    def code_action(ls: "KernelLanguageServer", params: types.CodeActionParams):
        uri = params.text_document.uri
        path = ls.ensure_current(uri)
        doc = ls.workspace.text_documents.get(uri)
        if path is None or doc is None:
            return None
        only = params.context.only
        if only and not any(k == types.CodeActionKind.QuickFix or k.startswith("quickfix") for k in only):
            return None
        pos = convert.Positions(doc.lines, doc.position_codec)
        want = pos.span(params.range)
        ls.note_focus(path, want.start_line)  # editors ask for code actions where the cursor is
        sent = {(d.code, d.range.start.line): d for d in params.context.diagnostics}
        actions: list[types.CodeAction] = []
        suppressions: list[types.CodeAction] = []
        for problem in ls.state.index.problems(path):
            if not _overlaps(problem.span, want.start_line, want.end_line):
                continue
            diag = sent.get((problem.code, pos.range(problem.span).start.line))
            diags = [diag] if diag else None
            if problem.fix is not None:
                actions.append(types.CodeAction(
                    title=problem.fix.title,
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=diags,
                    is_preferred=True,
                    edit=convert.fix_edit(problem.fix, uri, doc.version, pos),
                ))
            line = problem.span.start_line
            edit = _suppress_edit(doc.lines[line] if line < len(doc.lines) else "", line, problem.code)
            suppressions.append(types.CodeAction(
                title=f"Ignore {problem.code} on this line",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=diags,
                edit=convert.text_edits(uri, doc.version, [types.TextEdit(pos.range(edit.span), edit.new_text)]),
            ))
        return actions + suppressions or None
