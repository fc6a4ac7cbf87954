"""How many dropped masks TR002 finds on real code: every one-line `mask=` keyword of a tl.load / tl.store /
atomic in the corpus is removed in turn, and TR002 is asked whether it now reports that line.

    python bench/mask_detection.py bench/.corpus [--code DIR]

`--code` runs another copy of the project (e.g. `git archive COMMIT | tar -x -C DIR`) to compare two commits.
Static analysis only: nothing of the corpus is run. Prints found / sites, by where the access sits.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path


def _sites(tree: ast.Module) -> list[tuple[ast.Call, ast.keyword, str]]:
    """(call, its mask keyword, "top" | "loop" | "if") of every one-line masked memory access."""
    out = []

    def walk(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, (ast.For, ast.While)):
                inner = "loop"
            elif isinstance(child, ast.If) and where == "top":
                inner = "if"
            if isinstance(child, ast.Call):
                name = ast.unparse(child.func).rsplit(".", 1)[-1]
                mask = next((kw for kw in child.keywords if kw.arg == "mask"), None)
                if (name in ("load", "store") or name.startswith("atomic_")) and mask is not None \
                        and child.lineno == child.end_lineno:
                    out.append((child, mask, where))
            walk(child, inner if not isinstance(child, ast.FunctionDef) else "top")

    walk(tree, "top")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--code", help="the kernel-lsp source tree to run (default: this one)")
    ap.add_argument("--sites", help="write every site (path:line, where, found) here, to compare two runs")
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
        lines = text.splitlines(keepends=True)
        for call, mask, where in _sites(tree):
            line = lines[call.lineno - 1]
            segment = ast.get_source_segment(text, mask)
            if not segment or line.count(segment) != 1:
                continue
            cut = line.replace(", " + segment, "").replace(segment + ", ", "").replace(segment, "")
            if cut == line:
                continue
            mutated = "".join(lines[:call.lineno - 1] + [cut] + lines[call.lineno:])
            total[where] += 1
            problems = check_source(mutated, str(path)).problems
            hit = any(p.code == "TR002" and (p.span.start_line == call.lineno - 1
                                             or any(r.span.start_line == call.lineno - 1 for r in p.related))
                      for p in problems)
            found[where] += hit
            rows.append(f"{path}:{call.lineno}\t{where}\t{int(hit)}\n")
    if args.sites:
        Path(args.sites).write_text("".join(rows))
    print(f"dropped masks found by TR002: {sum(found.values())} of {sum(total.values())} sites")
    for where in ("top", "loop", "if"):
        print(f"  {where:5} {found[where]:5} of {total[where]}")


if __name__ == "__main__":
    main()
