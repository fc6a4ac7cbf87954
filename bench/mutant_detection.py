"""How many planted bugs of three kinds the rules find on real code, at the line where they were planted.

    python bench/mutant_detection.py bench/.corpus2-tuning [--code DIR] [--kind off-by-one]

Each mutant changes one line of one corpus file and is checked on its own (static analysis only, nothing of the
corpus is run):
- off-by-one: a one-line `mask=` keyword comparing with `<` gets `<=` (TR016 expected);
- swapped-strides: a line whose address has `a * stride_x` and `b * stride_y` gets the two strides exchanged
  (TR017 expected);
- reduction-axis: `tl.sum/max/min(x, axis=0|1)` of a 2-D tile gets the other axis (TR018 expected).
A mutant counts as found when its rule reports the planted line (or lists it as a related place). Prints found /
planted per kind; dropped masks are bench/mask_detection.py's.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter
from pathlib import Path

_STRIDE_TERM = re.compile(r"(\b[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?)\s*\*\s*(\b[A-Za-z_]*stride[A-Za-z0-9_]*\b)")


def _off_by_one(tree: ast.Module, lines: list[str]):
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call) or n.lineno != n.end_lineno:
            continue
        name = ast.unparse(n.func).rsplit(".", 1)[-1]
        mask = next((kw.value for kw in n.keywords if kw.arg == "mask"), None)
        if not (name in ("load", "store") or name.startswith("atomic_")) or mask is None:
            continue
        for c in ast.walk(mask):
            if isinstance(c, ast.Compare) and len(c.ops) == 1 and isinstance(c.ops[0], ast.Lt) \
                    and c.lineno == c.end_lineno:
                line = lines[c.lineno - 1]
                text = line[c.col_offset:c.end_col_offset] if line.isascii() else None
                if text and text.count(" < ") == 1:
                    yield c.lineno, line[:c.col_offset] + text.replace(" < ", " <= ") + line[c.end_col_offset:]
                break


def _swapped(tree: ast.Module, lines: list[str]):
    for i, line in enumerate(lines):
        terms = _STRIDE_TERM.findall(line)
        if len(terms) != 2 or terms[0][1] == terms[1][1] or "tl." in line and "load" not in line \
                and "store" not in line and "=" not in line:
            continue
        (a, sa), (b, sb) = terms
        first, second = f"{a} * {sa}", f"{b} * {sb}"
        if line.count(first) != 1 or line.count(second) != 1:
            continue
        mutated = line.replace(first, "\0").replace(second, f"{b} * {sa}").replace("\0", f"{a} * {sb}")
        yield i + 1, mutated


def _axis(tree: ast.Module, lines: list[str]):
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call) or n.lineno != n.end_lineno:
            continue
        name = ast.unparse(n.func)
        if name.rsplit(".", 1)[-1] not in ("sum", "max", "min") or not name.startswith(("tl.", "triton.language.")):
            continue
        axis = next((kw.value for kw in n.keywords if kw.arg == "axis"), n.args[1] if len(n.args) > 1 else None)
        if not isinstance(axis, ast.Constant) or axis.value not in (0, 1):
            continue
        line = lines[n.lineno - 1]
        text = line[axis.col_offset:axis.end_col_offset]
        if text not in ("0", "1"):
            continue
        yield n.lineno, line[:axis.col_offset] + str(1 - axis.value) + line[axis.end_col_offset:]


KINDS = {"off-by-one": (_off_by_one, "TR016"), "swapped-strides": (_swapped, "TR017"),
         "reduction-axis": (_axis, "TR018")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--code", help="the kernel-lsp source tree to run (default: this one)")
    ap.add_argument("--kind", choices=sorted(KINDS), action="append", help="only these kinds (repeatable)")
    ap.add_argument("--sites", help="write every mutant (kind, path:line, found) here")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.code).resolve() if args.code else Path(__file__).resolve().parent.parent))
    from analyzers import check_source

    found, total = Counter(), Counter()
    rows = []
    for path in sorted(Path(args.folder).rglob("*.py")):
        text = path.read_text(errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        if "triton" not in text:
            continue
        lines = text.splitlines(keepends=True)
        for kind in args.kind or sorted(KINDS):
            plant, code = KINDS[kind]
            for lineno, new in plant(tree, lines):
                mutated = "".join(lines[:lineno - 1] + [new] + lines[lineno:])
                try:
                    ast.parse(mutated)
                except SyntaxError:
                    continue
                total[kind] += 1
                problems = check_source(mutated, str(path)).problems
                hit = any(p.code == code and (p.span.start_line == lineno - 1
                                              or any(r.span.start_line == lineno - 1 for r in p.related))
                          for p in problems)
                found[kind] += hit
                rows.append(f"{kind}\t{path}:{lineno}\t{int(hit)}\n")
    if args.sites:
        Path(args.sites).write_text("".join(rows))
    for kind in args.kind or sorted(KINDS):
        share = f"{found[kind] / total[kind]:.0%}" if total[kind] else "-"
        print(f"{kind:16} found {found[kind]:5} of {total[kind]:5} planted ({share}) by {KINDS[kind][1]}")


if __name__ == "__main__":
    main()
