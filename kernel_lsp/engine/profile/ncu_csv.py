"""Parsers for what `ncu --import REPORT --csv` prints, and the attribution of warp-stall samples to source lines.

Pages read (Nsight Compute 2025.3, checked on a real H200 report; tests/profile/fixtures has that output):
- `--page source --print-source cuda,sass`: per file a `"File Path"` row, a `"Function Name"` row, a header
  (`"Line No","Source","Address","Source", metrics...`), then each source line (its number, its text, the line's
  summed metrics) followed by the SASS instructions ncu attributes to it (address, instruction, metrics). `...`
  rows mark gaps in the address order. The sample columns are "Warp Stall Sampling (All Samples)" and
  "(Not-issued Samples)"; other versions name them "# Samples" and add one `stall_<reason>` column per reason.
- `--page raw --print-metric-instances details`: one column per metric, a units row, one row per profiled
  launch; an instanced metric (the SourceCounters section's per-instruction `smsp__pcsamp_warps_issue_stalled_*`
  sample counts) reads `TOTAL (ID: VALUE; ID: VALUE; ...)` with the instruction address as the ID.
- `--page details`: one row per metric of each section (`Section Name`, `Metric Name`, `Metric Unit`,
  `Metric Value`) and one per rule result (`Rule Name`, `Rule Type` OPT/WRN/INF, `Rule Description`,
  `Estimated Speedup Type`, `Estimated Speedup`).

Pure: no processes, no torch. Never raises on odd input: what cannot be read is left out.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass, field

SAMPLE_COLUMNS = ("Warp Stall Sampling (All Samples)", "# Samples", "Warp Stall Sampling (All Cycles)")
STALL_METRIC = "smsp__pcsamp_warps_issue_stalled_"

# Reason names as people read them, from the raw metrics' suffixes and the source page's short column names.
REASONS = {
    "barrier": "barrier", "branch_resolving": "branch resolving", "branch": "branch resolving",
    "dispatch_stall": "dispatch stall", "dispatch": "dispatch stall", "drain": "drain", "imc_miss": "IMC miss",
    "imc": "IMC miss", "lg_throttle": "LG throttle", "lg": "LG throttle", "long_scoreboard": "long scoreboard",
    "long_sb": "long scoreboard", "math_pipe_throttle": "math pipe throttle", "math": "math pipe throttle",
    "membar": "membar", "mio_throttle": "MIO throttle", "mio": "MIO throttle", "misc": "misc",
    "no_instructions": "no instruction", "no_instruction": "no instruction", "no_inst": "no instruction",
    "not_selected": "not selected", "selected": "selected", "short_scoreboard": "short scoreboard",
    "short_sb": "short scoreboard", "sleeping": "sleeping", "sleep": "sleeping", "tex_throttle": "TEX throttle",
    "tex": "TEX throttle", "wait": "wait", "gmma": "GMMA", "tmem": "TMEM",
}


def reason_label(key: str) -> str:
    key = key.strip().lower()
    for prefix in (STALL_METRIC, "stall_"):
        key = key.removeprefix(prefix)
    return REASONS.get(key, key.replace("_", " "))


def number(text: str | None) -> float | None:
    """ncu's numbers: "3,176", "2.14", "-" or "" (none), "n/a"."""
    if text is None:
        return None
    text = text.strip().replace(",", "")
    if not text or text in ("-", "n/a", "N/A", "..."):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _rows(text: str) -> list[list[str]]:
    # ncu may put its own "==PROF==" or "==WARNING==" lines before the CSV.
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]
    try:
        return list(csv.reader(io.StringIO("\n".join(lines))))
    except csv.Error:
        return []


# --- source page -----------------------------------------------------------------------------------------------


@dataclass
class SassRow:
    address: int
    instruction: str
    metrics: dict[str, float]


@dataclass
class SourceLineRow:
    line: int  # 1-based, as ncu prints it
    text: str
    metrics: dict[str, float]
    sass: list[SassRow] = field(default_factory=list)


@dataclass
class SourceBlock:
    file: str
    function: str
    lines: list[SourceLineRow] = field(default_factory=list)
    orphans: list[SassRow] = field(default_factory=list)  # instructions with no source line (SASS-only view)


@dataclass
class SourcePage:
    blocks: list[SourceBlock]
    sample_column: str | None  # which column holds all warp-stall samples
    reason_columns: tuple[str, ...]  # per-reason sample columns, when this ncu prints them

    def samples(self, metrics: dict[str, float]) -> float:
        return metrics.get(self.sample_column, 0.0) if self.sample_column else 0.0


