"""Language features through a real client: API completion, signature help and hover docs read from the installed
triton; definition, references and rename between kernels, helpers and launch sites; semantic tokens."""

from __future__ import annotations

import pytest
from lsprotocol import types

from .conftest import until

pytest.importorskip("triton")  # the API docs come from the installed package

KERNELS = '''import triton
import triton.language as tl


@triton.jit
def helper(x, BLOCK: tl.constexpr):
    return x * BLOCK


@triton.autotune(configs=[triton.Config({'BLOCK': 64}, num_warps=4), triton.Config({"BLOCK": 128})], key=['n'])
@triton.jit
def add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, helper(x, BLOCK=BLOCK), mask=offs < n)


@triton.jit
def scale_kernel(x_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)
'''

LAUNCHER = '''import torch
from pkg.kernels import add_kernel, scale_kernel
from pkg import kernels


def add(x):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, out, x.numel())
    kernels.add_kernel[(1,)](x, out, x.numel())
    scale_kernel[(1,)](out, out.numel(), SCALE=2, BLOCK=256)
    return out
'''

FILES = {"pkg/__init__.py": "", "pkg/kernels.py": KERNELS, "launch.py": LAUNCHER}
K_LINES = KERNELS.splitlines()
L_LINES = LAUNCHER.splitlines()


def at(lines: list[str], needle: str, occurrence: int = 0, offset: int = 0) -> types.Position:
    """The position of the `occurrence`-th `needle` in the text (ASCII: every encoding counts the same)."""
    seen = 0
    for i, line in enumerate(lines):
        col = line.find(needle)
        while col >= 0:
            if seen == occurrence:
                return types.Position(i, col + offset)
            seen += 1
            col = line.find(needle, col + 1)
    raise AssertionError(needle)


def doc(s, name: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=s.uri(name))


async def test_completion_signature_help_and_hover_come_from_the_installed_triton(start):
    import triton

    s = await start(FILES)
    text = KERNELS.replace("    x = tl.load(", "    y = tl.\n    x = tl.load(")
    s.open("pkg/kernels.py", text)
    lines = text.splitlines()
    where = at(lines, "y = tl.", offset=len("y = tl."))
    got = await s.client.text_document_completion_async(types.CompletionParams(text_document=doc(s, "pkg/kernels.py"),
                                                                               position=where))
    items = {i.label: i for i in got.items}
    assert {"load", "store", "program_id", "arange", "dot", "constexpr"} <= set(items)
    assert items["load"].kind == types.CompletionItemKind.Function
    assert items["load"].detail.startswith("load(pointer, mask=None")
    assert f"triton {triton.__version__}" in items["load"].documentation.value
    assert "_semantic" not in items["load"].detail and "_builder" not in items["load"].detail

    help_ = await s.client.text_document_signature_help_async(types.SignatureHelpParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(lines, "mask=offs", offset=len("mask="))))
    sig = help_.signatures[0]
    assert sig.label.startswith("load(pointer, mask=None")
    a, b = sig.parameters[help_.active_parameter].label
    assert sig.label[a:b] == "mask=None"

    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(lines, "tl.load", offset=4)))
    assert hover is not None and "triton.language.load(pointer" in hover.contents.value
    assert "loaded from memory" in hover.contents.value  # the docstring itself


async def test_signature_help_at_a_launch_shows_the_kernels_parameters(start):
    s = await start(FILES)
    text = LAUNCHER.replace("    return out", "    scale_kernel[(2,)](out, n, ")
    s.open("launch.py", text)
    lines = text.splitlines()
    help_ = await s.client.text_document_signature_help_async(types.SignatureHelpParams(
        text_document=doc(s, "launch.py"), position=types.Position(len(lines) - 1, len(lines[-1]))))
    sig = help_.signatures[0]
    assert sig.label == "scale_kernel[grid](x_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr)"
    a, b = sig.parameters[help_.active_parameter].label
    assert sig.label[a:b] == "SCALE: tl.constexpr"
    assert "compile-time constant" in sig.parameters[help_.active_parameter].documentation.value

    autotuned = await s.client.text_document_signature_help_async(types.SignatureHelpParams(
        text_document=doc(s, "launch.py"), position=at(lines, "add_kernel[(1,)](x", offset=len("add_kernel[(1,)]("))))
    block = autotuned.signatures[0].parameters[-1]
    assert "autotune" in block.documentation.value and autotuned.active_parameter == 0


