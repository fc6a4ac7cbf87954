"""A measured latency in the editor carries its roofline fraction: the work counted under the interpreter against
the device's roofs (`analyzers.roofline.achieved`), the same figure the Python API and `kernel-lsp check` give.
The GPU timing is played back (no GPU on CI); the work counting is real."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.engine import latency
from kernel_lsp.engine.latency.roofline import add_measured_roofline
from kernel_lsp.features.latency import hint_label, lens_title

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"


def _measured(device: str) -> latency.LatencyReport:
    # vector_add's bench shape (2**24 fp32 elements: 201 MB moved) timed at 46.0 µs.
    point = {"kernel": "add_kernel", "spec": "add_inputs", "shape": [1 << 24], "dtype": "float32",
             "device_name": device,
             "kernel_timing": {"median_us": 46.0, "q1_us": 45.8, "q3_us": 46.3, "min_us": 45.5, "repetitions": 50}}
    return latency.LatencyReport(str(EXAMPLE), [latency.measured_entry(point, None)])


def test_the_editors_measured_figure_says_how_close_it_came_to_the_roofline(tmp_path: Path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    report = add_measured_roofline(_measured("NVIDIA H200"), EXAMPLE.read_text(encoding="utf-8"), str(tmp_path))
    (entry,) = report.entries
    # 201 MB at the H200's 4.8 TB/s take 41.9 µs: 91% of 46.0 µs.
    assert entry.fraction_of_roofline == pytest.approx(3 * 4 * (1 << 24) / 4.8e12 / 46.0e-6, rel=0.01)
    assert entry.work_estimated is True and "reduced shape" in (entry.work_note or "")
    assert hint_label(report, "add_kernel") == "46 µs on NVIDIA H200 · 91% of roofline (work est.)"
    assert lens_title(report, "add_kernel") == "(16777216,) float32: 46 µs on NVIDIA H200"


def test_a_measurement_whose_work_was_not_counted_has_no_fraction_and_says_why(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    def no_counting(*args, **kwargs):
        raise latency.WorkerError("the interpreter is not installed")

    monkeypatch.setattr(latency, "count_work", no_counting)
    report = add_measured_roofline(_measured("NVIDIA H200"), EXAMPLE.read_text(encoding="utf-8"), str(tmp_path))
    (entry,) = report.entries
    assert entry.fraction_of_roofline is None and entry.work_estimated is None
    assert "the interpreter is not installed" in (entry.work_note or "")
    assert hint_label(report, "add_kernel") == "46 µs on NVIDIA H200"