def parse_source_page(text: str) -> SourcePage:
    blocks: list[SourceBlock] = []
    file = function = ""
    header: list[str] | None = None
    cols: dict[str, int] = {}
    metric_cols: list[tuple[int, str]] = []
    current: SourceLineRow | None = None
    sample_column: str | None = None
    reasons: list[str] = []
    for row in _rows(text):
        if not row or not any(cell.strip() for cell in row):
            continue
        head = row[0].strip()
        if head == "File Path" and len(row) >= 2:
            file, header, current = row[1], None, None
            continue
        if head == "Function Name" and len(row) >= 2:
            function, header, current = row[1], None, None
            continue
        if head in ("Line No", "#", "Address") and len(row) > 2 and header is None:
            header = [c.strip() for c in row]
            sources = [i for i, c in enumerate(header) if c == "Source"]
            cols = {"line": header.index(head) if head != "Address" else -1,
                    "address": header.index("Address") if "Address" in header else -1,
                    "text": sources[0] if sources else -1,
                    "sass": sources[-1] if sources else -1}
            skip = {cols["line"], cols["address"], *sources}
            metric_cols = [(i, c) for i, c in enumerate(header) if i not in skip]
            names = [c for _, c in metric_cols]
            sample_column = sample_column or next((c for c in SAMPLE_COLUMNS if c in names), None)
            for c in names:
                if c.startswith("stall_") and "not issued" not in c.lower() and c not in reasons:
                    reasons.append(c)
            blocks.append(SourceBlock(file, function))
            current = None
            continue
        if header is None or not blocks:
            continue
        block = blocks[-1]

        def cell(i: int, row: list[str] = row) -> str:
            return row[i].strip() if 0 <= i < len(row) else ""

        metrics = {name: v for i, name in metric_cols if (v := number(cell(i))) is not None}
        line_text = cell(cols["line"])
        address_text = cell(cols["address"])
        if line_text.isdigit():
            current = SourceLineRow(int(line_text), row[cols["text"]] if cols["text"] >= 0 else "", metrics)
            block.lines.append(current)
        if address_text.lower().startswith("0x"):
            try:
                address = int(address_text, 16)
            except ValueError:
                continue
            sass = SassRow(address, cell(cols["sass"]), metrics)
            if current is not None and not line_text.isdigit():
                current.sass.append(sass)
            elif current is None:
                block.orphans.append(sass)
    return SourcePage(blocks, sample_column, tuple(reasons))


# --- raw page ---------------------------------------------------------------------------------------------------

_INSTANCES = re.compile(r"^\s*([-\d.,eE+]+)\s*\((.*)\)\s*$", re.DOTALL)


def parse_instances(value: str) -> tuple[float | None, dict[int, float]]:
    """"12 (0x7f00: 5; 0x7f10: 7)" -> (12, {0x7f00: 5, 0x7f10: 7}); a plain "12" -> (12, {})."""
    match = _INSTANCES.match(value or "")
    if not match:
        return number(value), {}
    total = number(match.group(1))
    body = match.group(2)
    items = [p for p in body.split(";") if p.strip()]
    if len(items) == 1 and body.count(":") > 1:
        items = body.split(", ")
    out: dict[int, float] = {}
    for item in items:
        if ":" not in item:
            continue
        key, _, val = item.rpartition(":")
        key = key.strip()
        try:
            ident = int(key, 16) if key.lower().startswith("0x") else int(key)
        except ValueError:
            continue
        v = number(val)
        if v is not None:
            out[ident] = out.get(ident, 0.0) + v
    return total, out


@dataclass
class RawStalls:
    totals: dict[str, float]  # reason label -> samples, the whole kernel
    per_pc: dict[int, dict[str, float]]  # correlation id (instruction address) -> reason label -> samples
    kernel: str = ""


def parse_raw_stalls(text: str) -> RawStalls:
    """The per-reason sample counts of the first profiled launch on a raw page (issued and not issued alike:
    the `_not_issued` variants are a subset and left out)."""
    rows = _rows(text)
    start = next((i for i, r in enumerate(rows) if r and r[0].strip() == "ID"), None)
    if start is None:
        return RawStalls({}, {})
    header = [c.strip() for c in rows[start]]
    data = next((r for r in rows[start + 1:] if r and r[0].strip().isdigit()), None)
    if data is None:
        return RawStalls({}, {})
    totals: dict[str, float] = {}
    per_pc: dict[int, dict[str, float]] = {}
    for i, name in enumerate(header):
        if not name.startswith(STALL_METRIC) or name.endswith("_not_issued") or i >= len(data):
            continue
        total, instances = parse_instances(data[i])
        reason = reason_label(name)
        if total is not None:
            totals[reason] = totals.get(reason, 0.0) + total
        for pc, v in instances.items():
            if v:
                slot = per_pc.setdefault(pc, {})
                slot[reason] = slot.get(reason, 0.0) + v
    kernel = data[header.index("Kernel Name")] if "Kernel Name" in header and header.index("Kernel Name") < len(
        data) else ""
    return RawStalls(totals, per_pc, kernel)


