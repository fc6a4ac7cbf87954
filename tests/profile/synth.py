"""Profiles with samples, derived from the real H200 fixture (whose tiny launch collected none): the same rows,
files, lines and instruction addresses, with warp-stall samples written into the sample column and a raw page
carrying them per instruction in the `--print-metric-instances details` shape. The numbers are made up; the
layout is ncu's."""

from __future__ import annotations

import csv
import io
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
SOURCE = (FIXTURES / "h200_softmax_source.csv").read_text()
DETAILS = (FIXTURES / "h200_softmax_details.csv").read_text()
SAMPLES = "Warp Stall Sampling (All Samples)"

# instruction address -> stall reason (raw metric suffix) -> samples
STALLS = {
    0x7F2B737A3B70: {"long_scoreboard": 4, "wait": 2},  # line 34: LDG
    0x7F2B737A3B80: {"long_scoreboard": 60, "selected": 2},  # line 37: FADD waits for the load
    0x7F2B737A3BD0: {"math_pipe_throttle": 6, "short_scoreboard": 2},  # line 37: MUFU.EX2
    0x7F2B737A3C40: {"short_scoreboard": 8},  # line 39: MUFU.RCP
    0x7F2B737A3C70: {"long_scoreboard": 5, "lg_throttle": 5},  # line 41: STG
    0x7F2B737A3B10: {"no_instructions": 2},  # line 30: S2R
}


def source_with_samples(stalls: dict[int, dict[str, int]] = STALLS, text: str = SOURCE) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    header = next(r for r in rows if r and r[0] == "Line No")
    col = header.index(SAMPLES)
    line_row = None
    for r in rows:
        if len(r) != len(header) or r is header:
            continue
        if r[0].isdigit():
            line_row = r
            r[col] = "0"
        elif r[2].startswith("0x"):
            n = sum(stalls.get(int(r[2], 16), {}).values())
            r[col] = str(n)
            line_row[col] = str(int(line_row[col]) + n)
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue()


def raw_page(stalls: dict[int, dict[str, int]] = STALLS, base: int = 0) -> str:
    """`ncu --page raw --csv --print-metric-instances details`; ids are addresses, or offsets from `base`."""
    reasons = sorted({r for v in stalls.values() for r in v})
    names = [f"smsp__pcsamp_warps_issue_stalled_{r}" for r in reasons]
    names += [f"smsp__pcsamp_warps_issue_stalled_{r}_not_issued" for r in reasons]
    cells = []
    for name in names:
        reason = name.removeprefix("smsp__pcsamp_warps_issue_stalled_").removesuffix("_not_issued")
        items = [(pc - base, v[reason]) for pc, v in stalls.items() if v.get(reason)]
        if name.endswith("_not_issued"):
            items = [(pc, n // 2) for pc, n in items]
        total = sum(n for _, n in items)
        cells.append(f"{total:,} ({'; '.join(f'{pc:#x}: {n:,}' for pc, n in items)})")
    rows = [["ID", "Process ID", "Kernel Name", *names], ["", "", "", *(["sample"] * len(names))],
            ["0", "1135", "softmax_kernel", *cells]]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue()
