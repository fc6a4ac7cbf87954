"""The single list of the server's workspace commands: names, titles and what they take.

Layer neutral, like settings.py: the protocol layer registers handlers under these names, and the editor clients'
command lists (the VS Code extension's palette entries, the Neovim plugin's user commands) are generated from or
checked against this table, so a command can never exist in one place only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerCommand:
    name: str  # the workspace/executeCommand name
    title: str  # what a command palette shows
    description: str
    # What the command takes: "none"; "position": one object {"uri", "line", "character"} (0-based, the kernel
    # under that place; positional uri, line, character also work); "uri": one object {"uri"} (a whole file).
    argument: str = "none"


STATUS = "kernel-lsp.status"
REINDEX = "kernel-lsp.reindex"
SHOW_IR = "kernel-lsp.showIR"

COMMANDS: tuple[ServerCommand, ...] = (
    ServerCommand(STATUS, "Show status", "What the server is doing: indexed files, queued work, compile and "
                  "check counters, memory."),
    ServerCommand(REINDEX, "Re-index the workspace", "Forget what is known of closed files and read the workspace "
                  "again."),
    ServerCommand(SHOW_IR, "Show IR", "Open the TTIR, TTGIR, LLIR, PTX, SASS or AMDGCN of the kernel under the "
                  "cursor, at the instructions that come from the cursor's line.", "position"),
)

BY_NAME = {c.name: c for c in COMMANDS}
