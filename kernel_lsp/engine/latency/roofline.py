"""How close a measured latency came to the device's roofs: the work its kernel was counted to do under the
interpreter (FLOPs, DRAM bytes) at the peak FLOP/s and bandwidth, over the measured time
(`analyzers.roofline.achieved`). One place for the Python API, the command line and the language server."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from analyzers.config_model import configuration_estimate
from analyzers.roofline import achieved

from . import COUNT_TIMEOUT_S, KernelLatency, LatencyReport, WorkerError, _device_from_name, work_from_json


def count_measured_work(path: str, source: str | None, measured: Sequence[KernelLatency], root: str | None, *,
                        timeout: float = COUNT_TIMEOUT_S, cancel: threading.Event | None = None) -> list[dict] | str:
    """The work of each measured point, counted under the interpreter, or why it could not be counted."""
    points = [{"spec": e.spec, "kernel": e.kernel, "shape": list(e.shape), "dtype": e.dtype}
              for e in measured if e.us is not None]
    if not points:
        return []
    from . import count_work  # looked up at the call: tests play the counting back

    try:
        return count_work(path, source, points, root=root, timeout=timeout, cancel=cancel)
    except WorkerError as exc:
        return f"work not counted, so no roofline fraction: {exc}"


def measured_roofline(measured: Sequence[KernelLatency], counted: list[dict] | str) -> list[dict[str, Any]]:
    """Per measured entry: its `fraction_of_roofline`, `roofline_us`, `achieved_tflops`, `achieved_tbps`,
    `peak_tflops`, `peak_tbps`, `work_estimated` (the count was sampled or made at a reduced shape and scaled) and
    `work_note` (how the work was counted); or only `work_note` saying why there is no fraction; or nothing for an
    entry without a time."""
    points = {} if isinstance(counted, str) else {
        (p.get("kernel"), tuple(p.get("shape") or ()), p.get("dtype")): p for p in counted}
    out: list[dict[str, Any]] = []
    for e in measured:
        if e.us is None:
            out.append({})
            continue
        hw = _device_from_name(e.device)
        point = points.get((e.kernel, tuple(e.shape), e.dtype))
        why = (counted if isinstance(counted, str) else
               f"no roofline fraction: {e.device} is not in the hardware table" if hw is None else
               "no roofline fraction: the work was not counted at this shape" if point is None else
               f"no roofline fraction: work counting failed: {point['error']}" if point.get("error") else
               "no roofline fraction: the launcher launched no kernel while counting" if not point.get("launches")
               else None)
        if why or hw is None or point is None:
            out.append({"work_note": why})
            continue
        by_config: dict[Any, list[Any]] = {}
        for launch in point["launches"]:
            by_config.setdefault(launch.get("config_index"), []).append(launch)
        notes = []
        if len(by_config) > 1:  # autotuned: the one the model expects the autotuner to pick
            pick = min(by_config, key=lambda i: sum(configuration_estimate(work_from_json(x), hw).us
                                                    for x in by_config[i]))
            notes.append(f"the work of autotune config {by_config[pick][0].get('config_label') or pick} (the one "
                         "expected to win; the GPU's pick is not reported)")
            launches = by_config[pick]
        else:
            launches = next(iter(by_config.values()))
        works = [work_from_json(x) for x in launches]
        sampled = [w for w in works if 0 < w.sampled_programs < w.programs]
        scaled = point.get("counted_shape")
        how = "FLOPs and bytes counted under Triton's interpreter"
        if sampled:
            how += (f" on {sum(w.sampled_programs for w in works)} of {sum(w.programs for w in works)} programs "
                    "and extrapolated over the grid")
        if scaled:
            how += f" at the reduced shape {tuple(scaled)} and scaled to this one"
        how += "; DRAM bytes are the distinct bytes touched plus the modelled L2 misses of re-reads"
        got = achieved(works, hw, e.us)
        out.append({
            "fraction_of_roofline": got.fraction_of_roofline, "roofline_us": got.roofline_us,
            "achieved_tflops": got.tflops, "achieved_tbps": got.tbps, "peak_tflops": got.peak_tflops,
            "peak_tbps": got.peak_tbps, "work_estimated": bool(sampled or scaled),
            "work_note": "; ".join([how + (" (an estimate)" if sampled or scaled else ""), *notes])})
    return out


def add_measured_roofline(report: LatencyReport, source: str | None, root: str | None, *,
                          timeout: float = COUNT_TIMEOUT_S, cancel: threading.Event | None = None) -> LatencyReport:
    """The report's measured entries with their roofline fraction (`fraction_of_roofline`, `work_estimated`,
    `work_note` set in place), for the editor's hints and hovers."""
    measured = [e for e in report.entries if e.source == "measured"]
    if not measured:
        return report
    counted = count_measured_work(report.path, source, measured, root, timeout=timeout, cancel=cancel)
    for e, got in zip(measured, measured_roofline(measured, counted)):
        e.fraction_of_roofline = got.get("fraction_of_roofline")
        e.work_estimated = got.get("work_estimated")
        e.work_note = got.get("work_note")
    return report