# --- details page -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Advice:
    rule: str  # e.g. "AchievedOccupancy"
    kind: str  # OPT, WRN or INF
    text: str
    section: str
    speedup: float | None  # ncu's estimated speedup, percent
    speedup_type: str  # "global" or "local" (of the kernel's whole time, or of one part)

    def to_json(self) -> dict:
        return {"rule": self.rule, "type": self.kind, "text": self.text, "section": self.section,
                "speedup": self.speedup, "speedupType": self.speedup_type}


@dataclass
class Details:
    kernel: str
    metrics: dict[tuple[str, str], tuple[str, str]]  # (section, metric) -> (unit, value text)
    advice: list[Advice]
    block: str = ""
    grid: str = ""
    device_cc: str = ""

    def value(self, section: str, metric: str) -> tuple[float | None, str]:
        unit, text = self.metrics.get((section, metric), ("", ""))
        return number(text), unit


_TIME = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
_BYTES = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kibyte": 1024, "mibyte": 1024 ** 2}


def microseconds(value: float | None, unit: str) -> float | None:
    scale = _TIME.get(unit.strip().lower())
    return value * scale if value is not None and scale is not None else None


_FREQ = {"hz": 1e-6, "khz": 1e-3, "mhz": 1.0, "ghz": 1e3, "cycle/nsecond": 1e3, "cycle/usecond": 1.0,
         "cycle/second": 1e-6}


def megahertz(value: float | None, unit: str) -> float | None:
    scale = _FREQ.get(unit.strip().lower())
    return value * scale if value is not None and scale is not None else None


def byte_count(value: float | None, unit: str) -> float | None:
    scale = _BYTES.get(unit.strip().lower().split("/")[0])
    return value * scale if value is not None and scale is not None else None


def parse_details_page(text: str) -> list[Details]:
    rows = _rows(text)
    start = next((i for i, r in enumerate(rows) if r and r[0].strip() == "ID"), None)
    if start is None:
        return []
    header = [c.strip() for c in rows[start]]
    out: dict[str, Details] = {}
    for r in rows[start + 1:]:
        row = dict(zip(header, r))
        ident = (row.get("ID") or "").strip()
        if not ident.isdigit():
            continue
        d = out.get(ident)
        if d is None:
            d = out[ident] = Details(row.get("Kernel Name", ""), {}, [], row.get("Block Size", ""),
                                     row.get("Grid Size", ""), row.get("CC", ""))
        section = row.get("Section Name", "")
        if (row.get("Rule Name") or "").strip():
            d.advice.append(Advice(row["Rule Name"].strip(), (row.get("Rule Type") or "").strip(),
                                   " ".join((row.get("Rule Description") or "").split()), section,
                                   number(row.get("Estimated Speedup")),
                                   (row.get("Estimated Speedup Type") or "").strip()))
        elif (row.get("Metric Name") or "").strip():
            d.metrics[(section, row["Metric Name"].strip())] = (row.get("Metric Unit") or "",
                                                               row.get("Metric Value") or "")
    return list(out.values())


# --- attribution ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineStat:
    line: int  # 0-based line of the user's file
    samples: float
    share: float  # of all the kernel's samples, 0..1
    stalls: tuple[tuple[str, float], ...]  # (reason, share of this line's samples), largest first
    instructions: int  # SASS instructions ncu attributes to the line

    def to_json(self) -> dict:
        return {"line": self.line, "samples": self.samples, "share": round(self.share, 4),
                "stalls": [{"reason": r, "share": round(s, 4)} for r, s in self.stalls],
                "instructions": self.instructions}


@dataclass(frozen=True)
class Attribution:
    lines: tuple[LineStat, ...]  # the user's file's lines with samples or instructions, in line order
    total_samples: float
    other_files: tuple[tuple[str, float], ...]  # samples at lines of other files (triton's own helpers)
    reasons_from: str  # "instructions" (per-instruction reasons), "source page" (its columns) or "none"
    kernel_stalls: tuple[tuple[str, float], ...]  # the kernel's whole breakdown (reason, share)


