"""Batch checking of files and folders: what `kernel-lsp check` runs, through the same index as the server."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from analyzers.model import Problem, Severity

from ..settings import Settings
from .files import walk_sources
from .index import WorkspaceIndex


@dataclass
class CheckResult:
    index: WorkspaceIndex
    problems: dict[str, list[Problem]] = field(default_factory=dict)  # every checked file, problems or not
    missing: list[str] = field(default_factory=list)  # paths given that do not exist

    def count(self, severity: Severity) -> int:
        return sum(1 for ps in self.problems.values() for p in ps if p.severity == severity)

    def worst(self) -> Severity | None:
        levels = [p.severity for ps in self.problems.values() for p in ps]
        return min(levels) if levels else None


def check_paths(paths: Iterable[str], settings: Settings) -> CheckResult:
    index = WorkspaceIndex(settings)
    result = CheckResult(index)
    for given in paths:
        if not os.path.exists(given):
            result.missing.append(given)
            continue
        for path in walk_sources(given, settings.exclude):
            index.load_from_disk(str(Path(path).resolve()))
    for path in sorted(index.files):
        result.problems[path] = index.problems(path)
    return result
