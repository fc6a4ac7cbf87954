"""Per-line profiles of the softmax, layernorm and matmul examples on this machine's GPU with Nsight Compute,
through the same runner the language server uses (kernel_lsp.engine.profile): one ncu run per kernel and bench
shape, warp-stall samples per line of the example, stall reasons per line, and ncu's advice.

    python bench/profile_lines.py OUT_DIR [--timeout 600] [--examples fused_softmax layernorm matmul_autotune]

Prints the per-line table and the advice of each kernel, and keeps under OUT_DIR/<example>/ every CSV ncu printed
(source page, details page, raw stall metrics per instruction) plus ncu's log and report, so the real output can
become a test fixture. It also exports two more views of each report for the parser's record: the SASS-only source
page and the whole raw page with instance values. Where the per-instruction stall metrics are missing, the table
falls back to totals per line and says so. Needs no pygls; works on triton 3.6 and 3.9.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernel_lsp.engine.profile import find_ncu, profile_file

EXAMPLES = ("fused_softmax", "layernorm", "matmul_autotune")


def table(path: Path, p) -> str:
    lines = path.read_text().splitlines()
    head = (f"{p.kernel} {tuple(p.shape)} {p.dtype} on {p.device}: {p.duration_us or 0:.2f} us, {p.registers} regs, "
            f"occupancy {p.achieved_occupancy}% of {p.theoretical_occupancy}%, shared {p.shared_bytes} B, "
            f"{p.total_samples:g} samples, reasons from: {p.reasons_from}")
    out = [head]
    out += [f"  note: {n}" for n in p.notes]
    out.append(f"  {'line':>5} {'share':>6} {'samples':>8} {'instr':>5}  top stalls | source")
    for ln in sorted(p.lines, key=lambda ln: -ln.share):
        stalls = ", ".join(f"{r} {s:.0%}" for r, s in ln.stalls[:3]) or "-"
        src = lines[ln.line].strip() if ln.line < len(lines) else "?"
        out.append(f"  {ln.line + 1:>5} {ln.share:>6.1%} {ln.samples:>8g} {ln.instructions:>5}  {stalls} | {src[:70]}")
    if p.other_files:
        out.append("  other files: " + ", ".join(f"{f} {s:g}" for f, s in p.other_files))
    if p.kernel_stalls:
        out.append("  kernel stalls: " + ", ".join(f"{r} {s:.0%}" for r, s in p.kernel_stalls[:6]))
    for a in p.advice:
        gain = f" [{a.speedup:g}% {a.speedup_type}]" if a.speedup is not None else ""
        out.append(f"  {a.kind} {a.rule}{gain}: {a.text[:160]}")
    return "\n".join(out)


def extra_views(ncu: str, folder: Path) -> None:
    for report in glob.glob(str(folder / "*.ncu-rep")):
        base = report.removesuffix(".ncu-rep")
        for name, args in (("source-sass.csv", ["--page", "source", "--csv", "--print-source", "sass"]),
                           ("raw-all.csv", ["--page", "raw", "--csv", "--print-metric-instances", "details"])):
            try:
                done = subprocess.run([ncu, "-i", report, *args], check=False, capture_output=True, text=True,
                                      timeout=300)
                Path(f"{base}.{name}").write_text(done.stdout + (f"\n# stderr:\n{done.stderr}" if done.stderr else ""))
            except (OSError, subprocess.SubprocessError) as exc:
                print(f"  cannot export {name}: {exc}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per ncu run")
    parser.add_argument("--examples", nargs="*", default=list(EXAMPLES))
    args = parser.parse_args()
    ncu = find_ncu()
    print(f"ncu: {ncu}")
    if ncu:
        print(subprocess.run([ncu, "--version"], check=False, capture_output=True, text=True).stdout.strip())
    failed = 0
    for name in args.examples:
        path = ROOT / "examples" / f"{name}.py"
        folder = args.out / name
        folder.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        report = profile_file(str(path), path.read_text(), None, str(ROOT), timeout_s=args.timeout,
                              keep_dir=str(folder), progress=lambda m, f: print(f"  {m}", flush=True))
        print(f"\n== {name} ({time.monotonic() - started:.1f} s)")
        for p in report.profiles:
            print(table(path, p))
        for e in report.errors:
            print(f"  error: {e}")
        failed += bool(report.errors) or not report.profiles
        if ncu:
            extra_views(ncu, folder)
    print(f"\nCSV files under {os.path.abspath(args.out)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
