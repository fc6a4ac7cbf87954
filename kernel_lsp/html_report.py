"""`kernel-lsp report`: one self-contained HTML page of a check run. Per kernel: its verdicts, what it compiled to per
target and configuration, its latency per bench shape (measured or estimated, labelled) and its history per device;
then a roofline chart per device placing each kernel and shape under the device's compute and bandwidth roofs.
Charts are drawn by plotly, whose script is embedded once, so the page needs no network."""

from __future__ import annotations

import datetime
import html
import math
import os
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from analyzers.hardware import Hardware, get_device
from analyzers.model import Severity

from . import __version__
from .api import BatchResult
from .engine.batch import CheckResult

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1180px; color: #1d2329; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ccd; }
h3 { font-size: 15px; margin: 18px 0 6px; } code { font: 13px ui-monospace, monospace; }
table { border-collapse: collapse; margin: 6px 0 12px; } td, th { border: 1px solid #d5d9e0; padding: 3px 8px; }
th { background: #f1f3f6; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 9px; font-weight: 600; color: #fff; }
.correct { background: #2e7d32; } .failed { background: #c62828; } .unchecked { background: #6b7280; }
.note { color: #4b5563; } .kernel { border: 1px solid #d5d9e0; border-radius: 6px; padding: 4px 16px 8px;
margin: 14px 0; } ul.not-run li { color: #92400e; }
"""


# Roofs in greys, kernels in plotly's qualitative palette (the first kernel of a chart gets the first colour).
ROOF_COLORS = ("#6b7280", "#374151", "#9ca3af", "#111827")
KERNEL_COLORS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _display(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _table(head: list[str], rows: Iterable[list[str]], numeric: Iterable[int] = ()) -> str:
    """An HTML table of already escaped cells."""
    nums = set(numeric)
    body = "".join("<tr>" + "".join(f"<td class='num'>{c}</td>" if i in nums else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return "<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + f"</tr>{body}</table>"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _us(us: float | None) -> str:
    if us is None or not math.isfinite(us):
        return "-"
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"


def _device_of(name: str) -> Hardware | None:
    """The hardware model of a device name as latency reports it ("H200", "NVIDIA H200")."""
    hw = get_device(name)
    if hw is not None:
        return hw
    for token in reversed(name.replace("-", " ").split()):
        if token.lower() not in ("nvidia", "amd") and (hw := get_device(token)) is not None:
            return hw
    return None


def _flops(entry) -> float | None:
    work = entry.work or {}
    if not work:
        return None
    return sum((work.get("tensor_flops") or {}).values()) + float(work.get("vector_flops") or 0.0)


def _dram_bytes(entry) -> float | None:
    return (entry.estimate or {}).get("dram_bytes")


class _Kernel:
    def __init__(self, path: str, name: str, line: int, language: str):
        self.path, self.name, self.line, self.language = path, name, line, language
        self.verdicts: list = []
        self.compiled: list = []
        self.latency: list = []
        self.plain: dict[int, Any] = {}  # id of a latency entry -> the API's entry (a measurement's roofline)
        self.problems: list = []


def _kernels(batch: BatchResult) -> list[_Kernel]:
    result: CheckResult = batch.details
    out: dict[tuple[str, str], _Kernel] = {}
    for path in sorted(result.index.files):
        analysis = result.index.files[path].analysis
        if analysis is None:
            continue
        for k in analysis.kernels:
            out.setdefault((path, k.name), _Kernel(path, k.name, k.name_span.start_line, "Triton"))
        for k in analysis.nki_kernels:
            out.setdefault((path, k.name), _Kernel(path, k.name, k.name_span.start_line, "NKI"))
    for path, v in result.verdicts:
        if (path, v.kernel) in out:
            out[(path, v.kernel)].verdicts.append(v)
    for report in result.compiled:
        if (report.path, report.kernel) in out:
            out[(report.path, report.kernel)].compiled.append(report)
    for report, plain in zip(result.latency, batch.latency):
        for e, p in zip(report.entries, plain.entries):
            if (report.path, e.kernel) in out:
                out[(report.path, e.kernel)].latency.append(e)
                out[(report.path, e.kernel)].plain[id(e)] = p
    for path, problems in result.problems.items():
        for p in problems:
            if p.kernel and (path, p.kernel) in out:
                out[(path, p.kernel)].problems.append(p)
    return list(out.values())


def _verdict_html(k: _Kernel, checks_ran: bool) -> str:
    if not k.verdicts:
        why = "no correctness spec" if checks_ran else "specs were not run"
        return f"<p><span class='badge unchecked'>not checked</span> <span class='note'>{_e(why)}</span></p>"
    items = []
    for v in k.verdicts:
        cls = "correct" if v.ok else "failed"
        items.append(f"<li><span class='badge {cls}'>{_e(v.status)}</span> <code>{_e(v.spec)}</code> on "
                     f"{_e(v.device)}: {_e(v.message)}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _resources_html(k: _Kernel) -> str:
    from .engine.compile.service import config_text

    rows = []
    for report in k.compiled:
        if report.plan_error:
            rows.append([_e(report.target.name), "-", f"not compiled: {_e(report.plan_error)}", "", "", "", "", ""])
        for jr in report.jobs:
            r = jr.result
            if not r.ok:
                why = r.error.message if r.error else "failed"
                rows.append([_e(report.target.name), _e(config_text(jr.job)), f"error: {_e(why)}", "", "", "", "", ""])
                continue
            res = r.resources
            rows.append([_e(report.target.name), _e(config_text(jr.job)), "ok",
                         _e(res.registers if res.registers is not None else "?"), _e(res.spill_bytes or 0),
                         _e(res.shared_bytes or 0), _e(f"{res.occupancy:.0%}" if res.occupancy is not None else "?"),
                         _e("/".join(res.matrix_instructions) or "-")])
    if not rows:
        return ""
    return "<h3>Resources per target and configuration</h3>" + _table(
        ["target", "configuration", "compile", "registers", "spill B", "shared B", "occupancy", "matrix"],
        rows, numeric=(3, 4, 5, 6))


def _latency_html(k: _Kernel) -> str:
    entries = [e for e in k.latency if e.error or e.source == "measured" or e.chosen]
    if not entries:
        return ""
    rows = []
    for e in sorted(entries, key=lambda e: (math.prod(e.shape) if e.shape else 1, e.dtype, e.device)):
        if e.error or e.us is None:
            rows.append([_e(tuple(e.shape)), _e(e.dtype), _e(e.device or "-"), "", _e(e.error or e.label), "", "", ""])
            continue
        what = "measured" if e.source == "measured" else "estimated"
        fraction = e.fraction_of_roofline
        if e.source == "measured" and (p := k.plain.get(id(e))) is not None:
            fraction = p.fraction_of_roofline
            if fraction is not None and p.work_estimated:
                what += "; work count estimated"
        roof = f"{fraction:.0%}" if fraction is not None else "-"
        rows.append([_e(tuple(e.shape)), _e(e.dtype), _e(e.device), _e(e.config or "-"),
                     f"{_e(_us(e.us))} <span class='note'>({what})</span>", _e(e.bound or "-"), _e(roof),
                     _e(f"{e.speedup:.2f}x" if e.speedup else "-")])
    return "<h3>Latency per shape</h3>" + _table(
        ["shape", "dtype", "device", "configuration", "time", "bound", "of roofline", "vs reference"], rows,
        numeric=(4, 6, 7))


def _history_html(k: _Kernel, root: str) -> str:
    """The kernel's history, one series per device, kind (measured or estimated), shape and dtype: figures of two
    devices are never compared with each other."""
    from .engine.latency import history_name, load_history

    series: dict[tuple, list[float]] = defaultdict(list)
    for h in load_history(root, history_name(k.path, k.name)):
        if isinstance(h.get("us"), (int, float)) and h.get("device"):
            kind = "estimated" if h.get("source") == "estimate" else "measured"
            series[(h["device"], kind, tuple(h.get("shape") or ()), h.get("dtype") or "")].append(float(h["us"]))
    if not series:
        return ""
    rows = [[_e(device), _e(kind), _e(shape), _e(dtype), _e(" → ".join(_us(u) for u in values[-8:])),
             _e(len(values))] for (device, kind, shape, dtype), values in sorted(series.items())]
    return "<h3>History per device</h3>" + _table(
        ["device", "kind", "shape", "dtype", "last figures (newest last)", "entries"], rows, numeric=(5,))


def _roofline_figures(kernels: list[_Kernel]) -> tuple[list[tuple[str, Any]], list[str]]:
    """One plotly figure per device: the bandwidth roof, the compute roofs, a point per kernel and shape (the
    configuration an autotuner picks). Also what could not be placed, and why."""
    import plotly.graph_objects as go

    points: dict[str, list] = defaultdict(list)
    unplaced: list[str] = []
    for k in kernels:
        for e in k.latency:
            if e.us is None or (e.source == "estimate" and not e.chosen):
                continue
            flops, dram = _flops(e), _dram_bytes(e)
            if not flops or not dram:
                why = "its work was not counted" if flops is None or dram is None else "it counts no floating-point work"
                unplaced.append(f"{k.name} {tuple(e.shape)} {e.dtype} on {e.device}: {why}")
                continue
            points[e.device].append((k, e, flops / dram, flops / (e.us * 1e-6) / 1e12))
    figures = []
    for device, pts in sorted(points.items()):
        hw = _device_of(device)
        if hw is None:
            unplaced += [f"{k.name} {tuple(e.shape)} on {device}: no hardware model for this device"
                         for k, e, _, _ in pts]
            continue
        fig = go.Figure()
        lo = min(min(p[2] for p in pts) / 4, 0.01)
        hi = max(max(p[2] for p in pts) * 4, 2 * max(hw.peak_tflops.values()) / hw.hbm_tbps)
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        # One roof per peak (bf16 and fp16 share theirs): min(peak, intensity x DRAM bandwidth).
        roofs: dict[float, list[str]] = {}
        for cls in ("fp32", "fp16", "bf16", "fp8"):
            if hw.peak_tflops.get(cls):
                roofs.setdefault(hw.peak_tflops[cls], []).append(cls if cls != "fp32" else "fp32 (vector)")
        for i, (peak, classes) in enumerate(sorted(roofs.items())):
            fig.add_trace(go.Scatter(x=xs, y=[min(peak, x * hw.hbm_tbps) for x in xs], mode="lines",
                                     name=f"{'/'.join(classes)} roof: {peak:g} TFLOP/s", hoverinfo="name",
                                     line={"dash": "dot" if "fp32 (vector)" in classes else "solid",
                                           "color": ROOF_COLORS[i % len(ROOF_COLORS)]}))
        by_kernel: dict[str, list] = defaultdict(list)
        for k, e, ai, tflops in pts:
            by_kernel[k.name].append((e, ai, tflops))
        for i, (name, items) in enumerate(by_kernel.items()):
            fig.add_trace(go.Scatter(
                x=[ai for _, ai, _ in items], y=[t for _, _, t in items], mode="markers", name=name,
                marker={"size": 12, "color": KERNEL_COLORS[i % len(KERNEL_COLORS)]},
                text=[f"{name} {tuple(e.shape)} {e.dtype}<br>{e.label}<br>"
                      f"{'measured' if e.source == 'measured' else 'estimated'}" for e, _, _ in items],
                hoverinfo="text"))
        fig.update_layout(
            title=f"Roofline on {hw.name} ({hw.description}): DRAM {hw.hbm_tbps:g} TB/s", height=460, template="plotly_white",
            xaxis={"type": "log", "title": "arithmetic intensity (FLOP per DRAM byte)"},
            yaxis={"type": "log", "title": "TFLOP/s"}, legend={"orientation": "h", "y": -0.25})
        figures.append((device, fig))
    return figures, unplaced


def html_page(batch: BatchResult, not_run: Iterable[str] = (), checks_ran: bool = True) -> str:
    """The whole page as a string (plotly's script inline when there is a chart), from the API's `BatchResult`.
    `not_run`: what was not done and why, listed at the top; `checks_ran`: whether the specs were run (else no
    kernel is said to lack one)."""
    result: CheckResult = batch.details
    kernels = _kernels(batch)
    stats = result.index.stats()
    counts = {s: result.count(s) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)}
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    source = {"measured": "measured on this machine's GPU",
              "estimate": "estimated by the roofline model (no GPU): estimates, not measurements"}.get(
        result.latency_source or "", "")
    parts = [(f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>kernel-lsp report</title>"
              f"<style>{_STYLE}</style></head><body>"),
             "<h1>kernel-lsp report</h1>",
             f"<p class='note'>kernel-lsp {_e(__version__)}, {_e(when)}. {stats['files']} files, "
             f"{stats['tritonKernels']} Triton kernels, {stats['nkiKernels']} NKI kernels; "
             f"{_n(counts[Severity.ERROR], 'error')}, {_n(counts[Severity.WARNING], 'warning')}, "
             f"{_n(counts[Severity.INFO], 'note')}."
             + (f" Compiled for {_e(', '.join(dict.fromkeys(r.target.name for r in result.compiled)))}."
                if result.compiled else "")
             + (f" Latency {_e(source)}." if source else "") + "</p>"]
    if not_run or result.missing:
        parts.append("<ul class='not-run'>" + "".join(f"<li>{_e(n)}</li>" for n in not_run)
                     + "".join(f"<li>{_e(p)}: no such file or directory</li>" for p in result.missing) + "</ul>")
    errors = [(r.path, m) for r in result.latency for m in r.errors]
    if errors:
        parts.append("<ul class='not-run'>" + "".join(f"<li>{_e(_display(p))}: latency: {_e(m)}</li>"
                                                      for p, m in errors) + "</ul>")
    figures, unplaced = _roofline_figures(kernels)
    parts.append("<h2>Roofline</h2>")
    if not figures:
        parts.append("<p class='note'>No kernel has a latency figure with counted work to place on a roofline "
                     "(latency needs a correctness spec that passes).</p>")
    for i, (_device, fig) in enumerate(figures):
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False},
                                 div_id=f"roofline-{i}"))
    if unplaced:
        parts.append("<p class='note'>Not placed: " + "; ".join(_e(u) for u in unplaced) + ".</p>")
    parts.append("<h2>Kernels</h2>")
    if not kernels:
        parts.append("<p>No kernel found under the given paths.</p>")
    for k in kernels:
        worst = sorted(k.problems, key=lambda p: p.severity)
        problems = (f" · {len(k.problems)} problem{'s' if len(k.problems) != 1 else ''} (worst: "
                    f"{_e(worst[0].code)} {_e(worst[0].message)})" if worst else "")
        parts.append(f"<div class='kernel'><h3 id='{_e(k.name)}'>{_e(k.name)} <span class='note'>({k.language}, "
                     f"<code>{_e(_display(k.path))}:{k.line + 1}</code>{problems})</span></h3>")
        parts.append(_verdict_html(k, checks_ran))
        parts.append(_resources_html(k))
        parts.append(_latency_html(k))
        parts.append(_history_html(k, result.root))
        parts.append("</div>")
    parts.append("</body></html>")
    return "\n".join(parts)
