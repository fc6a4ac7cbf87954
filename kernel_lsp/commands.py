"""The single list of the server's workspace commands: names, titles and what they take.

Layer neutral, like settings.py: the protocol layer registers handlers under these names, and the editor clients'
command lists (the VS Code extension's palette entries, the Neovim plugin's user commands) are generated from or
checked against this table, so a command can never exist in one place only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
COMPARE_IR = "kernel-lsp.compareIR"
RUN_CHECKS = "kernel-lsp.runChecks"
OPTIMIZE_TILING = "kernel-lsp.optimizeTiling"
ASSISTANT_OPTIMIZE = "kernel-lsp.assistantOptimize"
PORT_TO_NKI = "kernel-lsp.portToNki"
FIX_THIS = "kernel-lsp.fixThis"
EXPLAIN_TIME = "kernel-lsp.explainTime"
WRITE_SPEC = "kernel-lsp.writeSpec"
REFINE = "kernel-lsp.refine"
CANCEL_ASSISTANT = "kernel-lsp.cancelAssistant"
PROFILE_LINES = "kernel-lsp.profileLines"
TRUST = "kernel-lsp.trust"
REVIEW_PROPOSAL = "kernel-lsp.reviewProposal"
ACCEPT_PROPOSAL = "kernel-lsp.acceptProposal"
REJECT_PROPOSAL = "kernel-lsp.rejectProposal"

COMMANDS: tuple[ServerCommand, ...] = (
    ServerCommand(STATUS, "Show status", "What the server is doing: indexed files, queued work, compile and "
                  "check counters, memory."),
    ServerCommand(TRUST, "Trust this workspace", "Let kernel-lsp run this workspace's code (compile, check and time "
                  "its kernels as the settings say), remembered for its folders in your user configuration, once "
                  "you answer the server's question with Trust; `kernel-lsp untrust PATH` takes it back."),
    ServerCommand(REINDEX, "Re-index the workspace", "Forget what is known of closed files and read the workspace "
                  "again."),
    ServerCommand(SHOW_IR, "Show IR", "Open the TTIR, TTGIR, LLIR, PTX, SASS or AMDGCN of the kernel under the "
                  "cursor, at the instructions that come from the cursor's line.", "position"),
    ServerCommand(COMPARE_IR, "Compare IR", "Compile the kernel under the cursor two ways (two configurations: "
                  "{a, b} as NAME=VALUE,...; or two triton versions: {aPython, bPython}) and open both IR "
                  "documents side by side, with Show IR's line mapping.", "position"),
    ServerCommand(RUN_CHECKS, "Run correctness checks", "Check the kernel under the cursor (or every kernel of the "
                  "file) against the PyTorch reference of its spec, now.", "position"),
    ServerCommand(OPTIMIZE_TILING, "Optimize tiling", "Search the tiling of the kernel under the cursor (block "
                  "sizes, num_warps, num_stages or its autotune configs): measured on a GPU, else ranked by the "
                  "latency model; the verified winner is proposed as an edit to confirm.", "position"),
    ServerCommand(ASSISTANT_OPTIMIZE, "Optimize tiling (assistant)", "Ask the model for a plan to make the kernel "
                  "under the cursor faster; after `refine` with \"go\", candidates are compiled, checked against the "
                  "spec and timed, and the fastest correct one is proposed as an edit to confirm.", "position"),
    ServerCommand(PORT_TO_NKI, "Port to NKI (assistant)", "Ask the model for a plan, then an NKI port of the Triton "
                  "kernel under the cursor (current `nki` API), checked by the NK rules and run against the kernel's "
                  "spec in kernel-lsp's NKI model (AWS's simulator where installed).", "position"),
    ServerCommand(FIX_THIS, "Fix this (assistant)", "Ask the model to fix the problem at the cursor (a compile "
                  "error, a failed check, a rule); the fix is verified before it is proposed.", "position"),
    ServerCommand(EXPLAIN_TIME, "Explain where the time goes (assistant)", "The model explains the kernel's "
                  "latency report (measured on a GPU, else estimated): text, no edit.", "position"),
    ServerCommand(WRITE_SPEC, "Write a correctness spec (assistant)", "The model writes the PyTorch reference and "
                  "inputs of a spec for the kernel under the cursor; proposed once the check passes.", "position"),
    ServerCommand(REFINE, "Refine… (assistant)", "Continue the assistant's session for the kernel under the "
                  "cursor: {uri, line, character, instruction}; \"go\" accepts a plan, other text replaces it or asks "
                  "for a change.", "position"),
    ServerCommand(PROFILE_LINES, "Profile lines (Nsight Compute)", "Profile the kernel under the cursor (or every "
                  "spec'd kernel of the file) at its bench shapes with Nsight Compute on this machine's GPU: "
                  "warp-stall samples per line as hints and hovers, ncu's advice as KP001 diagnostics.", "position"),
    ServerCommand(CANCEL_ASSISTANT, "Cancel the assistant", "Stop every assistant action in progress (its model "
                  "calls and checks); nothing is proposed."),
    ServerCommand(REVIEW_PROPOSAL, "Review an agent's proposal", "Show the diff of the newest proposal an agent "
                  "wrote for this file (`propose_edit` through the API or `kernel-lsp mcp`), then accept or reject "
                  "it; {uri, proposal} names one.", "uri"),
    ServerCommand(ACCEPT_PROPOSAL, "Accept an agent's proposal", "Apply the newest proposal an agent wrote for this "
                  "file as one edit and remove it; refused when the file changed since it was made.", "uri"),
    ServerCommand(REJECT_PROPOSAL, "Reject an agent's proposal", "Remove the newest proposal an agent wrote for this "
                  "file without applying it.", "uri"),
)

BY_NAME = {c.name: c for c in COMMANDS}


POSITION = ("uri", "line", "character")


def command_arguments(args: tuple, names: tuple[str, ...] = POSITION) -> dict[str, Any]:
    """A command's arguments as one object: the object a client sends, or positional values named in order."""
    if len(args) == 1 and isinstance(args[0], dict):
        return dict(args[0])
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    return dict(zip(names, args))


def position_argument(args: tuple) -> tuple[str | None, int | None]:
    """(uri, 0-based line) of a "position" or "uri" command; None for what is missing or of the wrong type."""
    given = command_arguments(args)
    uri, line = given.get("uri"), given.get("line")
    return (uri if isinstance(uri, str) else None,
            line if isinstance(line, int) and not isinstance(line, bool) else None)
