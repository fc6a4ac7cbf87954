import os
import sys
import types

import pytest

from kernel_lsp.engine.latency import history_dir, load_history, measured_entry, record_history
from kernel_lsp.engine.latency.timing import Timing, _Lead, lead_us, summarize, suspicious, time_callable


def test_summary_is_median_and_iqr():
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert t.median_us == 3.0 and t.q1_us == 2.0 and t.q3_us == 4.0 and t.iqr_us == 2.0 and t.min_us == 1.0
    with pytest.raises(ValueError):
        summarize([])


def test_launch_cost_travels_with_the_timing_and_older_records_still_load():
    t = Timing(5.0, 4.5, 5.5, 4.0, 50, launch_us=21.5)
    assert Timing.from_json(t.to_json()) == t and t.to_json()["iqr_us"] == 1.0
    old = {"median_us": 5.0, "q1_us": 4.5, "q3_us": 5.5, "min_us": 4.0, "repetitions": 50}
    assert Timing.from_json(old).launch_us is None
    assert lead_us(30.0) > 2 * 30.0 and lead_us(-1.0) > 0


@pytest.mark.gpu
def test_host_launch_cost_stays_outside_the_measured_window():
    import time

    import torch

    x = torch.zeros(1 << 20, device="cuda")

    def slow_host_fast_kernel():
        until = time.perf_counter() + 80e-6  # a launcher with 80 us of Python before its launch
        while time.perf_counter() < until:
            pass
        x.add_(1.0)

    t = time_callable(slow_host_fast_kernel, repetitions=30)
    assert t.launch_us >= 80.0
    # The same kernel behind a cheap launcher: the 80 us of host work must not show in the GPU figure.
    plain = time_callable(lambda: x.add_(1.0), repetitions=30)
    assert t.median_us < plain.median_us + 40.0, (t, plain)
    assert abs(t.median_us - plain.median_us) < max(5.0, 0.5 * plain.median_us), (t, plain)


def test_suspicious_speedups_and_times_under_the_floor():
    assert suspicious(10.0, 50.0, 5.0) is None
    assert "faster than the PyTorch reference" in suspicious(1.0, 50.0, None)
    assert "peak DRAM bandwidth" in suspicious(4.0, 5.0, 10.0)


def test_history_records_change_against_previous(tmp_path):
    point = {"kernel": "add_kernel", "spec": "add_inputs", "shape": [1024], "dtype": "float32",
             "device_name": "NVIDIA H200", "bytes": 3 * 4096,
             "kernel_timing": {"median_us": 10.0, "q1_us": 9.0, "q3_us": 11.0, "min_us": 8.0, "repetitions": 5},
             "reference_timing": {"median_us": 20.0, "q1_us": 19.0, "q3_us": 21.0, "min_us": 18.0,
                                  "repetitions": 5}}
    first = measured_entry(point, str(tmp_path))
    assert first.speedup == 2.0 and first.change_vs_previous is None and first.suspicious is None
    point["kernel_timing"] = {**point["kernel_timing"], "median_us": 12.0}
    second = measured_entry(point, str(tmp_path))
    assert second.change_vs_previous == pytest.approx(0.2)
    assert [h["us"] for h in load_history(tmp_path, "add_kernel")] == [10.0, 12.0]
    assert os.listdir(history_dir(tmp_path)) == ["add_kernel.json"]
    (history_dir(tmp_path) / "add_kernel.json").write_text("{broken")
    assert load_history(tmp_path, "add_kernel") == []
    assert len(record_history(tmp_path, "add_kernel", {"us": 1.0})) == 1


class _FakeGPU:
    """The GPU timeline the lead sees: queued work runs back to back and an event is stamped when the GPU reaches
    it. The spin kernel's first launch stalls the host for `load_us` (CUDA loading its module lazily), and the
    GPU sits idle meanwhile, between whatever events surround that launch."""

    def __init__(self, flush_us: float = 30.0, cycles_per_us: float = 1980.0, load_us: float = 5000.0):
        self.now, self.flush_us, self.cycles_per_us, self.load_us = 0.0, flush_us, cycles_per_us, load_us
        self.spin_loaded = False
        gpu = self

        class Event:
            def __init__(self, enable_timing: bool = False):
                self.at = None

            def record(self) -> None:
                self.at = gpu.now

            def elapsed_time(self, end) -> float:
                return (end.at - self.at) / 1000.0  # milliseconds, as CUDA reports them

        def sleep(cycles: int) -> None:
            if not gpu.spin_loaded:
                gpu.spin_loaded = True
                gpu.now += gpu.load_us
            gpu.now += cycles / gpu.cycles_per_us

        self.torch = types.SimpleNamespace(cuda=types.SimpleNamespace(Event=Event, synchronize=lambda: None,
                                                                      _sleep=sleep))
        self.flush = types.SimpleNamespace(zero_=self._flush)

    def _flush(self) -> None:
        self.now += self.flush_us


def test_the_lead_covers_the_host_launch_even_when_the_spin_kernel_loads_late(monkeypatch):
    gpu = _FakeGPU()
    monkeypatch.setitem(sys.modules, "torch", gpu.torch)
    lead = _Lead(gpu.flush, host_us=100.0)
    before = gpu.now
    lead()
    covered = gpu.now - before
    assert lead_us(100.0) <= covered < 1.2 * lead_us(100.0), covered
