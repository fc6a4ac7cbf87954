"""The table of what a proposal tried (the tiling search's configurations, the assistant's candidates), where each
client can show it: as text in the edit's change annotation (the Neovim plugin's preview shows it under the
summary) and as a markdown document under `.kernel-lsp/proposals/`, opened beside the preview with
`window/showDocument` without taking focus (VS Code's refactor preview shows only one line of an annotation).
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import from_fs_path

from ..engine.files import ensure_ignored_dir

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)
SHOW_DOCUMENT_TIMEOUT = 5.0


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(proposal: dict[str, Any]) -> str:
    """The proposal's title, summary and table as a markdown document."""
    rows = proposal.get("table") or []
    lines = [f"# {proposal.get('title', 'Proposal')}", "", str(proposal.get("summary", "")), ""]
    if rows:
        header, *body = rows
        lines += ["| " + " | ".join(_cell(c) for c in header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def write(ls: "KernelLanguageServer", proposal: dict[str, Any]) -> str | None:
    """Write the proposal's table document; its URI, or None when there is no table or it cannot be written."""
    if len(proposal.get("table") or []) < 2:
        return None
    folder = ls.private_dir() / "proposals"
    name = re.sub(r"[^A-Za-z0-9_]+", "-", str(proposal.get("title", "proposal"))).strip("-").lower() or "proposal"
    out = folder / f"{name}.md"
    try:
        ensure_ignored_dir(folder.parent)
        folder.mkdir(parents=True, exist_ok=True)
        out.write_text(markdown(proposal), encoding="utf-8")
    except OSError:
        log.warning("cannot write the proposal's table to %s", out, exc_info=True)
        return None
    return from_fs_path(str(out)) or Path(out).as_uri()


async def show(ls: "KernelLanguageServer", uri: str) -> None:
    """Open the table document beside the editor, without taking focus, where the client can."""
    try:
        caps = ls.client_capabilities
        window = caps.window if caps else None
        if not (window and window.show_document and window.show_document.support):
            return
        await asyncio.wait_for(ls.window_show_document_async(types.ShowDocumentParams(uri=uri, take_focus=False)),
                               SHOW_DOCUMENT_TIMEOUT)
    except Exception:  # noqa: BLE001 - the table is also in the answer and the annotation
        log.debug("window/showDocument of the proposal's table failed", exc_info=True)
