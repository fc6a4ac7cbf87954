"""A file opened without a workspace folder (an editor finds none above it): it is compiled with its own folder
as the root, and the user is told once what that leaves out and how to get it."""

from __future__ import annotations


import pytest
from lsprotocol import types

from .conftest import capabilities, until
from .kernels import GOOD

pytest.importorskip("triton")

OPTIONS = {"compile": "open", "compileDebounceMs": 0, "targets": ["sm_90"], "compileWorkers": 1,
           "pins": {"add_kernel": {"BLOCK": 1024}}}


@pytest.fixture
def profile() -> str:
    return "neovim"


async def test_a_file_without_a_workspace_folder_is_compiled_and_says_what_is_off(client, tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "kernels.py").write_text(GOOD)
    (folder / "other.py").write_text(GOOD.replace("add_kernel", "other_kernel"))
    await client.initialize_session(types.InitializeParams(capabilities=capabilities("neovim"),
                                                           initialization_options=OPTIONS))
    uri = (folder / "kernels.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=GOOD)))
    line = GOOD.splitlines().index("def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):")

    async def hints():
        return await client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(0, 0), types.Position(len(GOOD.splitlines()), 0))))

    found = await until(hints, lambda h: bool(h), timeout=120)  # compiled: resources on the kernel's line
    assert found[0].position.line == line and "sm_90" in str(found[0].label)
    told = [m.message for m in client.messages if "no workspace folder" in m.message]
    assert len(told) == 1, told
    assert "kernels.py" in told[0] and str(folder) in told[0] and "Open the folder" in told[0]
    assert "checks and timing stay off" in told[0]

    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=(folder / "other.py").as_uri(), language_id="python", version=1, text=(folder / "other.py").read_text())))
    status = await until(lambda: client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernel-lsp.status")), lambda st: st["indexed"]["openDocuments"] == 2, timeout=30)
    assert status["indexed"]["files"] == 2  # the open files only: the folder is not walked
    assert not (folder / ".kernel-lsp").exists()  # nothing written into a folder nobody trusted
    told = [m.message for m in client.messages if "no workspace folder" in m.message]
    assert len(told) == 1  # once per session
