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


async def test_run_checks_in_a_single_file_names_the_missing_trusted_folder(client, tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "kernels.py").write_text(GOOD)
    await client.initialize_session(types.InitializeParams(capabilities=capabilities("neovim"),
                                                           initialization_options=OPTIONS))
    uri = (folder / "kernels.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=GOOD)))
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernel-lsp.runChecks", arguments=[{"uri": uri}]))
    # The `checks` setting asks for checks: what keeps them off is the missing trusted folder, and that is said.
    assert "`checks` setting" not in answer["error"]
    assert "trusted workspace folder" in answer["error"] and "Trust this workspace" in answer["error"]


@pytest.fixture
def trusting_nothing(tmp_path_factory, monkeypatch) -> None:
    """A trust file trusting nothing, set before the server starts (list this fixture before `start`)."""
    from kernel_lsp.engine.trust import TRUST_FILE_ENV

    monkeypatch.setenv(TRUST_FILE_ENV, str(tmp_path_factory.mktemp("user-config") / "trusted.json"))


async def test_run_checks_in_an_untrusted_folder_says_so_and_how_to_trust_it(trusting_nothing, start):
    s = await start({"kernels.py": GOOD}, options={**OPTIONS, "checks": "save"})
    uri = s.open("kernels.py")
    answer = await s.command("kernel-lsp.runChecks", {"uri": uri})
    assert "is not trusted" in answer["error"] and str(s.root) in answer["error"]
    assert "Trust this workspace" in answer["error"] and "kernel-lsp trust" in answer["error"]
    assert "`checks` setting" not in answer["error"]
