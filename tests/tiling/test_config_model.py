"""The configuration model's terms, each shown on a pair of launches that differ only where the term applies, and
its accuracy on the held-out half of the H200 sweeps kept in bench/sweeps/."""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from analyzers import config_model
from analyzers.config_model import Launch, estimate
from analyzers.hardware import get_device

BENCH = Path(__file__).resolve().parents[2] / "bench"
H200 = get_device("H200")


def us(launch: Launch) -> float:
    return estimate(launch, H200).us


def row_pass(**kw) -> Launch:
    """A two-pass row kernel over 8192 rows of 4096 fp32 (softmax-like): 8 warps, BLOCK 1024."""
    base = dict(programs=8192, num_warps=8, num_stages=1, dram_bytes=256e6, l2_bytes=128e6,
                elements=20.0 * 8192 * 4096, iterations=8, bytes_per_iteration=4096, block_elements=1024,
                reread_bytes=128e6, program_bytes=16384, registers=32, shared_bytes=0)
    return Launch(**{**base, **kw})


def gemm(**kw) -> Launch:
    """A 4096^3 fp16 matmul with 128x128x64 tiles, 8 warps, 3 stages."""
    base = dict(programs=1024, num_warps=8, num_stages=3, dram_bytes=100e6, l2_bytes=2.1e9,
                tensor_flops=2.0 * 4096 ** 3, tensor_dtype="float16", elements=2.0 * 1024 * 64 * 16384,
                iterations=64, bytes_per_iteration=32768, warp_tile=128 * 128 / 8, registers=128,
                shared_bytes=98304)
    return Launch(**{**base, **kw})


def test_a_second_pass_pays_dram_again_when_the_resident_rows_overflow_l2() -> None:
    fits = row_pass(num_warps=16)  # 132 SMs x 4 resident rows x 16 KiB: about 9 MB
    overflows = row_pass(num_warps=2)  # 32 resident rows per SM: about 69 MB
    assert estimate(fits, H200).terms_us["dram"] < estimate(overflows, H200).terms_us["dram"]
    one_pass = row_pass(num_warps=16, reread_bytes=0.0, program_bytes=0.0)
    assert estimate(one_pass, H200).terms_us["dram"] == estimate(fits, H200).terms_us["dram"]


def test_a_block_narrower_than_its_threads_still_costs_every_thread() -> None:
    narrow = row_pass(block_elements=256, iterations=32, bytes_per_iteration=1024)
    assert us(replace(narrow, num_warps=16)) > us(replace(narrow, num_warps=8))


def test_pipelining_stages_hide_a_dot_loops_copies_and_nothing_else() -> None:
    two, three = estimate(gemm(num_stages=2), H200), estimate(gemm(num_stages=3), H200)
    assert two.terms_us["latency"] > 1.8 * three.terms_us["latency"]  # one copy in flight, then two
    assert two.us > 1.1 * three.us  # measured on the H200 at 128x128x64 / 8 warps: 285 and 223 us
    assert us(row_pass(num_stages=3)) == us(row_pass(num_stages=1))  # the pipeliner only pipelines dot operands


def test_a_small_warp_tile_reaches_less_of_the_tensor_peak() -> None:
    assert estimate(gemm(warp_tile=64 * 64 / 8), H200).terms_us["tensor"] > \
        estimate(gemm(), H200).terms_us["tensor"]


def test_many_small_programs_pay_for_their_launches() -> None:
    # The same bytes moved by 16x16 tiles and by 64x64 tiles of a transpose.
    small = Launch(programs=262144, num_warps=2, num_stages=1, dram_bytes=268e6, elements=9 * 8192 ** 2,
                   bytes_per_iteration=512, block_elements=256, contiguous_bytes=32, registers=20, shared_bytes=512)
    large = replace(small, programs=16384, bytes_per_iteration=8192, block_elements=4096, contiguous_bytes=128,
                    shared_bytes=8192)
    assert estimate(small, H200).terms_us["launches"] > estimate(large, H200).terms_us["dram"]
    assert us(small) > 1.5 * us(large)


def test_a_short_contiguous_run_pays_for_the_whole_sector() -> None:
    base = Launch(programs=16384, num_warps=4, num_stages=1, dram_bytes=268e6, elements=9 * 8192 ** 2,
                  bytes_per_iteration=8192, block_elements=4096, registers=20, shared_bytes=8192)
    assert us(replace(base, contiguous_bytes=8)) > us(replace(base, contiguous_bytes=128))


def test_spills_cost_per_iteration() -> None:
    spilled = gemm(spill_bytes=600, registers=255)
    assert estimate(spilled, H200).terms_us["spill"] > 0
    assert us(replace(spilled, iterations=128)) > us(spilled)


