"""What the code at a cursor is: the dotted name under it, the member being completed, the call it is inside.

Read with Python's tokenizer, so strings and comments are never mistaken for code, and tolerant of the
half-typed text an editor sends (`tl.` and unclosed calls included). Columns are code points.
"""

from __future__ import annotations

import io
import functools
import re
import tokenize
from dataclasses import dataclass

from analyzers.source import _top_level_chunks  # the analyzers' own split into top-level statement groups

_IDENT = re.compile(r"[A-Za-z_]\w*")
_MEMBER_BEFORE = re.compile(r"([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\.\s*(\w*)$")
_NAME_CHARS = re.compile(r"\w")


def tokens(text: str) -> list[tokenize.TokenInfo]:
    """The tokens of a text, as far as it can be tokenized (an unclosed bracket or string ends the list)."""
    out: list[tokenize.TokenInfo] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            out.append(tok)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def dotted_at(line: str, col: int) -> tuple[str, int, int] | None:
    """The dotted name whose last part is under the cursor (`tl.load` for a cursor on `load` or on `tl`, cut
    after `tl`), with the columns of that part."""
    if col > len(line):
        return None
    start = col
    while start > 0 and _NAME_CHARS.match(line[start - 1]):
        start -= 1
    end = col
    while end < len(line) and _NAME_CHARS.match(line[end]):
        end += 1
    if start == end or not _IDENT.fullmatch(line[start:end]):
        return None
    head = start
    while True:  # walk back over `a.b.` before the part under the cursor
        i = head - 1
        while i >= 0 and line[i] in " \t":
            i -= 1
        if i < 0 or line[i] != ".":
            break
        j = i - 1
        while j >= 0 and line[j] in " \t":
            j -= 1
        k = j
        while k >= 0 and _NAME_CHARS.match(line[k]):
            k -= 1
        if k == j or not _IDENT.fullmatch(line[k + 1:j + 1]):
            break
        head = k + 1
    expr = re.sub(r"\s+", "", line[head:end])
    return expr, start, end


def member_prefix(line: str, col: int) -> tuple[str, str] | None:
    """At `tl.lo|`: ("tl", "lo"); None where the cursor does not follow `name.`."""
    m = _MEMBER_BEFORE.search(line[:col])
    if m is None:
        return None
    before = line[:m.start()]
    if before.rstrip().endswith(".") or _inside_string_or_comment(line[:m.start()]):
        return None
    return re.sub(r"\s+", "", m.group(1)), m.group(2)


_STRING = re.compile(r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"')


def _inside_string_or_comment(prefix: str) -> bool:
    """Whether the end of a line's prefix is inside a string or a comment (one line's view: good enough for the
    member being typed)."""
    rest = _STRING.sub("", prefix)
    return any(c in rest for c in "'\"#")


@dataclass(frozen=True)
class CallAt:
    """The innermost call whose parentheses hold the cursor."""

    callee: str  # dotted name as written: "tl.load", or the kernel's name for a launch
    launch: bool  # `kernel[grid](...)`
    index: int  # 0-based number of the argument under the cursor
    keyword: str | None  # the keyword of the argument under the cursor (`BLOCK=` typed), if any
    keywords: tuple[str, ...]  # keywords already given before the cursor


def call_at(text: str, line: int, col: int) -> CallAt | None:
    """The call the cursor (0-based line, code-point column) is inside, from the text up to the cursor."""
    lines = text.splitlines(keepends=True)
    if line >= len(lines):
        before = text
    else:
        before = "".join(lines[:line]) + lines[line][:col]
    toks = [t for t in tokens(before) if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER)]
    stack: list[int] = []  # indexes of open brackets
    for i, tok in enumerate(toks):
        if tok.type == tokenize.OP and tok.string in "([{":
            stack.append(i)
        elif tok.type == tokenize.OP and tok.string in ")]}":
            if stack:
                stack.pop()
        elif tok.type == tokenize.NEWLINE:
            stack.clear()
    for depth in range(len(stack) - 1, -1, -1):
        open_at = stack[depth]
        if toks[open_at].string != "(":
            continue  # inside a list or dict: look at the call around it
        callee = _callee_before(toks, open_at)
        if callee is None:
            return None
        name, launch = callee
        index, keyword, keywords = 0, None, []
        depth_here = 0
        arg_start = True
        for j in range(open_at + 1, len(toks)):
            tok = toks[j]
            if tok.type == tokenize.OP and tok.string in "([{":
                depth_here += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth_here -= 1
            elif depth_here == 0 and tok.type == tokenize.OP and tok.string == ",":
                index += 1
                keyword, arg_start = None, True
                continue
            elif depth_here == 0 and arg_start and tok.type == tokenize.NAME and j + 1 < len(toks) \
                    and toks[j + 1].string == "=":
                keyword = tok.string
                keywords.append(tok.string)
            arg_start = False
        return CallAt(name, launch, index, keyword, tuple(k for k in keywords if k != keyword))
    return None