def same_file(a: str, b: str) -> bool:
    if not a or not b:
        return False
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return a == b


def _map_pcs(per_pc: dict[int, dict[str, float]], addresses: set[int]) -> dict[int, dict[str, float]]:
    """Correlation ids are instruction addresses; where none of them is one the source page shows, read them as
    offsets from the function's first instruction."""
    if not per_pc or not addresses or set(per_pc) & addresses:
        return per_pc
    base = min(addresses)
    span = max(addresses) - base + 16
    if max(per_pc) <= span:
        return {base + pc: v for pc, v in per_pc.items()}
    return {}


def _shares(counts: dict[str, float]) -> tuple[tuple[str, float], ...]:
    total = sum(counts.values())
    if total <= 0:
        return ()
    return tuple(sorted(((r, v / total) for r, v in counts.items() if v > 0), key=lambda x: -x[1]))


def attribute(page: SourcePage, user_path: str, raw: RawStalls | None = None) -> Attribution:
    """Warp-stall samples per line of `user_path` (0-based lines). Every instruction counts once, even where ncu
    lists it under several source files; lines of helper functions in the same file are the user's lines too."""
    addresses = {s.address for b in page.blocks for ln in b.lines for s in ln.sass}
    addresses |= {s.address for b in page.blocks for s in b.orphans}
    per_pc = _map_pcs(raw.per_pc, addresses) if raw else {}
    pc_samples: dict[int, float] = {}
    for b in page.blocks:
        for s in [s for ln in b.lines for s in ln.sass] + b.orphans:
            pc_samples.setdefault(s.address, page.samples(s.metrics))
    total = sum(pc_samples.values())
    if total <= 0:  # no instruction rows: the line rows' own sums
        seen: dict[tuple[str, int], float] = {}
        for b in page.blocks:
            for ln in b.lines:
                seen[(b.file, ln.line)] = max(seen.get((b.file, ln.line), 0.0), page.samples(ln.metrics))
        total = sum(seen.values())
    if per_pc and total <= 0:
        total = sum(sum(v.values()) for v in per_pc.values())

    merged: dict[int, dict] = {}
    others: dict[str, float] = {}
    for b in page.blocks:
        mine = same_file(b.file, user_path)
        for ln in b.lines:
            samples = page.samples(ln.metrics)
            if not samples and ln.sass:
                samples = sum(page.samples(s.metrics) for s in ln.sass)
            if not samples and per_pc:
                samples = sum(sum(per_pc.get(s.address, {}).values()) for s in ln.sass)
            if not mine:
                if samples:
                    others[b.file] = others.get(b.file, 0.0) + samples
                continue
            slot = merged.setdefault(ln.line, {"pcs": {}, "row": 0.0, "columns": {}})
            for s in ln.sass:
                slot["pcs"].setdefault(s.address, s)
            slot["row"] = max(slot["row"], samples)
            for c in page.reason_columns:
                slot["columns"][c] = max(slot["columns"].get(c, 0.0), ln.metrics.get(c, 0.0))

    reasons_from = "instructions" if per_pc else "source page" if page.reason_columns else "none"
    lines = []
    for number_1, slot in sorted(merged.items()):
        if per_pc:
            counts: dict[str, float] = {}
            for pc in slot["pcs"]:
                for r, v in per_pc.get(pc, {}).items():
                    counts[r] = counts.get(r, 0.0) + v
        elif page.reason_columns:
            counts = {reason_label(c): v for c, v in slot["columns"].items()}
        else:
            counts = {}
        # Each instruction once, even where a line is listed under several functions of the file.
        samples = sum(page.samples(s.metrics) or sum(per_pc.get(pc, {}).values()) for pc, s in slot["pcs"].items())
        samples = float(samples if slot["pcs"] else slot["row"])
        lines.append(LineStat(number_1 - 1, samples, samples / total if total > 0 else 0.0, _shares(counts),
                              len(slot["pcs"])))
    if raw and raw.totals:
        kernel_stalls = _shares(raw.totals)
    else:
        agg: dict[str, float] = {}
        for stat in lines:
            for reason, share in stat.stalls:
                agg[reason] = agg.get(reason, 0.0) + share * stat.samples
        kernel_stalls = _shares(agg)
    return Attribution(tuple(lines), total, tuple(sorted(others.items(), key=lambda x: -x[1])), reasons_from,
                       kernel_stalls)