def test_spill_slots_that_overflow_l2_are_reloaded_from_dram() -> None:
    # A loop-free 1-warp program spilling 2.4 KB per thread (the 128x128 transpose on 1 warp): one program per SM
    # keeps its spill slots in L2 (10 MB for the GPU), 32 per SM do not (330 MB), so each byte costs more.
    one = Launch(programs=132, num_warps=1, num_stages=1, dram_bytes=4e6, elements=9 * 132 * 16384,
                 bytes_per_iteration=32768, block_elements=16384, registers=64, shared_bytes=2048, spill_bytes=2416)
    many = replace(one, programs=132 * 32, dram_bytes=128e6, elements=9 * 132 * 32 * 16384)
    per_program = [estimate(launch, H200).terms_us["spill"] / launch.programs for launch in (one, many)]
    assert estimate(many, H200).programs_per_sm >= 32
    assert per_program[1] > 1.5 * per_program[0]


def test_every_fitted_constant_says_where_it_comes_from() -> None:
    cal = config_model.CALIBRATIONS["H200"]
    fitted = [f for f in cal.__dataclass_fields__ if f != "provenance"]
    assert set(fitted) <= set(cal.provenance)
    assert all(cal.provenance[name] for name in fitted)


def test_another_device_uses_the_h200_constants_and_says_so() -> None:
    b200 = get_device("B200")
    est = estimate(gemm(), b200)
    assert est.calibrated_on == "H200" and est.us < estimate(gemm(), H200).us


@pytest.fixture(scope="module")
def sweeps():
    sys.path.insert(0, str(BENCH))
    try:
        import tiling_eval
        yield tiling_eval, tiling_eval.load()
    finally:
        sys.path.remove(str(BENCH))


def test_on_configurations_the_fit_never_saw_the_median_error_is_at_most_10_percent(sweeps) -> None:
    tiling_eval, cases = sweeps
    errs = tiling_eval.errors(cases, config_model.calibration(H200)[0], H200, True)
    assert len(errs) > 300
    assert statistics.median(errs) <= 0.10
    # The worst points are spilling tiles; 95% of the held-out points are within 25%.
    assert sum(e <= 0.25 for e in errs) >= 0.95 * len(errs)


def test_the_models_own_pick_is_within_85_percent_of_each_sweeps_best(sweeps) -> None:
    tiling_eval, cases = sweeps
    for case, recs in cases:
        by_cfg = {json.dumps(r["config"], sort_keys=True): r for r in recs}
        picked = min(recs, key=lambda r: us(tiling_eval.launch_of(case, r)))
        best = min(r["us"] for r in recs)
        assert best / by_cfg[json.dumps(picked["config"], sort_keys=True)]["us"] >= 0.85, case["case"]


def test_the_split_is_fixed_and_halves_every_sweep(sweeps) -> None:
    tiling_eval, cases = sweeps
    for case, recs in cases:
        held = sum(tiling_eval.held_out(case, r) for r in recs)
        assert 0.3 * len(recs) < held < 0.7 * len(recs), case["case"]


def test_a_counted_row_kernel_tells_the_model_what_its_second_pass_rereads() -> None:
    from analyzers.roofline import ArgTraffic, Work

    rows = 8192 * 4096 * 4.0
    softmax = Work(programs=8192, num_warps=8, num_stages=1, vector_flops=20.0 * 8192 * 4096,
                   args=(ArgTraffic("x", 2 * rows, 0, rows, rows), ArgTraffic("y", 0, rows, rows, rows)),
                   constexprs=(("BLOCK", 1024),))
    launch = config_model.launch_from_work(softmax, H200, registers=32, shared_bytes=0)
    assert launch.dram_bytes == 2 * rows and launch.reread_bytes == rows
    assert launch.program_bytes == 4096 * 4 and launch.block_elements == 1024
    # The same counts at 2 warps keep 32 rows resident per SM: more than L2 holds for the second pass.
    few_warps = config_model.launch_from_work(replace(softmax, num_warps=2), H200, registers=32, shared_bytes=0)
    assert estimate(few_warps, H200).terms_us["dram"] > estimate(launch, H200).terms_us["dram"]

    tile = Work(programs=128 * 256, num_warps=4, num_stages=1,
                args=(ArgTraffic("x", 128e6, 0, 128e6, 128e6), ArgTraffic("y", 0, 128e6, 128e6, 128e6)),
                constexprs=(("BLOCK_M", 64), ("BLOCK_N", 32)))
    launch = config_model.launch_from_work(tile, H200)
    assert launch.block_elements == 64 * 32 and launch.reread_bytes == 0


