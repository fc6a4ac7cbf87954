"""ncu's CSV pages parsed and attributed to the user's lines: the real H200 output (tests/profile/fixtures) and
sampled profiles derived from its layout (synth.py)."""

from __future__ import annotations

import pytest

from kernel_lsp.engine.profile import build_profile, ncu_failure
from kernel_lsp.engine.profile.ncu_csv import (
    attribute,
    parse_details_page,
    parse_instances,
    parse_raw_stalls,
    parse_source_page,
)
from tests.profile.synth import DETAILS, SOURCE, STALLS, raw_page, source_with_samples

USER = "/work/main/examples/fused_softmax.py"  # the file the fixture was profiled from
POINT = {"kernel": "softmax_kernel", "shape": [1, 8], "dtype": "float32"}


def test_real_source_page_lines_and_instructions():
    page = parse_source_page(SOURCE)
    assert page.sample_column == "Warp Stall Sampling (All Samples)" and page.reason_columns == ()
    [block] = page.blocks
    assert block.file == USER and block.function == "softmax_kernel"
    assert [(ln.line, len(ln.sass)) for ln in block.lines] == [(21, 1), (30, 1), (34, 4), (37, 6), (39, 6),
                                                                (41, 22)]
    store = block.lines[-1]
    assert store.text.startswith("tl.store(") and store.sass[0].address == 0x7F2B737A3B40
    assert "STG.E" in " ".join(s.instruction for s in store.sass)


def test_real_profile_has_no_samples_and_says_so():
    p = build_profile(USER, POINT, {}, SOURCE, DETAILS, None)
    assert [ln.line for ln in p.lines] == [20, 29, 33, 36, 38, 40]  # 0-based lines of the user's file
    assert p.total_samples == 0 and all(ln.share == 0 for ln in p.lines)
    assert any("no warp-stall samples" in n for n in p.notes)
    assert any("totals per line only" in n for n in p.notes)


def test_real_details_page():
    [d] = parse_details_page(DETAILS)
    assert d.kernel == "softmax_kernel" and d.grid == "(1, 1, 1)"
    p = build_profile(USER, POINT, {}, SOURCE, DETAILS, None)
    assert p.duration_us == pytest.approx(2.14) and p.registers == 16
    assert p.achieved_occupancy == pytest.approx(6.10) and p.theoretical_occupancy == 100
    assert p.shared_bytes == pytest.approx(1020)  # 1.02 Kbyte reserved by the driver, no static or dynamic
    assert len(p.advice) == 16 and [a.kind for a in p.advice][:12] == ["OPT"] * 12
    top = p.advice[0]  # OPT first, largest estimated speedup first
    assert top.rule == "HighPipeUtilization" and top.speedup == 100 and top.speedup_type == "local"
    launch = p.advice[1]
    assert launch.rule == "LaunchConfiguration" and launch.speedup == pytest.approx(99.24)
    assert "only 1 block" in launch.text and launch.speedup_type == "global"
    sampling = next(a for a in p.advice if a.rule == "PCSamplingData")
    assert sampling.kind == "WRN" and "no samples could be collected" in sampling.text


def test_samples_per_line_with_reasons_per_instruction():
    page = parse_source_page(source_with_samples())
    att = attribute(page, USER, parse_raw_stalls(raw_page()))
    total = sum(sum(v.values()) for v in STALLS.values())
    assert att.total_samples == total and att.reasons_from == "instructions"
    assert sum(ln.share for ln in att.lines) == pytest.approx(1.0)
    by_line = {ln.line: ln for ln in att.lines}
    exp = by_line[36]  # numerator = tl.exp(x - row_max): the FADD waits for the load
    assert exp.samples == 70 and exp.share == pytest.approx(70 / total)
    assert exp.stalls[0] == ("long scoreboard", pytest.approx(60 / 70))
    assert dict(by_line[38].stalls) == {"short scoreboard": 1.0}
    assert dict(by_line[40].stalls) == {"LG throttle": 0.5, "long scoreboard": 0.5}
    assert att.kernel_stalls[0][0] == "long scoreboard"
    assert sum(s for _, s in att.kernel_stalls) == pytest.approx(1.0)


def test_correlation_ids_as_offsets_from_the_function_start():
    base = 0x7F2B737A3B00
    att = attribute(parse_source_page(source_with_samples()), USER, parse_raw_stalls(raw_page(base=base)))
    assert att.reasons_from == "instructions"
    assert {ln.line: ln.stalls[0][0] for ln in att.lines if ln.stalls}[36] == "long scoreboard"


def test_reason_columns_on_the_source_page():
    """The shape other ncu versions print: "# Samples" and one stall_<reason> column per reason."""
    text = ('"File Path","/k.py"\n"Function Name","k"\n'
            '"Line No","Source","Address","Source","# Samples","stall_long_sb","stall_long_sb (Not Issued)",'
            '"stall_math"\n'
            '"5","x = tl.load(p)","-","-","30","24","3","6"\n'
            '"","","0x10","LDG.E R2, [R2]","30","24","3","6"\n'
            '"6","y = x * 2","-","-","10","0","0","10"\n'
            '"","","0x20","FMUL R3, R2, 2","10","0","0","10"\n')
    page = parse_source_page(text)
    assert page.sample_column == "# Samples" and page.reason_columns == ("stall_long_sb", "stall_math")
    att = attribute(page, "/k.py")
    assert att.reasons_from == "source page"
    assert [(ln.line, ln.share, ln.stalls) for ln in att.lines] == [
        (4, 0.75, (("long scoreboard", 0.8), ("math pipe throttle", 0.2))), (5, 0.25, (("math pipe throttle", 1.0),))]


