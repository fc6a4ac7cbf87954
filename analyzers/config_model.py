"""Latency of one launch as a function of its configuration: the model a tiling search ranks candidates with.

The roofline of analyzers/roofline.py answers "how far is this kernel from the hardware's limits"; it gives every
configuration of a memory-bound kernel the same time, so it cannot rank them. This model keeps the same inputs
(work counted per launch, compile facts) and adds what changes between configurations, each as a term with a
calibrated constant:

- occupancy: resident programs per multiprocessor from the compile's registers and shared memory;
- waves and tail: programs run in rounds of (multiprocessors x resident programs); the last, partial round costs
  `tail` of a full one;
- a program's lifetime, step by step: each iteration of its main loop waits for its loads (a DRAM round trip,
  shared by the iterations LLVM unrolls; for a tl.dot loop the operand copy, hidden by num_stages - 1 copies in
  flight but not its transfer at the SM's share of L2), its own dependent instructions, the scheduler's issue
  slots shared by every resident warp (one warp-instruction per cycle), and its share of the tensor cores at an
  efficiency that falls with the warp tile (BLOCK_M x BLOCK_N / num_warps);
- a block narrower than the program's threads is replicated across them: every thread still issues;
- bandwidth of the whole launch: DRAM (a contiguous run shorter than a sector pays for the sector) and L2; a
  program's second pass over its data hits L2 only while every resident program's data fits in it;
- the block scheduler's launch rate: a cost per program and multiprocessor;
- register spills: local-memory traffic per spilled byte, once per loop iteration; the share of it whose spill
  slots (SMs x resident threads x spill bytes) overflow L2 goes to DRAM.

t = launch overhead + smooth_max(lifetime, dram, l2, program launches) + spill, where the smooth maximum is a
p-norm (limits that overlap imperfectly add a little of each other).

The constants live in CALIBRATIONS with their provenance: fitted by `python bench/tiling_eval.py --fit` on half of
the configurations of the exhaustive sweeps in bench/sweeps/ (measured on an H200), and reported on the other half
and kernel by kernel left out (docs/benchmarks.md). Pure: no triton/torch import, never raises; an estimate is
always labelled as one.
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
    elements: float = 0.0  # element operations of the launch (each vector op, load and store per element), summed
    iterations: float = 1.0  # trip count of the program's main loop (1: no loop), all passes together
    passes: int = 1  # loops over the same data one after the other (a softmax reads its row twice)
    bytes_per_iteration: float = 0.0  # bytes one program loads in one iteration (its whole loads without a loop)
    contiguous_bytes: float | None = None  # shortest contiguous run of a global access (None: whole lines)
    warp_tile: float | None = None  # BLOCK_M x BLOCK_N / num_warps of a tl.dot kernel
    block_elements: float | None = None  # elements of the block one iteration of a program works on (None: unknown)
    reread_bytes: float = 0.0  # of l2_bytes: a program's re-reads of its own data (a second pass over a row)
    program_bytes: float = 0.0  # the data a program re-reads, per program: it stays in L2 only if every
    # resident program's fits at once
    registers: int | None = None
    shared_bytes: int | None = None
    spill_bytes: int = 0  # per thread


@dataclass(frozen=True)
class Calibration:
    """The model's constants. The defaults are priors from public figures (used for a device without a
    calibration, and as the fit's starting point); a device's calibration replaces them with fitted values."""

    dram_efficiency: float = 0.91  # share of the datasheet HBM bandwidth reached (vector add on an H200: 0.91)
    l2_tbps: float = 12.0  # bandwidth of re-reads served by L2
    latency_ns: float = 800.0  # one round trip to DRAM under load
    dot_latency_ns: float = 800.0  # one K step's operands: async copy to shared memory, barrier, MMA issue
    loop_overlap: float = 4.0  # iterations of a loop without tl.dot whose loads are in flight together (unrolling)
    dependent_ns: float = 2.0  # shortest interval between two instructions of one warp (~4 cycles)
    l2_usable: float = 0.5  # share of L2 that holds re-read data against the streams passing through
    instructions_per_element: float = 1.0  # machine instructions per counted element operation, per thread
    tensor_efficiency: float = 0.75  # share of the dense tensor peak a large warp tile reaches
    warp_tile_half: float = 512.0  # warp tile (elements) at which tensor efficiency is half its maximum
    tail: float = 1.0  # cost of the last, partial wave as a share of a full one
    smooth: float = 4.0  # exponent of the smooth maximum that joins limits which overlap
    spill_tbps: float = 10.0  # local-memory traffic of spilled registers
    program_ns: float = 80.0  # per program and multiprocessor: block launch, prologue and epilogue
    burst_bytes: float = 32.0  # a shorter contiguous run still moves a whole DRAM sector (32 B)
    provenance: dict[str, str] = field(default_factory=dict)


# Where each constant comes from (H200). The fitted ones are effective values of this model: e.g. the latency
# stands for everything between issuing a load and using its data, with the other warps' traffic queued ahead.
_FIT = ("fitted by `python bench/tiling_eval.py --fit` (least squares on log error) on the fit half of the "
        "configurations of the sweeps in bench/sweeps/ (matmul fp16/bf16 4096^3, softmax, layernorm, row sum, "
        "transpose), measured on an H200 with triton 3.6 on 2026-12-01; error on the held-out half and "
        "leave-one-kernel-out in docs/benchmarks.md")
_H200_PROVENANCE = {
    "dram_efficiency": f"share of the 4.8 TB/s datasheet HBM bandwidth; {_FIT}",
    "l2_tbps": f"bandwidth of re-reads served by L2; {_FIT}",
    "latency_ns": f"a program waits a DRAM round trip per iteration (Little's law per SM); {_FIT}",
    "dot_latency_ns": f"a K step waits for its operands unless num_stages - 1 copies are in flight; {_FIT}",
    "loop_overlap": f"LLVM unrolls a loop without tl.dot, so several iterations' loads are in flight; {_FIT}",
    "dependent_ns": f"a warp waits for its previous instruction's result (ALU and MUFU latency); {_FIT}",
    "l2_usable": (f"re-reads hit L2 while (SMs x resident programs x bytes each re-reads) fits this share, and so do "
                  f"reloaded spills while (SMs x resident threads x spill bytes) fits it; {_FIT}"),
    "instructions_per_element": f"machine instructions per element operation the source counts; {_FIT}",
    "tensor_efficiency": f"share of the 989 TFLOP/s dense fp16/bf16 peak a large warp tile reaches; {_FIT}",
    "warp_tile_half": f"wgmma/mma shape efficiency: operand traffic per MMA grows as the warp tile shrinks; {_FIT}",
    "tail": f"cost of the last, partial wave as a share of a full one; {_FIT}",
    "smooth": f"limits that overlap imperfectly (memory, issue, tensor cores) join by a p-norm; {_FIT}",
    "spill_tbps": ("spilled registers are stored and reloaded once per loop iteration: Nsight Compute counted "
                   "0.88-1.03x (spill bytes x threads x programs x iterations) of local loads and of local stores "
                   "on 10 spilling H200 matmul tiles (bench/sweeps/spill_traffic.json); the rate (of spills L2 "
                   "keeps; the overflow moves at the DRAM rate) is " + _FIT),
    "program_ns": f"the block scheduler's launch rate and each program's prologue/epilogue; {_FIT}",
    "burst_bytes": f"DRAM sector a short contiguous run pays for in full; {_FIT}",
    "issue": "not fitted: a scheduler issues one warp-instruction per cycle, 4 per SM, at Hardware.clock_ghz",
    "l2_mb": "not fitted: Hardware.l2_mb (datasheet)",
}

CALIBRATIONS: dict[str, Calibration] = {
    "H200": Calibration(
        dram_efficiency=0.7532, l2_tbps=22.51, latency_ns=1095.0, dot_latency_ns=449.1, loop_overlap=6.024,
        dependent_ns=0.5, l2_usable=0.5106, instructions_per_element=1.229, tensor_efficiency=0.7723,
        warp_tile_half=415.8, tail=1.0, smooth=3.130, spill_tbps=8.141, program_ns=67.18, burst_bytes=32.79,
        provenance=_H200_PROVENANCE),
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


def _smooth_max(values: list[float], p: float) -> float:
    top = max(values)
    if top <= 0:
        return 0.0
    return top * sum((v / top) ** p for v in values if v > 0) ** (1.0 / p)


def estimate(launch: Launch, hw: Hardware, cal: Calibration | None = None) -> ConfigEstimate:
    """Microseconds for one launch of this configuration on `hw`.

    Programs run in rounds of (multiprocessors x resident programs). Each program runs `iterations` steps; a step
    takes the smooth maximum of: its memory wait (a DRAM round trip shared by the iterations of a pass that are
    in flight together; in a tl.dot loop, the operand copy and its transfer over num_stages - 1 copies in flight:
    Triton's pipeliner pipelines only what feeds tl.dot) plus its own dependent instructions; the scheduler's
    issue slots shared by every resident warp; its share of the tensor cores. Against that lifetime stand the
    whole launch's DRAM bytes (short contiguous runs pay whole sectors; a second pass misses L2 when the resident
    programs' data overflow it), its L2 re-reads and the rate at which blocks launch. Spilled registers add their
    local-memory traffic, at the DRAM rate for the share of spill slots L2 cannot hold."""
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
    sms = hw.sm_count
    programs = max(1, int(launch.programs))
    waves = programs / (sms * per_sm)
    rounds = math.floor(waves) + cal.tail * (math.ceil(waves) - math.floor(waves)) if waves > 1 else 1.0
    resident = min(float(per_sm), programs / sms)  # programs per multiprocessor at a time
    threads = float(spec.warp_size if spec is not None else 32) * warps
    steps = max(1.0, launch.iterations)

    # One step of one program.
    per_step = launch.elements / (programs * steps)
    if launch.block_elements:
        # A block narrower than the program's threads is replicated across them: every thread still issues.
        block = max(1.0, launch.block_elements)
        per_thread = per_step / block * max(1.0, block / threads)
    else:
        per_thread = per_step / threads
    instructions = per_thread * cal.instructions_per_element
    warps_per_scheduler = resident * warps / 4.0
    l2_per_sm = cal.l2_tbps * 1e12 / sms
    copy = 0.0
    if launch.tensor_flops:
        # A K step's operands arrive after the copy's latency plus their transfer at this SM's share of L2;
        # num_stages - 1 copies in flight hide the latency, not the transfer.
        copy = resident * launch.bytes_per_iteration / l2_per_sm
        latency = (cal.dot_latency_ns * 1e-9 + copy) / max(1, launch.num_stages - 1)
    else:
        latency = cal.latency_ns * 1e-9 / min(cal.loop_overlap, max(1.0, steps / max(1, launch.passes)))
    latency += instructions * cal.dependent_ns * 1e-9
    # A scheduler issues one warp-instruction per cycle (four schedulers per SM; 1.5 GHz where the vendor
    # publishes no clock).
    issue = instructions * warps_per_scheduler / ((hw.clock_ghz or 1.5) * 1e9)
    tensor = 0.0
    if launch.tensor_flops:
        shape = 1.0
        if launch.warp_tile:
            tile = max(1.0, launch.warp_tile)
            shape = tile / (tile + cal.warp_tile_half)
        per_sm_peak = hw.peak(launch.tensor_dtype) * 1e12 / sms * cal.tensor_efficiency * shape
        tensor = launch.tensor_flops / (programs * steps) * resident / per_sm_peak
    step = _smooth_max([latency, issue, tensor, copy], cal.smooth)
    lifetime = rounds * steps * step

    waste = 1.0
    if launch.contiguous_bytes:
        waste = max(1.0, cal.burst_bytes / max(1.0, launch.contiguous_bytes))
    dram_bytes, l2_bytes = launch.dram_bytes, launch.l2_bytes
    if launch.reread_bytes and launch.program_bytes:
        # L2 keeps a program's data for its second pass only while all resident programs' data fit in it.
        working_set = sms * resident * launch.program_bytes
        missed = launch.reread_bytes * (1.0 - min(1.0, hw.l2_mb * 1e6 * cal.l2_usable / working_set))
        dram_bytes, l2_bytes = dram_bytes + missed, l2_bytes - missed
    dram = dram_bytes * waste / (hw.hbm_tbps * 1e12 * cal.dram_efficiency)
    l2 = l2_bytes / (cal.l2_tbps * 1e12)
    launches = programs / sms * cal.program_ns * 1e-9
    body = _smooth_max([lifetime, dram, l2, launches], cal.smooth)
    spill = 0.0
    if launch.spill_bytes:
        # Spilled registers go out and come back once per iteration of the main loop. Local memory is cached in
        # L2 like any global line: while every resident thread's spill slots fit its usable share they stay
        # there; beyond it the stores are written back to DRAM and the reloads miss.
        traffic = 2.0 * launch.spill_bytes * threads * programs * steps
        local_set = sms * resident * threads * launch.spill_bytes
        missed = 1.0 - min(1.0, hw.l2_mb * 1e6 * cal.l2_usable / local_set)
        spill = traffic * (1.0 - missed) / (cal.spill_tbps * 1e12) + \
            traffic * missed / (hw.hbm_tbps * 1e12 * cal.dram_efficiency)
    us = (body + spill) * 1e6 + hw.launch_overhead_us
    terms = {"latency": rounds * steps * latency, "issue": rounds * steps * issue, "tensor": rounds * steps * tensor,
             "dram": dram, "l2": l2, "launches": launches, "spill": spill}
    return ConfigEstimate(us, {k: v * 1e6 for k, v in terms.items()}, per_sm, waves, calibrated_on=measured_on)


def _operand_bytes(dtype: str) -> int:
    """Bytes of a tl.dot operand element, from its Triton dtype name (the keys of Work.tensor_flops: "fp16",
    "bf16", "fp32", "fp8e4nv", "int8", ...); 2 where the name is not one of those."""
    for prefix, size in (("fp8", 1), ("int8", 1), ("uint8", 1), ("fp16", 2), ("bf16", 2), ("tf32", 4), ("fp32", 4),
                         ("fp64", 8)):
        if dtype.startswith(prefix):
            return size
    return 2


def launch_from_work(work, hw: Hardware, registers: int | None = None, shared_bytes: int | None = None,
                     spill_bytes: int = 0) -> Launch:
    """The model's view of a launch whose work was counted (analyzers.roofline.Work) and compiled.

    The loop's shape is read from the block-size constexprs: a tl.dot kernel iterates over K in BLOCK_K steps
    (iterations = dot FLOPs per program / 2 x BLOCK_M x BLOCK_N x BLOCK_K); another kernel works on a block of
    BLOCK_M x BLOCK_N elements (or its widest block) per iteration (iterations = bytes a program loads / the
    block's bytes, at 4 bytes an element: the counts do not keep element sizes, so an fp16 row kernel is read as
    looping twice as often). Where neither reading applies, one iteration carrying the program's whole loads.
    Without a tl.dot, the bytes an argument is read beyond its footprint are a program's re-reads of its own data
    (a second pass over a row): whether L2 keeps them is the model's to say."""
    from .roofline import dram_bytes

    programs = max(1, int(work.programs))
    blocks = {k: v for k, v in work.constexprs if isinstance(v, int) and not isinstance(v, bool) and v > 0
              and "BLOCK" in k.upper()}
    by_axis = {axis: next((v for k, v in blocks.items() if k.upper().removesuffix("_SIZE").endswith(axis)), None)
               for axis in ("M", "N", "K")}
    load_per_program = work.load_bytes / programs
    iterations, per_iteration, warp_tile, block = 1.0, load_per_program, None, None
    tensor = sum(work.tensor_flops.values())
    bm, bn, bk = by_axis["M"], by_axis["N"], by_axis["K"]
    reread = program_bytes = 0.0
    if tensor and bm and bn and bk:
        iterations = max(1.0, tensor / programs / (2.0 * bm * bn * bk))
        per_iteration = load_per_program / iterations
        warp_tile = bm * bn / max(1, work.num_warps)
    elif blocks:
        elem = 4.0
        block = float(bm * bn) if bm and bn else float(max(blocks.values()))
        iterations = max(1.0, load_per_program / (block * elem))
        per_iteration = load_per_program / iterations
    if tensor:
        dram = dram_bytes(work, hw)
    else:
        dram = work.footprint_bytes
        for arg in work.args:
            if arg.load_bytes > arg.footprint_bytes:
                reread += arg.load_bytes - arg.footprint_bytes
                program_bytes += arg.footprint_bytes / programs
    dtype = next(iter(work.tensor_flops), "fp16")
    if shared_bytes is None and tensor and bm and bn and bk:
        # Not compiled: Triton's pipeliner keeps num_stages copies of the A and B tiles in shared memory (exactly
        # so in every compiled configuration of the H200 matmul sweeps), so a tile too large for an SM is known
        # unlaunchable without a compile.
        shared_bytes = int(max(1, work.num_stages) * (bm * bk + bk * bn) * _operand_bytes(dtype))
    return Launch(programs=programs, num_warps=work.num_warps, num_stages=work.num_stages, dram_bytes=dram,
                  l2_bytes=max(0.0, work.requested_bytes - dram), tensor_flops=tensor, tensor_dtype=dtype,
                  elements=work.vector_flops + work.requested_bytes / 4.0, iterations=iterations,
                  bytes_per_iteration=per_iteration, warp_tile=warp_tile, block_elements=block,
                  reread_bytes=reread, program_bytes=program_bytes, registers=registers,
                  shared_bytes=shared_bytes, spill_bytes=spill_bytes)


def configuration_estimate(work, hw: Hardware, resources=None):
    """The one estimate of one launch of one configuration, shown everywhere (check, the lens, the report, tune,
    the assistant): on a device this model is calibrated for, its figure, with the roofline's bound and the
    fraction of the roofline floor it reaches; elsewhere the roofline's (analyzers/roofline.py). `work` is an
    analyzers.roofline.Work, `resources` the compile's analyzers.roofline.Resources (None: assumed)."""
    import dataclasses

    from .roofline import estimate as roofline_estimate
    from .roofline import label

    base = roofline_estimate(work, hw, resources)
    if not base.launchable or hw.name not in CALIBRATIONS or not math.isfinite(base.us):
        return base
    res = resources
    launch = launch_from_work(work, hw, registers=res.registers if res else None,
                              shared_bytes=res.shared_bytes if res else None,
                              spill_bytes=(res.spill_bytes or 0) if res else 0)
    ranked = estimate(launch, hw)
    if not ranked.launchable and res is not None and res.registers is not None:
        return dataclasses.replace(base, us=math.inf, bound="invalid", label=f"cannot launch on {hw.name}",
                                   fraction_of_roofline=0.0, launchable=False, notes=(
                                       f"cannot launch on {hw.name}: {res.registers} registers per thread and "
                                       f"{res.shared_bytes} bytes of shared memory per program do not fit",))
    if not math.isfinite(ranked.us) or ranked.us <= 0:
        return base
    floor = base.us * base.fraction_of_roofline  # the ideal roofline time of this work
    return dataclasses.replace(
        base, us=ranked.us, label=label(ranked.us, hw), fraction_of_roofline=min(1.0, floor / ranked.us),
        terms_us={**base.terms_us, **{f"model_{k}": v for k, v in ranked.terms_us.items()}},
        programs_per_sm=ranked.programs_per_sm, waves=ranked.waves,
        model=f"kernel-lsp configuration model (calibrated on {ranked.calibrated_on or hw.name})")
