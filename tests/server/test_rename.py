"""Renaming a kernel parameter through a real client keeps the program working: every place that names it by a
string or a keyword (grids' `meta[...]`, autotune configs, `key=`, pruners, heuristics, `**kwargs` dicts, keywords at
calls of a @jit helper) is renamed, or the rename is refused naming the places it cannot follow; references and
definition see the same places."""

from __future__ import annotations

import ast
import re

import pytest
from lsprotocol import types

from .test_language import apply, at, doc

MM = '''import triton
import triton.language as tl


def _even(args):
    return args["n"] % args["BLOCK_N"] == 0


CONFIGS = [triton.Config({"BLOCK_N": 64}, num_warps=4), triton.Config(dict(BLOCK_N=128), num_warps=8)]


def _prune(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK_N"] <= named_args["n"]]


@triton.jit
def scale(x, BLOCK_N: tl.constexpr):
    return x * BLOCK_N


@triton.autotune(configs=CONFIGS, key=["n"], prune_configs_by={"early_config_prune": _prune})
@triton.heuristics({"EVEN": _even})
@triton.jit
def row_kernel(x_ptr, n, BLOCK_N: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, scale(x, BLOCK_N=BLOCK_N), mask=offs < n)


@triton.jit
def other_kernel(x_ptr, n, BLOCK_N: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x, n):
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)
    row_kernel[grid](x, n)
    row_kernel[lambda META: (triton.cdiv(n, META['BLOCK_N']),)](x, n)
    other_kernel[(4,)](x, n, BLOCK_N=256)
'''

RUN = '''import triton
from pkg.mm import row_kernel, other_kernel


def _grid(meta):
    return (triton.cdiv(meta["n"], meta.get("BLOCK_N", 1)),)


def run(x, n):
    row_kernel[_grid](x, n)
    options = {"BLOCK_N": 64}
    options["BLOCK_N"] = 128
    other_kernel[(1,)](x, n, **options)
'''

FILES = {"pkg/__init__.py": "", "pkg/mm.py": MM, "run.py": RUN}
MM_LINES = MM.splitlines()
RUN_LINES = RUN.splitlines()


def edits_by_file(edit: types.WorkspaceEdit) -> dict[str, list[types.TextEdit]]:
    return {c.text_document.uri.rsplit("/", 1)[-1]: c.edits for c in edit.document_changes}


async def test_renaming_an_autotuned_constexpr_renames_every_string_and_keyword_that_names_it(start):
    s = await start(FILES)
    s.open("pkg/mm.py")
    # From the key in the grid lambda, as from the parameter itself.
    edit = await s.client.text_document_rename_async(types.RenameParams(
        text_document=doc(s, "pkg/mm.py"), position=at(MM_LINES, 'meta["BLOCK_N"]', offset=7), new_name="TILE_N"))
    changed = edits_by_file(edit)
    mm, run = apply(MM, changed["mm.py"]), apply(RUN, changed["run.py"])
    ast.parse(mm), ast.parse(run)
    assert 'meta["TILE_N"]' in mm and "META['TILE_N']" in mm
    assert 'triton.Config({"TILE_N": 64}' in mm and "dict(TILE_N=128)" in mm  # both spellings of a config
    assert 'c.kwargs["TILE_N"]' in mm and 'args["TILE_N"]' in mm  # the pruner and the heuristic it feeds
    assert "def row_kernel(x_ptr, n, TILE_N: tl.constexpr" in mm and "tl.arange(0, TILE_N)" in mm
    assert 'meta.get("TILE_N", 1)' in run  # a grid function in another file
    # What names other kernels' and helpers' parameters keeps its name.
    assert "scale(x, BLOCK_N=TILE_N)" in mm and "def scale(x, BLOCK_N: tl.constexpr)" in mm
    assert "def other_kernel(x_ptr, n, BLOCK_N: tl.constexpr)" in mm and "BLOCK_N=256" in mm
    assert '"BLOCK_N": 64}' in run and 'options["BLOCK_N"] = 128' in run
    assert 'meta["n"]' in run and 'key=["n"]' in mm

    # References from the parameter see the same places, and definition from a grid key lands on the parameter.
    refs = await s.client.text_document_references_async(types.ReferenceParams(
        text_document=doc(s, "pkg/mm.py"), position=at(MM_LINES, "n, BLOCK_N: tl.constexpr, EVEN", offset=3),
        context=types.ReferenceContext(include_declaration=True)))
    assert sorted((r.uri.rsplit("/", 1)[-1], r.range.start.line, r.range.start.character) for r in refs) == sorted(
        (name, e.range.start.line, e.range.start.character) for name, edits in changed.items() for e in edits)
    found = await s.client.text_document_definition_async(types.DefinitionParams(
        text_document=doc(s, "run.py"), position=at(RUN_LINES, 'get("BLOCK_N"', offset=6)))
    assert [(f.uri, f.range.start) for f in found] == [(s.uri("pkg/mm.py"),
                                                       at(MM_LINES, "BLOCK_N: tl.constexpr, EVEN"))]


