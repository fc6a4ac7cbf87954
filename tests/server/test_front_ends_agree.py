"""The editor shows what the Python API (and so the command line and the MCP server) reports: the static findings of
every bundled example, and a file's compile problems, registers and hover table, read from a real LSP session and
compared with `Workspace.analyze` and `Workspace.compile` on the same files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lsprotocol import types

from kernel_lsp.api import Finding, Workspace
from kernel_lsp.settings import parse_settings

from .conftest import until
from .test_compile import BROKEN, OPTIONS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEVERITY = {types.DiagnosticSeverity.Error: "error", types.DiagnosticSeverity.Warning: "warning",
            types.DiagnosticSeverity.Information: "information", types.DiagnosticSeverity.Hint: "hint"}


def seen_in_editor(d: types.Diagnostic) -> tuple:
    r = d.range
    return (d.code, SEVERITY[d.severity], r.start.line + 1, r.start.character + 1, r.end.line + 1,
            r.end.character + 1, d.message)


def seen_by_api(f: Finding) -> tuple:
    return (f.code, f.severity, f.line, f.column, f.end_line, f.end_column, f.message)


@pytest.fixture(params=["vscode", "neovim"])
def profile(request) -> str:  # pulled, and pushed
    return request.param


async def test_static_findings_of_every_example_match_analyze(start, tmp_path):
    names = sorted(p.name for p in EXAMPLES.glob("*.py"))
    s = await start({name: (EXAMPLES / name).read_text() for name in names}, options={"checks": "off"})
    compared = []
    with Workspace(tmp_path) as ws:
        for name in names:
            uri = s.open(name)
            editor = sorted(seen_in_editor(d) for d in await s.diagnostics(uri))
            api = sorted(seen_by_api(f) for f in ws.analyze(path=name).findings)
            assert editor == api, name
            compared += api
    # Not a comparison of empty lists: one example is written to be wrong (5 errors, 3 warnings).
    assert sum(severity == "error" for _, severity, *_ in compared) >= 5, compared


async def test_compile_problems_and_registers_match_compile(start, tmp_path):
    s = await start({"kernels.py": BROKEN}, options={**OPTIONS, "checks": "off"})
    uri = s.open("kernels.py")
    diags = await until(lambda: s.diagnostics(uri), lambda ds: any(d.code == "KC001" for d in ds))
    lines = BROKEN.splitlines()
    hints = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(types.Position(0, 0), types.Position(len(lines), 0))))
    by_line = {h.position.line: str(h.label) for h in hints}

    # The API takes the pins as a user writes them today: by file and kernel (the editor was given the bare form).
    pins = {f"kernels.py::{name}": values for name, values in OPTIONS["pins"].items()}
    settings, messages = parse_settings({"targets": OPTIONS["targets"], "pins": pins})
    assert not messages
    with Workspace(tmp_path, settings=settings) as ws:
        compiled = ws.compile(path="kernels.py", targets=["sm_90"])
    assert sorted(seen_in_editor(d) for d in diags if str(d.code).startswith("KC")) == \
        sorted(seen_by_api(f) for f in compiled.findings)
    for kernel in ("add_kernel", "shapes_kernel"):
        line = next(i for i, text in enumerate(lines) if text.startswith(f"def {kernel}("))
        configs = [c for c in compiled.configs if c.kernel == kernel]
        assert configs, kernel
        if all(c.ok for c in configs):
            shown = re.search(r"sm_90: (\d+) regs", by_line[line])
            assert shown and int(shown.group(1)) == max(c.registers or 0 for c in configs), by_line[line]
        else:
            assert by_line[line] == "sm_90: compile failed"
        # The hover's table: a row per configuration compile reports, with its figures.
        hover = await s.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, 6)))
        rows = [r for r in hover.contents.value.splitlines() if r.startswith("| sm_90 |")]
        assert len(rows) == len(configs), hover.contents.value
        for row, c in zip(rows, configs):
            if c.ok:
                assert row.startswith(f"| sm_90 | {c.config} | {c.registers} | ") and \
                    f" | {c.num_warps} | {c.num_stages} | " in row, (row, c)
            else:
                assert row.startswith(f"| sm_90 | {c.config} | compile failed: {c.error.splitlines()[0]}"), (row, c)
