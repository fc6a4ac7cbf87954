"""The registration table: one module per LSP feature, each with a `register(server)` function."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import (
    assistant,
    code_actions,
    commands,
    completion,
    diagnostics,
    documents,
    ir,
    latency,
    lifecycle,
    navigation,
    profile,
    proposals,
    rename,
    resources,
    semantic_tokens,
    signature_help,
    symbols,
    verification,
)

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

FEATURES = (lifecycle, documents, diagnostics, code_actions, symbols, resources, commands, ir, verification, latency,
            assistant, profile, proposals, completion, signature_help, navigation, rename, semantic_tokens)


def register_all(server: "KernelLanguageServer") -> None:
    for feature in FEATURES:
        feature.register(server)
