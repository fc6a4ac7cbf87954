"""The Trainium2 latency estimate of NKI kernels: what the model counts while a kernel runs, on fixtures whose
counts are known by hand, and the estimate built from those counts and the NeuronCore table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analyzers import hardware
from analyzers.nki_estimate import NEURON_CORES, estimate
from kernel_lsp.engine import nki as model

CORRECT = Path(__file__).parent / "fixtures" / "correct"
TRN2 = NEURON_CORES["trn2"]
HBM_PER_CORE = 2.9e12 / 8  # bytes per second: one NeuronCore's share of the chip's HBM


def counted(fixture: str, *arrays) -> dict:
    module = model.load_file(str(CORRECT / f"{fixture}.py"))
    del model.OUTCOMES[:]
    with model.installed():
        module.launch(*arrays)
    total: dict = {}
    for outcome in model.OUTCOMES:  # a launcher may run the kernel more than once
        for k, v in outcome.counters.to_json().items():
            if isinstance(v, dict):
                total.setdefault(k, {})
                for cls, n in v.items():
                    total.setdefault(k, {})[cls] = total.get(k, {}).get(cls, 0) + n
            else:
                total[k] = total.get(k, 0) + v
    return total


def f32(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def test_an_elementwise_add_counts_its_dma_bytes_per_memory_and_one_vector_step_per_free_element():
    c = counted("add_current", f32(200, 96), f32(200, 96))
    # Two 200x96 fp32 inputs read from HBM, one written; two row tiles (128 and 72 rows) of 96 free elements.
    assert (c["hbm_read_bytes"], c["hbm_write_bytes"], c["on_chip_dma_bytes"]) == \
        (2 * 200 * 96 * 4, 200 * 96 * 4, 0)
    assert (c["vector_elements"], c["vector_steps"]) == (200 * 96, 2 * 96)
    assert c["scalar_steps"] == 0 and c["tensor_columns"] == {} and c["matmul_flops"] == 0
    est = estimate(c)
    assert est.bound == "DMA" and est.us == pytest.approx(3 * 200 * 96 * 4 / HBM_PER_CORE * 1e6)
    assert est.engine_us["Vector Engine"] == pytest.approx(2 * 96 * 128 / 1e12 * 1e6)
    assert est.label == f"≈{est.us:.1f} µs Trainium2 est."


def test_a_tiled_matmul_counts_tensor_engine_columns_at_its_operands_rate():
    a, b = f32(128, 256), f32(256, 512)
    c = counted("matmul_current", a, b)
    # K=256 in two 128-row passes of a 128x128 stationary and a 128x512 moving tile: 2 x 512 columns, fp32.
    assert c["tensor_columns"] == {"fp32": 1024} and c["matmul_instructions"] == 2
    assert c["matmul_flops"] == 2 * 128 * 256 * 512
    assert c["hbm_read_bytes"] == 2 * (128 * 128 + 128 * 512) * 4 and c["hbm_write_bytes"] == 128 * 512 * 4
    assert c["vector_steps"] == 512  # the PSUM -> SBUF copy of the 128x512 result
    est = estimate(c)
    assert est.engine_us["Tensor Engine"] == pytest.approx(1024 * 2 * 128 * 128 / (79e12 / 4) * 1e6)
    bf16 = estimate({**c, "tensor_columns": {"bf16": 1024}})
    assert bf16.engine_us["Tensor Engine"] == pytest.approx(est.engine_us["Tensor Engine"] / 4)


def test_a_reduction_costs_its_input_and_an_activation_runs_on_the_scalar_engine():
    c = counted("row_sum_current", f32(300, 200))
    assert (c["vector_elements"], c["vector_steps"]) == (300 * 200, 3 * 200)  # tiles of 128, 128 and 44 rows
    g = counted("gelu_bias_current", f32(130, 64), f32(130, 1))
    assert (g["scalar_elements"], g["scalar_steps"], g["vector_steps"]) == (130 * 64, 2 * 64, 0)
    assert estimate(g).engine_us["Scalar Engine"] == pytest.approx(2 * 64 * 128 / 1.2e12 * 1e6)


def test_a_tile_on_one_partition_costs_an_engine_as_much_as_a_full_one(tmp_path):
    path = tmp_path / "row_add.py"
    path.write_text('''import nki
import nki.language as nl


@nki.jit
def kernel(a, b):
    n = a.shape[1]
    out = nl.ndarray((1, n), dtype=a.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(n // 512):
        x = nl.load(a[0:1, t * 512:(t + 1) * 512])
        y = nl.load(b[0:1, t * 512:(t + 1) * 512])
        nl.store(out[0:1, t * 512:(t + 1) * 512], value=nl.exp(nl.add(x, y)))
    return out
''')
    module = model.load_file(str(path))
    outcome = model.run(module.kernel, f32(1, 1024), f32(1, 1024))
    c = outcome.counters.to_json()
    # 1024 elements on one partition: 2 tiles of 512 steps for the add (vector) and for the exp (scalar).
    assert (c["vector_elements"], c["vector_steps"], c["scalar_steps"]) == (1024, 1024, 1024)
    assert c["hbm_read_bytes"] == 2 * 1024 * 4 and c["hbm_write_bytes"] == 1024 * 4


def test_the_neuroncore_table_agrees_with_the_device_table_and_cites_every_number():
    chip = hardware.get_device("Trainium2")
    assert (TRN2.hbm_tbps_chip, TRN2.cores_per_chip) == (chip.hbm_tbps, chip.sm_count)
    assert TRN2.tensor_tflops["bf16"] * TRN2.cores_per_chip == pytest.approx(chip.peak_tflops["fp16"], rel=0.06)
    for name in ("cores_per_chip", "hbm_tbps_chip", "dma_engines_chip", "vector_tflops", "scalar_tflops",
                 "tensor_tflops.bf16", "tensor_tflops.fp8", "tensor_tflops.fp32"):
        assert TRN2.provenance[name], name
    assert estimate({}).label.endswith(" Trainium2 est.")  # labelled an estimate even when nothing was counted


def test_a_large_bench_shape_is_counted_reduced_and_carried_to_the_same_counts_as_a_full_run():
    from kernel_lsp.engine.latency import worker
    from kernel_lsp.engine.verify.loading import load_user_module

    spec_file = Path(__file__).parent / "specs" / "scale_rows_nki.py"
    point = {"spec": "scale_inputs", "kernel": "scale_rows", "dtype": "float32"}
    with model.installed():
        module = load_user_module(str(spec_file), spec_file.read_text())
        scaled, counted = worker._nki_counts(module, point, (2048, 1024))
        full = worker._nki_run(module, point, (2048, 1024))
    assert counted == (1024, 1024)  # 2M elements: over the counting limit, one size halved
    for key, value in full.items():
        assert scaled[key] == (value if isinstance(value, dict) else pytest.approx(value)), key
    assert full["hbm_read_bytes"] == full["hbm_write_bytes"] == 2048 * 1024 * 4
