"""The registration table: one module per LSP feature, each with a `register(server)` function."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import (
    assistant,
    checks,
    code_actions,
    commands,
    diagnostics,
    documents,
    ir,
    latency,
    lifecycle,
    profile,
    resources,
    symbols,
)

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

FEATURES = (lifecycle, documents, diagnostics, code_actions, symbols, resources, commands, ir, checks, latency,
            assistant, profile)


def register_all(server: "KernelLanguageServer") -> None:
    for feature in FEATURES:
        feature.register(server)
