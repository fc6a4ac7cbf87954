"""A workspace is untrusted until the user trusts it: before that nothing of its code runs, whatever it holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types

from kernel_lsp.engine.trust import TRUST_FILE_ENV

from .conftest import until, wait_for

# A hostile file: code in a constexpr default, an annotation, a helper the launch computes a constexpr with, the
# module level and the spec. Each leaves a marker when it runs.
HOSTILE = '''
import os
import torch
import triton
import triton.language as tl
from kernel_lsp.spec import spec

MARKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "marks")


def mark(what):
    with open(MARKS, "a") as f:
        f.write(what + "\\n")
    return 16


mark("module level")


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = mark("constexpr default")):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=mark("launch") * 16)
    return out


@spec(kernel=add_kernel, launcher=add, reference=lambda x, y: x + y, shapes=[(100,)], seeds=1)
def add_inputs(shape, dtype, device):
    mark("spec inputs")
    return (torch.randn(shape, dtype=dtype, device=device), torch.randn(shape, dtype=dtype, device=device))
'''


@pytest.fixture(autouse=True)
def untrusted(tmp_path_factory, monkeypatch) -> Path:
    """A trust file of this test's own, trusting nothing: the server started after this inherits it."""
    path = tmp_path_factory.mktemp("user-config") / "trusted.json"
    monkeypatch.setenv(TRUST_FILE_ENV, str(path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("user-cache")))
    return path


def _save(s, uri: str) -> None:
    s.client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


@pytest.mark.parametrize("answer", [None, "Not now"])
async def test_an_untrusted_workspace_runs_none_of_its_code(client, start, answer, tmp_path):
    client.answer_questions = answer
    s = await start({"hostile.py": HOSTILE}, options={"compile": "open", "checks": "save", "latency": "save"})
    uri = s.open("hostile.py")
    await s.diagnostics(uri)
    _save(s, uri)
    status = await s.command("kernel-lsp.status")
    assert status["trusted"] is False
    assert (status["compile"]["mode"], status["checks"]["when"]) == ("open", "off")
    checked = await s.command("kernel-lsp.runChecks", {"uri": uri, "line": 22, "character": 0})
    assert "error" in checked, checked
    await wait_for(lambda: bool(client.questions), timeout=10)
    (question,) = client.questions
    assert "Trust" in question.message and [a.title for a in question.actions] == ["Trust", "Not now"]
    assert (await s.command("kernel-lsp.status"))["trusted"] is False
    assert not (tmp_path / "marks").exists()


@pytest.mark.timeout(300)
async def test_an_untrusted_workspace_is_compiled_offline_and_nothing_is_written_into_it(client, start, tmp_path):
    """The offline compile runs in an untrusted folder: a kernel that needs the file's code to compile is said to
    be not compiled (information), nothing else; its caches live in the user's cache."""
    pytest.importorskip("triton")
    client.answer_questions = None
    s = await start({"hostile.py": HOSTILE}, options={"compile": "open", "checks": "save"})
    uri = s.open("hostile.py")
    # The constexpr default is computed by a call: not known offline (KC009), or, were it read, not run (KC008).
    not_compiled = {"KC008", "KC009"}
    found = await until(lambda: s.diagnostics(uri, timeout=30), lambda ds: any(d.code in not_compiled for d in ds),
                        timeout=240, interval=0.5)
    notes = [d for d in found if d.code in not_compiled]
    assert notes and all(d.severity == types.DiagnosticSeverity.Information for d in notes), notes
    assert not [d for d in found if str(d.code).startswith("KC") and d.code not in not_compiled], found
    _save(s, uri)
    await s.command("kernel-lsp.status")
    assert not (tmp_path / "marks").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.py"]


@pytest.mark.timeout(300)
async def test_trusting_turns_on_what_the_settings_ask_for_and_is_remembered(client, start, tmp_path, untrusted):
    client.answer_questions = "Trust"
    s = await start({"hostile.py": HOSTILE}, options={"compile": "off", "checks": "save", "latency": "off"})
    status = await until(lambda: s.command("kernel-lsp.status"), lambda st: st["trusted"], timeout=30)
    assert status["checks"]["when"] == "save"
    assert json.loads(untrusted.read_text())["trusted"] == [str(tmp_path.resolve())]
    assert not (tmp_path / "marks").exists()  # trusting runs nothing by itself
    # Trusted, the checks run the file's code as asked: its module level, the spec's inputs, the launcher.
    pytest.importorskip("torch")
    uri = s.open("hostile.py")
    checked = await s.command("kernel-lsp.runChecks", {"uri": uri, "line": 22, "character": 0})
    assert "error" not in checked, checked
    ran = (tmp_path / "marks").read_text().split("\n")
    assert {"module level", "spec inputs", "launch"} <= set(ran), ran


async def test_the_trust_command_trusts_once_the_person_answers_trust(client, start, tmp_path, untrusted):
    s = await start({"k.py": "x = 1\n"}, options={"checks": "save"})
    assert (await s.command("kernel-lsp.status"))["trusted"] is False
    client.answer_questions = "Trust"
    asked = len(client.questions)
    assert (await s.command("kernel-lsp.trust"))["trusted"] == [str(tmp_path.resolve())]
    assert len(client.questions) == asked + 1  # the command asked the person
    status = await s.command("kernel-lsp.status")
    assert status["trusted"] is True and status["checks"]["when"] == "save"


