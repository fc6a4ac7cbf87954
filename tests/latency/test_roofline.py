import math
from dataclasses import replace

import pytest

from analyzers.hardware import DEVICES
from analyzers.roofline import ArgTraffic, Resources, Work, estimate, format_us, label

H200 = DEVICES["H200"]


def stream(n, elem=4, programs=None, warps=4):
    b = n * elem
    return Work(programs=programs or n // 1024, num_warps=warps,
                args=(ArgTraffic("x", b, 0, b, b), ArgTraffic("y", b, 0, b, b), ArgTraffic("out", 0, b, b, b)))


def test_streaming_kernel_is_bytes_over_achievable_bandwidth_plus_launch():
    est = estimate(stream(1 << 24), H200, Resources(registers=32, shared_bytes=0))
    expected = 3 * (1 << 24) * 4 / (4.8e12 * H200.bw_efficiency) * 1e6 + H200.launch_overhead_us
    assert est.us == pytest.approx(expected, rel=1e-9)
    assert est.bound == "memory" and est.label.endswith("H200 est.") and est.label.startswith("≈")
    assert est.fraction_of_roofline == pytest.approx(3 * (1 << 24) * 4 / 4.8e12 * 1e6 / est.us)


def test_tiny_grid_is_latency_or_launch_bound():
    est = estimate(stream(4096, programs=4), H200)
    assert est.bound == "launch"
    few = estimate(stream(1 << 22, programs=4, warps=4), H200)  # 16 warps in flight on a 132-SM device
    assert few.bound == "latency" and few.us > estimate(stream(1 << 22), H200).us


def test_tiny_blocks_keep_too_few_bytes_in_flight_to_hide_dram_latency():
    regs = Resources(registers=32, shared_bytes=0)
    n = 1 << 24
    usual = estimate(stream(n, programs=n // 1024, warps=4), H200, regs)
    big = estimate(stream(n, programs=n // 4096, warps=8), H200, regs)
    tiny = estimate(stream(n, programs=n // 64, warps=1), H200, regs)
    assert usual.bound == big.bound == "memory" and usual.us == pytest.approx(big.us, rel=0.01)
    # 32 resident one-warp programs x 512 B of loads = 16 KB per multiprocessor; ~18 KB hides 600 ns at 3.4 TB/s.
    assert tiny.bound == "latency" and tiny.us > usual.us * 1.08
    assert any("in flight per multiprocessor" in note for note in tiny.notes), tiny.notes
    # Same Little's law, one level down: the same tiny programs at a longer DRAM latency are slower still.
    slower = estimate(stream(n, programs=n // 64, warps=1), replace(H200, dram_latency_ns=1200.0), regs)
    assert slower.us > tiny.us * 1.5


def gemm(programs, flops):
    return Work(programs=programs, num_warps=8, tensor_flops={"fp16": flops})


def test_tail_wave_of_a_compute_bound_kernel():
    one = estimate(gemm(132, 132e9), H200, Resources(registers=255, shared_bytes=150_000))
    more = estimate(gemm(133, 133e9), H200, Resources(registers=255, shared_bytes=150_000))
    assert one.bound == more.bound == "compute" and one.programs_per_sm == 1
    body = one.us - H200.launch_overhead_us
    assert more.us - H200.launch_overhead_us == pytest.approx(body * 2, rel=0.02)  # the 133rd runs alone
    assert one.terms_us["tensor"] == pytest.approx(132e9 / (989.4e12 * H200.matmul_efficiency) * 1e6)


def test_a_program_that_cannot_fit_is_invalid():
    est = estimate(gemm(10, 1e9), H200, Resources(registers=64, shared_bytes=300_000))
    assert not est.launchable and est.bound == "invalid" and math.isinf(est.us)
    assert est.to_json()["us"] is None


def test_rereads_beyond_l2_cost_dram_and_l2_time():
    big = 400e6
    w = Work(programs=4096, num_warps=4, args=(ArgTraffic("a", big * 10, 0, big, big),))
    est = estimate(w, H200)
    assert est.dram_bytes == pytest.approx(big + 0.15 * big * 9)
    assert est.terms_us["l2"] > 0


def test_labels():
    assert format_us(38.4) == "38 µs" and format_us(4.25) == "4.2 µs" and format_us(1500) == "1.5 ms"
    assert label(38.4, H200) == "≈38 µs H200 est."