async def test_renaming_a_helper_parameter_renames_its_keyword_at_calls(start):
    s = await start(FILES)
    s.open("pkg/mm.py")
    edit = await s.client.text_document_rename_async(types.RenameParams(
        text_document=doc(s, "pkg/mm.py"), position=at(MM_LINES, "def scale(x, BLOCK_N", offset=14),
        new_name="FACTOR"))
    mm = apply(MM, edits_by_file(edit)["mm.py"])
    assert "def scale(x, FACTOR: tl.constexpr):\n    return x * FACTOR" in mm
    assert "scale(x, FACTOR=BLOCK_N)" in mm  # the call's keyword, not the caller's own parameter


async def test_renaming_a_dict_passed_at_a_launch_renames_its_keys(start):
    s = await start(FILES)
    s.open("run.py")
    edit = await s.client.text_document_rename_async(types.RenameParams(
        text_document=doc(s, "pkg/mm.py"), position=at(MM_LINES, "BLOCK_N=256"), new_name="TILE"))
    run = apply(RUN, edits_by_file(edit)["run.py"])
    assert 'options = {"TILE": 64}' in run and 'options["TILE"] = 128' in run
    assert 'meta.get("BLOCK_N", 1)' in run  # row_kernel's grid


ROW_BLOCK = "n, BLOCK_N: tl.constexpr, EVEN"
OTHER_BLOCK = "n, BLOCK_N: tl.constexpr):"


@pytest.mark.parametrize("param, launcher, place, reason", [
    (ROW_BLOCK, "from pkg.mm import row_kernel\n\n\ndef go(grid, x, n):\n    row_kernel[grid](x, n)\n",
     "go.py:5", "the grid `grid` comes from outside this function"),
    (OTHER_BLOCK, "from pkg.mm import other_kernel\n\n\ndef go(x, n, **opts):\n    other_kernel[(1,)](x, n, **opts)\n",
     "go.py:5", "passes `**opts`, whose keys come from outside this function"),
    (ROW_BLOCK, "from pkg.mm import row_kernel, other_kernel\n\n\ndef go(x, n):\n"
     "    grid = lambda meta: (meta['BLOCK_N'],)\n    row_kernel[grid](x, n)\n    other_kernel[grid](x, n)\n",
     "go.py:5", "also used to launch another kernel"),
])
async def test_a_rename_it_cannot_follow_is_refused_naming_the_place(start, param, launcher, place, reason):
    s = await start({**FILES, "go.py": launcher})
    s.open("pkg/mm.py")
    position = at(MM_LINES, param, offset=3)
    with pytest.raises(Exception, match=re.escape(place) + ".*" + re.escape(reason)):
        await s.client.text_document_prepare_rename_async(types.PrepareRenameParams(
            text_document=doc(s, "pkg/mm.py"), position=position))
    with pytest.raises(Exception, match="'BLOCK_N' not renamed.*" + re.escape(place)):
        await s.client.text_document_rename_async(types.RenameParams(
            text_document=doc(s, "pkg/mm.py"), position=position, new_name="TILE"))
    status = await s.command("kernel-lsp.status")  # the server carries on
    assert status["indexed"]["files"] == 4


async def test_a_pruner_imported_from_elsewhere_refuses_the_rename(start):
    text = MM.replace("def _prune(configs, named_args, **kwargs):\n    return [c for c in configs if "
                      "c.kwargs[\"BLOCK_N\"] <= named_args[\"n\"]]\n", "from pkg.pruning import _prune\n")
    s = await start({**FILES, "pkg/mm.py": text, "pkg/pruning.py": "def _prune(configs, named_args, **kw):\n"
                                                                      "    return configs\n"})
    s.open("pkg/mm.py")
    lines = text.splitlines()
    with pytest.raises(Exception, match=r"mm\.py:\d+: the decorator of `row_kernel` uses `_prune`, imported from "
                                        r"`pkg\.pruning`"):
        await s.client.text_document_rename_async(types.RenameParams(
            text_document=doc(s, "pkg/mm.py"), position=at(lines, ROW_BLOCK, offset=3),
            new_name="TILE"))
