"""The table of what "Optimize tiling" tried reaches the editor: in the edit's change annotation (the Neovim
plugin's preview shows it) and as a markdown document opened beside VS Code's refactor preview."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from .conftest import until

pytest.importorskip("torch")
pytest.importorskip("triton")

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "vector_add.py").read_text()
# A block size the launch grid does not tie (the grid reads it from the launch's meta-parameters), started small:
# the model ranks other tilings above it, so the search proposes a change.
UNTIED = EXAMPLE.replace('''    grid = (triton.cdiv(n, block_size),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size, num_warps=4)''', '''    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=64, num_warps=4)''')
KERNEL_LINE = EXAMPLE.splitlines().index("def add_kernel(")
OPTIONS = {"checkDevice": "interpreter", "targets": ["sm_90"]}


@pytest.fixture(params=["vscode"])
def profile(request) -> str:
    return request.param


@pytest.mark.timeout(900)
async def test_the_tiling_table_reaches_the_preview_and_a_document(start):
    assert UNTIED != EXAMPLE
    s = await start({"vector_add.py": UNTIED}, options=OPTIONS)
    uri = s.open("vector_add.py")
    answer = await s.command("kernel-lsp.optimizeTiling", {"uri": uri, "line": KERNEL_LINE, "character": 0})
    assert "proposal" in answer, answer
    table = answer["proposal"]["table"]
    assert table[0] == ["configuration", "estimated", "measured", "note"] and len(table) > 2
    labels = [row[0] for row in table[1:]]
    assert all(label.startswith("BLOCK_SIZE=") for label in labels), labels

    # The preview: the edit sent as workspace/applyEdit carries the table under the summary in its annotation.
    assert answer["delivered"] == "applyEdit"
    await until(lambda: asyncio.sleep(0, s.client.applied_edits), lambda edits: edits)
    annotation = s.client.applied_edits[-1].edit.change_annotations["kernel-lsp.proposal"]
    assert annotation.description.startswith(answer["proposal"]["summary"])
    described = annotation.description.splitlines()
    assert described[2].split() == ["configuration", "estimated", "measured", "note"]
    assert [line for line in described[3:] if line.strip()] and all(
        any(line.startswith(label) for line in described[3:]) for label in labels)

    # The document: one markdown row per configuration tried, opened beside the preview without taking focus.
    doc_uri = answer["tableDocument"]
    path = Path(doc_uri.removeprefix("file://"))
    assert path.parent == s.root / ".kernel-lsp" / "proposals" and path.suffix == ".md"
    text = path.read_text().splitlines()
    assert text[0] == "# Optimize tiling of add_kernel" and text[2] == answer["proposal"]["summary"]
    assert "| configuration | estimated | measured | note |" in text
    rows = [line for line in text if line.startswith("| BLOCK_SIZE=")]
    assert [r.split(" | ")[0].removeprefix("| ") for r in rows] == labels
    shown = await until(lambda: asyncio.sleep(0, s.client.shown_documents),
                        lambda docs: any(d.uri == doc_uri for d in docs))
    assert [d.take_focus for d in shown if d.uri == doc_uri] == [False]