def test_helper_lines_of_the_same_file_and_samples_in_other_files():
    """A @jit helper of the user's file is listed as its own function block: its lines are the user's lines too,
    and an instruction listed under two blocks counts once. Lines of triton's own files are reported apart."""
    text = ('"File Path","/k.py"\n"Function Name","k"\n'
            '"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)"\n'
            '"9","y = helper(x)","-","-","40"\n'
            '"","","0x10","FADD R1, R2, R3","40"\n'
            '"File Path","/k.py"\n"Function Name","helper"\n'
            '"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)"\n'
            '"3","return x + 1","-","-","40"\n'
            '"","","0x10","FADD R1, R2, R3","40"\n'
            '"","","0x20","FMUL R1, R2, R3","20"\n'
            '"File Path","/site-packages/triton/language/standard.py"\n"Function Name","k"\n'
            '"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)"\n'
            '"290","return a + b","-","-","40"\n'
            '"","","0x30","SHFL.BFLY R1, R2","40"\n')
    att = attribute(parse_source_page(text), "/k.py")
    assert att.total_samples == 100  # 0x10 once
    assert [(ln.line, ln.samples) for ln in att.lines] == [(2, 60), (8, 40)]
    assert att.other_files == (("/site-packages/triton/language/standard.py", 40),)


def test_instance_values():
    assert parse_instances("12 (0x7f00: 5; 0x7f10: 7)") == (12, {0x7F00: 5, 0x7F10: 7})
    assert parse_instances("1,234 (16: 1,000; 32: 234)") == (1234, {16: 1000, 32: 234})
    assert parse_instances("7") == (7, {})
    assert parse_instances("n/a") == (None, {})


def test_totals_only_raw_page_gives_the_kernel_breakdown():
    raw = ('"ID","Kernel Name","smsp__pcsamp_warps_issue_stalled_long_scoreboard",'
           '"smsp__pcsamp_warps_issue_stalled_wait","smsp__pcsamp_warps_issue_stalled_wait_not_issued"\n'
           '"","","","",""\n"0","softmax_kernel","30","10","4"\n')
    p = build_profile(USER, POINT, {}, source_with_samples(), DETAILS, raw)
    assert p.reasons_from == "none" and p.kernel_stalls == (("long scoreboard", 0.75), ("wait", 0.25))
    assert sum(ln.share for ln in p.lines) == pytest.approx(1.0)
    assert all(ln.stalls == () for ln in p.lines)


@pytest.mark.parametrize("bad", ["", "garbage\n,,,\n", '"File Path"\n"Line No","Source"\n"x","y"\n'])
def test_bad_pages_do_not_raise(bad):
    assert attribute(parse_source_page(bad), USER, parse_raw_stalls(bad)).lines == ()
    assert parse_details_page(bad) == []


def test_failures_in_words():
    assert "ERR_NVGPUCTRPERM" in ncu_failure("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    assert "LibraryNotLoaded" in ncu_failure("==ERROR== LibraryNotLoaded: failed")
    assert ncu_failure("==ERROR== The application returned an error code (1).").startswith("Nsight Compute failed")
    assert ncu_failure("==WARNING== No kernels were profiled.") is None


def test_lines_of_another_file_are_not_pinned_on_the_users():
    p = build_profile("/elsewhere/mine.py", POINT, {}, source_with_samples(), DETAILS, raw_page())
    assert p.lines == () and p.other_files == ((USER, 96),)
    assert any("not to this file" in n for n in p.notes)


def _real(name: str) -> str:
    import gzip
    from pathlib import Path

    return gzip.decompress((Path(__file__).parent / "fixtures" / name).read_bytes()).decode()


def test_real_matmul_profile_with_stall_reasons_per_line():
    """ncu 2025.3.1 on the H200: matmul_autotune's kernel at 2048**3 fp16, with the raw page's per-instruction
    stall reasons (what `bench/profile_lines.py` printed on that machine)."""
    user = "/work/main/examples/matmul_autotune.py"
    point = {"kernel": "matmul_kernel", "shape": [2048, 2048, 2048], "dtype": "float16"}
    p = build_profile(user, point, {}, _real("h200_matmul_source.csv.gz"), _real("h200_matmul_details.csv.gz"),
                      _real("h200_matmul_raw.csv.gz"))
    assert p.total_samples > 2000
    top = sorted(p.lines, key=lambda ln: -ln.samples)[:3]
    # 0-based lines of the user's file: the `a` tile load, tl.dot, the `b` tile load.
    assert [ln.line for ln in top] == [79, 81, 80]
    assert top[0].stalls[0][0] == "barrier" and 0.25 < top[0].share < 0.31
    assert abs(sum(ln.share for ln in p.lines) - 1.0) < 0.05  # a few samples fall in triton's own files
    rules = {a.rule for a in p.advice}
    assert {"TheoreticalOccupancy", "LaunchConfiguration"} <= rules


def test_the_clock_the_profile_ran_at():
    p = build_profile(USER, POINT, {}, SOURCE, DETAILS, None)
    assert p.sm_clock_mhz == pytest.approx(1480)  # "SM Frequency", 1.48 Ghz in this H200 report
    assert any("SM clock of 1480 MHz" in n and "base clock" in n for n in p.notes), p.notes
    assert p.to_json()["smClockMhz"] == pytest.approx(1480) and p.to_json()["clockControl"] == "base"
    unreported = "\n".join(ln for ln in DETAILS.splitlines() if "SM Frequency" not in ln)
    p = build_profile(USER, POINT, {}, SOURCE, unreported, None)
    assert p.sm_clock_mhz is None and any("did not report the SM clock" in n for n in p.notes)
