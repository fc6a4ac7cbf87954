"""The workspace index: every analysed file's kernels, launch sites and problems, and the links between files.

Launch sites are checked against the kernel they launch wherever it is defined in the workspace, so an edit
to a kernel's signature re-checks the launchers in other files (`dependents`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from analyzers import analyze_source, check_launch_sites
from analyzers.model import FileAnalysis, LaunchSite, Problem, Severity, TritonKernel
from analyzers.suppression import select_problems

from ..settings import Settings
from .files import oversize, read_source, too_large_problem

_SEVERITY_NAMES = {"error": Severity.ERROR, "warning": Severity.WARNING, "information": Severity.INFO,
                   "hint": Severity.HINT}


@dataclass
class IndexedFile:
    path: str
    analysis: FileAnalysis | None  # None when the file could not be read as text
    read_problem: Problem | None = None
    version: int | None = None  # the open document's version; None when read from disk
    from_buffer: bool = False

    @property
    def kernel_names(self) -> set[str]:
        return {k.name for k in self.analysis.kernels} if self.analysis else set()

    @property
    def is_interesting(self) -> bool:
        """Whether the file holds anything kernel-related (worth showing diagnostics for when not open)."""
        a = self.analysis
        return self.read_problem is not None or bool(a and (a.kernels or a.nki_kernels or a.problems))


def module_suffixes(path: str) -> set[str]:
    """Dotted module names a file may be imported as: a/b/c.py -> {"c", "b.c", "a.b.c"}."""
    p = Path(path)
    parts = list(p.parent.parts) + ([] if p.stem == "__init__" else [p.stem])
    parts = [x for x in parts if x not in ("/", "")]
    return {".".join(parts[i:]) for i in range(len(parts)) if parts[i:]}


class WorkspaceIndex:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings()
        self.files: dict[str, IndexedFile] = {}
        self._kernel_files: dict[str, set[str]] = {}  # kernel name -> paths defining it

    # -- updates -------------------------------------------------------------------------------------------

    def set_text(self, path: str, text: str, version: int | None = None, from_buffer: bool = False) -> IndexedFile:
        size = oversize(text, self.settings.max_file_bytes)
        if size is not None:
            entry = IndexedFile(path, FileAnalysis(path), too_large_problem(size, self.settings.max_file_bytes),
                                version, from_buffer)
        else:
            entry = IndexedFile(path, analyze_source(text, path), None, version, from_buffer)
        self._store(entry)
        return entry

    def store_analysis(self, path: str, analysis: FileAnalysis, version: int | None, from_buffer: bool) -> IndexedFile:
        """Store an analysis computed elsewhere (for example in a worker thread)."""
        entry = IndexedFile(path, analysis, None, version, from_buffer)
        self._store(entry)
        return entry

    def load_from_disk(self, path: str) -> IndexedFile | None:
        """(Re)index a file from disk; None (and the file forgotten) when it no longer exists."""
        read = read_source(path, self.settings.max_file_bytes)
        if read.missing:
            self.remove(path)
            return None
        if read.text is None:
            return self.store_unreadable(path, read.problem)
        return self.set_text(path, read.text)

    def store_unreadable(self, path: str, problem: Problem | None) -> IndexedFile:
        """A file that exists but cannot be analysed (binary, not UTF-8, too large): only its reason is kept."""
        entry = IndexedFile(path, FileAnalysis(path), problem)
        self._store(entry)
        return entry

    def remove(self, path: str) -> IndexedFile | None:
        entry = self.files.pop(path, None)
        if entry is not None:
            for name in entry.kernel_names:
                paths = self._kernel_files.get(name)
                if paths:
                    paths.discard(path)
                    if not paths:
                        del self._kernel_files[name]
        return entry

    def _store(self, entry: IndexedFile) -> None:
        self.remove(entry.path)
        self.files[entry.path] = entry
        for name in entry.kernel_names:
            self._kernel_files.setdefault(name, set()).add(entry.path)

    # -- queries -------------------------------------------------------------------------------------------

    def get(self, path: str) -> IndexedFile | None:
        return self.files.get(path)

    def resolve(self, site: LaunchSite, from_path: str) -> tuple[TritonKernel, str | None] | None:
        """The kernel a launch site launches, and the file defining it (None when it is the launching file)."""
        candidates = self._kernel_files.get(site.target, set())
        if not candidates:
            return None
        if site.module is None:
            if from_path in candidates:
                return self._kernel_in(from_path, site.target, from_path)
            if len(candidates) != 1:
                return None  # ambiguous: unknown which one is meant
            return self._kernel_in(next(iter(candidates)), site.target, from_path)
        module = site.module
        if module.startswith("."):
            base = Path(from_path).parent
            level = len(module) - len(module.lstrip("."))
            for _ in range(level - 1):
                base = base.parent
            rest = module.lstrip(".")
            target = str(base / rest.replace(".", os.sep)) if rest else str(base)
            for path in candidates:
                if path in (target + ".py", os.path.join(target, "__init__.py")):
                    return self._kernel_in(path, site.target, from_path)
            return None
        matching = [p for p in candidates if module in module_suffixes(p)]
        if len(matching) == 1:
            return self._kernel_in(matching[0], site.target, from_path)
        return None

    def _kernel_in(self, path: str, name: str, from_path: str) -> tuple[TritonKernel, str | None] | None:
        entry = self.files.get(path)
        kernel = entry.analysis.kernel(name) if entry and entry.analysis else None
        if kernel is None:
            return None
        return kernel, (None if path == from_path else path)

    def problems(self, path: str, extra: Sequence[Problem] = ()) -> list[Problem]:
        """Every problem to show for a file, after suppression comments, select/ignore and severity overrides.

        `extra`: problems found elsewhere (the compile service's), filtered the same way."""
        entry = self.files.get(path)
        if entry is None:
            return []
        if entry.analysis is None or entry.read_problem is not None:
            return [entry.read_problem] if entry.read_problem else []
        analysis = entry.analysis
        found = list(analysis.problems)
        found += check_launch_sites(analysis, lambda site: self.resolve(site, path))
        # The compiler rejecting a line that a rule already reports as an error (`str(x)` in a kernel) says the
        # same thing twice: the rule's message names the fix.
        errors = {p.span.start_line for p in found if p.severity == Severity.ERROR}
        found += [p for p in extra if not (p.code == "KC001" and p.span.start_line in errors)]
        return self.filtered(found, analysis.suppressions)

    def filtered(self, found: Sequence[Problem], suppressions: dict[int, frozenset[str]] | None = None
                 ) -> list[Problem]:
        """Problems after suppression comments, select/ignore and severity overrides, in file order."""
        selected = select_problems(list(found), suppressions or {}, self.settings.select, self.settings.ignore)
        out = []
        for p in selected:
            override = self.settings.severity_for(p.code)
            if override == "off":
                continue
            if override:
                p = dataclasses.replace(p, severity=_SEVERITY_NAMES[override])
            out.append(p)
        out.sort(key=lambda p: (p.span.start_line, p.span.start_col, p.code))
        return out

    def launches_by_kernel_file(self) -> dict[str, list[tuple[LaunchSite, str]]]:
        """Kernel file -> (launch site, the file it is in) for every workspace launch of a kernel defined there."""
        out: dict[str, list[tuple[LaunchSite, str]]] = {}
        for path, entry in self.files.items():
            for site in entry.analysis.launch_sites if entry.analysis else ():
                found = self.resolve(site, path)
                if found is not None:
                    out.setdefault(found[1] or path, []).append((site, path))
        return out

    def dependents(self, names: set[str], exclude: str | None = None) -> set[str]:
        """Files whose launch sites name any of these kernels."""
        if not names:
            return set()
        return {
            path for path, entry in self.files.items()
            if path != exclude and entry.analysis
            and any(site.target in names for site in entry.analysis.launch_sites)
        }

    def stats(self) -> dict[str, int]:
        triton = sum(len(e.analysis.kernels) for e in self.files.values() if e.analysis)
        nki = sum(len(e.analysis.nki_kernels) for e in self.files.values() if e.analysis)
        launches = sum(len(e.analysis.launch_sites) for e in self.files.values() if e.analysis)
        return {
            "files": len(self.files),
            "kernelFiles": sum(1 for e in self.files.values() if e.analysis and (e.analysis.kernels or e.analysis.nki_kernels)),
            "tritonKernels": triton,
            "nkiKernels": nki,
            "launchSites": launches,
            "openDocuments": sum(1 for e in self.files.values() if e.from_buffer),
        }

