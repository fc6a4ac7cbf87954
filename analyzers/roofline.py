"""Analytic latency of one kernel launch: a roofline over DRAM, L2 and tensor/vector units, with waves over the
multiprocessors at the kernel's occupancy, the tail wave, a concurrency limit on bandwidth and launch overhead.

Pure: plain dataclasses in and out, no triton/torch import, never raises (a launch that cannot run is an Estimate
with `launchable=False` and a note). Every Estimate is labelled as an estimate and names the device it assumes.

The model, per launch (times in seconds):
- DRAM bytes = each argument's footprint (distinct bytes it touches, at most what was requested) plus re-reads
  (requested - footprint) that miss L2: none when all footprints fit in L2, else `REREAD_MISS` of them.
- t_dram = DRAM bytes / (hbm x bw_efficiency x concurrency); t_l2 = re-read bytes / (l2 bandwidth x concurrency),
  where concurrency (at most 1) is the smaller of two Little's-law limits on memory-level parallelism, below
  which DRAM latency is not hidden ("latency" bound):
  - warps: resident warps / (SMs x warps_to_saturate);
  - bytes: the load bytes the resident programs have in flight per multiprocessor / the bytes that must be in
    flight to sustain its share of the bandwidth (achievable bandwidth x dram_latency_ns / SMs). A program's
    loads count whole (a program that loops has less in flight at once), so this limit only ever bites on
    tiny programs: BLOCK_SIZE=64 with one warp keeps ~16 KB in flight per H200 multiprocessor, ~18 KB is needed.
- t_tensor = dot FLOPs / (dtype peak x matmul_efficiency), t_vector = other FLOPs / (fp32 peak x VECTOR_EFFICIENCY),
  both stretched by the tail: programs run ceil(programs / SMs) deep on the busiest multiprocessor.
- t = max(terms) + OVERLAP x second largest (units overlap imperfectly), plus the launch overhead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from . import targets as _targets
from .hardware import Hardware

REREAD_MISS = 0.15  # [FITTED] fraction of re-reads that go to DRAM when the footprint exceeds L2 (swizzled GEMMs)
OVERLAP = 0.5  # [FITTED] on the H200 matmul tiles: memory and tensor work overlap only partly
VECTOR_EFFICIENCY = 0.5  # fraction of the fp32 vector peak elementwise math reaches (loads/converts interleave)
DEFAULT_REGISTERS = 32  # per thread, when no compile facts are known: streaming kernels use 20-40
DEFAULT_DOT_REGISTERS = 128  # per thread for kernels with tl.dot: accumulators live in registers


@dataclass(frozen=True)
class ArgTraffic:
    """Bytes one tensor argument moves in one launch."""

    name: str
    load_bytes: float
    store_bytes: float
    footprint_bytes: float  # distinct bytes touched (<= the tensor's extent)
    extent_bytes: float = 0.0  # the tensor's size in memory


@dataclass(frozen=True)
class Work:
    """What one launch does, counted (by the interpreter) or computed by hand."""

    programs: int  # grid size (product of the three axes)
    num_warps: int = 4
    num_stages: int = 3
    args: tuple[ArgTraffic, ...] = ()
    tensor_flops: dict[str, float] = field(default_factory=dict)  # dtype class of the dot inputs -> FLOPs
    vector_flops: float = 0.0  # elementwise float operations (one per element per op)
    sampled_programs: int = 0  # how many programs were interpreted to count this (0: computed by hand)
    constexprs: tuple[tuple[str, object], ...] = ()
    grid: tuple[int, ...] = ()

    @property
    def load_bytes(self) -> float:
        return sum(a.load_bytes for a in self.args)

    @property
    def store_bytes(self) -> float:
        return sum(a.store_bytes for a in self.args)

    @property
    def requested_bytes(self) -> float:
        return self.load_bytes + self.store_bytes

    @property
    def footprint_bytes(self) -> float:
        return sum(min(a.footprint_bytes, a.load_bytes + a.store_bytes) for a in self.args)

    @property
    def flops(self) -> float:
        return sum(self.tensor_flops.values()) + self.vector_flops

    def to_json(self) -> dict:
        out = asdict(self)
        out["constexprs"] = [[k, v if isinstance(v, (int, float, str, bool)) or v is None else repr(v)]
                             for k, v in self.constexprs]
        out["load_bytes"], out["store_bytes"] = self.load_bytes, self.store_bytes
        return out


@dataclass(frozen=True)
class Resources:
    """Compile facts that set occupancy; None where unknown (defaults are then assumed and said so)."""

    registers: int | None = None
    shared_bytes: int | None = None
    spill_bytes: int | None = None


@dataclass(frozen=True)
class Estimate:
    us: float  # microseconds per launch (inf when it cannot launch)
    bound: str  # "memory" | "compute" | "latency" | "launch" | "invalid"
    device: str
    label: str  # "≈38 µs H200 est."
    fraction_of_roofline: float  # ideal roofline time / this estimate, 0..1
    dram_bytes: float
    terms_us: dict[str, float]  # dram, l2, tensor, vector, launch
    programs_per_sm: int
    waves: float
    launchable: bool = True
    notes: tuple[str, ...] = ()
    model: str = "kernel-lsp roofline v1"

    def to_json(self) -> dict:
        out = asdict(self)
        if math.isinf(self.us):
            out["us"] = None
        return out


def format_us(us: float) -> str:
    if not math.isfinite(us):
        return "—"
    if us >= 1000:
        return f"{us / 1000:.3g} ms"
    if us >= 10:
        return f"{us:.0f} µs"
    return f"{us:.1f} µs"


def dram_bytes(work: Work, hw: Hardware) -> float:
    footprint = work.footprint_bytes
    rereads = max(0.0, work.requested_bytes - footprint)
    miss = 0.0 if footprint <= hw.l2_mb * 1e6 else REREAD_MISS
    return footprint + miss * rereads


def programs_per_sm(work: Work, hw: Hardware, res: Resources | None = None) -> tuple[int, list[str]]:
    """Resident programs per multiprocessor from registers, shared memory and warps (targets.blocks_per_sm)."""
    notes: list[str] = []
    spec = hw.target_spec
    if spec is None:
        return 1, notes
    res = res or Resources()
    regs = res.registers
    if regs is None:
        regs = DEFAULT_DOT_REGISTERS if work.tensor_flops else DEFAULT_REGISTERS
        notes.append(f"registers not known: assumed {regs} per thread")
    shared = res.shared_bytes if res.shared_bytes is not None else 0
    return _targets.blocks_per_sm(spec, regs, shared, max(1, work.num_warps)), notes


def estimate(work: Work, hw: Hardware, resources: Resources | None = None) -> Estimate:
    """Microseconds for one launch of `work` on `hw`, with the bound and the terms behind it."""
    notes: list[str] = []
    try:
        per_sm, more = programs_per_sm(work, hw, resources)
        notes += more
    except Exception as exc:  # noqa: BLE001 - a strange resource value must not break the estimate
        per_sm, notes = 1, [f"occupancy unknown ({exc}); assumed one program per multiprocessor"]
    if per_sm <= 0:
        return Estimate(math.inf, "invalid", hw.name, f"cannot launch on {hw.name}", 0.0, 0.0, {}, 0, 0.0,
                        launchable=False, notes=((f"one program of {work.num_warps} warps does not fit on a {hw.name} "
                                                  "multiprocessor (registers or shared memory over the limit)"),))
    programs = max(0, int(work.programs))
    launch_s = hw.launch_overhead_us * 1e-6
    if programs == 0:
        return Estimate(hw.launch_overhead_us, "launch", hw.name, label(hw.launch_overhead_us, hw), 0.0, 0.0,
                        {"launch": hw.launch_overhead_us}, per_sm, 0.0, notes=("empty grid",))
    slots = hw.sm_count * per_sm
    waves = programs / slots
    spec = hw.target_spec
    warps = max(1, work.num_warps)
    in_flight = needed = None
    if spec is not None:
        resident_warps = min(programs, slots) * warps
        concurrency = min(1.0, resident_warps / (hw.sm_count * hw.warps_to_saturate))
        if work.load_bytes > 0 and hw.dram_latency_ns > 0:
            in_flight = min(per_sm, programs / hw.sm_count) * work.load_bytes / programs
            needed = hw.hbm_tbps * 1e12 * hw.bw_efficiency * hw.dram_latency_ns * 1e-9 / hw.sm_count
            concurrency = min(concurrency, in_flight / needed)
    else:
        concurrency = min(1.0, programs / hw.sm_count)
    concurrency = max(concurrency, 1e-6)
    busy_sms = min(programs, hw.sm_count)
    tail = math.ceil(programs / hw.sm_count) / (programs / busy_sms)  # >= 1: the busiest SM's depth vs the mean

    dram = dram_bytes(work, hw)
    terms = {
        "dram": dram / (hw.hbm_tbps * 1e12 * hw.bw_efficiency * concurrency),
        "l2": max(0.0, work.requested_bytes - work.footprint_bytes) / (hw.l2_tbps * 1e12 * concurrency),
        "tensor": sum(f / (hw.peak(cls) * 1e12 * hw.matmul_efficiency) for cls, f in work.tensor_flops.items())
        * tail * hw.sm_count / busy_sms,
        "vector": work.vector_flops / (hw.peak("fp32", tensor=False) * 1e12 * VECTOR_EFFICIENCY)
        * tail * hw.sm_count / busy_sms,
    }
    ordered = sorted(terms.values(), reverse=True)
    body = ordered[0] + OVERLAP * ordered[1]
    total = body + launch_s
    top = max(terms, key=terms.__getitem__)
    if launch_s >= body:
        bound = "launch"
    elif top in ("dram", "l2"):
        bound = "latency" if concurrency < 0.999 else "memory"
    else:
        bound = "compute"
    ideal = max(_dram_seconds(dram, hw), _compute_seconds(work, hw))
    us = total * 1e6
    if concurrency < 0.999:
        if in_flight is not None and needed is not None and in_flight < needed and in_flight / needed <= concurrency:
            notes.append(f"only {in_flight / 1024:.1f} KB of loads in flight per multiprocessor "
                         f"({min(programs, slots) * warps} warps): {concurrency:.0%} of the {needed / 1024:.1f} KB "
                         "that hides DRAM latency; larger blocks or more warps per program keep more in flight")
        else:
            notes.append(f"only {min(programs, slots) * warps} warps in flight: {concurrency:.0%} of what saturates "
                         "DRAM")
    if tail > 1.05 and top in ("tensor", "vector"):
        notes.append(f"tail wave: {programs} programs over {hw.sm_count} multiprocessors leave "
                     f"{(1 - 1 / tail):.0%} idle at the end")
    return Estimate(
        us=us, bound=bound, device=hw.name, label=label(us, hw), fraction_of_roofline=min(1.0, ideal / total),
        dram_bytes=dram, terms_us={**{k: v * 1e6 for k, v in terms.items()}, "launch": hw.launch_overhead_us},
        programs_per_sm=per_sm, waves=waves, notes=tuple(notes))


def _dram_seconds(dram: float, hw: Hardware) -> float:
    return dram / (hw.hbm_tbps * 1e12)


def _compute_seconds(work: Work, hw: Hardware) -> float:
    """The work's FLOPs at the device's peaks: dot FLOPs on the tensor units per dtype, the rest on the vector unit."""
    return (sum(f / (hw.peak(cls) * 1e12) for cls, f in work.tensor_flops.items())
            + work.vector_flops / (hw.peak("fp32", tensor=False) * 1e12))


@dataclass(frozen=True)
class Achieved:
    """A measured time set against the device's roofs for the work it did."""

    tflops: float  # FLOPs / measured time, TFLOP/s
    tbps: float  # DRAM bytes / measured time, TB/s
    peak_tflops: float | None  # the compute roof for this work's mix of dot dtypes and vector math (None: no FLOPs)
    peak_tbps: float  # the DRAM roof
    roofline_us: float  # the fastest this work can run: the slower of its bytes at the DRAM roof and FLOPs at peak
    fraction_of_roofline: float  # roofline_us / measured time; above 1 the counted work overstates what ran


def achieved(works: Sequence[Work], hw: Hardware, us: float) -> Achieved:
    """The launches `works` (one kernel call's launches) measured at `us` microseconds in all on `hw`."""
    seconds = us * 1e-6
    dram = sum(dram_bytes(w, hw) for w in works)
    flops = sum(w.flops for w in works)
    compute = sum(_compute_seconds(w, hw) for w in works)
    roofline_s = max(_dram_seconds(dram, hw), compute)
    return Achieved(
        tflops=flops / seconds / 1e12, tbps=dram / seconds / 1e12,
        peak_tflops=flops / compute / 1e12 if compute > 0 else None, peak_tbps=hw.hbm_tbps,
        roofline_us=roofline_s * 1e6, fraction_of_roofline=roofline_s / seconds)


def label(us: float, hw: Hardware | str) -> str:
    name = hw if isinstance(hw, str) else hw.name
    return f"≈{format_us(us)} {name} est."


def roofline_floor_us(load_store_bytes: float, hw: Hardware) -> float:
    """The fastest any kernel moving these DRAM bytes can run: bytes / peak bandwidth (no efficiency factor)."""
    return load_store_bytes / (hw.hbm_tbps * 1e12) * 1e6
