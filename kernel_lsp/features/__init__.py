"""The registration table: one module per LSP feature, each with a `register(server)` function."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import checks, code_actions, commands, diagnostics, documents, ir, lifecycle, resources, symbols

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

FEATURES = (lifecycle, documents, diagnostics, code_actions, symbols, resources, commands, ir, checks)


def register_all(server: "KernelLanguageServer") -> None:
    for feature in FEATURES:
        feature.register(server)
