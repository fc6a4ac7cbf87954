"""An agent's proposal (`propose_edit`, through the API as `kernel-lsp mcp` calls it) offered in the editor: noticed
when its file opens, listed in the file's code actions, reviewed as a diff, accepted as one edit the editor
applies, rejected, and refused once the file has changed since it was made."""

from __future__ import annotations

import ast
import asyncio

from pathlib import Path

import pytest
from lsprotocol import types

from kernel_lsp.api import Workspace
from kernel_lsp.engine import trust

from .conftest import wait_for

pytestmark = pytest.mark.timeout(120)

OLD = "import triton\n\n\ndef block_size():\n    return 1024\n"
NEW = "import triton\n\n\ndef block_size():\n    return 2048\n"


@pytest.fixture
def profile() -> str:
    return "vscode"


@pytest.fixture(autouse=True)
def own_trust_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The API's verification asks the trust file; the test's own keeps the user's out of it (nothing runs).
    monkeypatch.setenv(trust.TRUST_FILE_ENV, str(tmp_path.parent / f"{tmp_path.name}-trusted.json"))


def propose(root: Path, name: str, text: str, who: str = "test-agent") -> Path:
    with Workspace(root) as ws:
        return Path(ws.propose_edit(name, text, proposer=who).proposal_path)


async def actions(session, uri: str) -> list[tuple[str, str, list]]:
    """(title, command, arguments) of the file's proposal actions."""
    found = await session.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        context=types.CodeActionContext(diagnostics=[])))
    out = []
    for a in found or []:
        # lsprotocol's converter reads a CodeAction that carries a Command as a Command whose `command` is the
        # repr of the nested one; editors read it correctly.
        inner = a.command
        inner = ast.literal_eval(inner) if isinstance(inner, str) else {"command": inner.command,
                                                                         "arguments": inner.arguments}
        if "proposal" in a.title:
            out.append((a.title, inner["command"], inner["arguments"]))
    return out


def whole_text_edit(params: types.ApplyWorkspaceEditParams) -> tuple[str, int | None, str]:
    (change,) = params.edit.document_changes
    (edit,) = change.edits
    assert (edit.range.start.line, edit.range.start.character) == (0, 0)
    return change.text_document.uri, change.text_document.version, edit.new_text


async def test_a_proposal_is_offered_reviewed_and_accepted_as_one_edit(start, tmp_path: Path):
    session = await start({"blocks.py": OLD})
    diff = propose(tmp_path, "blocks.py", NEW)
    uri = session.open("blocks.py")
    await wait_for(lambda: any("test-agent proposed a change to blocks.py" in m.message
                               for m in session.client.messages))

    titles = [title for title, _, _ in await actions(session, uri)]
    assert "Review proposal from test-agent: +1 \u22121 lines, NOT verified: checks not run" in titles
    assert any(t.startswith("Accept proposal from test-agent") for t in titles)
    assert "Reject proposal from test-agent" in titles

    _, command, arguments = next(a for a in await actions(session, uri) if a[0].startswith("Review"))
    assert command == "kernel-lsp.reviewProposal"
    session.client.answer_questions = "Accept"
    answer = await session.command(command, *arguments)
    assert answer["applied"] is True, answer
    # The diff was shown as a document, the question asked, and the new text sent as one versioned edit.
    assert any(d.uri == diff.as_uri() for d in session.client.shown_documents)
    assert "Apply it?" in session.client.questions[-1].message
    edited_uri, version, text = whole_text_edit(session.client.applied_edits[-1])
    assert (edited_uri, version, text) == (uri, 1, NEW)
    # Accepted: the proposal is gone, and the file on disk is the editor's to save.
    assert not diff.exists() and not diff.with_suffix(".json").exists()
    assert await actions(session, uri) == []
    assert (tmp_path / "blocks.py").read_text() == OLD


async def test_a_rejected_proposal_is_removed_unapplied(start, tmp_path: Path):
    session = await start({"blocks.py": OLD})
    diff = propose(tmp_path, "blocks.py", NEW, who="claude-code")
    uri = session.open("blocks.py")
    _, command, arguments = next(a for a in await actions(session, uri) if a[0] == "Reject proposal from claude-code")
    answer = await session.command(command, *arguments)
    assert answer["rejected"] is True
    assert not diff.exists() and not session.client.applied_edits
    assert await actions(session, uri) == []
    # Asked again, the server says it is gone rather than failing.
    again = await session.command(command, *arguments)
    assert again["rejected"] is False and "is gone" in again["error"]


async def test_a_stale_proposal_is_refused_with_a_message(start, tmp_path: Path):
    session = await start({"blocks.py": OLD})
    diff = propose(tmp_path, "blocks.py", NEW)
    uri = session.open("blocks.py")
    session.set_text(uri, OLD.replace("import triton", "import triton  # edited since"))

    offered = await actions(session, uri)
    assert [title for title, _, _ in offered] == [
        "Reject stale proposal from test-agent (blocks.py changed since it was made)"]
    answer = await session.command("kernel-lsp.acceptProposal", {"uri": uri})
    assert answer["applied"] is False and answer["stale"] is True
    assert "was made for an older text of blocks.py" in answer["error"]
    await wait_for(lambda: any("it was not applied" in m.message for m in session.client.messages))
    assert not session.client.applied_edits and diff.exists()  # kept until the user rejects it


async def test_a_damaged_proposal_file_is_skipped(start, tmp_path: Path):
    session = await start({"blocks.py": OLD})
    diff = propose(tmp_path, "blocks.py", NEW)
    (diff.parent / "broken.json").write_text("{not json", encoding="utf-8")
    uri = session.open("blocks.py")
    titles = [title for title, _, _ in await actions(session, uri)]
    assert sum(t.startswith("Review proposal") for t in titles) == 1


async def test_a_proposal_for_an_open_file_is_announced_when_it_arrives(start, tmp_path: Path):
    session = await start({"blocks.py": OLD})
    uri = session.open("blocks.py")
    await session.diagnostics(uri)
    assert not any("proposed a change" in m.message for m in session.client.messages)
    propose(tmp_path, "blocks.py", NEW, who="cursor")
    await wait_for(lambda: any("cursor proposed a change to blocks.py" in m.message
                               for m in session.client.messages), timeout=10)
    assert [title for title, _, _ in await actions(session, uri)][0].startswith("Review proposal from cursor")
    # Announced once, however long it waits.
    await asyncio.sleep(2.5)
    assert sum("cursor proposed a change" in m.message for m in session.client.messages) == 1
