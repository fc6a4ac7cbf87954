"""Show IR's documents name the user's file and lines, not the module the compile ran on."""

from __future__ import annotations

import re

import pytest

from kernel_lsp.engine.compile.irmap import relabel, source_lines_of_ir

from .test_irmap import EXAMPLE, LOAD, compiled  # noqa: F401 - the module fixture compiles once

pytest.importorskip("triton")

USER = str(EXAMPLE)


@pytest.mark.parametrize("target,stages", [("sm_90", ("ttir", "ttgir", "llir", "ptx")),
                                           ("gfx942", ("ttir", "ttgir", "llir", "amdgcn"))])
def test_ir_names_the_users_file_and_lines(compiled, target, stages) -> None:  # noqa: F811
    job, result = compiled[target]
    for stage in stages:
        text = result.asm[stage]
        out = relabel(stage, text, job, USER)
        assert len(out.splitlines()) == len(text.splitlines()), stage
        assert "kernel-lsp-" not in out and f"_{job.key[:12]}.py" not in out, stage
        assert "vector_add.py" in out, stage
        # Each IR line that comes from the load names the load's line (1-based) in the user's file.
        lines = out.splitlines()
        from_load = [i for i, users in source_lines_of_ir(stage, text, job).items() if users == [LOAD]]
        assert from_load, stage
        if stage in ("ttir", "ttgir"):
            assert all(f'vector_add.py":{LOAD + 1}:' in lines[i] or "loc(#loc" in lines[i] for i in from_load)
            assert re.search(rf'vector_add\.py":{LOAD + 1}:\d+', out), stage
        elif stage in ("ptx", "amdgcn"):
            assert re.search(rf"^\s*\.loc\s+\d+\s+{LOAD + 1}\s", out, re.MULTILINE), stage
        else:
            assert re.search(rf"line: {LOAD + 1}\b", out), stage
