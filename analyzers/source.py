"""Source text utilities shared by every analyzer: positions, tolerant parsing, import resolution."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from .model import Span


class SourceText:
    """A file's text with conversions from ast positions (UTF-8 byte columns) to code-point columns."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines()
        self._encoded: dict[int, bytes] = {}

    def line(self, index: int) -> str:
        return self.lines[index] if 0 <= index < len(self.lines) else ""

    def col(self, line_index: int, byte_col: int) -> int:
        line = self.line(line_index)
        if line.isascii():
            return byte_col
        data = self._encoded.get(line_index)
        if data is None:
            data = self._encoded[line_index] = line.encode("utf-8")
        return len(data[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> Span:
        start = node.lineno - 1  # type: ignore[attr-defined]
        end = (getattr(node, "end_lineno", None) or node.lineno) - 1  # type: ignore[attr-defined]
        end_byte = getattr(node, "end_col_offset", None)
        return Span(
            start,
            self.col(start, node.col_offset),  # type: ignore[attr-defined]
            end,
            self.col(end, end_byte) if end_byte is not None else len(self.line(end)),
        )

    def segment(self, node: ast.AST) -> str:
        s = self.span(node)
        if s.start_line == s.end_line:
            return self.line(s.start_line)[s.start_col : s.end_col]
        parts = [self.line(s.start_line)[s.start_col :]]
        parts.extend(self.line(i) for i in range(s.start_line + 1, s.end_line))
        parts.append(self.line(s.end_line)[: s.end_col])
        return "\n".join(parts)


@dataclass
class ParseResult:
    body: list[ast.stmt]
    # (line, column, message) of the syntax error that stopped a whole-file parse, zero-based.
    error: tuple[int, int, str] | None = None
    skipped_lines: list[tuple[int, int]] = field(default_factory=list)


_CONTINUATION = re.compile(r"(else|elif|except|finally|case)\b|[)\]}]")


def _top_level_chunks(lines: list[str]) -> list[tuple[int, int]]:
    """Split a module into top-level statement groups by indentation, keeping decorators with their def."""
    chunks: list[tuple[int, int]] = []
    start = None
    prev_decorator = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        top = not line[0].isspace()
        if top and not _CONTINUATION.match(stripped) and not prev_decorator:
            if start is not None:
                chunks.append((start, i))
            start = i
        elif start is None:
            start = i
        prev_decorator = top and stripped.startswith("@")
    if start is not None:
        chunks.append((start, len(lines)))
    return chunks


def parse_recovering(source: SourceText) -> ParseResult:
    """Parse a module; on a syntax error, keep every top-level statement group that still parses.

    While a user types, one broken function must not hide the analysis of the rest of the file.
    """
    try:
        return ParseResult(ast.parse(source.text).body)
    except SyntaxError as exc:
        line = max((exc.lineno or 1) - 1, 0)
        col = max((exc.offset or 1) - 1, 0)
        error = (line, min(col, len(source.line(line))), exc.msg or "invalid syntax")
    except ValueError as exc:  # NUL bytes
        return ParseResult([], (0, 0, str(exc)), [(0, len(source.lines))])
    body: list[ast.stmt] = []
    skipped: list[tuple[int, int]] = []
    for start, end in _top_level_chunks(source.lines):
        chunk = "\n".join(source.lines[start:end])
        try:
            tree = ast.parse(chunk)
        except (SyntaxError, ValueError):
            skipped.append((start, end))
            continue
        ast.increment_lineno(tree, start)
        body.extend(tree.body)
    return ParseResult(body, error, skipped)


class ImportMap:
    """Maps local names to the dotted names they were imported as, e.g. tl -> triton.language."""

    def __init__(self, body: list[ast.stmt]):
        self.names: dict[str, str] = {}
        for node in body:
            for sub in ast.walk(node) if not isinstance(node, (ast.Import, ast.ImportFrom)) else [node]:
                if isinstance(sub, ast.Import):
                    for alias in sub.names:
                        if alias.asname:
                            self.names[alias.asname] = alias.name
                        else:
                            top = alias.name.split(".")[0]
                            self.names.setdefault(top, top)
                elif isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                    for alias in sub.names:
                        if alias.name != "*":
                            self.names[alias.asname or alias.name] = f"{sub.module}.{alias.name}"
                elif isinstance(sub, ast.ImportFrom) and sub.level > 0:
                    mod = "." * sub.level + (sub.module or "")
                    for alias in sub.names:
                        if alias.name != "*":
                            self.names[alias.asname or alias.name] = f"{mod}.{alias.name}"

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression refers to, through aliases; None for anything but names and attributes."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            return self.resolve(node.func)
        return None

    def aliases_of(self, dotted: str) -> set[str]:
        return {local for local, full in self.names.items() if full == dotted}

    def imports_module(self, prefix: str) -> bool:
        return any(full == prefix or full.startswith(prefix + ".") for full in self.names.values())


def literal_value(node: ast.AST | None) -> object | None:
    """The value of a literal expression (numbers, strings, tuples, negations), or None."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def is_power_of_2(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def next_power_of_2(value: int) -> int:
    return 1 if value <= 1 else 1 << (value - 1).bit_length()
