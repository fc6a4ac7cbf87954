"""The watched workspace, links between files, settings, the status command, and bad input."""

from __future__ import annotations

import asyncio
import os

from lsprotocol import types

from .conftest import wait_for
from .kernels import GOOD, LAUNCHER, TYPO


def codes(diags):
    return sorted(str(d.code) for d in diags)


async def disk_diagnostics(s, name: str, want, timeout: float = 15.0):
    """Diagnostics of a file that is not open, once they satisfy want(codes)."""
    uri = s.uri(name)
    last = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if s.refreshable:
            last = (await s.workspace_diagnostics()).get(uri, [])
        else:
            last = list(s.client.diagnostics.get(uri, []))
        if want(codes(last)):
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name}: diagnostics {codes(last or [])} never satisfied the condition")


async def test_files_changed_on_disk_are_reanalysed(start):
    # How fast is measured by bench/disk_change.py (target: under a second); here, that it happens at all.
    s = await start({"pkg/kernels.py": GOOD})
    await disk_diagnostics(s, "pkg/kernels.py", lambda c: c == [])
    refreshes = s.client.diagnostic_refresh_count
    (s.root / "pkg/kernels.py").write_text(TYPO)  # another tool writes the file
    await disk_diagnostics(s, "pkg/kernels.py", lambda c: c == ["TR007"])
    if s.refreshable:
        assert s.client.diagnostic_refresh_count > refreshes


async def test_deleted_and_renamed_files_leave_no_stale_diagnostics(start):
    s = await start({"a.py": TYPO, "b.py": TYPO})
    await disk_diagnostics(s, "a.py", lambda c: c == ["TR007"])
    await disk_diagnostics(s, "b.py", lambda c: c == ["TR007"])
    os.remove(s.root / "a.py")
    os.rename(s.root / "b.py", s.root / "c.py")
    await disk_diagnostics(s, "a.py", lambda c: c == [])
    await disk_diagnostics(s, "b.py", lambda c: c == [])
    await disk_diagnostics(s, "c.py", lambda c: c == ["TR007"])
    status = await s.command("kernel-lsp.status")
    assert status["indexed"]["files"] == 1


async def test_ignored_folders_are_neither_indexed_nor_watched(start):
    s = await start({"k.py": GOOD, ".venv/lib/k.py": TYPO, "build/k.py": TYPO, ".git/k.py": TYPO,
                     "node_modules/x/k.py": TYPO, "src/deep/k.py": GOOD})
    status = await s.command("kernel-lsp.status")
    assert status["indexed"]["files"] == 2
    assert status["watchedFolders"] == 3  # the root, src, src/deep
    (s.root / ".venv/lib/k2.py").write_text(TYPO)
    await asyncio.sleep(0.5)
    assert (await s.command("kernel-lsp.status"))["indexed"]["files"] == 2


async def test_new_folders_are_watched(start):
    s = await start({"k.py": GOOD})
    (s.root / "new/sub").mkdir(parents=True)
    await asyncio.sleep(0.3)
    (s.root / "new/sub/k.py").write_text(TYPO)
    await disk_diagnostics(s, "new/sub/k.py", lambda c: c == ["TR007"])


async def test_launch_sites_are_checked_against_kernels_in_other_files(start):
    bad_launcher = LAUNCHER.replace("(x, y, out, n, BLOCK=1024)", "(x, y, out, BLOCK=1024)")
    s = await start({"kernels.py": GOOD, "ops.py": bad_launcher})
    uri = s.open("ops.py")
    diags = await s.diagnostics(uri)
    assert codes(diags) == ["TR010"]
    assert "n" in diags[0].message
    related = diags[0].related_information
    if related:  # both recorded profiles support related information
        assert related[0].location.uri == s.uri("kernels.py")
    # The kernel gains a default for n: the launcher in the other file is fine now.
    kernels = s.open("kernels.py")
    s.set_text(kernels, GOOD.replace("out_ptr, n, BLOCK", "out_ptr, n=0, BLOCK"))
    await s.diagnostics(kernels)
    await wait_for_codes(s, uri, [])


