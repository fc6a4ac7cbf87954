"""The accelerators latency estimates are made for: bandwidth, peak throughput per dtype, multiprocessors, caches,
launch overhead and the efficiency factors that turn peaks into what kernels reach, each number with its source.

Pure data: no triton or torch import, never raises. Provenance tags:
- [VENDOR] the vendor's datasheet (dense, non-sparse figures): NVIDIA A100 / H100 / H200 / B200 datasheets,
  AMD Instinct MI300X datasheet, AWS Trainium2 product page.
- [H200-MEAS] measured on an H200 (triton 3.6, torch 2.11): vector add fp32 2**28 elements with do_bench reached
  4.36 TB/s of 4.8 (0.91); bf16 matmul 8192**3 with the best Triton tile (128x256x64, 8 warps, 3 stages) reached
  632 TFLOP/s of 989 (0.64); cuBLAS 751 (0.76).
- [PRACTICE] practitioners' figures: streaming kernels reach ~0.92 of HBM bandwidth, GEMMs ~0.78 of the dense peak,
  a kernel launch costs 2-4 us.
- [H200-FIT] fitted by `bench/model_accuracy.py` to its points measured on an H200 (date and points given).
- [FITTED] fitted to the H200 tile measurements above: L2 bandwidth such that loads re-read from L2 explain why
  small matmul tiles run at half the speed of large ones (64x64x32: 327 TFLOP/s; 128x128x64: 537).
  `python bench/model_accuracy.py` prints refreshed factors from measurements on the device it runs on.

Compile targets map to a default device (`device_for_target`): sm_80 -> A100, sm_90 -> H200 (the H100 shares the
sm_90 target; the H200 is what the measurements above were taken on, and its compute peaks equal the H100's, so only
memory-bound estimates differ: pick "H100" explicitly for one), sm_100 -> B200, gfx942 -> MI300X.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from . import targets as _targets

# Dtype classes of peak throughput. "fp16" covers bf16 too (same peak on every device listed).
DTYPE_CLASSES = ("fp64", "fp32", "tf32", "fp16", "fp8", "int8")
_DTYPE_ALIASES = {
    "float64": "fp64", "double": "fp64", "fp64": "fp64",
    "float32": "fp32", "float": "fp32", "fp32": "fp32",
    "tf32": "tf32",
    "float16": "fp16", "half": "fp16", "fp16": "fp16", "bfloat16": "fp16", "bf16": "fp16",
    "float8": "fp8", "fp8": "fp8", "fp8e4nv": "fp8", "fp8e5": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "e4m3": "fp8", "e5m2": "fp8",
    "int8": "int8", "i8": "int8", "uint8": "int8", "u8": "int8",
}


def dtype_class(dtype: str) -> str:
    """"bfloat16" / "torch.float16" / "fp8e4nv" -> the peak-throughput class ("fp16", "fp8", ...); fp32 if unknown."""
    key = str(dtype).lower().removeprefix("torch.").removeprefix("tl.").removeprefix("*")
    return _DTYPE_ALIASES.get(key, "fp32")


@dataclass(frozen=True)
class Hardware:
    name: str
    vendor: str
    description: str
    hbm_tbps: float  # DRAM bandwidth, TB/s (1e12 bytes per second)
    peak_tflops: dict[str, float]  # dense tensor-unit peak per dtype class (int8: TOPS); "fp32" is the vector peak
    sm_count: int  # streaming multiprocessors / compute units / NeuronCores
    l2_mb: float  # the last cache before DRAM, MB (MI300X: Infinity Cache)
    clock_ghz: float | None
    launch_overhead_us: float
    bw_efficiency: float  # achievable fraction of hbm_tbps for streaming kernels
    matmul_efficiency: float  # achievable fraction of the tensor-unit peak for a well-tiled GEMM
    l2_tbps: float  # bandwidth of loads served by L2 (re-reads of data another program brought in)
    target: str | None = None  # analyzers/targets.py entry: shared-memory and register limits, resident warps
    # Warps per multiprocessor needed to keep enough loads in flight to saturate DRAM (Little's law: bandwidth x
    # latency / bytes in flight per warp); fewer resident warps make a kernel latency-bound.
    warps_to_saturate: float = 12.0
    # Latency of a DRAM load under load (Little's law again: the bytes in flight it takes to sustain the bandwidth).
    dram_latency_ns: float = 600.0
    provenance: dict[str, str] = field(default_factory=dict)  # field name -> where its value comes from

    def peak(self, dtype: str, tensor: bool = True) -> float:
        """TFLOP/s for an operation on `dtype`: tensor-unit peak when `tensor`, else the vector (fp32) peak."""
        cls = dtype_class(dtype)
        if not tensor:
            return self.peak_tflops.get("fp32", 1.0) if cls != "fp64" else self.peak_tflops.get("fp64", 1.0)
        for c in (cls, "fp16", "fp32"):
            if self.peak_tflops.get(c):
                return self.peak_tflops[c]
        return 1.0

    @property
    def target_spec(self) -> _targets.TargetSpec | None:
        if not self.target:
            return None
        try:
            return _targets.parse_target(self.target)
        except _targets.UnknownTargetError:
            return None


_V = "[VENDOR]"
_NV_LAUNCH = "[PRACTICE] 2-4 us per launch; 3 us"
_COMMON_PROV = {
    "bw_efficiency": "[H200-MEAS] vector add fp32 2**28: 4.36 of 4.8 TB/s (0.91); [PRACTICE] ~0.92",
    "matmul_efficiency": "[H200-MEAS] best Triton bf16 tile 632 of 989 TFLOP/s at 8192**3 reached with the L2 "
                         "term of the model; [PRACTICE] ~0.78",
    "launch_overhead_us": _NV_LAUNCH,
    "warps_to_saturate": "Little's law: HBM bandwidth x ~600 ns latency / ~2 KB in flight per warp, per SM",
    "dram_latency_ns": "[PRACTICE] assumed 600 ns for a loaded HBM access on Ampere/Hopper/Blackwell "
                       "(pointer-chasing microbenchmarks report ~500 ns idle; queueing under load adds to it)",
}


_H200_BW_FIT = ("[H200-FIT] 0.847: memory-bound points (vector add, softmax, layernorm; 2**20 to 2**27 elements) of "
                "`python bench/model_accuracy.py` on an H200, 2026-11-29 (triton 3.6, torch 2.11, the host's launch "
                "cost kept outside the timed window); median model error 12.8% over 22 points there "
                "(docs/benchmarks.md)")
_H200_MATMUL_FIT = ("[H200-FIT] 0.727: compute-bound matmul points (fp16, 2048**3 and 4096**3, tiles 64x64 and "
                    "128x256) of the same run; the best Triton bf16 tile at 8192**3 reached 632 of 989 TFLOP/s (0.64)")


def _nvidia(name: str, desc: str, hbm: float, peaks: dict[str, float], sms: int, l2: float, clock: float | None,
            target: str, l2_tbps: float, prov: dict[str, str], bw_efficiency: float = 0.91,
            matmul_efficiency: float = 0.78) -> Hardware:
    return Hardware(name=name, vendor="NVIDIA", description=desc, hbm_tbps=hbm, peak_tflops=peaks, sm_count=sms,
                    l2_mb=l2, clock_ghz=clock, launch_overhead_us=3.0, bw_efficiency=bw_efficiency,
                    matmul_efficiency=matmul_efficiency, l2_tbps=l2_tbps, target=target, provenance={**_COMMON_PROV, **prov})


DEVICES: dict[str, Hardware] = {
    h.name: h
    for h in (
        _nvidia("A100", "NVIDIA A100 SXM 80GB", 2.039,
                {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "int8": 624.0}, 108, 40.0, 1.41,
                "sm_80", 2.039 * 2.5,
                {"hbm_tbps": _V, "peak_tflops": _V, "sm_count": _V, "l2_mb": _V, "clock_ghz": _V + " boost clock",
                 "l2_tbps": "[FITTED] H200 ratio of L2 to HBM bandwidth (2.5x) applied to A100's HBM"}),
        _nvidia("H100", "NVIDIA H100 SXM5 80GB", 3.35,
                {"fp64": 67.0, "fp32": 67.0, "tf32": 494.7, "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9}, 132,
                50.0, 1.98, "sm_90", 12.0,
                {"hbm_tbps": _V, "peak_tflops": _V, "sm_count": _V, "l2_mb": _V,
                 "clock_ghz": "nvidia-smi max SM clock (1980 MHz)",
                 "l2_tbps": "[FITTED] on H200 (same L2 as H100): 12 TB/s"}),
        _nvidia("H200", "NVIDIA H200 SXM 141GB", 4.8,
                {"fp64": 67.0, "fp32": 67.0, "tf32": 494.7, "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9}, 132,
                50.0, 1.98, "sm_90", 12.0,
                {"hbm_tbps": _V, "peak_tflops": _V + " (same compute as H100 SXM)", "sm_count": _V,
                 "l2_mb": _V + " (torch reports 60 MB: the whole die's L2, 50 MB usable per the datasheet)",
                 "clock_ghz": "nvidia-smi max SM clock (1980 MHz)",
                 "l2_tbps": "[FITTED] H200 matmul tiles 64x64x32 / 128x128x64 / 128x256x64 at 8192**3",
                 "bw_efficiency": _H200_BW_FIT, "matmul_efficiency": _H200_MATMUL_FIT}, bw_efficiency=0.847,
                matmul_efficiency=0.727),
        _nvidia("B200", "NVIDIA B200 (HGX, 1000 W)", 8.0,
                {"fp64": 40.0, "fp32": 80.0, "tf32": 1100.0, "fp16": 2250.0, "fp8": 4500.0, "int8": 4500.0}, 148,
                126.0, None, "sm_100", 8.0 * 2.5,
                {"hbm_tbps": _V, "peak_tflops": _V + " (dense: half the sparse figures)", "sm_count": _V,
                 "l2_mb": _V, "clock_ghz": "not published by the vendor",
                 "l2_tbps": "[FITTED] H200 ratio of L2 to HBM bandwidth (2.5x) applied to B200's HBM"}),
        Hardware(
            name="MI300X", vendor="AMD", description="AMD Instinct MI300X (OAM, 192 GB)", hbm_tbps=5.3,
            peak_tflops={"fp64": 81.7, "fp32": 163.4, "tf32": 653.7, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
            sm_count=304, l2_mb=256.0, clock_ghz=2.1, launch_overhead_us=4.0, bw_efficiency=0.80,
            matmul_efficiency=0.60, l2_tbps=5.3 * 2.5, target="gfx942", warps_to_saturate=16.0,
            provenance={
                "hbm_tbps": _V, "peak_tflops": _V + " (fp32: matrix peak; vector fp32 is 81.7)", "sm_count": _V,
                "l2_mb": _V + " Infinity Cache (256 MB; L2 is 4 MB per XCD)", "clock_ghz": _V + " peak engine clock",
                "launch_overhead_us": "[PRACTICE] HIP launches cost slightly more than CUDA's: 4 us",
                "bw_efficiency": "[PRACTICE] public MI300X stream benchmarks reach ~0.8 of 5.3 TB/s",
                "matmul_efficiency": "[PRACTICE] public MI300X GEMM benchmarks reach ~0.6 of the dense peak",
                "l2_tbps": "[FITTED] H200 ratio of L2 to HBM bandwidth (2.5x) applied to MI300X's HBM",
                "warps_to_saturate": "wave64 CDNA3: more waves in flight per CU to hide HBM latency",
                "dram_latency_ns": "[PRACTICE] assumed 600 ns, as on NVIDIA parts (not measured on an MI300X)",
            }),
        Hardware(
            name="Trainium2", vendor="AWS", description="AWS Trainium2 chip (8 NeuronCores)", hbm_tbps=2.9,
            peak_tflops={"fp32": 181.0, "fp16": 667.0, "fp8": 1299.0}, sm_count=8, l2_mb=224.0, clock_ghz=None,
            launch_overhead_us=10.0, bw_efficiency=0.80, matmul_efficiency=0.70, l2_tbps=2.9 * 2.5, target=None,
            warps_to_saturate=1.0,
            provenance={
                "hbm_tbps": _V, "peak_tflops": _V + " (dense)", "sm_count": _V + " NeuronCores per chip",
                "l2_mb": "SBUF: 28 MiB per NeuronCore x 8 (software-managed, no hardware cache)",
                "clock_ghz": "not published by the vendor",
                "launch_overhead_us": "[PRACTICE] NKI kernel dispatch through the Neuron runtime: ~10 us",
                "bw_efficiency": "[PRACTICE] DMA-bound NKI kernels: ~0.8", "matmul_efficiency": "[PRACTICE] ~0.7",
                "l2_tbps": "SBUF re-reads: 2.5x HBM (assumed, as on GPUs)",
                "warps_to_saturate": "not applicable: DMA queues, not warps",
                "dram_latency_ns": "not applicable: no target occupancy model, so no in-flight limit is applied",
            }),
    )
}

_DEVICE_ALIASES = {
    "a100": "A100", "a100-sxm": "A100", "h100": "H100", "h100-sxm": "H100", "h200": "H200", "b200": "B200",
    "mi300x": "MI300X", "mi300": "MI300X", "trainium2": "Trainium2", "trn2": "Trainium2",
}

# Compile target -> the device an estimate assumes when the user names only a target.
TARGET_DEVICES = {"sm_80": "A100", "sm_90": "H200", "sm_100": "B200", "gfx942": "MI300X"}


def get_device(name: str, table: dict[str, Hardware] | None = None) -> Hardware | None:
    """A device by name ("H200", "h100", "trn2") or by compile target ("sm_90", "hopper", "gfx942"); None if
    neither. `table` (default DEVICES) may hold the user's overrides."""
    table = DEVICES if table is None else table
    if not isinstance(name, str) or not name.strip():
        return None
    raw = name.strip()
    if raw in table:
        return table[raw]
    lowered = {k.lower(): v for k, v in table.items()}
    if raw.lower() in lowered:
        return lowered[raw.lower()]
    alias = _DEVICE_ALIASES.get(raw.lower().replace(" ", ""))
    if alias and alias in table:
        return table[alias]
    return device_for_target(raw, table)


