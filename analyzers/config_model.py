"""Latency of one launch as a function of its configuration: the model a tiling search ranks candidates with.

The roofline of analyzers/roofline.py answers "how far is this kernel from the hardware's limits"; it gives every
configuration of a memory-bound kernel the same time, so it cannot rank them. This model keeps the same inputs
(work counted per launch, compile facts) and adds what changes between configurations, each as a term with a
calibrated constant:

- occupancy: resident programs per multiprocessor from the compile's registers and shared memory;
- waves and tail: programs run in waves of (multiprocessors x resident programs); the last, partial wave costs
  `tail` of a full one;
- bytes in flight: a multiprocessor sustains the bytes its resident programs have in flight over the memory
  latency (Little's law), more with pipelining stages; below the bandwidth's share, the kernel is latency-bound;
- access granularity: a contiguous run shorter than a DRAM burst wastes the rest of the burst;
- issue: the instructions each warp issues per element it handles, at `issue_ns` per element per warp-slot;
- tensor-core shape efficiency: small warp tiles (BLOCK_M x BLOCK_N / num_warps) reach less of the peak;
- bytes from DRAM and from L2, at the calibrated bandwidths;
- register spills: local-memory traffic per spilled byte.

t = launch + max(dram, l2, tensor, issue) + overlap x (the sum of the others) + spill.

The constants live in CALIBRATIONS with their provenance: fitted by `python bench/tiling_eval.py --fit` on half of
the configurations of the exhaustive sweeps in bench/sweeps/ (measured on an H200), and reported on the other half.
Pure: no triton/torch import, never raises; an estimate is always labelled as one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import targets as _targets
from .hardware import Hardware


@dataclass(frozen=True)
class Launch:
    """One configuration of one launch, as the model sees it."""

    programs: int
    num_warps: int
    num_stages: int
    dram_bytes: float  # bytes that must come from (or go to) DRAM
    l2_bytes: float = 0.0  # re-reads served by L2
    tensor_flops: float = 0.0
    tensor_dtype: str = "fp16"
    elements: float = 0.0  # elements each program's warps handle in all (loads, math, stores), summed over the launch
    iterations: float = 1.0  # trip count of the program's main loop (1: no loop)
    bytes_per_iteration: float = 0.0  # bytes one program loads in one iteration (its whole loads without a loop)
    contiguous_bytes: float | None = None  # shortest contiguous run of a global access (None: whole lines)
    warp_tile: float | None = None  # BLOCK_M x BLOCK_N / num_warps of a tl.dot kernel
    registers: int | None = None
    shared_bytes: int | None = None
    spill_bytes: int = 0  # per thread


@dataclass(frozen=True)
class Calibration:
    dram_efficiency: float = 0.8
    l2_tbps: float = 10.0
    latency_ns: float = 800.0  # DRAM latency under load: Little's law's bytes in flight
    l2_latency_ns: float = 300.0
    issue_ns: float = 0.02
    tensor_efficiency: float = 0.75
    warp_tile_half: float = 1024.0  # warp tile at which tensor efficiency is half its maximum
    tail: float = 0.6
    overlap: float = 0.2
    spill_ns: float = 1.0
    stage_overlap: float = 0.5
    burst_bytes: float = 64.0  # a shorter contiguous run wastes the rest of the DRAM burst
    provenance: dict[str, str] = field(default_factory=dict)


_H200_SWEEPS = ("fitted by `python bench/tiling_eval.py --fit` on the fit half (300 configurations) of the sweeps in "
                "bench/sweeps/ (matmul fp16/bf16 4096^3, softmax, layernorm, row sum, transpose), measured on an H200 "
                "with triton 3.6 on 2026-12-01; error on the other half in docs/benchmarks.md")

# Device -> calibration. The constants are effective values of this model, not datasheet figures: e.g. the fitted
# "latencies" stand for everything that limits memory-level parallelism, and L2's comes out above DRAM's.
CALIBRATIONS: dict[str, Calibration] = {
    "H200": Calibration(
        dram_efficiency=0.8, l2_tbps=12.857, latency_ns=287.37, l2_latency_ns=774.78, issue_ns=0.0016,
        tensor_efficiency=0.7734, warp_tile_half=427.75, tail=1.0, overlap=0.1641, spill_ns=2.1874,
        stage_overlap=0.4137, burst_bytes=41.146,
        provenance={"*": _H200_SWEEPS}),
}


def calibration(hw: Hardware) -> tuple[Calibration, bool]:
    """The device's calibration, and whether it was measured on that device (else the H200's, or defaults)."""
    if hw.name in CALIBRATIONS:
        return CALIBRATIONS[hw.name], True
    return CALIBRATIONS.get("H200", Calibration()), False


@dataclass(frozen=True)
class ConfigEstimate:
    us: float
    terms_us: dict[str, float]
    programs_per_sm: int
    waves: float
    launchable: bool = True
    calibrated_on: str | None = None  # the device the constants were measured on (None: defaults)


def estimate(launch: Launch, hw: Hardware, cal: Calibration | None = None) -> ConfigEstimate:
    """Microseconds for one launch of this configuration on `hw`."""
    measured_on = None
    if cal is None:
        cal, own = calibration(hw)
        measured_on = hw.name if own else ("H200" if "H200" in CALIBRATIONS else None)
    spec = hw.target_spec
    warps = max(1, launch.num_warps)
    if spec is not None:
        regs = launch.registers if launch.registers else (128 if launch.tensor_flops else 32)
        per_sm = _targets.blocks_per_sm(spec, regs, launch.shared_bytes or 0, warps)
    else:
        per_sm = 1
    if per_sm <= 0:
        return ConfigEstimate(math.inf, {}, 0, 0.0, launchable=False, calibrated_on=measured_on)
    programs = max(1, int(launch.programs))
    slots = hw.sm_count * per_sm
    waves = programs / slots
    waves_paid = math.floor(waves) + cal.tail * (math.ceil(waves) - math.floor(waves)) if waves > 1 else 1.0
    quantized = waves_paid / waves if waves > 1 else 1.0
    resident = min(per_sm, programs / hw.sm_count)  # programs per multiprocessor at a time
    resident_warps = resident * warps
    # Little's law: a multiprocessor sustains (bytes it has in flight) / latency; pipelining stages keep more
    # iterations' loads in flight.
    in_flight = resident * launch.bytes_per_iteration * (1.0 + cal.stage_overlap * max(0, launch.num_stages - 1))
    dram_bw = hw.hbm_tbps * 1e12 * cal.dram_efficiency
    if launch.bytes_per_iteration > 0:
        dram_bw = min(dram_bw, hw.sm_count * in_flight / (cal.latency_ns * 1e-9))
    l2_bw = cal.l2_tbps * 1e12
    if launch.bytes_per_iteration > 0:
        l2_bw = min(l2_bw, hw.sm_count * in_flight / (cal.l2_latency_ns * 1e-9))
    waste = 1.0
    if launch.contiguous_bytes:
        waste = max(1.0, cal.burst_bytes / max(1.0, launch.contiguous_bytes))
    issue_slots = hw.sm_count * min(resident_warps, 64.0)
    issue = launch.elements / max(1.0, issue_slots) * cal.issue_ns * 1e-9 * 32.0 * quantized
    tensor = 0.0
    if launch.tensor_flops:
        shape = 1.0
        if launch.warp_tile:
            shape = launch.warp_tile / (launch.warp_tile + cal.warp_tile_half)
        busy = min(1.0, programs / hw.sm_count)
        tensor = (launch.tensor_flops / (hw.peak(launch.tensor_dtype) * 1e12 * cal.tensor_efficiency * shape * busy)
                  * quantized)
    terms = {
        "dram": launch.dram_bytes * waste / dram_bw * quantized,
        "l2": launch.l2_bytes / l2_bw * quantized,
        "issue": issue,
        "tensor": tensor,
    }
    spill = (launch.spill_bytes * 32 * warps * programs * launch.iterations * cal.spill_ns * 1e-9 /
             (hw.sm_count * 64.0)) if launch.spill_bytes else 0.0
    ordered = sorted(terms.values(), reverse=True)
    body = ordered[0] + cal.overlap * sum(ordered[1:])
    us = (body + spill) * 1e6 + hw.launch_overhead_us
    return ConfigEstimate(us, {**{k: v * 1e6 for k, v in terms.items()}, "spill": spill * 1e6}, per_sm, waves,
                          calibrated_on=measured_on)


def launch_from_work(work, hw: Hardware, registers: int | None = None, shared_bytes: int | None = None,
                     spill_bytes: int = 0) -> Launch:
    """The model's view of a launch whose work was counted (analyzers.roofline.Work) and compiled.

    The loop's shape is read from the block-size constexprs: a tl.dot kernel iterates over K in BLOCK_K steps
    (iterations = dot FLOPs per program / 2 x BLOCK_M x BLOCK_N x BLOCK_K); a row kernel loads its largest block
    per iteration (iterations = bytes a program loads / the block's bytes, at 4 bytes an element: the counts do not
    keep element sizes, so an fp16 row kernel is read as looping twice as often). Where neither reading applies,
    one iteration carrying the program's whole loads."""
    from .roofline import dram_bytes

    programs = max(1, int(work.programs))
    blocks = {k: v for k, v in work.constexprs if isinstance(v, int) and not isinstance(v, bool) and v > 0
              and "BLOCK" in k.upper()}
    by_axis = {axis: next((v for k, v in blocks.items() if k.upper().removesuffix("_SIZE").endswith(axis)), None)
               for axis in ("M", "N", "K")}
    load_per_program = work.load_bytes / programs
    iterations, per_iteration, warp_tile = 1.0, load_per_program, None
    tensor = sum(work.tensor_flops.values())
    bm, bn, bk = by_axis["M"], by_axis["N"], by_axis["K"]
    if tensor and bm and bn and bk:
        iterations = max(1.0, tensor / programs / (2.0 * bm * bn * bk))
        per_iteration = load_per_program / iterations
        warp_tile = bm * bn / max(1, work.num_warps)
    elif blocks:
        elem = 4.0
        widest = max(blocks.values())
        iterations = max(1.0, load_per_program / (widest * elem))
        per_iteration = load_per_program / iterations
    dram = dram_bytes(work, hw)
    dtype = next(iter(work.tensor_flops), "fp16")
    return Launch(programs=programs, num_warps=work.num_warps, num_stages=work.num_stages, dram_bytes=dram,
                  l2_bytes=max(0.0, work.requested_bytes - dram), tensor_flops=tensor, tensor_dtype=dtype,
                  elements=work.vector_flops + work.requested_bytes / 4.0, iterations=iterations,
                  bytes_per_iteration=per_iteration, warp_tile=warp_tile, registers=registers,
                  shared_bytes=shared_bytes, spill_bytes=spill_bytes)