async def wait_for_codes(s, uri, expected, timeout=15.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = codes(await s.diagnostics(uri) if s.pulls else s.client.diagnostics.get(uri, []))
        if got == expected or loop.time() > deadline:
            assert got == expected
            return
        await asyncio.sleep(0.05)


async def test_settings_from_initialization_options(start):
    s = await start({"kernels.py": TYPO}, options={"ignore": ["TR007"]})
    uri = s.open("kernels.py")
    assert await s.diagnostics(uri) == []


async def test_invalid_setting_gets_a_message_and_the_default(start):
    s = await start({"kernels.py": TYPO}, options={"ignore": "TR007", "maxFileBytes": -5, "bogus": 1})
    uri = s.open("kernels.py")
    assert codes(await s.diagnostics(uri)) == ["TR007"]
    await wait_for(lambda: len(s.client.messages) >= 3)
    text = "\n".join(m.message for m in s.client.messages)
    assert "ignore" in text and "maxFileBytes" in text and "bogus" in text
    assert all(m.type == types.MessageType.Warning for m in s.client.messages)


async def test_configuration_is_reread_on_change(start):
    s = await start({"kernels.py": TYPO}, configuration={})
    uri = s.open("kernels.py")
    assert codes(await s.diagnostics(uri)) == ["TR007"]
    s.client.set_configuration({"severity": {"TR007": "hint"}}, section="kernelLsp")
    s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await wait_for(lambda: True)

    async def severity():
        diags = await s.diagnostics(uri) if s.pulls else s.client.diagnostics.get(uri, [])
        return [d.severity for d in diags]

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 3
    while await severity() != [types.DiagnosticSeverity.Hint]:
        assert loop.time() < deadline, await severity()
        await asyncio.sleep(0.05)


async def test_status_reports_index_queue_and_memory(start):
    s = await start({"kernels.py": GOOD, "ops.py": LAUNCHER, "plain.py": "x = 1\n"})
    status = await s.command("kernel-lsp.status")
    assert status["indexed"]["files"] == 3
    assert status["indexed"]["tritonKernels"] == 1
    assert status["indexed"]["launchSites"] == 1
    assert status["queued"] == 0
    assert 10 < status["memoryMB"] < 500
    assert status["diagnostics"] == ("pull" if s.pulls else "push")


async def test_bad_files_get_a_message_and_the_rest_still_works(start):
    huge = GOOD + "\n".join(f"X{i} = {i}" for i in range(400_000)) + "\n"  # about 5 MB
    s = await start({
        "latin1.py": "import triton\n# caf\xe9\n".encode("latin-1"),
        "blob.py": bytes(range(256)) * 10,
        "huge.py": huge,
        "kernels.py": TYPO,
    })
    assert (s.root / "huge.py").stat().st_size > 4_000_000
    await disk_diagnostics(s, "latin1.py", lambda c: c == ["KL002"])
    await disk_diagnostics(s, "blob.py", lambda c: c == ["KL002"])
    await disk_diagnostics(s, "huge.py", lambda c: c == ["KL003"])
    await disk_diagnostics(s, "kernels.py", lambda c: c == ["TR007"])
    uri = s.open("huge.py", huge)
    assert codes(await s.diagnostics(uri)) == ["KL003"]


async def test_file_deleted_while_open_and_unknown_requests(start):
    s = await start({"kernels.py": TYPO})
    uri = s.open("kernels.py")
    os.remove(s.root / "kernels.py")
    assert codes(await s.diagnostics(uri)) == ["TR007"]  # the buffer still exists
    s.client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri)))
    await disk_diagnostics(s, "kernels.py", lambda c: c == [])
    try:
        await s.client.protocol.send_request_async("kernelLsp/noSuchMethod", {})
    except Exception as exc:  # noqa: BLE001 - the server answers with an error
        assert "noSuchMethod" in str(exc) or "not found" in str(exc).lower()
    assert (await s.command("kernel-lsp.status"))["ready"]


NKI = '''import nki
import nki.language as nl


@nki.jit
def add_kernel_nki(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a) + nl.load(b))
    return out
'''

AUTOTUNED = GOOD.replace("@triton.jit", "@triton.autotune(configs=[triton.Config({'BLOCK': 128}), "
                         "triton.Config({'BLOCK': 256})], key=['n'])\n@triton.jit")


async def test_kernels_are_listed_as_symbols(start):
    s = await start({"kernels.py": AUTOTUNED, "nki_ops.py": NKI, "plain.py": "def helper():\n    pass\n"})
    uri = s.open("kernels.py")
    (sym,) = await s.client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert sym.name == "add_kernel" and "autotuned (2 configs)" in sym.detail
    assert [(c.name, c.kind) for c in sym.children][-1] == ("BLOCK", types.SymbolKind.Constant)
    assert sym.selection_range.start.line == AUTOTUNED.splitlines().index(
        "def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):")
    found = await s.client.workspace_symbol_async(types.WorkspaceSymbolParams(query="add_kernel"))
    assert sorted((f.name, f.container_name) for f in found) == [
        ("add_kernel", "Triton kernel · autotuned (2 configs)"), ("add_kernel_nki", "NKI kernel (current API)")]


async def test_configuration_keys_left_out_keep_initialization_options(start):
    s = await start({"kernels.py": TYPO}, options={"ignore": ["TR007"]}, configuration={"severity": {"TR": "hint"}})
    uri = s.open("kernels.py")
    assert await s.diagnostics(uri) == []  # ignore from initializationOptions still applies
    status = await s.command("kernel-lsp.status")
    assert status["ready"]


async def test_a_workspace_cannot_point_the_assistant_elsewhere(start):
    # workspace/configuration is what a repository can supply (.vscode/settings.json, .dir-locals.el).
    s = await start({"kernels.py": TYPO}, options={"assistantBaseUrl": "https://gateway.example.com"},
                    configuration={"assistantBaseUrl": "http://attacker.example", "ignore": ["TR007"]})
    uri = s.open("kernels.py")
    assert await s.diagnostics(uri) == []  # the workspace's other settings apply
    await wait_for(lambda: any("assistantBaseUrl" in m.message for m in s.client.messages))
    (message,) = [m for m in s.client.messages if "assistantBaseUrl" in m.message]
    assert "was ignored" in message.message and "user-level" in message.message
