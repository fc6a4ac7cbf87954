"""The one place where analysis results become Language Server Protocol objects.

Analysis positions are code points; clients count in UTF-8, UTF-16 or UTF-32 units as negotiated, so every
range goes through the document's position codec with the text the analysis ran on.
"""

from __future__ import annotations

from typing import Callable, Sequence

from lsprotocol import converters, types
from pygls.uris import from_fs_path
from pygls.workspace.position_codec import PositionCodec

from analyzers.model import Fix, Problem, Severity, Span, TextEdit

SOURCE = "kernel-lsp"
_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}


class Positions:
    """Converts spans of one document's text to client ranges and back."""

    def __init__(self, lines: Sequence[str], codec: PositionCodec):
        self.lines = lines
        self.codec = codec

    def position(self, line: int, col: int) -> types.Position:
        if line >= len(self.lines):
            return types.Position(line, col)  # text unknown (unreadable file): only line starts are reported
        return self.codec.position_to_client_units(self.lines, types.Position(line, col))

    def range(self, span: Span) -> types.Range:
        return types.Range(self.position(span.start_line, span.start_col), self.position(span.end_line, span.end_col))

    def span(self, rng: types.Range) -> Span:
        start = self.codec.position_from_client_units(self.lines, rng.start)
        end = self.codec.position_from_client_units(self.lines, rng.end)
        return Span(start.line, start.character, end.line, end.character)


def diagnostic(
    problem: Problem,
    pos: Positions,
    uri: str,
    positions_of: Callable[[str], Positions | None] | None = None,
    related_support: bool = True,
) -> types.Diagnostic:
    """positions_of(path) gives the Positions of another file a related location points into, or None."""
    related = []
    for r in problem.related if related_support else ():
        other = pos if r.path is None else (positions_of(r.path) if positions_of else None)
        if other is not None:
            related.append(types.DiagnosticRelatedInformation(
                location=types.Location(uri=uri if r.path is None else from_fs_path(r.path), range=other.range(r.span)),
                message=r.message,
            ))
    return types.Diagnostic(
        range=pos.range(problem.span),
        message=problem.message,
        severity=_SEVERITY[problem.severity],
        code=problem.code,
        source=SOURCE,
        related_information=related or None,
        data={"code": problem.code, "fixable": problem.fix is not None},
    )


def fix_edit(fix: Fix, uri: str, version: int | None, pos: Positions) -> types.WorkspaceEdit:
    """A versioned edit: the client refuses it if the document changed since the fix was computed."""
    edits = [types.TextEdit(range=pos.range(e.span), new_text=e.new_text) for e in fix.edits]
    return text_edits(uri, version, edits)


def text_edits(uri: str, version: int | None, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
        edits=edits,
    )])


PROPOSAL_ANNOTATION = "kernel-lsp.proposal"


def table_text(rows: Sequence[Sequence[object]]) -> str:
    """A table (header row first) as aligned text columns after a blank line; empty without body rows."""
    if len(rows) < 2:
        return ""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(max(map(len, cells)))]
    return "\n\n" + "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in cells)


def proposal(uri: str, version: int | None, pos: Positions, edits: list[TextEdit], *, title: str, summary: str,
             table: list[list[str]] | None = None, **extra: object) -> dict:
    """A proposed change, as a command's answer: the edit is versioned (a client refuses it once the document has
    changed) and every text edit carries a change annotation that needs confirmation, so an editor previews it
    (VS Code's refactor preview, the Neovim plugin's diff) instead of applying it silently."""
    annotated = [types.AnnotatedTextEdit(range=pos.range(e.span), new_text=e.new_text,
                                         annotation_id=PROPOSAL_ANNOTATION) for e in edits]
    edit = types.WorkspaceEdit(
        document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=annotated)],
        change_annotations={PROPOSAL_ANNOTATION: types.ChangeAnnotation(
            label=title, needs_confirmation=True, description=summary + table_text(table or []))},
    )
    # Command answers are plain JSON: the edit is unstructured here (the converter is built on first use: ~45 ms).
    return {"proposal": {"title": title, "summary": summary, "edit": converters.get_converter().unstructure(edit),
                         "table": table or [], **extra}}


def new_file_proposal(uri: str, text: str, *, title: str, summary: str, table: list[list[str]] | None = None,
                      **extra: object) -> dict:
    """A proposal that creates a file (a port's `<name>_nki.py`): a CreateFile that fails where the file exists
    (never an overwrite), then its text, both under the annotation that needs confirmation."""
    start = types.Position(0, 0)
    edit = types.WorkspaceEdit(
        document_changes=[
            types.CreateFile(uri=uri, options=types.CreateFileOptions(overwrite=False, ignore_if_exists=False),
                             annotation_id=PROPOSAL_ANNOTATION),
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
                edits=[types.AnnotatedTextEdit(range=types.Range(start, start), new_text=text,
                                               annotation_id=PROPOSAL_ANNOTATION)])],
        change_annotations={PROPOSAL_ANNOTATION: types.ChangeAnnotation(
            label=title, needs_confirmation=True, description=summary)},
    )
    return {"proposal": {"title": title, "summary": summary, "edit": converters.get_converter().unstructure(edit),
                         "table": table or [], "creates": uri, **extra}}


