"""NeuronCore limits that NKI kernels must respect: one table for the static NKI rules (rules/nki.py) and the
CPU model that runs NKI kernels (kernel_lsp/engine/nki/).

Sources: the NKI programming model and ISA pages of the AWS Neuron documentation (SBUF and PSUM layout, the Tensor
Engine's operand limits, `nl.tile_size`), and the Trainium architecture pages for SBUF capacity per NeuronCore.
"""

from __future__ import annotations

PMAX = 128  # partitions of SBUF and PSUM (nl.tile_size.pmax)
PSUM_BANK_BYTES = 2048  # one PSUM bank per partition; a matmul accumulates into one bank
PSUM_BANKS = 8  # banks per partition: 16 KiB of PSUM per partition
PSUM_PARTITION_BYTES = PSUM_BANK_BYTES * PSUM_BANKS
STATIONARY_FMAX = 128  # free size of nc_matmul's stationary operand (nl.tile_size.gemm_stationary_fmax)
MOVING_FMAX = 512  # free size of nc_matmul's moving operand (nl.tile_size.gemm_moving_fmax)
# SBUF bytes per partition per NeuronCore generation (24 / 28 / 32 MiB over 128 partitions).
SBUF_PARTITION_BYTES = {"trn1": 24 * 2**20 // PMAX, "trn2": 28 * 2**20 // PMAX, "trn3": 32 * 2**20 // PMAX}
DEFAULT_GENERATION = "trn2"

TILE_SIZES = {"pmax": PMAX, "gemm_stationary_fmax": STATIONARY_FMAX, "gemm_moving_fmax": MOVING_FMAX,
              "psum_bank_fmax": PSUM_BANK_BYTES // 4, "psum_fmax": PSUM_BANK_BYTES // 4}

DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "tfloat32": 4, "int32": 4, "uint32": 4, "float16": 2, "fp16": 2, "bfloat16": 2,
    "bf16": 2, "int16": 2, "uint16": 2, "int8": 1, "uint8": 1, "bool_": 1, "float8_e4m3": 1, "float8_e5m2": 1,
    "float8_e4m3fn": 1, "float8_e5m2_x4": 4, "float8_e4m3fn_x4": 4,
}

# What the Tensor Engine reads (nc_matmul operands) and what PSUM accumulates in.
MATMUL_INPUT_DTYPES = frozenset({"float32", "bfloat16", "float16", "tfloat32", "float8_e4m3", "float8_e5m2",
                                 "float8_e4m3fn", "int8", "uint8"})
PSUM_ACCUMULATE_DTYPES = frozenset({"float32", "bfloat16"})
# Engines compute in float32 internally; integer tiles go through the vector engine's integer paths.
ELEMENTWISE_DTYPES = frozenset(DTYPE_BYTES) - {"float8_e5m2_x4", "float8_e4m3fn_x4"}
