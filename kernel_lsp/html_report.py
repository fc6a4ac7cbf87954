"""`kernel-lsp report`: one self-contained HTML page of a check run. Per kernel: its verdicts, what it compiled to per
target and configuration, its latency per bench shape (measured or estimated, labelled) and its history per device;
then a roofline chart per device placing each kernel and shape under the device's compute and bandwidth roofs.
Charts are drawn by plotly, whose script is embedded once, so the page needs no network. Everything on the page comes
from the API's `BatchResult` (`Workspace.check_files(..., history=True)`)."""

from __future__ import annotations

import datetime
import html
import math
import os
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from analyzers.hardware import Hardware, get_device

from . import __version__
from .api import BatchResult, CompiledConfig, Finding, HistoryPoint, LatencyEntry, UncompiledKernel, VerdictInfo

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


_SEVERITY_ORDER = ("error", "warning", "information", "hint")


class _Kernel:
    def __init__(self, path: str, name: str, line: int, language: str):
        self.path, self.name, self.line, self.language = path, name, line, language  # line: 1-based
        self.verdicts: list[VerdictInfo] = []
        self.compiled: list[CompiledConfig] = []
        self.uncompiled: list[UncompiledKernel] = []
        self.latency: list[LatencyEntry] = []
        self.history: list[HistoryPoint] = []
        self.problems: list[Finding] = []


def _kernels(batch: BatchResult) -> list[_Kernel]:
    out: dict[tuple[str, str], _Kernel] = {}
    for f in sorted(batch.files, key=lambda f: f.path):
        for k in f.kernels:
            out.setdefault((f.path, k.name), _Kernel(f.path, k.name, k.line,
                                                     "Triton" if k.language == "triton" else "NKI"))
    for check in batch.checks:
        for v in check.verdicts:
            if (check.path, v.kernel) in out:
                out[(check.path, v.kernel)].verdicts.append(v)
    # A kernel that could not be planned has no configuration on any target, so its rows never mix with these.
    for u in batch.uncompiled:
        if (u.path, u.kernel) in out:
            out[(u.path, u.kernel)].uncompiled.append(u)
    for c in batch.compiled:
        if (c.path, c.kernel) in out:
            out[(c.path, c.kernel)].compiled.append(c)
    for report in batch.latency:
        for e in report.entries:
            if (report.path, e.kernel) in out:
                out[(report.path, e.kernel)].latency.append(e)
    for h in batch.history:
        if (h.path, h.kernel) in out:
            out[(h.path, h.kernel)].history.append(h)
    for f in batch.files:
        for p in f.findings:
            if p.kernel and (f.path, p.kernel) in out:
                out[(f.path, p.kernel)].problems.append(p)
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
    rows = [[_e(u.target), "-", f"not compiled: {_e(u.reason)}", "", "", "", "", ""] for u in k.uncompiled]
    for c in k.compiled:
        if not c.ok:
            why = c.error if c.error_kind is not None else "failed"
            rows.append([_e(c.target), _e(c.values), f"error: {_e(why)}", "", "", "", "", ""])
            continue
        rows.append([_e(c.target), _e(c.values), "ok",
                     _e(c.registers if c.registers is not None else "?"), _e(c.spill_bytes or 0),
                     _e(c.shared_bytes or 0), _e(f"{c.occupancy:.0%}" if c.occupancy is not None else "?"),
                     _e("/".join(c.matrix_instructions) or "-")])
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
        if e.source == "measured" and fraction is not None and e.work_estimated:
            what += "; work count estimated"
        roof = f"{fraction:.0%}" if fraction is not None else "-"
        rows.append([_e(tuple(e.shape)), _e(e.dtype), _e(e.device), _e(e.config or "-"),
                     f"{_e(_us(e.us))} <span class='note'>({what})</span>", _e(e.bound or "-"), _e(roof),
                     _e(f"{e.speedup:.2f}x" if e.speedup else "-")])
    return "<h3>Latency per shape</h3>" + _table(
        ["shape", "dtype", "device", "configuration", "time", "bound", "of roofline", "vs reference"], rows,
        numeric=(4, 6, 7))


def _history_html(k: _Kernel) -> str:
    """The kernel's history, one series per device, kind (measured or estimated), shape and dtype: figures of two
    devices are never compared with each other."""
    series: dict[tuple, list[float]] = defaultdict(list)
    for h in k.history:
        kind = "estimated" if h.source == "estimate" else "measured"
        series[(h.device, kind, tuple(h.shape), h.dtype)].append(h.us)
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
            flops, dram = e.flops, e.dram_bytes
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
    kernels = _kernels(batch)
    stats = batch.stats
    counts = {s: sum(1 for f in batch.files for p in f.findings if p.severity == s) for s in _SEVERITY_ORDER}
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    source = {"measured": "measured on this machine's GPU",
              "estimate": "estimated by the latency model (no GPU): estimates, not measurements"}.get(
        batch.latency_source or "", "")
    parts = [(f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>kernel-lsp report</title>"
              f"<style>{_STYLE}</style></head><body>"),
             "<h1>kernel-lsp report</h1>",
             f"<p class='note'>kernel-lsp {_e(__version__)}, {_e(when)}. {stats.files} files, "
             f"{stats.triton_kernels} Triton kernels, {stats.nki_kernels} NKI kernels; "
             f"{_n(counts['error'], 'error')}, {_n(counts['warning'], 'warning')}, "
             f"{_n(counts['information'], 'note')}."
             + (f" Compiled for {_e(', '.join(batch.compile_targets))}." if batch.compile_targets else "")
             + (f" Latency {_e(source)}." if source else "") + "</p>"]
    if not_run or batch.missing:
        parts.append("<ul class='not-run'>" + "".join(f"<li>{_e(n)}</li>" for n in not_run)
                     + "".join(f"<li>{_e(p)}: no such file or directory</li>" for p in batch.missing) + "</ul>")
    errors = [(r.path, m) for r in batch.latency for m in r.errors]
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
        worst = sorted(k.problems, key=lambda p: _SEVERITY_ORDER.index(p.severity))
        problems = (f" · {len(k.problems)} problem{'s' if len(k.problems) != 1 else ''} (worst: "
                    f"{_e(worst[0].code)} {_e(worst[0].message)})" if worst else "")
        parts.append(f"<div class='kernel'><h3 id='{_e(k.name)}'>{_e(k.name)} <span class='note'>({k.language}, "
                     f"<code>{_e(_display(k.path))}:{k.line}</code>{problems})</span></h3>")
        parts.append(_verdict_html(k, checks_ran))
        parts.append(_resources_html(k))
        parts.append(_latency_html(k))
        parts.append(_history_html(k))
        parts.append("</div>")
    parts.append("</body></html>")
    return "\n".join(parts)
