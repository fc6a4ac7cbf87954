"""Why kernels of the corpus are not compiled offline: each kernel is planned for sm_90 as `kernel-lsp check
--target sm_90` plans it (launch sites of its project matched by kernel name), and for each constexpr whose value
is not known, the argument its launches pass is classified by what the launcher's code binds it to.

    python bench/compile_coverage.py bench/.corpus [--code DIR] [--examples 3]

Static analysis only: nothing of the corpus is run or compiled. Prints the planned share and the reasons.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

_SIZE_CALLS = ("size", "numel", "dim", "shape", "stride", "element_size")


def _unbound(name: str, scope: ast.AST) -> str:
    """How a name is bound when it is not bound to one expression: unpacked from a shape or a call, a loop."""
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign) and any(isinstance(t, (ast.Tuple, ast.List)) and any(
                isinstance(e, ast.Name) and e.id == name for e in t.elts) for t in n.targets):
            text = ast.unparse(n.value)
            if ".shape" in text or ".size()" in text:
                return "a runtime size (or computed from one)"
            if isinstance(n.value, ast.Call):
                return "unpacked from a call of a project function"
            return "unpacked from a value computed at run time"
    return "bound by a loop or `with`"


def _classify(node: ast.AST | None, scope: ast.AST, module: ast.Module, imported: set[str], depth: int = 0) -> str:
    """What a value a launch passes is made of, in the words of the coverage table."""
    from analyzers.values import assigned

    if node is None:
        return "not passed (no default)"
    text = ast.unparse(node)
    if isinstance(node, ast.Name):
        bound = assigned(scope.body, node.id) if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if len(bound) > 1:
            return "reassigned in the launcher (several bindings)"
        if len(bound) == 1:
            if bound[0] is None:
                return _unbound(node.id, scope)
            return _classify(bound[0], scope, module, imported, depth + 1) if depth < 4 else "deep chain"
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = scope.args
            if node.id in [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]:
                return "a parameter of the launcher (its callers decide)"
        if node.id in imported:
            return "a name imported from another module"
        top = assigned(module.body, node.id)
        if len(top) == 1 and top[0] is not None:
            return _classify(top[0], module, module, imported, depth + 1) if depth < 4 else "deep chain"
        return "a name bound elsewhere (global, several bindings)"
    if "stride(" in text:
        return "a stride of a runtime tensor"
    if any(f".{m}" in text for m in _SIZE_CALLS) or "len(" in text:
        return "a runtime size (or computed from one)"
    if isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp) and
                                                       isinstance(node.op, ast.Not)):
        return "a flag computed at run time"
    if "dtype" in text:
        return "a dtype choice"
    if isinstance(node, ast.IfExp):
        return "a conditional value"
    if isinstance(node, ast.Call):
        return f"a call of `{ast.unparse(node.func)}`" if depth == 0 else "a call of a project function"
    if isinstance(node, ast.Attribute):
        return "an attribute (object or config field)"
    if isinstance(node, ast.Subscript):
        return "a subscript (dict or list entry)"
    if isinstance(node, ast.BinOp):
        kinds = {_classify(node.left, scope, module, imported, depth + 1),
                 _classify(node.right, scope, module, imported, depth + 1)}
        kinds.discard("a constant")
        return sorted(kinds)[0] if kinds else "a constant"
    if isinstance(node, ast.Constant):
        return "a constant"
    return type(node).__name__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--code", help="another copy of the project to run (default: this one)")
    ap.add_argument("--examples", type=int, default=2, help="examples printed per reason")
    args = ap.parse_args()
    if args.code:
        sys.path.insert(0, args.code)
    from analyzers import analyze_source
    from analyzers.source import ImportMap, parse_python
    from analyzers.values import scope_at
    from kernel_lsp.engine.compile.extract import ExtractionError
    from kernel_lsp.engine.compile.jobs import NOT_COMPILED
    from kernel_lsp.engine.compile.service import _is_helper
    from kernel_lsp.engine.compile.specialize import ValueNotKnown, plan_jobs

    folder = Path(args.folder)
    planned = attempted = 0
    why: Counter[str] = Counter()
    kernels_by_reason: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    for project in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files = sorted(project.rglob("*.py"))
        texts = {f: f.read_text(errors="replace") for f in files}
        analyses = {f: analyze_source(t, str(f)) for f, t in texts.items()}
        sites = [(s, texts[f], str(f)) for f, a in analyses.items() for s in a.launch_sites]
        for f, analysis in analyses.items():
            launched = {s.target for s, _, _ in sites}
            for kernel in analysis.kernels:
                if kernel.name not in launched and _is_helper(kernel.name, analysis, texts[f]):
                    continue  # compiled only through its callers, as the compile service does
                try:
                    plan_jobs(texts[f], kernel.name, ["sm_90"], path=str(f), launch_sites=sites)
                except ValueNotKnown as exc:
                    attempted += 1
                    names = str(exc).removeprefix(NOT_COMPILED).split(" not known")[0]
                    missing = names.split("`")[1::2]
                    mine = [(s, t, p) for s, t, p in sites if s.target == kernel.name]
                    reasons = set()
                    for name in missing:
                        if not mine:
                            reasons.add("no launch site in the corpus")
                            continue
                        for site, text, path in mine:
                            tree = parse_python(text)
                            scope = scope_at(tree, site.span.start_line + 1)
                            imported = set(ImportMap(tree.body).names)
                            params = [p.name for p in kernel.params]
                            arg = next((a for a in site.kwargs if a.keyword == name), None)
                            if arg is None and name in params and params.index(name) < len(site.args):
                                arg = site.args[params.index(name)]
                            node = parse_python(arg.text, mode="eval").body if arg is not None else None
                            reason = _classify(node, scope, tree, imported)
                            if reason == "a constant":
                                continue  # known at this launch: another launch of the kernel lacks it
                            why[reason] += 1
                            reasons.add(reason)
                            if len(examples[reason]) < args.examples:
                                examples[reason].append(f"{Path(path).relative_to(folder)}:"
                                                        f"{site.span.start_line + 1} {name}={arg.text if arg else '-'}")
                    for r in reasons:
                        kernels_by_reason[r] += 1
                except (ExtractionError, SyntaxError, ValueError):
                    continue
                else:
                    attempted += 1
                    planned += 1
    print(f"kernels planned (every constexpr known): {planned} of {attempted} ({100 * planned / max(attempted, 1):.1f}%)")
    print("kernels not planned, by reason (a kernel counts under each reason of its missing values):")
    for reason, n in kernels_by_reason.most_common():
        print(f"  {n:4d}  {reason}  ({why[reason]} arguments)" if why[reason] else f"  {n:4d}  {reason}")
        for e in examples[reason]:
            print(f"          e.g. {e}")


if __name__ == "__main__":
    main()
