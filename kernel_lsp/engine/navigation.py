"""Kernels, their @jit helpers and their launch sites across the workspace: definition, references and rename.

Works on the workspace index (which file defines which kernel, which launch site launches which) and the
files' texts; returns plain locations `(path, Span)` and edits `{path: [TextEdit]}` with code-point columns.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from analyzers import param_keys
from analyzers.model import LaunchSite, Param, Span, TextEdit, TritonKernel
from analyzers.source import parse_python

from .apidocs import imported_names
from .code_at import dotted_at, name_tokens, string_tokens
from .index import WorkspaceIndex, module_suffixes

Location = tuple[str, Span]
_QUOTED = re.compile(r"""(['"])([A-Za-z_]\w*)\1""")
TextOf = Callable[[str], "str | None"]  # path -> its current text (open buffer or disk), None if unreadable


@dataclass(frozen=True)
class Target:
    """What a cursor designates: a kernel (or @jit helper), or one parameter of a kernel."""

    path: str  # the file defining the kernel
    kernel: TritonKernel
    param: Param | None = None


def _line(text: str, line: int) -> str:
    lines = text.splitlines()
    return lines[line] if 0 <= line < len(lines) else ""


def _point_in(span: Span, line: int, col: int) -> bool:
    if not span.start_line <= line <= span.end_line:
        return False
    if line == span.start_line and col < span.start_col:
        return False
    return not (line == span.end_line and col > span.end_col)


def kernel_named(index: WorkspaceIndex, path: str, text: str, dotted: str) -> tuple[str, TritonKernel] | None:
    """The kernel a name in a file refers to (`add_kernel`, `mod.add_kernel`, an imported alias), resolved like a
    launch site: the same file first, then the module it was imported from."""
    names = imported_names(text)
    if "." in dotted:
        head, rest = dotted.split(".", 1)
        module_part, _, target = rest.rpartition(".")
        module: str | None = names.get(head, head) + ("." + module_part if module_part else "")
    elif dotted in names:
        module, _, target = names[dotted].rpartition(".")
        module = module or None
    else:
        module, target = None, dotted
    entry = index.get(path)
    local = entry.analysis.kernel(target) if module is None and entry and entry.analysis else None
    if local is not None:
        return path, local
    site = LaunchSite(dotted, target, module, Span.point(0), Span.point(0), (), ())
    found = index.resolve(site, path)
    if found is None:
        return None
    kernel, where = found
    return (where or path), kernel


def target_at(index: WorkspaceIndex, path: str, text: str, line: int, col: int, text_of: TextOf | None = None
              ) -> Target | None:
    """The kernel or kernel parameter under a cursor: a kernel's name where it is defined, called or launched;
    a parameter in its kernel (definition or body), or a keyword argument at a launch of it."""
    entry = index.get(path)
    analysis = entry.analysis if entry else None
    if analysis is None:
        return None
    for site in analysis.launch_sites:  # `BLOCK=` at a launch
        for arg in site.kwargs:
            if arg.keyword and arg.span.start_line == line and \
                    arg.span.start_col <= col <= arg.span.start_col + len(arg.keyword):
                found = index.resolve(site, path)
                if found is not None and found[0].param(arg.keyword) is not None:
                    return Target(found[1] or path, found[0], found[0].param(arg.keyword))
    keyed = _string_key_target(index, path, text, line, col, text_of or (lambda p: text if p == path else None))
    if keyed is not None:
        return keyed
    at = dotted_at(_line(text, line), col)
    if at is None:
        return None
    dotted, _, _ = at
    name = dotted.rsplit(".", 1)[-1]
    for kernel in analysis.kernels:  # a parameter, inside its own kernel
        if kernel.span.contains_line(line) and "." not in dotted:
            param = kernel.param(name)
            if param is not None and line >= kernel.name_span.start_line:
                return Target(path, kernel, param)
    for kernel in analysis.kernels:  # the kernel's own name in its def line
        if _point_in(kernel.name_span, line, col):
            return Target(path, kernel)
    named = kernel_named(index, path, text, dotted)
    if named is not None:
        return Target(named[0], named[1])
    return None


def _string_key_target(index: WorkspaceIndex, path: str, text: str, line: int, col: int, text_of: TextOf
                       ) -> Target | None:
    """A parameter named by a string the rename would change (`meta["BLOCK"]`, a config key, a `key=` entry):
    the parameter of a kernel defined or launched in this file whose places include it."""
    found = next((m for m in _QUOTED.finditer(_line(text, line)) if m.start(2) <= col <= m.end(2)), None)
    if found is None:
        return None
    name = found.group(2)
    entry = index.get(path)
    analysis = entry.analysis if entry else None
    if analysis is None:
        return None
    candidates = [Target(path, k, k.param(name)) for k in analysis.kernels if k.param(name) is not None]
    for site in analysis.launch_sites:
        resolved = index.resolve(site, path)
        if resolved is not None and resolved[0].param(name) is not None:
            candidates.append(Target(resolved[1] or path, resolved[0], resolved[0].param(name)))
    for target in candidates:
        if (path, line, found.start(2), name) in _places(index, target, text_of, True)[0]:
            return target
    return None


# path -> (the analysis its index entry held, the dotted names the file imports). A closed file's imports are read
# once per analysis of it (a change on disk re-analyses it, which invalidates this), so references and renames do
# not read and scan every file of the workspace on each request.
_IMPORTED: dict[str, tuple[object, frozenset[str]]] = {}


def _imports_of(path: str, entry, text_of: TextOf) -> frozenset[str] | None:
    cached = _IMPORTED.get(path)
    if cached is not None and cached[0] is entry.analysis:
        return cached[1]
    text = text_of(path)
    if text is None:
        return None
    names = frozenset(imported_names(text).values())
    if not entry.from_buffer:  # an open buffer's text may be newer than its analysis: read it each time
        _IMPORTED[path] = (entry.analysis, names)
    return names


def _importers(index: WorkspaceIndex, defining: str, name: str, text_of: TextOf) -> dict[str, str]:
    """Files other than the defining one that import the kernel's name from its module: path -> text."""
    wanted = {f"{module}.{name}" for module in module_suffixes(defining)}
    out = {}
    for path, entry in index.files.items():
        if path == defining or entry.analysis is None:
            continue
        names = _imports_of(path, entry, text_of)
        if names and not wanted.isdisjoint(names):
            text = text_of(path)
            if text:
                out[path] = text
    for gone in [p for p in list(_IMPORTED) if p not in index.files]:
        _IMPORTED.pop(gone, None)
    return out


def _launches(index: WorkspaceIndex, target: Target) -> list[tuple[str, LaunchSite]]:
    out = []
    for path, entry in index.files.items():
        for site in entry.analysis.launch_sites if entry.analysis else ():
            if site.target != target.kernel.name:
                continue
            found = index.resolve(site, path)
            if found is not None and (found[1] or path) == target.path:
                out.append((path, site))
    return out


def references(index: WorkspaceIndex, target: Target, text_of: TextOf, include_declaration: bool = True
               ) -> list[Location]:
    """Where a kernel or parameter is named: launches, calls and imports of a kernel; a parameter's uses in its
    kernel, its keyword at launches and calls, its keys in the kernel's autotune configs, heuristics and pruners,
    in grids' `meta` dicts and in `**kwargs` dicts passed at launches."""
    found, _ = _places(index, target, text_of, include_declaration)
    return [(path, Span(line, col, line, col + len(name))) for path, line, col, name in found]


Unproven = tuple[str, Span, str]  # (path, where, why): a place that may name the parameter in a way not followed


class UnsafeRename(Exception):
    """A rename that would leave the program broken, or might: the places whose uses could not be followed."""

    def __init__(self, name: str, places: list[Unproven]):
        self.places = places
        shown = "; ".join(f"{os.path.basename(path)}:{span.start_line + 1}: {why}" for path, span, why in places[:5])
        more = f" (and {len(places) - 5} more)" if len(places) > 5 else ""
        super().__init__(f"'{name}' not renamed: {len(places)} place(s) may use it in a way that cannot be "
                         f"followed: {shown}{more}")


def _places(index: WorkspaceIndex, target: Target, text_of: TextOf, include_declaration: bool
            ) -> tuple[list[tuple[str, int, int, str]], list[Unproven]]:
    kernel = target.kernel
    found: set[tuple[str, int, int, str]] = set()
    unproven: list[Unproven] = []
    defining_text = text_of(target.path) or ""
    if target.param is None:
        name = kernel.name
        for path, text in [(target.path, defining_text), *_importers(index, target.path, name, text_of).items()]:
            for line, col, keyword in name_tokens(text, name):
                if not keyword:
                    found.add((path, line, col, name))
        for path, site in _launches(index, target):  # `module.kernel[grid](...)` too
            s = site.callee_span
            found.add((path, s.end_line, s.end_col - len(name), name))
        if not include_declaration:
            found.discard((target.path, kernel.name_span.start_line, kernel.name_span.start_col, name))
        return sorted(found), unproven
    name = target.param.name
    body = Span(kernel.name_span.start_line, 0, kernel.span.end_line, 10**9)
    lines = defining_text.splitlines(keepends=True)
    chunk = "".join(lines[body.start_line:body.end_line + 1])
    for line, col, keyword in name_tokens(chunk, name):
        if not keyword:
            found.add((target.path, line + body.start_line, col, name))
    # Keys naming the parameter in the decorators (autotune configs, key lists, heuristics) and in configs
    # written elsewhere in the file, read from the tokens (a file being typed) and from its syntax tree (the
    # functions and values the decorators refer to).
    config_spans = [Span(kernel.span.start_line, 0, kernel.name_span.start_line, 10**9)]
    config_spans += [c.span for c in kernel.autotune_configs if not kernel.span.contains_line(c.span.start_line)]
    for span in config_spans:
        chunk = "".join(lines[span.start_line:span.end_line + 1])
        for line, col in string_tokens(chunk, name):
            found.add((target.path, line + span.start_line, col, name))
        for line, col, keyword in name_tokens(chunk, name):
            if keyword:  # triton.Config(dict(BLOCK=...)) / kwargs given by name
                found.add((target.path, line + span.start_line, col, name))

    def add(path: str, uses: param_keys.KeyUses) -> None:
        found.update((path, s.start_line, s.start_col, name) for s in uses.spans)
        unproven.extend((path, s, why) for s, why in uses.unproven)

    add(target.path, param_keys.decorator_uses(defining_text, kernel, name))
    for path, text in _importers(index, target.path, kernel.name, text_of).items():
        local = {alias for alias, dotted in imported_names(text).items()
                 if dotted.rsplit(".", 1)[-1] == kernel.name}
        add(path, param_keys.importer_uses(text, kernel.name, local, name))
    by_file: dict[str, list[LaunchSite]] = {}
    for path, site in _launches(index, target):
        by_file.setdefault(path, []).append(site)
        for arg in site.kwargs:
            if arg.keyword == name:
                found.add((path, arg.span.start_line, arg.span.start_col, name))
    for path, sites in by_file.items():
        launcher_text = text_of(path)
        entry = index.get(path)
        if launcher_text is None or entry is None or entry.analysis is None:
            continue
        others = [s for s in entry.analysis.launch_sites if s not in sites]
        add(path, param_keys.launch_uses(launcher_text, sites, others, name))
    if not include_declaration:
        found.discard((target.path, target.param.span.start_line, target.param.span.start_col, name))
    return sorted(found), unproven


def rename_edits(index: WorkspaceIndex, target: Target, new_name: str, text_of: TextOf) -> dict[str, list[TextEdit]]:
    """Every edit that renames a kernel (its definition, calls, imports and launches) or a kernel parameter (its
    uses, launch and call keywords, autotune config keys, heuristics and pruners, grids' `meta` keys, `**kwargs`
    keys). Raises UnsafeRename, naming the places, where some use of a parameter's name cannot be followed."""
    found, unproven = _places(index, target, text_of, True)
    if unproven:
        raise UnsafeRename(target.param.name if target.param else target.kernel.name, unproven)
    edits: dict[str, list[TextEdit]] = {}
    for path, line, col, name in found:
        edits.setdefault(path, []).append(TextEdit(Span(line, col, line, col + len(name)), new_name))
    return edits


def unproven_places(index: WorkspaceIndex, target: Target, text_of: TextOf) -> list[Unproven]:
    return _places(index, target, text_of, True)[1]


def definition(target: Target) -> Location:
    if target.param is not None:
        p = target.param
        return target.path, Span(p.span.start_line, p.span.start_col, p.span.start_line,
                                 p.span.start_col + len(p.name))
    return target.path, target.kernel.name_span


def signature_text(kernel: TritonKernel) -> str:
    """`helper(x, BLOCK: tl.constexpr)` as the parameters are written."""
    params = [p.name + (f": {p.annotation}" if p.annotation else "") + (f" = {p.default}" if p.default else "")
              for p in kernel.params]
    return f"{kernel.name}({', '.join(params)})"


def docstring(kernel: TritonKernel, text: str) -> str | None:
    """The docstring of a kernel or helper, read from its file's text."""
    import ast
    import textwrap

    lines = text.splitlines()[kernel.name_span.start_line:kernel.span.end_line + 1]
    try:
        tree = parse_python(textwrap.dedent("\n".join(lines)))
    except SyntaxError:
        return None
    fn = tree.body[0] if tree.body else None
    return ast.get_docstring(fn) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