async def test_definition_and_references_link_kernels_helpers_and_launches(start):
    s = await start(FILES)
    s.open("launch.py")
    found = await s.client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(s, "launch.py"), position=at(L_LINES, "kernels.add_kernel", offset=10)))
    assert [(loc.uri, loc.range.start.line) for loc in found] == [(s.uri("pkg/kernels.py"),
                                                                   at(K_LINES, "def add_kernel").line)]
    keyword = await s.client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(s, "launch.py"), position=at(L_LINES, "SCALE=2")))
    assert keyword[0].range.start == at(K_LINES, "SCALE: tl")

    helper = await s.client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(K_LINES, "helper(x, BLOCK=BLOCK)", offset=2)))
    assert helper[0].range.start == at(K_LINES, "helper(x, BLOCK: tl", offset=0)

    refs = await s.client.text_document_references_async(types.ReferenceParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(K_LINES, "def add_kernel", offset=6),
        context=types.ReferenceContext(include_declaration=True)))
    assert sorted((r.uri.rsplit("/", 1)[-1], r.range.start.line) for r in refs) == [
        ("kernels.py", at(K_LINES, "def add_kernel").line),
        ("launch.py", 1), ("launch.py", at(L_LINES, "add_kernel[").line),
        ("launch.py", at(L_LINES, "kernels.add_kernel[").line)]


async def test_references_follow_a_closed_file_that_changes_on_disk(start):
    """A closed file's imports are read once per analysis of it: a change on disk is seen at the next request."""
    s = await start({**FILES, "other.py": "from pkg.kernels import add_kernel\n"})
    s.open("pkg/kernels.py")

    async def referencing_files() -> set[str]:
        refs = await s.client.text_document_references_async(types.ReferenceParams(
            text_document=doc(s, "pkg/kernels.py"), position=at(K_LINES, "def add_kernel", offset=6),
            context=types.ReferenceContext(include_declaration=False)))
        return {r.uri.rsplit("/", 1)[-1] for r in refs or []}

    assert await until(referencing_files, lambda files: "other.py" in files) == {"launch.py", "other.py"}
    assert await referencing_files() == {"launch.py", "other.py"}  # the same answer from what was read once
    (s.root / "other.py").write_text("from pkg.kernels import scale_kernel\n")
    assert await until(referencing_files, lambda files: "other.py" not in files) == {"launch.py"}
    (s.root / "other.py").write_text("import pkg.kernels\nfrom pkg.kernels import add_kernel as k\n")
    assert await until(referencing_files, lambda files: "other.py" in files) == {"launch.py", "other.py"}


async def test_rename_a_constexpr_parameter_updates_configs_and_launch_keywords(start):
    s = await start(FILES)
    s.open("pkg/kernels.py")
    edit = await s.client.text_document_rename_async(types.RenameParams(
        text_document=doc(s, "launch.py"), position=at(L_LINES, "BLOCK=256"), new_name="TILE"))
    by_file = {c.text_document.uri.rsplit("/", 1)[-1]: c for c in edit.document_changes}
    assert by_file["kernels.py"].text_document.version == 1  # the open document's version
    assert by_file["launch.py"].text_document.version is None  # a file on disk
    assert [(e.range.start.line, e.range.start.character) for e in by_file["launch.py"].edits] == [
        (at(L_LINES, "BLOCK=256").line, at(L_LINES, "BLOCK=256").character)]
    kernel_edits = {(e.range.start.line, e.range.start.character) for e in by_file["kernels.py"].edits}
    scale = at(K_LINES, "def scale_kernel").line
    assert all(line >= scale for line, _ in kernel_edits)  # add_kernel's BLOCK is another parameter
    assert len(kernel_edits) == 3  # the parameter and its 2 uses in scale_kernel's body

    edit = await s.client.text_document_rename_async(types.RenameParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(K_LINES, "pid * BLOCK", offset=6), new_name="TILE"))
    changed = {c.text_document.uri.rsplit("/", 1)[-1]: c.edits for c in edit.document_changes}
    assert set(changed) == {"kernels.py"}  # no launch passes add_kernel's BLOCK: the autotuner does
    new = apply(KERNELS, changed["kernels.py"])
    assert "triton.Config({'TILE': 64}, num_warps=4), triton.Config({\"TILE\": 128})" in new
    assert "def add_kernel(x_ptr, out_ptr, n, TILE: tl.constexpr):" in new
    assert "helper(x, BLOCK=TILE)" in new  # the helper's own parameter keeps its name
    assert "def helper(x, BLOCK: tl.constexpr):" in new and "key=['n']" in new

    edit = await s.client.text_document_rename_async(types.RenameParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(K_LINES, "def add_kernel", offset=6),
        new_name="vector_add"))
    changed = {c.text_document.uri.rsplit("/", 1)[-1]: c.edits for c in edit.document_changes}
    assert "from pkg.kernels import vector_add, scale_kernel" in apply(LAUNCHER, changed["launch.py"])
    assert "kernels.vector_add[(1,)]" in apply(LAUNCHER, changed["launch.py"])
    assert "def vector_add(" in apply(KERNELS, changed["kernels.py"])