def device_for_target(target: str, table: dict[str, Hardware] | None = None) -> Hardware | None:
    """The default device of a compile target ("sm_90" -> H200); None for a target without one (sm_89, gfx950)."""
    table = DEVICES if table is None else table
    try:
        spec = _targets.parse_target(str(target))
    except (_targets.UnknownTargetError, TypeError, AttributeError):
        return None
    name = TARGET_DEVICES.get(spec.name)
    return table.get(name) if name else None


# --- user overrides ---------------------------------------------------------------------------------------------

_NUMBER_FIELDS = {"hbm_tbps", "sm_count", "l2_mb", "clock_ghz", "launch_overhead_us", "bw_efficiency",
                  "matmul_efficiency", "l2_tbps", "warps_to_saturate", "dram_latency_ns"}
_FRACTIONS = {"bw_efficiency", "matmul_efficiency"}


def parse_hardware_overrides(value: object) -> tuple[dict[str, Hardware], list[str]]:
    """Devices from settings: {"my-accel": {"base": "H100", "hbm_tbps": 2.0, "peak_tflops": {"fp16": 500}}}.

    Each entry overrides fields of `base` (an existing device; required for a new name, optional when the name is
    an existing device, which is then adjusted). Returns the full table (built-ins plus these) and one message per
    rejected entry or field; a bad field is dropped, the rest of its entry still applies.
    """
    table = dict(DEVICES)
    errors: list[str] = []
    if value is None:
        return table, errors
    if not isinstance(value, dict):
        return table, [f"hardware overrides must be an object of device name -> fields, got {type(value).__name__}"]
    for name, entry in value.items():
        if not isinstance(name, str) or not name.strip():
            errors.append(f"hardware override name {name!r} must be a non-empty string")
            continue
        if not isinstance(entry, dict):
            errors.append(f"hardware override {name!r} must be an object of fields, got {type(entry).__name__}")
            continue
        base_name = entry.get("base", name if name in table else None)
        base = get_device(base_name, table) if isinstance(base_name, str) else None
        if base is None:
            known = ", ".join(table)
            errors.append(f"hardware override {name!r}: base {base_name!r} is not a known device ({known}); "
                          "give \"base\" to start from one")
            continue
        changes: dict[str, Any] = {"name": name}  # checked per field below
        prov = dict(base.provenance)
        for key, raw in entry.items():
            if key == "base":
                continue
            if key in _NUMBER_FIELDS:
                ok = isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw) and raw > 0
                if ok and key in _FRACTIONS and raw > 1:
                    ok = False
                if not ok:
                    limit = "a number in (0, 1]" if key in _FRACTIONS else "a positive number"
                    errors.append(f"hardware override {name!r}: {key} must be {limit}, got {raw!r}")
                    continue
                changes[key] = int(raw) if key == "sm_count" else float(raw)
                prov[key] = "user setting"
            elif key == "peak_tflops":
                if not isinstance(raw, dict):
                    errors.append(f"hardware override {name!r}: peak_tflops must be an object of dtype -> TFLOP/s")
                    continue
                peaks = dict(base.peak_tflops)
                for dt, tf in raw.items():
                    cls = _DTYPE_ALIASES.get(str(dt).lower())
                    if cls is None or not isinstance(tf, (int, float)) or isinstance(tf, bool) or not tf > 0:
                        errors.append(f"hardware override {name!r}: peak_tflops[{dt!r}] must name a dtype "
                                      f"({', '.join(DTYPE_CLASSES)}) and be a positive number, got {tf!r}")
                        continue
                    peaks[cls] = float(tf)
                changes["peak_tflops"] = peaks
                prov["peak_tflops"] = "user setting (others from " + base.name + ")"
            elif key in ("description", "vendor"):
                changes[key] = str(raw)
            elif key == "target":
                try:
                    changes["target"] = None if raw is None else _targets.parse_target(str(raw)).name
                except _targets.UnknownTargetError:
                    errors.append(f"hardware override {name!r}: target {raw!r} is not a known compile target")
            else:
                allowed = ", ".join(sorted(_NUMBER_FIELDS | {"peak_tflops", "description", "vendor", "target"}))
                errors.append(f"hardware override {name!r}: unknown field {key!r} (known: base, {allowed})")
        changes["provenance"] = prov
        if "description" not in changes and name != base.name:
            changes["description"] = f"{base.description}, adjusted by settings"
        table[name] = replace(base, **changes)
    return table, errors
