"""analyzers/targets.py: target names and theoretical occupancy against hand-worked CUDA Occupancy Calculator cases."""

from __future__ import annotations

import pytest

from analyzers.targets import TARGETS, UnknownTargetError, blocks_per_sm, occupancy, parse_target


@pytest.mark.parametrize(
    "text, name",
    [("sm_90", "sm_90"), ("sm90", "sm_90"), ("SM_90a", "sm_90"), ("hopper", "sm_90"), ("H100", "sm_90"),
     ("cuda:90:32", "sm_90"), ("9.0", "sm_90"), ("ampere", "sm_80"), ("sm_89", "sm_89"), ("blackwell", "sm_100"),
     ("sm_120", "sm_120"), ("gfx942", "gfx942"), ("hip:gfx942", "gfx942"), ("MI300X", "gfx942"),
     ("gfx950", "gfx950"), ("cdna4", "gfx950")],
)
def test_parse_target(text: str, name: str) -> None:
    assert parse_target(text).name == name


def test_unknown_target_names_the_supported_ones() -> None:
    with pytest.raises(UnknownTargetError, match=r"unknown GPU target 'sm_61'.*sm_80.*gfx942"):
        parse_target("sm_61")


def test_table_is_consistent() -> None:
    for t in TARGETS.values():
        assert t.max_threads_per_sm == t.max_warps_per_sm * t.warp_size
        assert t.shared_per_block <= t.shared_per_sm
        assert (t.backend == "hip") == (t.warp_size == 64)
    assert parse_target("sm_90").shared_per_block == 227 * 1024  # the opt-in maximum cudaFuncSetAttribute allows
    assert parse_target("sm_80").shared_per_block == 163 * 1024


def test_cuda_occupancy() -> None:
    # 4 warps, 32 registers, no shared memory: 16 blocks (64 warps) fit on sm_90 -> 100 %.
    assert occupancy("sm_90", 32, 0, 4) == 1.0
    # 128 registers: 128*32 = 4096 per warp -> 16 warps -> 4 blocks of 4 warps -> 25 %.
    assert occupancy("sm_90", 128, 0, 4) == 0.25
    # 255 registers round to 8192 per warp -> 8 warps -> 1 block of 8 warps -> 12.5 %.
    assert occupancy("sm_90", 255, 0, 8) == 0.125
    # Shared memory: 100 KB + 1 KB reserved per block -> 2 blocks in 228 KB.
    assert blocks_per_sm("sm_90", 32, 100 * 1024, 4) == 2
    # sm_89 holds 48 warps: 12 blocks of 4 warps at most.
    assert occupancy("sm_89", 32, 0, 4) == 1.0 and blocks_per_sm("sm_89", 32, 0, 4) == 12
    # More shared memory than a block may have, or too many registers: cannot launch.
    assert occupancy("sm_80", 32, 200 * 1024, 4) == 0.0
    assert occupancy("sm_90", 300, 0, 4) == 0.0


def test_amd_occupancy_matches_llvm_waves_per_simd() -> None:
    # 65 VGPRs round to 72 -> 7 waves per SIMD (the compiled kernel's "; Occupancy: 7"); 4-wave workgroups put one
    # wave on each SIMD -> 7 workgroups -> 28 of 32 waves.
    assert occupancy("gfx942", 65, 0, 4) == 28 / 32
    # 36 KB of LDS: one workgroup per CU on gfx942 (64 KB), four on gfx950 (160 KB).
    assert blocks_per_sm("gfx942", 64, 36 * 1024, 4) == 1
    assert blocks_per_sm("gfx950", 64, 36 * 1024, 4) == 4
    assert occupancy("gfx942", 64, 96 * 1024, 4) == 0.0
