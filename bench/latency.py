"""Latency: from an incremental textDocument/didChange to the diagnostics of that version, on a large file.

The file (bench/common.big_kernel_file) has 30 Triton kernels with their launchers, about 2,100 lines; it lives
in the workspace folder and is opened with didOpen. Then the client types into kernel bodies, one
didChange per keystroke: in 4 kernels spread over the file it opens a new line, types a statement character by
character, and fixes it — `probe = tl.arange(0, 100)` (a non-power-of-two extent, TR001, corrected by deleting
"100" and typing "128") or `probe = tl.arrange(0, 64)` (a typo, TR007, corrected by deleting one "r") — and
then deletes the line, 122 edits in all. Intermediate states include syntax errors, as real typing does.

Each edit's latency runs from just before didChange is written to the pipe until the client has decoded:
- push (VS Code 1.65.2 capabilities): the textDocument/publishDiagnostics whose `version` is that edit's;
- pull (Neovim 0.11 capabilities): the response to a textDocument/diagnostic request sent right after the
  didChange (with the previous resultId, as Neovim sends it).
The next edit is sent `--gap-ms` (default 50) after the previous result arrived: a typist is slower than that,
so a longer gap changes little unless the server keeps working after it answers (it does, in pull mode:
see docs/benchmarks.md). No warm-up: the measured edits start right after the didOpen's own diagnostics.

    python bench/latency.py [--mode push|pull|both] [--gap-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Figure, ServerSession, big_kernel_file, common_args, load_line, print_table, summarize, write_json

TARGET_MS = 30.0
PROBES = [
    # (typed text, bug code, ((start, end) to delete within the typed text, replacement to type))
    ("probe = tl.arange(0, 100)", "TR001", ((21, 24), "128")),
    ("probe = tl.arrange(0, 64)", "TR007", ((12, 13), "")),
]


@dataclass
class Edit:
    start: tuple[int, int]
    end: tuple[int, int]
    text: str
    tag: str = ""  # "bug:CODE" once the problem is fully typed, "fixed:CODE" once corrected


class Doc:
    """The client's copy of the document, to compute edit ranges the way an editor does."""

    def __init__(self, text: str):
        self.lines = text.split("\n")

    def apply(self, e: Edit) -> None:
        (l0, c0), (l1, c1) = e.start, e.end
        merged = self.lines[l0][:c0] + e.text + self.lines[l1][c1:]
        self.lines[l0:l1 + 1] = merged.split("\n")

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def edit_script(text: str, kernels: list[str], n_sites: int = 4) -> list[Edit]:
    """Typing edits in n_sites kernels spread over the file (applied in order to a copy of text)."""
    doc = Doc(text)
    picks = [kernels[round(i * (len(kernels) - 5) / max(n_sites - 1, 1))] for i in range(n_sites)]
    edits: list[Edit] = []

    def do(e: Edit) -> None:
        doc.apply(e)
        edits.append(e)

    for n, kernel in enumerate(picks):
        probe, code, ((d0, d1), replacement) = PROBES[n % len(PROBES)]
        start = next(i for i, ln in enumerate(doc.lines) if ln.startswith(f"def {kernel}("))
        anchor = next(i for i in range(start, len(doc.lines)) if "tl.program_id(" in doc.lines[i])
        end = len(doc.lines[anchor])
        do(Edit((anchor, end), (anchor, end), "\n    "))  # Enter, auto-indented
        line, col = anchor + 1, 4
        for k, ch in enumerate(probe):
            do(Edit((line, col + k), (line, col + k), ch, f"bug:{code}" if k == len(probe) - 1 else ""))
        for k in range(d1 - 1, d0 - 1, -1):  # backspace over the wrong part
            do(Edit((line, col + k), (line, col + k + 1), ""))
        for k, ch in enumerate(replacement):
            do(Edit((line, col + d0 + k), (line, col + d0 + k), ch))
        edits[-1].tag = f"fixed:{code}"
        do(Edit((anchor, len(doc.lines[anchor])), (line, len(doc.lines[line])), ""))  # delete the line
    assert doc.text == text, "the edit script must leave the file as it was"
    return edits


