"""Show IR's line mapping on real compiler output: vector_add for sm_90 and gfx942, every IR stage."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from analyzers.analyze import analyze_source
from kernel_lsp.engine.compile.irmap import ir_lines_for, source_lines_of_ir
from kernel_lsp.engine.compile.specialize import plan_jobs

from .pool import compile_all

pytest.importorskip("triton")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"
TEXT = EXAMPLE.read_text()
LINES = TEXT.splitlines()
LOAD = LINES.index("    x = tl.load(x_ptr + offsets, mask=in_bounds)")
STORE = LINES.index("    tl.store(out_ptr + offsets, x + y, mask=in_bounds)")
OUTSIDE = LINES.index("def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    sites = [(s, TEXT) for s in analyze_source(TEXT).launch_sites]
    jobs = {t: plan_jobs(TEXT, "add_kernel", [t], path=str(EXAMPLE), launch_sites=sites)[0]
            for t in ("sm_90", "gfx942")}
    results, _ = compile_all(jobs, str(tmp_path_factory.mktemp("triton-cache")))
    assert all(r.ok for r in results.values()), {t: r.error for t, r in results.items()}
    return {t: (jobs[t], results[t]) for t in jobs}


@pytest.mark.parametrize("target,stages", [("sm_90", ("ttir", "ttgir", "llir", "ptx")),
                                           ("gfx942", ("ttir", "ttgir", "llir", "amdgcn"))])
def test_load_line_maps_both_ways(compiled, target, stages) -> None:
    job, result = compiled[target]
    for stage in stages:
        text = result.asm[stage]
        mapping = source_lines_of_ir(stage, text, job)
        lines = ir_lines_for(stage, text, job, LOAD)
        assert lines, (target, stage)
        assert all(LOAD in mapping[i] for i in lines)
        assert ir_lines_for(stage, text, job, STORE), (target, stage)
        # every mapped line points into the kernel, never at the module's own import lines or outside the kernel
        used = {u for users in mapping.values() for u in users}
        assert used and all(LINES.index("def add_kernel(") <= u <= STORE for u in used), (target, stage, used)
        assert ir_lines_for(stage, text, job, OUTSIDE) == []
    if target == "sm_90":
        ir = result.asm["ttgir"].splitlines()
        assert any("tt.load" in ir[i] for i in ir_lines_for("ttgir", result.asm["ttgir"], job, LOAD))
        ptx = result.asm["ptx"].splitlines()
        assert any("ld.global" in ptx[i] for i in ir_lines_for("ptx", result.asm["ptx"], job, LOAD))


def test_lines_follow_the_line_map(compiled) -> None:
    """A kernel moved down the file (a cached result served to it) maps to its new lines."""
    job, result = compiled["sm_90"]
    moved = replace(job, line_map=tuple(n + 5 if n else 0 for n in job.line_map))
    text = result.asm["ttgir"]
    assert ir_lines_for("ttgir", text, moved, LOAD + 5) == ir_lines_for("ttgir", text, job, LOAD)
    assert ir_lines_for("ttgir", text, moved, LOAD) != ir_lines_for("ttgir", text, job, LOAD)


def test_inline_asm_blocks_belong_to_the_location_before_them(compiled) -> None:
    job, result = compiled["sm_90"]
    ptx = result.asm["ptx"]
    lines = ptx.splitlines()
    mapping = source_lines_of_ir("ptx", ptx, job)
    blocks, start = [], None
    for i, line in enumerate(lines):
        if line.strip().startswith("// begin inline asm"):
            start = i
        elif line.strip().startswith("// end inline asm") and start is not None:
            blocks.append((start, i))
    # The loads are inline asm. With triton 3.9 their own `.loc` lines count on from the load's line (16 9,
    # 17 9, 18 9 ...; triton 3.6 emits none there): they must not make the load's instructions look like they
    # came from the lines below it.
    assert blocks
    for s, e in blocks:
        before = mapping.get(s - 1)
        for i in range(s, e + 1):
            assert mapping.get(i) == before, (i, lines[i])
    load_block = next((s, e) for s, e in blocks if mapping.get(s) == [LOAD])
    assert any("ld.global" in lines[i] for i in range(*load_block))


def test_synthetic_locations() -> None:
    """Inline MLIR locations, callsite/fused nesting, LLVM inlinedAt and locations in other files."""
    job = replace(_fake_job(), line_map=(0, 0, 10, 11, 12, 13))  # module lines 3..6 -> user lines 10..13
    mod = "/tmp/kernel-lsp-x/m_abcdef123456.py"
    mlir = "\n".join([
        f'  %0 = arith.constant 1 : i32 loc("{mod}":3:5)',
        '  %1 = arith.addi %0, %0 : i32 loc(#loc2)',
        '  %2 = tt.foo : i32 loc(#loc4)',
        '  %3 = tt.bar : i32 loc("/usr/lib/triton/language/standard.py":40:1)',
        f'#loc1 = loc("{mod}":4:1)',
        '#loc2 = loc("y"(#loc1))',
        '#loc3 = loc("/usr/lib/triton/language/standard.py":50:3)',
        '#loc4 = loc(callsite(#loc3 at #loc5))',
        f'#loc5 = loc(fused[#loc1, "{mod}":6:2])',
    ])
    assert source_lines_of_ir("ttgir", mlir, job) == {0: [9], 1: [10], 2: [10, 12]}
    llvm = "\n".join([
        "  %5 = add i32 %3, %4, !dbg !10",
        "  %6 = add i32 %3, %4, !dbg !11",
        '!1 = !DIFile(filename: "m_abcdef123456.py", directory: "/tmp/kernel-lsp-x")',
        '!2 = !DIFile(filename: "standard.py", directory: "/usr/lib/triton/language")',
        "!3 = distinct !DISubprogram(name: \"k\", scope: !1, file: !1, line: 3, unit: !0)",
        "!4 = distinct !DISubprogram(name: \"sum\", scope: !2, file: !2, line: 90, unit: !0)",
        "!10 = !DILocation(line: 5, column: 3, scope: !3)",
        "!11 = !DILocation(line: 95, column: 3, scope: !4, inlinedAt: !10)",
    ])
    assert source_lines_of_ir("llir", llvm, job) == {0: [11], 1: [11]}
    ptx = "\n".join([
        ".visible .entry k(", "{", "\t.loc\t1 3 0", "\tmov.u32 %r1, 0;", "\t.loc\t2 7 0", "\tadd.s32 %r2, 1;",
        "\t.loc\t1 4 1", "\t// begin inline asm", "\t.loc\t1 5 1", "\tld.global.b32 %r3, [%rd1];",
        "\t// end inline asm", "\tret;", "}", "\t.file\t1 \"/tmp/kernel-lsp-x/m_abcdef123456.py\"",
        "\t.file\t2 \"/usr/lib/triton/language/standard.py\"",
    ])
    assert source_lines_of_ir("ptx", ptx, job) == {2: [9], 3: [9], 6: [10], 7: [10], 8: [10], 9: [10], 10: [10],
                                                 11: [10]}
    sass = "\n".join([
        "//--------------------- .text.k --------------------------",
        "k:",
        f'\t//## File "{mod}", line 4',
        "        /*0000*/                   LDC R1, c[0x0][0x28] ;",
        '\t//## File "/site-packages/triton/language/core.py", line 40',
        "        /*0010*/                   S2R R0, SR_TID.X ;",
        f'\t//## File "{mod}", line 5',
        "        /*0020*/              @!P0 LDG.E.128 R16, desc[UR4][R2.64] ;",
        "        /*0030*/                   EXIT ;",
        "//--------------------- .nv.info --------------------------",
        "        /*0000*/ .byte 0x04",
    ])
    assert source_lines_of_ir("sass", sass, job) == {3: [10], 7: [11], 8: [11]}
    with pytest.raises(ValueError):
        source_lines_of_ir("cuda", "", job)


def _fake_job():
    from kernel_lsp.engine.compile.jobs import CompileJob, Target

    return CompileJob(path="/ws/m.py", kernel="k", module_source="", line_map=(), signature=(), constexprs=(),
                      attrs=(), target=Target("sm_90", "cuda", 90, 32), key="abcdef1234567890")
