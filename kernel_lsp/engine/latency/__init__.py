"""The latency engine: how long each kernel takes at its spec's bench shapes, estimated without a GPU or measured
with one, and a verified search over its tiling.

Public API (synchronous, thread-safe: every call runs its own worker process; cancellable through a
`threading.Event`; results are plain dataclasses with `to_json()`):

- `estimate_file(path, source, targets, kernels=None, root=None, *, hardware=None, resources=None, cancel=None)`
  -> LatencyReport: work counted under Triton's interpreter (no GPU), then the roofline model
  (analyzers/roofline.py) per target device. Every entry is labelled "≈… <device> est.".
- `measure_file(path, source, kernels=None, root=None, *, cancel=None)` -> LatencyReport: GPU timing of the launcher
  and the reference at each bench shape, speedup, a `suspicious` reason, the change against the kernel's history
  (kept under `<root>/.kernel-lsp/history/`).
- `search_tiling(path, source, kernel, target, root=None, ...)` -> TilingProposal (search.py).
- `load_history(root, kernel)`, `record_history(root, kernel, entry)`, `history_dir(root)` (history.py).

Specs come from `kernel_lsp.spec` in the user's file; a file without one gets a report whose `errors` say so.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict

from analyzers.hardware import Hardware, get_device
from analyzers.config_model import configuration_estimate
from analyzers.roofline import ArgTraffic, Resources, Work, format_us, roofline_floor_us
from analyzers.roofline import label as estimate_label
from analyzers.tiling import format_config

from ..proc import Stopped, killed_from_outside, run_group
from ..redact import user_code_env
from .history import history_dir, history_name, load_history, record_history
from .timing import Timing, suspicious

__all__ = [
    "KernelLatency",
    "LatencyReport",
    "WorkerError",
    "count_work",
    "estimate_file",
    "history_dir",
    "history_name",
    "load_history",
    "measure_file",
    "record_estimates",
    "record_history",
    "resolve_device",
    "search_tiling",
    "work_from_json",
]

COUNT_TIMEOUT_S = 180.0
MEASURE_TIMEOUT_S = 300.0
REPO_ROOT = str(Path(__file__).resolve().parents[3])


class WorkerError(RuntimeError):
    pass


@dataclass
class KernelLatency:
    """One kernel at one bench shape (and, for estimates, one target device and configuration)."""

    kernel: str
    spec: str | None
    shape: tuple[int, ...]
    dtype: str
    source: str  # "estimate" | "measured"
    device: str  # the device measured on, or the device the estimate assumes
    us: float | None
    label: str  # "≈38 µs H200 est." | "41.2 µs on NVIDIA H200"
    config: str = ""  # "BLOCK_SIZE=1024, num_warps=4" or the autotune config
    bound: str | None = None
    fraction_of_roofline: float | None = None
    estimate: dict | None = None
    work: dict | None = None
    timing: dict | None = None
    reference_us: float | None = None
    speedup: float | None = None
    suspicious: str | None = None
    change_vs_previous: float | None = None  # relative change of the median against the last history entry
    chosen: bool = True  # among an autotuned kernel's configs: the one its autotuner is expected to pick
    error: str | None = None
    # Measurements with their roofline fraction (roofline.py): whether the work count is itself an estimate, and
    # how the work was counted or why there is no fraction.
    work_estimated: bool | None = None
    work_note: str | None = None

    def to_json(self) -> dict:
        out = asdict(self)
        out["shape"] = list(self.shape)
        return out


@dataclass
class LatencyReport:
    path: str
    entries: list[KernelLatency] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"path": self.path, "entries": [e.to_json() for e in self.entries], "errors": list(self.errors),
                "seconds": self.seconds}

    def for_kernel(self, kernel: str) -> list[KernelLatency]:
        return [e for e in self.entries if e.kernel == kernel]


# --- worker processes ---------------------------------------------------------------------------------------------


def run_worker(request: dict, *, interpret: bool, timeout: float, cancel: threading.Event | None = None) -> dict:
    """Run the latency worker on one request in a fresh process; raise WorkerError on timeout, cancel or crash."""
    env = user_code_env()  # the user's code runs here: no API key, no token (engine/redact.py)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p)
    env["TRITON_DEFAULT_FP_FUSION"] = env.get("TRITON_DEFAULT_FP_FUSION", "1")
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    try:
        done = run_group([sys.executable, "-P", "-B", "-m", "kernel_lsp.engine.latency.worker"], timeout=timeout, cancel=cancel,
                         input=json.dumps(request).encode(), env=env, cwd=request.get("root") or None)
    except Stopped as exc:
        raise WorkerError("cancelled" if exc.reason == "cancelled"
                          else f"no answer within {timeout:g} s; the worker was stopped") from None
    text = done.stdout.decode(errors="replace")
    outside = killed_from_outside(done.returncode, "the latency worker", "run the check again to time it")
    if outside:
        raise WorkerError(outside)
    if done.returncode != 0 or not text.strip():
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise WorkerError(f"the latency worker ended with code {done.returncode}: {' | '.join(tail) or 'no output'}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkerError(f"unreadable answer from the latency worker: {exc}") from exc


# --- estimates -----------------------------------------------------------------------------------------------------


def resolve_device(target: str | Hardware, table: dict[str, Hardware] | None = None) -> Hardware | None:
    if isinstance(target, Hardware):
        return target
    return get_device(target, table)


def work_from_json(data: dict) -> Work:
    return Work(
        programs=int(data["programs"]), num_warps=int(data.get("num_warps") or 4),
        num_stages=int(data.get("num_stages") or 3),
        args=tuple(ArgTraffic(a["name"], float(a["load_bytes"]), float(a["store_bytes"]), float(a["footprint_bytes"]),
                              float(a.get("extent_bytes") or 0.0)) for a in data.get("args", ())),
        tensor_flops={k: float(v) for k, v in (data.get("tensor_flops") or {}).items()},
        vector_flops=float(data.get("vector_flops") or 0.0), sampled_programs=int(data.get("sampled_programs") or 0),
        constexprs=tuple((k, v) for k, v in data.get("constexprs") or ()), grid=tuple(data.get("grid") or ()),
    )


def config_label(work: Work) -> str:
    return format_config(work.constexprs, work.num_warps, work.num_stages)


def count_work(path: str, source: str | None, points: Sequence[dict] | None = None, *, kernels=None,
               root: str | None = None, samples: int | None = None, cancel: threading.Event | None = None,
               timeout: float = COUNT_TIMEOUT_S, scale: bool = True) -> list[dict]:
    """Work of each point (see worker.py) counted under the interpreter: one dict per point with `launches`.
    `scale`: count large shapes at a reduced shape and scale the counts (counting.py); `counted_shape` then says
    which shape was interpreted."""
    request = {"mode": "count", "path": path, "source": source, "root": root, "kernels": list(kernels or ()),
               "points": list(points or ()), "samples": samples, "scale": scale}
    answer = run_worker(request, interpret=True, timeout=timeout, cancel=cancel)
    if not answer.get("ok"):
        raise WorkerError(answer.get("error") or "work counting failed")
    return answer["results"]


ResourcesFn = Callable[[str, str, dict, int, int], "Resources | None"]


def estimate_file(path: str, source: str | None, targets: Sequence[str | Hardware], kernels: Sequence[str] | None = None,
                  root: str | None = None, *, hardware: dict[str, Hardware] | None = None,
                  resources: ResourcesFn | None = None, cancel: threading.Event | None = None,
                  timeout: float = COUNT_TIMEOUT_S) -> LatencyReport:
    """Estimated latency of each spec'd kernel of a file at its bench shapes on each target device (no GPU).

    `targets`: device names or compile targets ("H100", "sm_90" -> H200); `hardware`: the device table with the
    user's overrides (analyzers.hardware.parse_hardware_overrides). `resources(kernel, target, constexprs,
    num_warps, num_stages)` may supply compile facts (registers, shared memory) for occupancy.
    """
    started = time.perf_counter()
    report = LatencyReport(path)
    devices = []
    for t in targets:
        hw = resolve_device(t, hardware)
        if hw is None:
            report.errors.append(f"no hardware model for target {t!r}: add it under the hardware setting")
        else:
            devices.append((t if isinstance(t, str) else hw.name, hw))
    if not devices:
        report.seconds = time.perf_counter() - started
        return report
    try:
        results = count_work(path, source, kernels=kernels, root=root, cancel=cancel, timeout=timeout)
    except WorkerError as exc:
        report.errors.append(f"work counting failed: {exc}")
        report.seconds = time.perf_counter() - started
        return report
    if not results:
        report.errors.append("no spec in this file: latency needs a @spec with bench shapes (kernel_lsp.spec)")
    for point in results:
        report.entries += entries_for_point(point, devices, resources)
    report.seconds = time.perf_counter() - started
    return report


class PointId(TypedDict):
    """Which kernel, spec, bench shape and dtype a worker's point was: the fields every entry of it starts with."""

    kernel: str
    spec: str | None
    shape: tuple[int, ...]
    dtype: str


def point_id(point: dict) -> PointId:
    return PointId(kernel=point.get("kernel") or "", spec=point.get("spec"), shape=tuple(point.get("shape") or ()),
                   dtype=point.get("dtype") or "")


def entries_for_point(point: dict, devices: Sequence[tuple[str, Hardware]],
                      resources: ResourcesFn | None = None) -> list[KernelLatency]:
    base = point_id(point)
    if point.get("error"):
        return [KernelLatency(**base, source="estimate", device="", us=None, label="no estimate",
                              error=point["error"])]
    if point.get("nki") is not None:
        return [nki_entry(base, point["nki"], point.get("counted_shape"))]
    out = []
    for target, hw in devices:
        group = []
        for launch in point.get("launches", ()):
            work = work_from_json(launch)
            res = None
            if resources is not None:
                try:
                    res = resources(base["kernel"], target, dict(work.constexprs), work.num_warps, work.num_stages)
                except Exception:  # noqa: BLE001 - missing compile facts only make the estimate coarser
                    res = None
            est = configuration_estimate(work, hw, res)
            label = launch.get("config_label") or config_label(work)
            group.append((launch.get("config_index"), est, work, label))
        if not group:
            continue
        by_config: dict[object, list] = {}
        for idx, est, work, label in group:
            by_config.setdefault(idx, []).append((est, work, label))
        # Several launches of one configuration add up; an autotuner picks the fastest configuration.
        totals = {idx: sum(e.us for e, _, _ in items) for idx, items in by_config.items()}
        best = min(totals, key=lambda i: totals[i])
        for idx, items in by_config.items():
            est, work, label = items[0]
            us = totals[idx]
            out.append(KernelLatency(
                **base, source="estimate", device=hw.name, us=us if math.isfinite(us) else None,
                label=estimate_label(us, hw) if math.isfinite(us) else est.label, config=label,
                bound=est.bound, fraction_of_roofline=est.fraction_of_roofline, estimate=est.to_json(),
                work=_work_json(work, point), chosen=idx == best))
    return out


def nki_entry(base: PointId, counts: dict, counted_shape: list | None = None) -> KernelLatency:
    """An NKI kernel's estimate on one Trainium2 NeuronCore, whatever the GPU targets (analyzers/nki_estimate.py).
    Its estimate and work carry the figures the reports read (HBM bytes, FLOPs) beside the model's counters."""
    from analyzers.nki_estimate import estimate as nki_estimate

    est = nki_estimate(counts)
    estimate_json = {**est.to_json(), "dram_bytes": counts.get("hbm_read_bytes", 0) + counts.get("hbm_write_bytes", 0),
                     "notes": list(est.assumptions)}
    work = {**counts, "tensor_flops": {"matmul": counts.get("matmul_flops", 0)},
            "vector_flops": counts.get("vector_elements", 0) + counts.get("scalar_elements", 0)}
    if counted_shape:
        work["counted_shape"] = list(counted_shape)
        estimate_json["notes"].append(f"counted at {tuple(counted_shape)} and scaled to the bench shape")
    return KernelLatency(**base, source="estimate", device=est.device, us=est.us, label=est.label,
                         config="counted in the NKI model", bound=est.bound, estimate=estimate_json, work=work)


def _work_json(work: Work, point: dict) -> dict:
    """The counted work; `counted_shape` where it was counted at a reduced shape and scaled (counting.py)."""
    out = work.to_json()
    if point.get("counted_shape"):
        out["counted_shape"] = list(point["counted_shape"])
    return out


def record_estimates(report: LatencyReport, root: str) -> None:
    """Keep each kernel's estimate in its history (`source: "estimate"`), so edits show their change against the
    previous estimate as measurements do; an estimate equal to the last one adds nothing."""
    loaded: dict[str, list[dict]] = {}  # read once per kernel, again only after a write
    for e in report.entries:
        if e.source != "estimate" or not e.chosen or e.us is None:
            continue
        name = history_name(report.path, e.kernel)
        if name not in loaded:
            loaded[name] = load_history(root, name)
        same = [h for h in loaded[name] if h.get("source") == "estimate"
                and h.get("shape") == list(e.shape) and h.get("dtype") == e.dtype and h.get("device") == e.device]
        if same and same[-1].get("us"):
            e.change_vs_previous = e.us / float(same[-1]["us"]) - 1.0
            if abs(e.change_vs_previous) < 1e-9 and same[-1].get("config") == e.config:
                e.change_vs_previous = None  # nothing changed since: no "+0%"
                continue
        loaded.pop(name)
        record_history(root, name, {"source": "estimate", "shape": list(e.shape), "dtype": e.dtype,
                                        "device": e.device, "us": e.us, "config": e.config})


# --- measurements --------------------------------------------------------------------------------------------------


def measure_file(path: str, source: str | None, kernels: Sequence[str] | None = None, root: str | None = None, *,
                 points: Sequence[dict] | None = None, repetitions: int | None = None,
                 cancel: threading.Event | None = None, timeout: float = MEASURE_TIMEOUT_S,
                 history: bool = True, floor_device: Hardware | str | None = None) -> LatencyReport:
    """Measured latency on this machine's GPU of each spec'd kernel at its bench shapes, with the reference timed
    the same way, the speedup, a `suspicious` reason, and the change against the kernel's history."""
    started = time.perf_counter()
    report = LatencyReport(path)
    request = {"mode": "measure", "path": path, "source": source, "root": root, "kernels": list(kernels or ()),
               "points": list(points or ()), "repetitions": repetitions}
    try:
        answer = run_worker(request, interpret=False, timeout=timeout, cancel=cancel)
    except WorkerError as exc:
        report.errors.append(f"timing failed: {exc}")
        report.seconds = time.perf_counter() - started
        return report
    if not answer.get("ok"):
        report.errors.append(answer.get("error") or "timing failed")
    for point in answer.get("results", ()):
        report.entries.append(measured_entry(point, root if history else None, floor_device, path=path))
    report.seconds = time.perf_counter() - started
    return report


def measured_entry(point: dict, root: str | None, floor_device: Hardware | str | None = None, *,
                   path: str | None = None) -> KernelLatency:
    base = point_id(point)
    if point.get("error"):
        return KernelLatency(**base, source="measured", device=point.get("device_name") or "", us=None,
                             label="not measured", error=point["error"])
    if point.get("nki") is not None:
        return nki_entry(base, point["nki"], point.get("counted_shape"))
    t = Timing.from_json(point["kernel_timing"])
    ref = Timing.from_json(point["reference_timing"]) if point.get("reference_timing") else None
    device = point.get("device_name") or "GPU"
    hw = resolve_device(floor_device) if floor_device else _device_from_name(device)
    floor = roofline_floor_us(float(point.get("bytes") or 0), hw) if hw is not None and point.get("bytes") else None
    speedup = ref.median_us / t.median_us if ref and t.median_us > 0 else None
    entry = KernelLatency(**base, source="measured", device=device, us=t.median_us,
                          label=f"{format_us(t.median_us)} on {device}", timing=t.to_json(),
                          reference_us=ref.median_us if ref else None, speedup=speedup,
                          suspicious=point.get("audit") or suspicious(t.median_us, ref.median_us if ref else None,
                                                                      floor),
                          config=str(point.get("overrides") or ""))
    if root:
        name = history_name(path, entry.kernel)
        previous = load_history(root, name)
        same = [h for h in previous if h.get("shape") == list(entry.shape) and h.get("dtype") == entry.dtype
                and h.get("device") == device]
        if same and same[-1].get("us"):
            entry.change_vs_previous = t.median_us / float(same[-1]["us"]) - 1.0
        record_history(root, name, {"shape": list(entry.shape), "dtype": entry.dtype, "device": device,
                                            "us": t.median_us, "iqr_us": t.iqr_us, "reference_us": entry.reference_us,
                                            "config": entry.config})
    return entry


def _device_from_name(name: str) -> Hardware | None:
    """"NVIDIA H200" -> the H200 model (for the DRAM floor of a measurement)."""
    for token in reversed(name.replace("-", " ").split()):
        hw = get_device(token)
        if hw is not None and token.lower() not in ("nvidia", "amd"):
            return hw
    return None


def search_tiling(*args, **kwargs):
    """See kernel_lsp.engine.latency.search.search_tiling."""
    from .search import search_tiling as _search

    return _search(*args, **kwargs)
