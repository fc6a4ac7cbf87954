"""GPU targets the compiler supports offline, with the per-multiprocessor limits behind theoretical occupancy.

Pure data: no triton import. Sources for the numbers:
- [CUDA-CC] CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (the same values are
  encoded in CCCL's `cuda/__device/arch_traits.h`), and the CUDA Occupancy Calculator for allocation units.
- [ROCM-SPECS] ROCm documentation, "AMD GPU specifications" (LDS and VGPR file per CU, wavefront size).
- [CDNA3-ISA] / [CDNA4-ISA] AMD Instinct MI300 / MI355 "CDNA3" / "CDNA4" Instruction Set Architecture guides
  (4 SIMDs per CU, 512 unified VGPRs+AGPRs per lane, LDS per workgroup).
- [LLVM-AMDGPU] LLVM AMDGPUUsage / AMDGPUBaseInfo: max waves per EU (SIMD) = 8 on gfx90a and later, VGPR
  allocation granule 8 on gfx90a+ (also what the `; Occupancy:` line of a compiled gfx942 kernel reports: 8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class TargetSpec:
    name: str  # canonical: "sm_90", "gfx942"
    backend: str  # "cuda" | "hip" (triton's GPUTarget backend)
    arch: int | str  # 90 | "gfx942" (triton's GPUTarget arch)
    warp_size: int
    description: str
    shared_per_block: int  # bytes, the opt-in maximum one block (workgroup) may use
    shared_per_sm: int  # bytes per SM (CU)
    shared_reserved_per_block: int  # bytes the driver reserves for each resident block
    shared_granularity: int  # bytes: allocation unit of shared memory per block
    registers_per_sm: int  # 32-bit registers per SM; for AMD: VGPRs per lane per SIMD
    registers_per_thread: int  # max registers one thread (lane) may use
    register_granularity: int  # CUDA: registers per warp allocation unit; AMD: VGPRs per wave allocation unit
    max_warps_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int = 1024
    simds_per_sm: int = 1  # AMD: waves of a workgroup are spread over 4 SIMDs, each with its own VGPR file
    max_waves_per_simd: int = 0  # AMD only


def _cuda(cc: int, desc: str, smem_sm_kib: int, warps: int, blocks: int) -> TargetSpec:
    return TargetSpec(
        name=f"sm_{cc}",
        backend="cuda",
        arch=cc,
        warp_size=32,
        description=desc,
        # [CUDA-CC] "Maximum amount of shared memory per thread block" = per-SM maximum minus the 1 KB the driver
        # reserves per block ("reserved for system use", compute capability 8.0 and later).
        shared_per_block=(smem_sm_kib - 1) * 1024,
        shared_per_sm=smem_sm_kib * 1024,
        shared_reserved_per_block=1024,
        shared_granularity=128,  # CUDA Occupancy Calculator: shared memory allocation unit 128 B (cc >= 8.0)
        registers_per_sm=64 * 1024,  # [CUDA-CC] "Number of 32-bit registers per multiprocessor": 64 K
        registers_per_thread=255,  # [CUDA-CC] "Maximum number of 32-bit registers per thread": 255
        register_granularity=256,  # CUDA Occupancy Calculator: register allocation unit 256 per warp
        max_warps_per_sm=warps,
        max_threads_per_sm=warps * 32,
        max_blocks_per_sm=blocks,
    )


def _cdna(arch: str, desc: str, lds_kib: int) -> TargetSpec:
    return TargetSpec(
        name=arch,
        backend="hip",
        arch=arch,
        warp_size=64,  # [ROCM-SPECS] wavefront size 64 on CDNA
        description=desc,
        shared_per_block=lds_kib * 1024,  # [CDNA3-ISA]/[CDNA4-ISA]: a workgroup may allocate the whole LDS
        shared_per_sm=lds_kib * 1024,  # [ROCM-SPECS] LDS per CU: gfx942 64 KiB, gfx950 160 KiB
        shared_reserved_per_block=0,
        shared_granularity=512,  # [LLVM-AMDGPU] LDS is allocated to a workgroup in 128-dword (512 B) blocks
        registers_per_sm=512,  # [ROCM-SPECS] 512 KiB VGPR file per CU = 4 SIMDs x 64 lanes x 512 x 4 B
        registers_per_thread=512,  # 256 architectural VGPRs + 256 AGPRs per lane (unified file, gfx90a+)
        register_granularity=8,  # [LLVM-AMDGPU] VGPR allocation granule on gfx90a+
        max_warps_per_sm=32,  # 4 SIMDs x 8 waves
        max_threads_per_sm=32 * 64,
        max_blocks_per_sm=32,  # no tighter documented limit than one wave per workgroup
        simds_per_sm=4,  # [CDNA3-ISA] 4 SIMD units per CU
        max_waves_per_simd=8,  # [LLVM-AMDGPU] getMaxWavesPerEU = 8 for gfx90a, gfx942, gfx950
    )


# [CUDA-CC] columns 8.0 / 8.9 / 9.0 / 10.0 / 12.0: shared memory per SM 164/100/228/228/100 KB; resident warps
# per SM 64/48/64/64/48; resident blocks per SM 32/24/32/32/24.
TARGETS: dict[str, TargetSpec] = {
    t.name: t
    for t in (
        _cuda(80, "NVIDIA Ampere (A100)", 164, 64, 32),
        _cuda(89, "NVIDIA Ada Lovelace (L4, L40, RTX 40xx)", 100, 48, 24),
        _cuda(90, "NVIDIA Hopper (H100, H200)", 228, 64, 32),
        _cuda(100, "NVIDIA Blackwell (B200, GB200)", 228, 64, 32),
        _cuda(120, "NVIDIA Blackwell consumer (RTX 50xx, RTX PRO 6000)", 100, 48, 24),
        _cdna("gfx942", "AMD CDNA3 (MI300X, MI300A, MI325X)", 64),
        _cdna("gfx950", "AMD CDNA4 (MI350X, MI355X)", 160),
    )
}

_ALIASES = {
    "ampere": "sm_80", "a100": "sm_80", "a800": "sm_80",
    "ada": "sm_89", "lovelace": "sm_89", "l4": "sm_89", "l40": "sm_89", "l40s": "sm_89", "rtx4090": "sm_89",
    "hopper": "sm_90", "h100": "sm_90", "h200": "sm_90", "h800": "sm_90", "gh200": "sm_90",
    "blackwell": "sm_100", "b200": "sm_100", "b100": "sm_100", "gb200": "sm_100",
    "rtx5090": "sm_120", "blackwell-consumer": "sm_120",
    "cdna3": "gfx942", "mi300": "gfx942", "mi300x": "gfx942", "mi300a": "gfx942", "mi325x": "gfx942",
    "cdna4": "gfx950", "mi350": "gfx950", "mi350x": "gfx950", "mi355x": "gfx950",
}


class UnknownTargetError(ValueError):
    pass


def parse_target(text: str) -> TargetSpec:
    """"sm_90", "sm90", "sm_90a", "90", "cuda:90", "hopper", "H100", "gfx942", "hip:gfx942", "mi300x" -> its spec."""
    raw = text
    key = text.strip().lower().replace(" ", "")
    key = re.sub(r"^(cuda|hip):", "", key)
    key = re.sub(r":\d+$", "", key)  # "cuda:90:32" (triton's tools/compile.py spelling) -> "90"
    key = _ALIASES.get(key, key)
    m = re.fullmatch(r"(?:sm_?|compute_?)?(\d{2,3})a?", key)
    if m:
        key = f"sm_{m.group(1)}"
    m = re.fullmatch(r"(\d+)\.(\d)", key)  # "9.0"
    if m:
        key = f"sm_{m.group(1)}{m.group(2)}"
    spec = TARGETS.get(key)
    if spec is None:
        known = ", ".join(TARGETS)
        raise UnknownTargetError(
            f"unknown GPU target {raw!r}; supported targets: {known} (or hopper, ampere, mi300x, ...)")
    return spec


def _spec(target: object) -> TargetSpec:
    if isinstance(target, TargetSpec):
        return target
    return parse_target(target if isinstance(target, str) else str(getattr(target, "name", target)))


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def blocks_per_sm(target: object, registers: int, shared_bytes: int, num_warps: int) -> int:
    """Resident blocks (workgroups) per SM (CU); 0 when one block cannot launch at all."""
    t = _spec(target)
    registers, shared_bytes = max(int(registers or 0), 1), max(int(shared_bytes or 0), 0)
    if num_warps <= 0 or num_warps * t.warp_size > t.max_threads_per_block:
        return 0
    if registers > t.registers_per_thread or shared_bytes > t.shared_per_block:
        return 0
    by_warps = min(t.max_warps_per_sm // num_warps, t.max_blocks_per_sm)
    if t.backend == "hip":
        # Waves of a workgroup are spread round-robin over the SIMDs; each SIMD holds at most max_waves_per_simd
        # waves and has its own 512-VGPR-per-lane file.
        per_wave = _round_up(registers, t.register_granularity)
        waves_per_simd = min(t.max_waves_per_simd, t.registers_per_sm // per_wave)
        by_regs = waves_per_simd // -(-num_warps // t.simds_per_sm)
    else:
        per_warp = _round_up(registers * t.warp_size, t.register_granularity)
        by_regs = (t.registers_per_sm // per_warp) // num_warps
    by_shared = by_warps
    if shared_bytes or t.shared_reserved_per_block:
        per_block = _round_up(shared_bytes + t.shared_reserved_per_block, t.shared_granularity)
        by_shared = t.shared_per_sm // per_block
    return max(0, min(by_warps, by_regs, by_shared))


def occupancy(target: object, registers: int, shared_bytes: int, num_warps: int) -> float:
    """Theoretical occupancy: resident warps (waves) per SM (CU) over the maximum, 0..1.

    `target` is a TargetSpec, a name parse_target accepts, or anything with a `.name` attribute (a compile Target).
    `registers` is per thread (per lane on AMD: VGPRs + AGPRs), `shared_bytes` per block.
    """
    t = _spec(target)
    blocks = blocks_per_sm(t, registers, shared_bytes, num_warps)
    return blocks * num_warps / t.max_warps_per_sm
