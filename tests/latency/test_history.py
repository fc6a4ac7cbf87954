"""Estimates join a kernel's history like measurements do: the change against the previous estimate of the same
shape, dtype and device; an unchanged estimate adds nothing."""

from __future__ import annotations

from kernel_lsp.engine.latency import KernelLatency, LatencyReport, load_history, record_estimates


def _report(us: float, config: str = "BLOCK=1024, num_warps=4, num_stages=3") -> LatencyReport:
    entry = KernelLatency(kernel="add_kernel", spec="add_inputs", shape=(1 << 24,), dtype="float32",
                          source="estimate", device="H200", us=us, label=f"≈{us:.0f} µs H200 est.", config=config)
    return LatencyReport("/w/add.py", [entry])


def test_estimates_are_recorded_with_their_change(tmp_path):
    first = _report(60.0)
    record_estimates(first, str(tmp_path))
    assert first.entries[0].change_vs_previous is None
    faster = _report(45.0)
    record_estimates(faster, str(tmp_path))
    assert abs(faster.entries[0].change_vs_previous - (45.0 / 60.0 - 1.0)) < 1e-9
    same = _report(45.0)
    record_estimates(same, str(tmp_path))
    assert same.entries[0].change_vs_previous is None
    history = load_history(str(tmp_path), "add.add_kernel")  # filed under the file's name and the kernel's
    assert [h["us"] for h in history] == [60.0, 45.0] and all(h["source"] == "estimate" for h in history)