async def measure(mode: str, text: str, kernels: list[str], gap_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="kl-bench-latency-") as tmp:
        root = Path(tmp)
        path = root / "pkg" / "fused_kernels.py"
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8")
        uri = path.as_uri()
        edits = edit_script(text, kernels)
        lat: list[float] = []
        codes: dict[int, tuple[str, ...]] = {}
        missing = 0
        async with ServerSession(mode, root=root) as s:
            await s.start()
            await s.wait_ready()
            result_id = None
            t0 = time.perf_counter()
            if mode == "push":
                fut = s.expect_publish(uri, 1)
                s.open(uri, text)
                await asyncio.wait_for(fut, 30)
                codes[1] = s.published[uri][-1].codes
            else:
                s.open(uri, text)
                report = await s.pull(uri)
                result_id = report.result_id
                codes[1] = tuple(str(d.code) for d in report.items)
            open_ms = (time.perf_counter() - t0) * 1000
            for e in edits:
                await asyncio.sleep(gap_s)
                if mode == "push":
                    fut = s.expect_publish(uri, s.versions[uri] + 1)
                    t0 = time.perf_counter()
                    version = s.change(uri, e.start, e.end, e.text)
                    try:
                        t1 = await asyncio.wait_for(fut, 10)
                    except TimeoutError:
                        missing += 1
                        continue
                    codes[version] = s.published[uri][-1].codes
                else:
                    t0 = time.perf_counter()
                    version = s.change(uri, e.start, e.end, e.text)
                    report = await s.pull(uri, result_id)
                    t1 = time.perf_counter()
                    if getattr(report, "items", None) is not None:
                        codes[version] = tuple(str(d.code) for d in report.items)
                    else:
                        codes[version] = codes.get(version - 1, ())
                    result_id = report.result_id
                e.version = version  # type: ignore[attr-defined]
                lat.append((t1 - t0) * 1000)
            try:
                st = await s.wait_idle()
                still = ""
            except TimeoutError:  # the background compile of the final text is still running: the figures hold
                st = await s.status()
                pool = st.get("compile", {}).get("pool", {})
                still = f"; still compiling 60 s after the last edit ({pool.get('queued', '?')} compile jobs queued)"
            refreshes = s.refreshes
        # Did the typed problems appear and go away again?
        verdicts = []
        for e in edits:
            if e.tag.startswith("bug:"):
                code = e.tag[4:]
                bug_version = getattr(e, "version", None)
            elif e.tag.startswith("fixed:"):
                n_bug = codes.get(bug_version, ()).count(code)
                n_fixed = codes.get(getattr(e, "version", None), ()).count(code)
                verdicts.append(n_bug > n_fixed)
        return {
            "lat": lat, "missing": missing, "open_ms": open_ms, "edits": len(edits), "verdicts": verdicts,
            "superseded": st["supersededJobs"], "stale": st["staleResultsDropped"], "refreshes": refreshes,
            "baseline": len(codes[1]), "still": still,
        }


def analysis_floor(text: str, runs: int = 15) -> tuple[float, float]:
    """Medians (ms) of analyze_source and of ast.parse alone on the file, in this process: what any edit costs
    while the server re-analyses the whole file."""
    import ast

    from analyzers import analyze_source

    def median_ms(fn) -> float:
        fn()  # the first call also imports and compiles what the analyzers load lazily
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    return median_ms(lambda: analyze_source(text, "/bench/fused_kernels.py")), median_ms(lambda: ast.parse(text))


def keystroke_cost(text: str, kernels: list[str]) -> dict[str, float]:
    """analyze_source of each state of the edit script with the document's parse cache, as the server runs it
    after each didChange, in this process: what a keystroke costs the analyzers alone (ms)."""
    from analyzers import analyze_source
    from analyzers.source import ParseCache

    cache = ParseCache()
    doc = Doc(text)
    analyze_source(doc.text, "/bench/fused_kernels.py", cache)
    times = []
    for e in edit_script(text, kernels):
        doc.apply(e)
        t0 = time.perf_counter()
        analyze_source(doc.text, "/bench/fused_kernels.py", cache)
        times.append((time.perf_counter() - t0) * 1000)
    return summarize(times)


def run(modes=("push", "pull"), gap_ms: float = 50.0) -> list[Figure]:
    text, kernels = big_kernel_file(30, 2000)
    n_lines = text.count("\n")
    figures = []
    for mode in modes:
        r = asyncio.run(measure(mode, text, kernels, gap_ms / 1000))
        s = summarize(r["lat"])
        profile = "VS Code 1.65.2, publishDiagnostics" if mode == "push" else "Neovim 0.11, textDocument/diagnostic"
        seen = "yes" if r["verdicts"] and all(r["verdicts"]) else f"NO ({r['verdicts']})"
        detail = (f"{profile}; {s['n']} of {r['edits']} edits answered ({r['missing']} missing), "
                  f"{n_lines}-line file, {len(kernels)} kernels, {r['baseline']} diagnostics at open; "
                  f"min {s['min']:.1f} ms, mean {s['mean']:.1f} ms; typed problems appeared and cleared: {seen}; "
                  f"didOpen -> first diagnostics {r['open_ms']:.0f} ms; server: {r['superseded']} superseded jobs, "
                  f"{r['stale']} stale results dropped, {r['refreshes']} diagnostic refresh requests; "
                  f"gap {gap_ms:g} ms{r['still']}; {load_line()}")
        figures += [
            Figure(f"latency {mode}: didChange -> diagnostics, p50", s["p50"], "ms", TARGET_MS, detail),
            Figure(f"latency {mode}: didChange -> diagnostics, p95", s["p95"], "ms", TARGET_MS),
            Figure(f"latency {mode}: didChange -> diagnostics, max", s["max"], "ms"),
        ]
    analyze_ms, parse_ms = analysis_floor(text)
    keys = keystroke_cost(text, kernels)
    figures += [
        Figure("context: analyze_source per keystroke with the parse cache, in-process, p50", keys["p50"], "ms", None,
               f"the {keys['n']:.0f} edits of the script, each state analysed as the server does after a didChange"),
        Figure("context: analyze_source per keystroke with the parse cache, in-process, p95", keys["p95"], "ms"),
        Figure("context: analyze_source of the whole file, in-process median", analyze_ms, "ms", None,
               "what each edit costs while every change re-analyses the whole file"),
        Figure("context: ast.parse of the whole file, in-process median", parse_ms, "ms"),
    ]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["push", "pull", "both"], default="both")
    parser.add_argument("--gap-ms", type=float, default=50.0, help="pause after each result before the next edit")
    common_args(parser)
    args = parser.parse_args(argv)
    modes = ("push", "pull") if args.mode == "both" else (args.mode,)
    figures = run(modes, args.gap_ms)
    print_table("Language server change-to-diagnostics latency", figures)
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
