"""Latency estimates of NKI kernels on one NeuronCore: the work the NKI model counted while the kernel ran (bytes
moved by DMA, Tensor Engine passes, Vector and Scalar Engine element steps) over the engines' published rates.

Every figure is an estimate ("≈12 µs Trainium2 est."): the engines and the DMA queues are taken to overlap
perfectly, so the time is that of the busiest one (the bound), with no instruction issue, dependency, semaphore or
launch cost. Pure: no NumPy, never raises.

The rates, per NeuronCore, each with its public source:
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from . import nki_limits
from .roofline import format_us

_V3 = "AWS Neuron docs, NeuronCore-v3 architecture (awsdocs-neuron.readthedocs-hosted.com, " \
      "about-neuron/arch/neuron-hardware/neuron-core-v3)"
_TRN2 = "AWS Neuron docs, Trainium2 Architecture Guide for NKI (nki/guides/architecture/trainium2_arch)"


@dataclass(frozen=True)
class NeuronCore:
    """One NeuronCore's rates, as the vendor publishes them."""

    name: str  # the device the estimate is labelled with
    cores_per_chip: int
    hbm_tbps_chip: float  # the chip's HBM bandwidth, TB/s, shared by its NeuronCores
    dma_engines_chip: int
    tensor_tflops: dict[str, float]  # Tensor Engine, dense, per operand class ("bf16", "fp8", "fp32")
    vector_tflops: float  # Vector Engine, FP32
    scalar_tflops: float  # Scalar Engine (activations), FP32
    provenance: dict[str, str] = field(default_factory=dict)

    @property
    def hbm_bytes_per_s(self) -> float:
        """One NeuronCore's share of the chip's HBM bandwidth."""
        return self.hbm_tbps_chip * 1e12 / self.cores_per_chip


NEURON_CORES = {
    "trn2": NeuronCore(
        name="Trainium2", cores_per_chip=8, hbm_tbps_chip=2.9, dma_engines_chip=128,
        # The Tensor Engine is a 128x128 array: 79 TFLOPS is 2*128*128 FLOPs per cycle at ~2.4 GHz.
        tensor_tflops={"bf16": 79.0, "fp8": 158.0, "fp32": 79.0 / 4},
        vector_tflops=1.0, scalar_tflops=1.2,
        provenance={
            "cores_per_chip": _TRN2 + ": 8 NeuronCores (v3) per Trainium2 device",
            "hbm_tbps_chip": _TRN2 + ": 4 HBM stacks, 96 GiB, 2.9 TB/s per device",
            "dma_engines_chip": _TRN2 + ": 128 DMA engines per device",
            "tensor_tflops.bf16": _V3 + ": 79 BF16/FP16/TF32 TFLOPS (dense)",
            "tensor_tflops.fp8": _V3 + ": 158 cFP8 TFLOPS (dense)",
            "tensor_tflops.fp32": "assumed: FP32 operands at a quarter of the BF16 rate (not published per core)",
            "vector_tflops": _V3 + ": Vector Engines deliver 1 TFLOPS of FP32",
            "scalar_tflops": _V3 + ": Scalar Engines deliver 1.2 TFLOPS of FP32",
        }),
}
DEFAULT = "trn2"

# What the estimate assumes beyond the table, shown with every estimate.
ASSUMPTIONS = (
    "one NeuronCore with 1/8 of the chip's HBM bandwidth; on-chip DMA copies at the same rate",
    "engines and DMA overlap perfectly (the busiest one sets the time); no launch, issue or dependency cost",
    "a Tensor Engine pass streams its moving operand's columns through the whole 128x128 array",
    "Vector and Scalar Engine instructions take all 128 partitions' time: one FLOP per element step",
)


def matmul_class(dtype: str) -> str:
    """The Tensor Engine rate class of an operand dtype name."""
    if dtype.startswith("float8"):
        return "fp8"
    if dtype in ("float32", "fp32", "int32"):
        return "fp32"
    return "bf16"


@dataclass(frozen=True)
class NkiEstimate:
    us: float
    bound: str  # "DMA", "Tensor Engine", "Vector Engine", "Scalar Engine"
    engine_us: dict[str, float]  # per engine (and DMA), the time its counted work takes alone
    serial_us: float  # the same work with no overlap at all: an upper figure
    device: str
    assumptions: tuple[str, ...] = ASSUMPTIONS

    @property
    def label(self) -> str:
        return f"≈{format_us(self.us)} {self.device} est."

    def to_json(self) -> dict:
        out = asdict(self)
        out["assumptions"] = list(self.assumptions)
        out["label"] = self.label
        return out


def estimate(counts: dict, core: NeuronCore | None = None) -> NkiEstimate:
    """The estimate from the model's counters (`Counters.to_json()` of kernel_lsp/engine/nki)."""
    core = core or NEURON_CORES[DEFAULT]
    full = nki_limits.PMAX
    dma_bytes = float(counts.get("hbm_read_bytes", 0)) + float(counts.get("hbm_write_bytes", 0)) + \
        float(counts.get("on_chip_dma_bytes", 0))
    tensor_s = sum(float(columns) * 2 * full * full / (core.tensor_tflops.get(cls, core.tensor_tflops["bf16"]) * 1e12)
                   for cls, columns in (counts.get("tensor_columns") or {}).items())
    engine_s = {
        "DMA": dma_bytes / core.hbm_bytes_per_s,
        "Tensor Engine": tensor_s,
        "Vector Engine": float(counts.get("vector_steps", 0)) * full / (core.vector_tflops * 1e12),
        "Scalar Engine": float(counts.get("scalar_steps", 0)) * full / (core.scalar_tflops * 1e12),
    }
    bound = max(engine_s, key=lambda k: engine_s[k])
    engine_us = {k: v * 1e6 for k, v in engine_s.items()}
    return NkiEstimate(engine_us[bound], bound, engine_us, sum(engine_us.values()), core.name)