def test_any_launch_gets_a_positive_estimate_or_is_unlaunchable() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    sizes = st.floats(min_value=0, max_value=1e12, allow_nan=False)
    launches = st.builds(
        Launch, programs=st.integers(0, 10 ** 7), num_warps=st.sampled_from([0, 1, 2, 4, 8, 16, 32]),
        num_stages=st.integers(0, 6), dram_bytes=sizes, l2_bytes=sizes, tensor_flops=sizes, elements=sizes,
        iterations=st.floats(0, 1e5), bytes_per_iteration=sizes,
        contiguous_bytes=st.none() | st.floats(0, 1e4), warp_tile=st.none() | st.floats(0, 1e5),
        block_elements=st.none() | st.floats(0, 1e6), reread_bytes=sizes, program_bytes=sizes,
        registers=st.none() | st.integers(0, 300), shared_bytes=st.none() | st.integers(0, 10 ** 6),
        spill_bytes=st.integers(0, 4096))

    @settings(max_examples=150, deadline=None)
    @given(launches, st.sampled_from(["H200", "A100", "B200", "MI300X"]))
    def check(launch: Launch, device: str) -> None:
        est = estimate(launch, get_device(device))
        assert 0 < est.us < float("inf") if est.launchable else est.us == float("inf")

    check()


def test_the_spill_term_moves_the_local_bytes_nsight_compute_measured(sweeps) -> None:
    # bench/sweeps/spill_traffic.json: local-memory load and store bytes of each spilling matmul tile (H200, ncu).
    tiling_eval, cases = sweeps
    measured = json.loads((BENCH / "sweeps" / "spill_traffic.json").read_text())["records"]
    case = next(c for c, _ in cases if c["case"] == "matmul_fp16")
    records = {json.dumps(r["config"], sort_keys=True): r for r in case["records"]}
    # Spill bytes that overflow L2 move at DRAM's rate, the others at the spill rate: with the two rates equal, the
    # term is the traffic over that rate, wherever it goes.
    cal = config_model.calibration(H200)[0]
    cal = replace(cal, spill_tbps=H200.hbm_tbps * cal.dram_efficiency)
    checked = 0
    for m in measured:
        if not m["sweep"]["spills"] or "metrics" not in m:
            continue
        local = sum(float(m["metrics"][f"l1tex__t_bytes_pipe_lsu_mem_local_op_{op}.sum"].replace(",", ""))
                    for op in ("ld", "st"))
        launch = tiling_eval.launch_of(case, records[json.dumps(m["config"], sort_keys=True)])
        modelled = estimate(launch, H200, cal).terms_us["spill"] * 1e-6 * cal.spill_tbps * 1e12
        assert 0.75 < modelled / local < 1.3, (m["config"], modelled, local)
        checked += 1
    assert checked >= 8


def test_an_uncompiled_dot_tile_too_large_for_shared_memory_is_unlaunchable() -> None:
    """Without a compile, the operand tiles a dot loop keeps in flight (num_stages copies of A and B) stand in for
    its shared memory: a 512x1024x256 fp16 tile needs 3.75 MiB and cannot run, a 128x256x64 one on 3 stages can."""
    from analyzers.roofline import ArgTraffic, Work

    def matmul(bm: int, bn: int, bk: int, stages: int) -> Work:
        n = 4096
        programs = (n // bm) * (n // bn)
        loads = programs * (n // bk) * (bm * bk + bk * bn) * 2.0
        return Work(programs=programs, num_warps=8, num_stages=stages, tensor_flops={"fp16": 2.0 * n ** 3},
                    args=(ArgTraffic("a", loads / 2, 0, n * n * 2.0, n * n * 2.0),
                          ArgTraffic("b", loads / 2, 0, n * n * 2.0, n * n * 2.0),
                          ArgTraffic("c", 0, n * n * 2.0, n * n * 2.0, n * n * 2.0)),
                          constexprs=(("BLOCK_SIZE_M", bm), ("BLOCK_SIZE_N", bn), ("BLOCK_SIZE_K", bk)))

    huge = config_model.launch_from_work(matmul(512, 1024, 256, 3), H200)
    assert huge.shared_bytes == 3 * (512 * 256 + 256 * 1024) * 2
    assert not estimate(huge, H200).launchable
    fits = config_model.launch_from_work(matmul(128, 256, 64, 3), H200)
    assert fits.shared_bytes == 3 * (128 * 64 + 64 * 256) * 2
    assert estimate(fits, H200).launchable
    # What a compile read stands: the assumption is only for candidates that were not compiled.
    compiled = config_model.launch_from_work(matmul(512, 1024, 256, 3), H200, registers=255, shared_bytes=1024)
    assert compiled.shared_bytes == 1024
