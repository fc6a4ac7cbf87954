"""Generated documentation and the VS Code extension's generated manifest must match their single definitions."""

import dataclasses
import json

import pytest

from kernel_lsp import docs
from kernel_lsp.commands import COMMANDS
from kernel_lsp.docs import GENERATED, VSCODE_PACKAGE, stale, vscode_package
from kernel_lsp.settings import SETTINGS


def test_generated_docs_are_current():
    assert stale() == [], "run `python -m kernel_lsp.docs` and commit the result"


def test_every_rule_and_setting_is_documented():
    rules = GENERATED["rules.md"]()
    from analyzers.rules import RULES

    for code in RULES:
        assert f"### {code}" in rules
    config = GENERATED["configuration.md"]()
    for s in SETTINGS:
        assert f"`{s.key}`" in config


def test_vscode_manifest_has_every_setting_and_command():
    pkg = json.loads(VSCODE_PACKAGE.read_text())
    generated = next(s for s in pkg["contributes"]["configuration"] if s["id"] == docs.VSCODE_SETTINGS_ID)
    assert list(generated["properties"]) == [f"kernelLsp.{s.key}" for s in SETTINGS]
    assert generated["properties"]["kernelLsp.compile"]["enum"] == ["open", "workspace", "off"]
    palette = {c["command"]: c["title"] for c in pkg["contributes"]["commands"]}
    for c in COMMANDS:
        assert palette[docs.vscode_command_id(c)] == c.title
        assert f"onCommand:{docs.vscode_command_id(c)}" in pkg["activationEvents"]
    assert [c["server"] for c in pkg["kernelLsp"]["serverCommands"]] == [c.name for c in COMMANDS]


def test_regenerating_keeps_the_extension_own_parts_and_drops_removed_commands(monkeypatch):
    pkg = json.loads(VSCODE_PACKAGE.read_text())
    own_settings = [s for s in pkg["contributes"]["configuration"] if s["id"] != docs.VSCODE_SETTINGS_ID]
    own_commands = [c for c in pkg["contributes"]["commands"]
                    if c["command"] not in {x["command"] for x in pkg["kernelLsp"]["serverCommands"]}]
    assert own_settings and own_commands
    monkeypatch.setattr(docs, "COMMANDS", COMMANDS[:1])  # a command removed from the server
    out = vscode_package(pkg)
    assert [c["command"] for c in out["contributes"]["commands"]] == \
        [docs.vscode_command_id(COMMANDS[0])] + [c["command"] for c in own_commands]
    assert out["contributes"]["configuration"][1:] == own_settings
    assert vscode_package(out) == out


def test_a_command_argument_the_extension_cannot_send_is_refused():
    odd = dataclasses.replace(COMMANDS[0], argument="selection")
    with pytest.raises(ValueError, match="cannot send a 'selection' argument"):
        docs.vscode_command_id(odd)
