"""End-to-end server tests: a real LSP client (pytest-lsp) talking to `kernel-lsp serve` over stdio."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from tests.slow import scaled

# Recorded capabilities of real editors: Neovim 0.11 pulls diagnostics (without refresh support), this VS Code
# profile gets them pushed; "refresh" is Neovim's profile plus workspace/diagnostic/refresh support, as current
# VS Code language clients have.
PROFILES = {"neovim": "neovim@v0.11.0", "vscode": "visual-studio-code", "refresh": "neovim@v0.11.0"}


def capabilities(profile: str) -> types.ClientCapabilities:
    caps = client_capabilities(PROFILES[profile])
    if profile == "refresh":
        caps.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return caps


def _on_publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.pushed_versions[params.uri] = params.version  # type: ignore[attr-defined]
    client.publish_count += 1  # type: ignore[attr-defined]


def _on_apply_edit(client: LanguageClient, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
    client.applied_edits.append(params)  # type: ignore[attr-defined]
    return types.ApplyWorkspaceEditResult(applied=True)


def _on_inlay_hint_refresh(client: LanguageClient, params: None) -> None:
    client.inlay_hint_refreshes += 1  # type: ignore[attr-defined]


def _on_code_lens_refresh(client: LanguageClient, params: None) -> None:
    client.code_lens_refreshes += 1  # type: ignore[attr-defined]


def _on_show_document(client: LanguageClient, params: types.ShowDocumentParams) -> types.ShowDocumentResult:
    client.shown_documents.append(params)  # type: ignore[attr-defined]
    return types.ShowDocumentResult(success=True)


def _on_show_message_request(client: LanguageClient,
                             params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
    """Records the question; answers with `client.answer_questions` (an action title) or dismisses it."""
    client.questions.append(params)  # type: ignore[attr-defined]
    title = client.answer_questions  # type: ignore[attr-defined]
    return types.MessageActionItem(title=title) if title else None


def make_client() -> LanguageClient:
    """pytest-lsp's test client, also recording the version of each pushed diagnostics set and applied edits."""
    client = LanguageClient(converter_factory=default_converter)
    client.pushed_versions = {}  # type: ignore[attr-defined]
    client.publish_count = 0  # type: ignore[attr-defined]
    client.applied_edits = []  # type: ignore[attr-defined]
    client.inlay_hint_refreshes = 0  # type: ignore[attr-defined]
    client.code_lens_refreshes = 0  # type: ignore[attr-defined]
    client.shown_documents = []  # type: ignore[attr-defined]
    client.questions = []  # type: ignore[attr-defined]
    client.answer_questions = None  # type: ignore[attr-defined]
    register_lsp_features(client, {
        **DEFAULT_CLIENT_FEATURES,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _on_publish,
        types.WORKSPACE_APPLY_EDIT: _on_apply_edit,
        types.WORKSPACE_INLAY_HINT_REFRESH: _on_inlay_hint_refresh,
        types.WORKSPACE_CODE_LENS_REFRESH: _on_code_lens_refresh,
        types.WINDOW_SHOW_DOCUMENT: _on_show_document,
        types.WINDOW_SHOW_MESSAGE_REQUEST: _on_show_message_request,
    })
    return client


SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "kernel_lsp", "serve"], client_factory=make_client)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


class Session:
    """A test's view of one client session on a workspace folder."""

    def __init__(self, client: LanguageClient, profile: str, root: Path):
        self.client = client
        self.profile = profile
        self.root = root
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}
        self.encoding = "utf-16"

    @property
    def refreshable(self) -> bool:
        caps = self.client.capabilities
        return bool(self.pulls and caps and caps.workspace and caps.workspace.diagnostics
                    and caps.workspace.diagnostics.refresh_support)

    @property
    def pulls(self) -> bool:
        caps = self.client.capabilities
        return bool(caps and caps.text_document and caps.text_document.diagnostic)

    def uri(self, name: str) -> str:
        return (self.root / name).as_uri()

    def open(self, name: str, text: str | None = None, language: str = "python") -> str:
        uri = self.uri(name)
        if text is None:
            text = (self.root / name).read_text()
        self.versions[uri] = 1
        self.texts[uri] = text
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))
        return uri

    def replace(self, uri: str, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        """An incremental change, as editors send while typing."""
        self.versions[uri] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(*start), types.Position(*end)), text=text)],
        ))

    def set_text(self, uri: str, text: str) -> None:
        self.versions[uri] += 1
        self.texts[uri] = text
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        ))

    async def diagnostics(self, uri: str, timeout: float = 5.0) -> list[types.Diagnostic]:
        """The diagnostics the editor would show for an open document's current version."""
        if self.pulls:
            report = await self.client.text_document_diagnostic_async(
                types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri)))
            return list(report.items)
        version = self.versions.get(uri)
        await wait_for(lambda: uri in self.client.diagnostics and self._pushed_version(uri) == version, timeout)
        return list(self.client.diagnostics[uri])

    def _pushed_version(self, uri: str) -> Any:
        return getattr(self.client, "pushed_versions", {}).get(uri)

    async def workspace_diagnostics(self) -> dict[str, list[types.Diagnostic]]:
        report = await self.client.workspace_diagnostic_async(types.WorkspaceDiagnosticParams(previous_result_ids=[]))
        return {item.uri: list(item.items) for item in report.items if hasattr(item, "items")}

    async def command(self, name: str, *args: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=list(args)))

    async def lenses(self, uri: str) -> list[types.CodeLens]:
        return await self.client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=uri))) or []


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


async def until(what: Callable[[], Any], condition: Callable[[Any], bool], timeout: float = 90.0,
                interval: float = 0.1) -> Any:
    """Ask `what()` (a coroutine function) again until `condition` holds of its answer; returns that answer."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        value = await what()
        if condition(value):
            return value
        assert time.monotonic() < deadline, value
        await asyncio.sleep(interval)


@pytest.fixture(params=sorted(PROFILES))
def profile(request) -> str:
    return request.param


@pytest.fixture
def start(client: LanguageClient, profile: str, tmp_path: Path):
    """start(files, options) writes the workspace, initializes the session, and returns a Session."""

    async def _start(files: dict[str, str | bytes] | None = None, options: Any = None,
                     configuration: Any = None) -> Session:
        for name, content in (files or {}).items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        if configuration is not None:
            client.set_configuration(configuration, section="kernelLsp")
        # Background compiles are tested on their own (test_compile.py); elsewhere they would only add load.
        options = {"compile": "off", **(options or {})}
        result = await client.initialize_session(types.InitializeParams(
            capabilities=capabilities(profile),
            root_uri=tmp_path.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
            initialization_options=options,
        ))
        session = Session(client, profile, tmp_path)
        session.encoding = str(result.capabilities.position_encoding or "utf-16")
        await wait_for_indexed(session)
        return session

    return _start


async def wait_for_indexed(session: Session, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + scaled(timeout)
    while True:
        status = await session.command("kernel-lsp.status")
        if not status["indexing"] and status["queued"] == 0 and status["completedJobs"] >= 0 and status.get("ready"):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"server did not finish indexing: {status}")
        await asyncio.sleep(0.05)