async def test_rename_says_what_it_cannot_do(start):
    s = await start(FILES)
    s.open("pkg/kernels.py")
    nothing = await s.client.text_document_prepare_rename_async(types.PrepareRenameParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(K_LINES, "tl.store")))
    assert nothing is None  # not a kernel or a kernel parameter
    ready = await s.client.text_document_prepare_rename_async(types.PrepareRenameParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(K_LINES, "pid * BLOCK", offset=7)))
    assert ready.placeholder == "BLOCK" and ready.range.start == at(K_LINES, "pid * BLOCK", offset=6)
    with pytest.raises(Exception, match="not a Python identifier"):
        await s.client.text_document_rename_async(types.RenameParams(
            text_document=doc(s, "pkg/kernels.py"), position=at(K_LINES, "pid * BLOCK", offset=7), new_name="2x"))
    status = await s.command("kernel-lsp.status")  # the server carries on
    assert status["indexed"]["files"] == 3


def apply(text: str, edits: list[types.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        assert e.range.start.line == e.range.end.line
        line = lines[e.range.start.line]
        lines[e.range.start.line] = line[:e.range.start.character] + e.new_text + line[e.range.end.character:]
    return "".join(lines)


async def test_semantic_tokens_mark_constexprs_and_program_id_values(start):
    s = await start(FILES)
    s.open("pkg/kernels.py")
    result = await until(lambda: s.client.text_document_semantic_tokens_full_async(
        types.SemanticTokensParams(text_document=doc(s, "pkg/kernels.py"))), lambda r: bool(r.data), timeout=10)
    data, line, col, tokens = result.data, 0, 0, []
    for i in range(0, len(data), 5):
        dl, dc, length, kind, mods = data[i:i + 5]
        line, col = line + dl, (col + dc if dl == 0 else dc)
        tokens.append((K_LINES[line][col:col + length], line, kind, mods))
    pid_line = at(K_LINES, "pid = tl.program_id").line
    offs_line = pid_line + 1
    names = {(text, line) for text, line, _, _ in tokens}
    assert ("pid", pid_line) in names and ("offs", offs_line) in names and ("pid", offs_line) in names
    assert ("BLOCK", offs_line) in names  # a constexpr in use
    assert ("x", offs_line + 1) not in names  # loaded data is not where the program is
    kinds = {text: kind for text, _, kind, _ in tokens}
    assert kinds["BLOCK"] == 0 and kinds["pid"] == 1  # parameter / variable

    scale = at(K_LINES, "def scale_kernel").line
    visible = await s.client.text_document_semantic_tokens_range_async(types.SemanticTokensRangeParams(
        text_document=doc(s, "pkg/kernels.py"), range=types.Range(types.Position(scale, 0),
                                                                   types.Position(len(K_LINES), 0))))
    assert visible.data and visible.data[0] == scale  # the first token is on scale_kernel's def line
    assert len(visible.data) < len(result.data)
