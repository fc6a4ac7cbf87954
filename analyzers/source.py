"""Source text utilities shared by every analyzer: positions, tolerant parsing, import resolution."""

from __future__ import annotations

import ast
import gc
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, overload

from .model import Span

# CPython 3.11 tracks the depth of its C-to-Python AST conversion in interpreter-wide state, so two threads parsing
# at once can fail with "SystemError: AST constructor recursion depth mismatch". The server parses from its
# analysis and compile-planning threads: every parse goes through `parse_python`, or `parsing()`, one at a time.
# A parse nested in another on the same thread breaks it too: a garbage collection during the conversion can run a
# finalizer whose traceback is formatted (logging, pytest's unraisable hook), and 3.11's traceback parses the
# failing line to place its carets. The cyclic collector is paused while a parse runs.
PARSE_LOCK = threading.Lock()


@contextmanager
def parsing() -> Iterator[None]:
    """Hold while calling `ast.parse` directly: one parse at a time, no garbage collection inside it."""
    with PARSE_LOCK:
        collecting = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if collecting:
                gc.enable()


@overload
def parse_python(text: str, mode: Literal["exec"] = "exec") -> ast.Module: ...
@overload
def parse_python(text: str, mode: Literal["eval"]) -> ast.Expression: ...


def parse_python(text: str, mode: str = "exec") -> ast.Module | ast.Expression:
    """`ast.parse`, safe to call from several threads at once."""
    with parsing():
        tree = ast.parse(text, mode=mode)
    assert isinstance(tree, (ast.Module, ast.Expression))
    return tree


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

    def statement_text(self, stmt: ast.stmt) -> str:
        """The lines a statement spans, decorators included: for cheap text pre-filters before walking a tree."""
        first = min([d.lineno for d in getattr(stmt, "decorator_list", ())] + [stmt.lineno])
        return "\n".join(self.lines[first - 1 : stmt.end_lineno or stmt.lineno])

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
    """Split a module into top-level statement groups by indentation, keeping decorators with their def.

    Lines inside a triple-quoted string (a module docstring's unindented lines) never start a group.
    """
    chunks: list[tuple[int, int]] = []
    start = None
    decorating = False  # inside a decorator list: its arguments may span lines, up to the def it decorates
    in_string: str | None = None  # the open triple quote, if any
    for i, line in enumerate(lines):
        opened = in_string
        if '"""' in line or "'''" in line:
            in_string = _triple_quote_state(line, in_string)
        if opened is not None:
            continue  # this line continues a string
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        top = not line[0].isspace()
        continuation = _CONTINUATION.match(stripped)
        if top and not continuation and not decorating:
            if start is not None:
                chunks.append((start, i))
            start = i
        elif start is None:
            start = i
        if top and not continuation:
            decorating = stripped.startswith("@")
    if start is not None:
        chunks.append((start, len(lines)))
    return chunks


def _triple_quote_state(line: str, open_quote: str | None) -> str | None:
    """Which triple quote is open after this line (ignores quotes after a # outside strings)."""
    i = 0
    while i < len(line):
        if open_quote is None:
            if line[i] == "#":
                break
            if line.startswith('"""', i) or line.startswith("'''", i):
                open_quote = line[i : i + 3]
                i += 3
                continue
        elif line.startswith(open_quote, i):
            open_quote = None
            i += 3
            continue
        elif line[i] == "\\":
            i += 1
        i += 1
    return open_quote


_MISSING = object()


class StatementMemo:
    """Results computed from one statement, reused while that statement object (the parse cache keeps the
    unchanged ones) and the file-level context the result depends on are unchanged.

    A statement may have moved since (lines added or removed above it): `get` returns the value and how many
    lines it moved, and the caller shifts positions. Values are shared between analyses: never mutate them.
    """

    MISSING = _MISSING

    def __init__(self) -> None:
        self._entries: dict[tuple[str, int], tuple[ast.AST, tuple, object, object]] = {}
        self._used: set[tuple[str, int]] = set()
        self.hits = 0

    @staticmethod
    def _where(node: ast.AST) -> tuple:
        return (node.lineno, node.end_lineno, node.col_offset)  # type: ignore[attr-defined]

    def get(self, kind: str, node: ast.AST, context: object) -> tuple[object, int]:
        """(value, lines moved since it was computed), or (MISSING, 0)."""
        key = (kind, id(node))
        entry = self._entries.get(key)
        if entry is None or entry[0] is not node or entry[2] != context:
            return _MISSING, 0
        (line, end, col), now = entry[1], self._where(node)
        moved = now[0] - line
        if now[2] != col or now[1] - end != moved:
            return _MISSING, 0
        self._used.add(key)
        self.hits += 1
        return entry[3], moved

    def put(self, kind: str, node: ast.AST, context: object, value: object) -> None:
        key = (kind, id(node))
        self._entries[key] = (node, self._where(node), context, value)
        self._used.add(key)

    def sweep(self) -> None:
        """After an analysis: forget what it did not use (statements that changed or are gone)."""
        self._entries = {k: v for k, v in self._entries.items() if k in self._used}
        self._used = set()


def _positioned(stmts: list[ast.stmt]) -> list[ast.AST]:
    """Every node of these statements that has a line number: what moving them must update."""
    return [n for stmt in stmts for n in ast.walk(stmt) if "lineno" in n._attributes]


