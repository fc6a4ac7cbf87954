"""`kernel-lsp check` output: human text, JSON, and SARIF 2.1.0 for code-scanning services, from the API's
`BatchResult` (`Workspace.check_files`): its plain latency entries give a measurement's roofline fraction, its
`details` the rest of the run.

The JSON follows kernel_lsp/schema/check-report.schema.json: keys in camelCase, lines and columns 1-based
everywhere (the engine's are 0-based), durations in seconds, latencies in microseconds (`us`)."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from analyzers.model import Problem, Severity
from analyzers.rules import RULES

from . import __version__
from .api import BatchResult
from .engine.batch import CheckResult

# The `$schema` of every JSON report and the `$id` of kernel_lsp/schema/check-report.schema.json.
SCHEMA_ID = "urn:kernel-lsp:check-report:2"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "info", Severity.HINT: "hint"}
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note", Severity.HINT: "note"}


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _display(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def text_report(batch: BatchResult, color: bool = False) -> str:
    result: CheckResult = batch.details
    lines = []
    paint = (lambda code, s: f"\033[{code}m{s}\033[0m") if color else (lambda code, s: s)
    colors = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.INFO: "36", Severity.HINT: "2"}
    for path, problems in result.problems.items():
        for p in problems:
            fix = " [fix available]" if p.fix else ""
            where = f"{_display(path)}:{p.span.start_line + 1}:{p.span.start_col + 1}"
            lines.append(f"{paint('1', where)}: {paint(colors[p.severity], _LEVEL[p.severity])} "
                         f"{paint('1', p.code)} {p.message}{fix}")
    for path in result.missing:
        lines.append(f"{path}: no such file or directory")
    for report in result.compiled:
        for jr in report.jobs:
            if jr.result.ok:
                lines.append(resource_line(report, jr))
                # The figures hold for launches that match what was assumed: say it where they are shown.
                lines += [f"    assumed: {note}" for note in jr.job.notes]
    lines += [f"{_display(k.path)}:{k.line + 1} {k.name} {k.target} {k.registers} regs, {k.spill_bytes or 0} B spill, "
              f"{k.shared_bytes} B smem (nvcc)" for k in result.cuda]
    lines += [f"{_display(path)}:{v.kernel_line + 1} {v.kernel}: {v.message}" for path, v in result.verdicts]
    lines += latency_lines(batch)
    stats = result.index.stats()
    total = sum(len(ps) for ps in result.problems.values())
    counts = ", ".join(_n(result.count(s), _LEVEL[s]) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)
                       if result.count(s))
    summary = (f"{_n(len(result.problems), 'file')}, {_n(stats['tritonKernels'], 'Triton kernel')}, "
               f"{_n(stats['nkiKernels'], 'NKI kernel')}, {_n(stats['launchSites'], 'launch site')} checked: ")
    summary += f"{_n(total, 'problem')} ({counts})" if total else "no problems"
    if result.compiled:
        jobs = [jr for r in result.compiled for jr in r.jobs]
        cached = sum(1 for jr in jobs if jr.cached)
        targets = ", ".join(dict.fromkeys(r.target.name for r in result.compiled))
        summary += f"; {_n(len(jobs), 'compile job')} for {targets} ({cached} cached)"
    if result.verdicts:
        correct = sum(1 for _, v in result.verdicts if v.ok)
        summary += f"; {_n(len(result.verdicts), 'spec')} checked ({correct} correct)"
    timed = [e for r in result.latency for e in r.entries if e.us is not None and (e.chosen or e.source == "measured")]
    if timed:
        how = "measured on the GPU" if result.latency_source == "measured" else "estimated by the roofline model, no GPU"
        if result.latency_source != "measured" and any((e.estimate or {}).get("engine_us") for e in timed):
            how = "estimated" + (" by the roofline model and" if any(not (e.estimate or {}).get("engine_us")
                                                                     for e in timed) else "") + \
                " from the NKI model's counts, no device"
        summary += f"; {_n(len(timed), 'latency figure')} ({how})"
    fixable = sum(1 for ps in result.problems.values() for p in ps if p.fix)
    if fixable:
        summary += f"; {fixable} with a quick fix in the editor"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def _kernel_lines(result: CheckResult) -> dict[tuple[str, str], int]:
    """(path, kernel) -> 0-based def line, for kernels of the index."""
    out = {}
    for path, entry in result.index.files.items():
        if entry.analysis:
            for k in [*entry.analysis.kernels, *entry.analysis.nki_kernels]:
                out.setdefault((path, k.name), k.name_span.start_line)
    return out


def latency_lines(batch: BatchResult) -> list[str]:
    """`examples/vector_add.py:16 add_kernel (98432,) float32 H200: ≈3.1 µs H200 est. [BLOCK_SIZE=1024] memory-bound,
    83% of roofline`: one line per kernel, shape and device (estimates: the configuration an autotuner picks); a
    measurement says how close its counted work came to the device's roofs (`46.0 µs on NVIDIA H200 91% of roofline
    (work count estimated)`)."""
    result: CheckResult = batch.details
    where = _kernel_lines(result)
    lines = []
    for report, plain in zip(result.latency, batch.latency):
        for e, p in zip(report.entries, plain.entries):
            if e.source == "estimate" and not e.chosen and e.error is None:
                continue
            line = where.get((report.path, e.kernel))
            head = f"{_display(report.path)}:{line + 1 if line is not None else 1} {e.kernel} {tuple(e.shape)} {e.dtype}"
            if e.error or e.us is None:
                lines.append(f"{head}: {e.label}: {e.error or 'no figure'}")
                continue
            parts = [e.label]
            if e.config:
                parts.append(f"[{e.config}]")
            extra = []
            if e.bound and e.fraction_of_roofline is not None:
                extra.append(f"{e.bound}-bound, {e.fraction_of_roofline:.0%} of roofline")
            elif e.source == "measured" and p.fraction_of_roofline is not None:
                extra.append(f"{p.fraction_of_roofline:.0%} of roofline"
                             + (" (work count estimated)" if p.work_estimated else ""))
            elif e.bound:
                extra.append(f"{e.bound}-bound")
            if e.speedup:
                extra.append(f"{e.speedup:.2f}x the reference")
            if e.change_vs_previous is not None:
                extra.append(f"{e.change_vs_previous:+.0%} vs previous on {e.device}")
            if e.suspicious:
                extra.append(f"suspicious: {e.suspicious}")
            lines.append(f"{head}: " + " ".join(parts) + (f" {', '.join(extra)}" if extra else ""))
        lines += [f"{_display(report.path)}: latency: {err}" for err in report.errors]
    return lines


def _bits(widths: tuple[int, ...]) -> str:
    return f"{max(widths)}b" if widths else "-"


def resource_line(report, jr) -> str:
    """`examples/vector_add.py:16 add_kernel sm_90 [BLOCK_SIZE=1024] 25 regs, 0 B spill, ...`"""
    from .engine.compile.service import config_text

    res = jr.result.resources
    parts = [f"{res.registers if res.registers is not None else '?'} regs",
             f"{res.spill_bytes or 0} B spill", f"{res.shared_bytes or 0} B smem"]
    if res.occupancy is not None:
        parts.append(f"occ {res.occupancy:.0%}")
    ld, st = _bits(res.load_widths), _bits(res.store_widths)
    parts.append(f"ld/st {ld}" if ld == st else f"ld {ld} st {st}")
    if res.matrix_instructions:
        parts.append("/".join(res.matrix_instructions))
    if res.uses_tma:
        parts.append("TMA")
    return (f"{_display(report.path)}:{report.span.start_line + 1} {report.kernel} {report.target.name} "
            f"[{config_text(jr.job)}] " + ", ".join(parts))


def _compile_json(report, jr) -> dict[str, Any]:
    res, r = jr.result.resources, jr.result
    return {
        "path": report.path, "kernel": report.kernel, "line": report.span.start_line + 1,
        "target": report.target.name, "config": jr.job.config_label,
        "constexprs": {k: v if isinstance(v, (int, float, bool, str, type(None))) else repr(v)
                       for k, v in jr.job.constexprs},
        "numWarps": jr.job.num_warps, "numStages": jr.job.num_stages,
        "ok": r.ok, "cached": jr.cached, "seconds": round(r.seconds, 3),
        "error": None if r.error is None else {"kind": r.error.kind, "message": r.error.message},
        "resources": None if not r.ok else {
            "registers": res.registers, "spillBytes": res.spill_bytes, "stackBytes": res.stack_bytes,
            "sharedBytes": res.shared_bytes, "occupancy": res.occupancy,
            "matrixInstructions": list(res.matrix_instructions), "loadWidths": list(res.load_widths),
            "storeWidths": list(res.store_widths), "usesTma": res.uses_tma,
        },
        "notes": list(jr.job.notes),
    }


def _problem_json(path: str, p: Problem) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": path,
        "code": p.code,
        "rule": RULES[p.code].name if p.code in RULES else None,
        "severity": _LEVEL[p.severity],
        "message": p.message,
        "line": p.span.start_line + 1,
        "column": p.span.start_col + 1,
        "endLine": p.span.end_line + 1,
        "endColumn": p.span.end_col + 1,
        "kernel": p.kernel,
    }
    if p.fix:
        out["fix"] = {
            "title": p.fix.title,
            "edits": [{"line": e.span.start_line + 1, "column": e.span.start_col + 1, "endLine": e.span.end_line + 1,
                       "endColumn": e.span.end_col + 1, "text": e.new_text} for e in p.fix.edits],
        }
    if p.related:
        out["related"] = [{"path": r.path or path, "line": r.span.start_line + 1, "column": r.span.start_col + 1,
                           "message": r.message} for r in p.related]
    return out


def _line(zero_based: int | None) -> int | None:
    return None if zero_based is None else zero_based + 1


def _case_json(c) -> dict[str, Any]:
    from .engine.verify.results import case_to_dict

    d = case_to_dict(c)
    return {"shape": list(c.shape), "dtype": c.dtype, "seed": c.seed, "ok": c.ok, "maxAbs": d["max_abs"],
            "maxRel": d["max_rel"], "mismatched": c.mismatched, "total": c.total,
            "firstIndex": None if c.first_index is None else list(c.first_index), "tailOnly": c.tail_only,
            "config": c.config, "note": c.note, "line": _line(c.line)}


def _verdict_json(path: str, v) -> dict[str, Any]:
    return {"path": path, "kernel": v.kernel, "spec": v.spec, "specLine": v.spec_line + 1,
            "kernelLine": v.kernel_line + 1, "status": v.status, "device": v.device, "message": v.message,
            "line": _line(v.line), "column": _line(v.column), "failedCheck": v.failed_check,
            "seconds": round(v.duration_s, 3), "notes": list(v.notes), "cases": [_case_json(c) for c in v.cases]}


def _latency_json(path: str, e, kernel_line: int | None, plain) -> dict[str, Any]:
    """An engine latency entry and the API's (`plain`: a measurement's roofline fraction and how its work was
    counted, in `fractionOfRoofline` and `notes`)."""
    est, work, timing = e.estimate or {}, e.work or {}, e.timing or {}
    notes = list(est.get("notes") or ())
    fraction = e.fraction_of_roofline
    if e.source == "measured":
        fraction = plain.fraction_of_roofline
        if plain.work_note:
            notes.append(plain.work_note)
    flops = sum((work.get("tensor_flops") or {}).values()) + float(work.get("vector_flops") or 0.0) if work else None
    return {"path": path, "kernel": e.kernel, "line": _line(kernel_line), "spec": e.spec, "shape": list(e.shape),
            "dtype": e.dtype, "source": e.source, "device": e.device, "us": e.us, "label": e.label,
            "config": e.config, "chosen": e.chosen, "bound": e.bound, "fractionOfRoofline": fraction,
            "dramBytes": est.get("dram_bytes"), "flops": flops,
            "iqrUs": timing.get("iqr_us"), "referenceUs": e.reference_us, "speedup": e.speedup,
            "suspicious": e.suspicious, "changeVsPrevious": e.change_vs_previous, "error": e.error,
            "notes": notes}


def json_document(batch: BatchResult) -> dict[str, Any]:
    """The report as one JSON-ready dict (kernel_lsp/schema/check-report.schema.json)."""
    result: CheckResult = batch.details
    doc = {
        "$schema": SCHEMA_ID,
        "version": __version__,
        "summary": {**result.index.stats(), "errors": result.count(Severity.ERROR),
                    "warnings": result.count(Severity.WARNING), "infos": result.count(Severity.INFO)},
        "problems": [_problem_json(path, p) for path, ps in result.problems.items() for p in ps],
        "missing": result.missing,
        "kernels": [
            {"path": path, "name": k.name, "line": k.name_span.start_line + 1, "language": "triton",
             "decorators": k.decorators, "params": [{"name": p.name, "constexpr": p.is_constexpr} for p in k.params],
             "autotuneConfigs": len(k.autotune_configs)}
            for path, e in result.index.files.items() if e.analysis for k in e.analysis.kernels
        ] + [
            {"path": path, "name": k.name, "line": k.name_span.start_line + 1, "language": "nki", "api": k.api,
             "decorators": k.decorators}
            for path, e in result.index.files.items() if e.analysis for k in e.analysis.nki_kernels
        ],
    }
    if result.compiled:
        doc["compile"] = [_compile_json(report, jr) for report in result.compiled for jr in report.jobs]
        doc["compileStats"] = {k: v for k, v in result.compile_stats.items() if k != "pool"}
    if result.cuda:
        doc["cuda"] = [{"path": k.path, "name": k.name, "line": k.line + 1, "target": k.target,
                        "registers": k.registers, "spillBytes": k.spill_bytes, "stackBytes": k.stack_bytes,
                        "sharedBytes": k.shared_bytes} for k in result.cuda]
    if result.verdicts:
        doc["checks"] = [_verdict_json(path, v) for path, v in result.verdicts]
    if result.latency:
        where = _kernel_lines(result)
        doc["latency"] = [_latency_json(r.path, e, where.get((r.path, e.kernel)), p)
                          for r, plain in zip(result.latency, batch.latency) for e, p in zip(r.entries, plain.entries)]
        doc["latencySource"] = result.latency_source
        doc["latencyErrors"] = [{"path": r.path, "message": m} for r in result.latency for m in r.errors]
    return doc


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such a figure is unknown (null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def json_report(batch: BatchResult, *, one_line: bool = False) -> str:
    """The JSON report; `one_line` writes it on a single line (`--watch` prints one document per run: NDJSON)."""
    return json.dumps(_finite(json_document(batch)), indent=None if one_line else 2, allow_nan=False,
                      separators=(",", ":") if one_line else None) + "\n"


def _region(p_span) -> dict[str, int]:
    return {"startLine": p_span.start_line + 1, "startColumn": p_span.start_col + 1,
            "endLine": p_span.end_line + 1, "endColumn": p_span.end_col + 1}


def sarif_report(batch: BatchResult) -> str:
    result: CheckResult = batch.details
    used = sorted({p.code for ps in result.problems.values() for p in ps})
    rule_index = {code: i for i, code in enumerate(used)}
    rules = []
    for code in used:
        r = RULES[code]
        rules.append({
            "id": code, "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.explanation or r.summary},
            "help": {"text": f"See docs/rules.md, {code}."},
            "defaultConfiguration": {"level": _SARIF_LEVEL[r.severity]},
        })
    results = []
    for path, problems in result.problems.items():
        uri = _display(path).replace(os.sep, "/")
        for p in problems:
            entry: dict[str, Any] = {
                "ruleId": p.code, "ruleIndex": rule_index[p.code], "level": _SARIF_LEVEL[p.severity],
                "message": {"text": p.message},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri}, "region": _region(p.span)}}],
            }
            if p.related:
                entry["relatedLocations"] = [
                    {"id": i, "message": {"text": r.message}, "physicalLocation": {
                        "artifactLocation": {"uri": _display(r.path or path).replace(os.sep, "/")},
                        "region": _region(r.span)}}
                    for i, r in enumerate(p.related)
                ]
            if p.fix:
                entry["fixes"] = [{"description": {"text": p.fix.title}, "artifactChanges": [{
                    "artifactLocation": {"uri": uri},
                    "replacements": [{"deletedRegion": _region(e.span), "insertedContent": {"text": e.new_text}}
                                     for e in p.fix.edits]}]}]
            results.append(entry)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "kernel-lsp", "version": __version__, "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"