def files_edit(changes: list[tuple[str, int | None, Positions, list[TextEdit]]]) -> types.WorkspaceEdit:
    """One edit over several files, each (uri, open document version or None, its positions, edits); an open
    document's edit is refused by the client once that document has changed."""
    return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
        edits=[types.TextEdit(range=pos.range(e.span), new_text=e.new_text) for e in edits],
    ) for uri, version, pos, edits in changes])


def location(uri: str, pos: Positions, span: Span) -> types.Location:
    return types.Location(uri=uri, range=pos.range(span))


def semantic_tokens(pos: Positions, tokens: Sequence[tuple[Span, int, int]]) -> types.SemanticTokens:
    """Tokens (one-line span, type index, modifier bits) in file order, encoded relative to each other in the
    client's position units as the protocol asks."""
    data: list[int] = []
    prev_line = prev_col = 0
    for span, kind, modifiers in tokens:
        start = pos.position(span.start_line, span.start_col)
        end = pos.position(span.end_line, span.end_col)
        delta_col = start.character - prev_col if start.line == prev_line else start.character
        data += [start.line - prev_line, delta_col, end.character - start.character, kind, modifiers]
        prev_line, prev_col = start.line, start.character
    return types.SemanticTokens(data=data)
def document_edit(uri: str, version: int | None, pos: Positions, edits: Sequence[TextEdit]) -> types.WorkspaceEdit:
    """Analysis edits (code-point spans) as one versioned edit of the document."""
    return text_edits(uri, version, [types.TextEdit(range=pos.range(e.span), new_text=e.new_text) for e in edits])


# -- what the features show ---------------------------------------------------------------------------------------

def edit_action(title: str, kind: str, edit: types.WorkspaceEdit, *, diagnostics: list | None = None,
                preferred: bool | None = None) -> types.CodeAction:
    """A code action that carries its edit (a quick fix, a suppression comment, a starter spec)."""
    return types.CodeAction(title=title, kind=kind, diagnostics=diagnostics, is_preferred=preferred, edit=edit)


def command_action(title: str, kind: str, command: str, arguments: list, *, diagnostics: list | None = None,
                   disabled: str | None = None) -> types.CodeAction:
    """A code action that runs a workspace command when picked: the work happens then, not while listing.
    `disabled`: why it cannot run (for clients that show disabled actions)."""
    return types.CodeAction(title=title, kind=kind, diagnostics=diagnostics,
                            command=types.Command(title=title, command=command, arguments=arguments),
                            disabled=types.CodeActionDisabled(reason=disabled) if disabled else None)


def code_lens(pos: Positions, line: int, title: str, command: str = "", arguments: list | None = None
              ) -> types.CodeLens:
    """A lens at the start of `line`; an empty command only shows its title."""
    at = pos.position(line, 0)
    return types.CodeLens(range=types.Range(at, at), command=types.Command(title=title, command=command,
                                                                           arguments=arguments))


def line_end_hint(pos: Positions, line: int, label: str, tooltip: str | None = None) -> types.InlayHint:
    """An inlay hint after the last character of `line` (a line past the known text gets column 0)."""
    end = len(pos.lines[line].rstrip("\r\n")) if line < len(pos.lines) else 0
    return types.InlayHint(position=pos.position(line, end), label=label, padding_left=True, tooltip=tooltip)


def markdown_hover(text: str, pos: Positions | None = None, span: Span | None = None) -> types.Hover:
    """A Markdown hover, over `span` where given."""
    rng = pos.range(span) if pos is not None and span is not None else None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text), range=rng)


def kernel_symbol(pos: Positions, name: str, detail: str, span: Span, name_span: Span,
                  params: Sequence[tuple[str, str, bool, Span]] | None = None) -> types.DocumentSymbol:
    """A kernel as a document symbol; `params`: (name, detail, is constexpr, span) of each parameter."""
    children = None if params is None else [
        types.DocumentSymbol(name=p_name, detail=p_detail,
                             kind=types.SymbolKind.Constant if constexpr else types.SymbolKind.Variable,
                             range=pos.range(p_span), selection_range=pos.range(p_span))
        for p_name, p_detail, constexpr, p_span in params
    ]
    return types.DocumentSymbol(name=name, detail=detail, kind=types.SymbolKind.Function, range=pos.range(span),
                                selection_range=pos.range(name_span), children=children)


def kernel_workspace_symbol(uri: str, pos: Positions, name: str, container: str, name_span: Span
                            ) -> types.WorkspaceSymbol:
    return types.WorkspaceSymbol(name=name, kind=types.SymbolKind.Function, container_name=container,
                                 location=types.Location(uri=uri, range=pos.range(name_span)))


def markdown(value: str) -> types.MarkupContent:
    """Markdown documentation of a completion item, a signature or one of its parameters."""
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=value)


def hover_over(value: str, rng: types.Range | None) -> types.Hover:
    """A Markdown hover over a range the feature already converted."""
    return types.Hover(contents=markdown(value), range=rng)