@pytest.mark.parametrize("answer", [None, "Not now"])
async def test_the_trust_command_alone_grants_nothing(client, start, tmp_path, untrusted, answer):
    """A message can arrive from any program that reaches the server: without the person's Trust it trusts nothing."""
    s = await start({"k.py": "x = 1\n"}, options={"checks": "save"})
    client.answer_questions = answer
    result = await s.command("kernel-lsp.trust")
    assert result["trusted"] == [] and "kernel-lsp trust" in result["error"]
    assert (await s.command("kernel-lsp.status"))["trusted"] is False
    assert not untrusted.exists() or json.loads(untrusted.read_text())["trusted"] == []


async def test_the_trust_command_takes_up_trust_given_in_a_shell(client, start, tmp_path, untrusted):
    """`kernel-lsp trust PATH` is the user's own action: the command then needs no question."""
    import subprocess
    import sys

    s = await start({"k.py": "x = 1\n"}, options={"checks": "save"})
    subprocess.run([sys.executable, "-m", "kernel_lsp", "trust", str(tmp_path)], check=True, capture_output=True)
    client.answer_questions = None
    asked = len(client.questions)
    assert (await s.command("kernel-lsp.trust"))["trusted"] == [str(tmp_path.resolve())]
    assert len(client.questions) == asked
    assert (await s.command("kernel-lsp.status"))["checks"]["when"] == "save"


async def test_the_editor_vouching_for_the_workspace_is_enough(start):
    s = await start({"k.py": "x = 1\n"}, options={"checks": "save", "workspaceTrusted": True})
    status = await s.command("kernel-lsp.status")
    assert status["trusted"] is True and status["checks"]["when"] == "save"


async def test_a_workspace_setting_cannot_grant_trust(start):
    s = await start({"k.py": "x = 1\n"}, options={"checks": "save"}, configuration={"workspaceTrusted": True})
    assert (await s.command("kernel-lsp.status"))["trusted"] is False


async def test_a_folder_added_later_needs_trust_of_its_own(client, start, tmp_path, untrusted, tmp_path_factory):
    client.answer_questions = None
    s = await start({"k.py": "x = 1\n"}, options={"checks": "save"})
    client.answer_questions = "Trust"
    assert (await s.command("kernel-lsp.trust"))["trusted"] == [str(tmp_path.resolve())]
    client.answer_questions = None
    asked = len(client.questions)
    other = tmp_path_factory.mktemp("other")
    client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(
            added=[types.WorkspaceFolder(uri=other.as_uri(), name="other")], removed=[])))
    status = await until(lambda: s.command("kernel-lsp.status"), lambda st: len(st["roots"]) == 2, timeout=10)
    assert status["trusted"] is False and status["checks"]["when"] == "off"
    await wait_for(lambda: len(client.questions) > asked, timeout=10)
    assert str(other) in client.questions[-1].message and str(tmp_path) not in client.questions[-1].message


def _open(client, path: Path) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=path.read_text())))
    return uri


@pytest.mark.parametrize("how", ["trust file", "editor's trust", "folder swap"])
async def test_a_file_outside_every_trusted_folder_is_never_run(client, start, tmp_path, untrusted, tmp_path_factory,
                                                                 how):
    """Trust is decided per file from its real path: whatever else the session trusts, a file of an untrusted
    folder is not run, and the user hears why and how to trust its folder."""
    pytest.importorskip("torch")
    options = {"checks": "save", "latency": "off"}
    if how == "editor's trust":
        options["workspaceTrusted"] = True
    else:
        untrusted.write_text(json.dumps({"trusted": [str(tmp_path.resolve())]}))
    other = tmp_path_factory.mktemp("elsewhere")
    (other / "hostile.py").write_text(HOSTILE)
    s = await start({"k.py": "x = 1\n"}, options=options)
    if how == "folder swap":  # the untrusted folder joins the workspace, then leaves it with its file still open
        folder = types.WorkspaceFolder(uri=other.as_uri(), name="other")
        client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(added=[folder], removed=[])))
        await until(lambda: s.command("kernel-lsp.status"), lambda st: len(st["roots"]) == 2, timeout=10)
        uri = _open(client, other / "hostile.py")
        client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(added=[], removed=[folder])))
        await until(lambda: s.command("kernel-lsp.status"), lambda st: len(st["roots"]) == 1, timeout=10)
    else:
        uri = _open(client, other / "hostile.py")
    status = await s.command("kernel-lsp.status")
    assert status["trusted"] is True and status["checks"]["when"] == "save"
    checked = await s.command("kernel-lsp.runChecks", {"uri": uri, "line": 36, "character": 0})
    assert "outside every trusted folder" in checked.get("error", ""), checked
    assert f"kernel-lsp trust {other.resolve()}" in checked["error"]
    _save(s, uri)
    await wait_for(lambda: any("outside every trusted folder" in m.message for m in client.messages), timeout=30)
    profiled = await s.command("kernel-lsp.profileLines", {"uri": uri, "line": 36, "character": 0})
    assert "error" in profiled
    assert not (other / "marks").exists()
    # A file of the trusted folder still runs.
    (tmp_path / "hostile.py").write_text(HOSTILE)
    mine = s.open("hostile.py")
    checked = await s.command("kernel-lsp.runChecks", {"uri": mine, "line": 36, "character": 0})
    assert "outside every trusted folder" not in str(checked)
    assert (tmp_path / "marks").exists()