def _move(nodes: list[Any], lines: int) -> None:
    # A flat loop over nodes listed once at parse time (every one has a lineno): moving half a file must stay
    # cheap while typing.
    for node in nodes:
        node.lineno += lines
        if node.end_lineno is not None:
            node.end_lineno += lines


class ParseCache:
    """Remembers the parsed statements of one document's top-level statement groups, keyed by their text.

    While a user types, only the group being edited changes; the others are reused, renumbered in place when
    lines were added or removed above them. One cache serves one document; analyses of it are serialised by
    the lock because reused trees are renumbered in place.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # text -> [(statements, their positioned nodes, the 0-based line they are numbered from)], per occurrence
        self._groups: dict[str, list[tuple[list[ast.stmt], list[ast.AST], int]]] = {}
        self.reused = 0
        self.parsed = 0
        self.memo = StatementMemo()

    def parse(self, source: SourceText) -> ParseResult:
        fresh: dict[str, list[tuple[list[ast.stmt], list[ast.AST], int]]] = {}
        positioned: dict[int, list[ast.AST]] = {}

        def reuse(text: str, start: int) -> list[ast.stmt] | None:
            known = self._groups.get(text)
            if not known:
                return None
            stmts, nodes, numbered = known.pop()
            if numbered != start:
                _move(nodes, start - numbered)
            positioned[id(stmts)] = nodes
            self.reused += 1
            return stmts

        def remember(text: str, start: int, stmts: list[ast.stmt], parsed: bool) -> None:
            nodes = _positioned(stmts) if parsed else positioned[id(stmts)]
            fresh.setdefault(text, []).append((stmts, nodes, start))
            self.parsed += parsed

        result = _parse_groups(source, reuse, remember)
        self._groups = fresh  # groups that disappeared are forgotten
        return result


def _parse_groups(source: SourceText, reuse=None, remember=None) -> ParseResult:
    """Parse each top-level statement group on its own; a group that does not parse is skipped and reported."""
    lines = source.lines
    result = ParseResult([])
    for start, end in _top_level_chunks(lines):
        text = "\n".join(lines[start:end])
        stmts = reuse(text, start) if reuse else None
        parsed = stmts is None
        if stmts is None:
            try:
                stmts = parse_python(text).body
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                result.skipped_lines.append((start, end))
                if result.error is None:
                    result.error = _error_position(source, exc, start)
                continue
            for stmt in stmts:
                ast.increment_lineno(stmt, start)
        if remember:
            remember(text, start, stmts, parsed)
        result.body.extend(stmts)
    return result


def _error_position(source: SourceText, exc: Exception, first_line: int) -> tuple[int, int, str]:
    if isinstance(exc, (RecursionError, MemoryError)):  # Python's own compiler fails on it too
        return (first_line, 0, f"this statement nests too deeply for Python to parse ({type(exc).__name__})")
    if not isinstance(exc, SyntaxError):
        return (first_line, 0, str(exc))
    line = first_line + max((exc.lineno or 1) - 1, 0)
    col = max((exc.offset or 1) - 1, 0)
    return (line, min(col, len(source.line(line))), exc.msg or "invalid syntax")


def parse_recovering(source: SourceText, cache: ParseCache | None = None) -> ParseResult:
    """Parse a module; on a syntax error, keep every top-level statement group that still parses.

    While a user types, one broken function must not hide the analysis of the rest of the file. The error
    reported is that of the first group that does not parse.
    """
    if cache is not None:
        return cache.parse(source)
    try:
        return ParseResult(parse_python(source.text).body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _parse_groups(source)


def statements(body: list[ast.stmt]):
    """Every statement in source order, nested ones included, without descending into expressions."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        children: list[ast.AST] = []
        for name in ("body", "handlers", "orelse", "finalbody", "cases"):  # source order
            children.extend(getattr(node, name, None) or ())
        stack.extend(reversed(children))


class ImportMap:
    """Maps local names to the dotted names they were imported as, e.g. tl -> triton.language."""

    def __init__(self, body: list[ast.stmt], memo: StatementMemo | None = None):
        self.names: dict[str, str] = {}
        if memo is None:
            self._bind(self._imports(body))
            return
        for stmt in body:  # what each top-level statement imports is read once per parse
            found = memo.get("imports", stmt, None)[0]
            if found is _MISSING:
                found = tuple(self._imports([stmt]))
                memo.put("imports", stmt, None, found)
            self._bind(found)  # type: ignore[arg-type]

    def _bind(self, imports) -> None:
        for local, full, keep in imports:
            if keep:
                self.names.setdefault(local, full)
            else:
                self.names[local] = full

    @staticmethod
    def _imports(body: list[ast.stmt]) -> Iterator[tuple[str, str, bool]]:
        """(local name, dotted name, whether an earlier binding of the name wins), in source order."""
        for sub in statements(body):
            if isinstance(sub, ast.Import):
                for alias in sub.names:
                    if alias.asname:
                        yield alias.asname, alias.name, False
                    else:
                        top = alias.name.split(".")[0]
                        yield top, top, True
            elif isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                for alias in sub.names:
                    if alias.name != "*":
                        yield alias.asname or alias.name, f"{sub.module}.{alias.name}", False
            elif isinstance(sub, ast.ImportFrom) and sub.level > 0:
                mod = "." * sub.level + (sub.module or "")
                for alias in sub.names:
                    if alias.name != "*":
                        yield alias.asname or alias.name, f"{mod}.{alias.name}", False

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