def _callee_before(toks: list[tokenize.TokenInfo], open_at: int) -> tuple[str, bool] | None:
    i = open_at - 1
    launch = False
    if i >= 0 and toks[i].string == "]":
        depth = 0
        while i >= 0:
            if toks[i].string in ")]}":
                depth += 1
            elif toks[i].string in "([{":
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        i -= 1
        launch = True
    parts: list[str] = []
    while i >= 0 and toks[i].type == tokenize.NAME:
        parts.append(toks[i].string)
        if i >= 1 and toks[i - 1].string == ".":
            i -= 2
        else:
            break
    if not parts or parts[0] in ("if", "while", "for", "return", "and", "or", "not", "in", "lambda", "yield"):
        return None
    return ".".join(reversed(parts)), launch


def name_tokens(text: str, name: str) -> list[tuple[int, int, bool]]:
    """Every token of the text that is the bare name (not an attribute `x.name`): (line, col, keyword) with
    0-based lines; `keyword` when it is a keyword argument's name inside brackets (`f(name=...)`).

    Only the top-level statement groups whose text holds the word are tokenized (a whole 2,400-line module takes
    the tokenizer about 100 ms; the groups naming a kernel, a few milliseconds)."""
    return names_tokens(text, {name}).get(name, [])


def names_tokens(text: str, names: set[str]) -> dict[str, list[tuple[int, int, bool]]]:
    """name_tokens for several names at once: one pass of the tokenizer over each group that holds any."""
    out: dict[str, list[tuple[int, int, bool]]] = {}
    if not any(name in text for name in names):
        return out
    wanted = frozenset(names)
    for start, chunk in _chunks(text):
        if any(name in chunk for name in wanted):  # a substring test: the tokenizer decides what is a name
            for name, found in _names_in_chunk(chunk, wanted).items():
                out.setdefault(name, []).extend((line + start, col, keyword) for line, col, keyword in found)
    return out


# References, renames and semantic tokens ask about the same texts again and again (each request, each repeat of
# it; after an edit, every group but the edited one is unchanged): the split into groups is kept per text, and
# the names found per group and set of names.
@functools.lru_cache(maxsize=16)
def _chunks(text: str) -> tuple[tuple[int, str], ...]:
    """The text's top-level statement groups: (first line, the group's text)."""
    lines = text.splitlines(keepends=True)
    return tuple((start, "".join(lines[start:end]))
                 for start, end in _top_level_chunks([line.rstrip("\r\n") for line in lines]))


@functools.lru_cache(maxsize=4096)
def _names_in_chunk(chunk: str, names: frozenset[str]) -> dict[str, list[tuple[int, int, bool]]]:
    return _names_in(chunk, set(names))


def _names_in(text: str, names: set[str]) -> dict[str, list[tuple[int, int, bool]]]:
    toks = tokens(text)
    out: dict[str, list[tuple[int, int, bool]]] = {}
    depth = 0
    for i, tok in enumerate(toks):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth = max(0, depth - 1)
        if tok.type != tokenize.NAME or tok.string not in names:
            continue
        if i > 0 and toks[i - 1].type == tokenize.OP and toks[i - 1].string == ".":
            continue
        after = toks[i + 1] if i + 1 < len(toks) else None
        keyword = depth > 0 and after is not None and after.type == tokenize.OP and after.string == "=" \
            and not _in_def_header(toks, i)
        out.setdefault(tok.string, []).append((tok.start[0] - 1, tok.start[1], keyword))
    return out


def _in_def_header(toks: list[tokenize.TokenInfo], i: int) -> bool:
    """Whether token i lies inside the parameter list of a `def` (where `name=` is a default, not a keyword)."""
    depth = 0
    for j in range(i - 1, -1, -1):
        t = toks[j]
        if t.string in ")]}":
            depth += 1
        elif t.string in "([{":
            if depth == 0:
                return t.string == "(" and j >= 2 and toks[j - 2].string == "def"
            depth -= 1
        elif t.type == tokenize.NEWLINE:
            return False
    return False


def string_tokens(text: str, value: str) -> list[tuple[int, int]]:
    """Positions (0-based line, column of the first character inside the quotes) of plain string literals whose
    value is exactly `value` ('BLOCK' or "BLOCK")."""
    out = []
    for tok in tokens(text):
        if tok.type != tokenize.STRING:
            continue
        s = tok.string
        if s[:1] in ("'", '"') and len(s) >= 2 and s[1:-1] == value and s[0] == s[-1]:
            out.append((tok.start[0] - 1, tok.start[1] + 1))
    return out
