"""Precision on real code: `kernel-lsp check` over the public Triton corpus, statically and compiled for sm_90.

    python bench/fetch_corpus.py                         # once: materialise bench/.corpus
    python bench/corpus.py bench/.corpus                 # both passes, all projects
    python bench/corpus.py bench/.corpus --project kernl --limit 5 --no-compile
    python bench/corpus.py bench/.corpus --json corpus.json   # also save every finding and compile job

Each project (a sub-folder of the corpus) is checked by one `kernel-lsp check --format json` process, so launch
sites still resolve across its files. A process that crashes, times out or prints no JSON is re-run one file at a
time: the file that breaks the tool is named and counted, and the others still count. Without `--run-checks`
nothing of the corpus is executed. Prints figures only; what they mean is for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL_LSP = [sys.executable, "-m", "kernel_lsp"]


def _project_files(folder: Path, project: str | None, limit: int | None) -> dict[str, list[Path]]:
    projects = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if project:
        projects = [p for p in projects if p.name in project.split(",")]
    out = {}
    for p in projects:
        files = sorted(f for f in p.rglob("*.py") if "/." not in str(f.relative_to(folder)))
        out[p.name] = files[:limit] if limit else files
    return out


def _run_check(paths: list[Path], targets: list[str], timeout: float, config: str | None,
               cwd: str, code: Path = ROOT) -> tuple[dict | None, str, float]:
    """One `kernel-lsp check` process: (its JSON report or None, why not, wall seconds)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", dir=cwd, delete=False) as fh:
        out = fh.name
    cmd = [*KERNEL_LSP, "check", *map(str, paths), "--format", "json", "-o", out, "--exit-zero"]
    for t in targets:
        cmd += ["--target", t]
    if config:
        cmd += ["--config", config]
    start = time.perf_counter()
    # PYTHONPATH comes before the editable install, so `--code` can point at another copy of the project.
    env = {**os.environ, "PYTHONPATH": str(code)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s", time.perf_counter() - start
    wall = time.perf_counter() - start
    try:
        with open(out, encoding="utf-8") as fh:
            return json.load(fh), "", wall
    except (OSError, ValueError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"exit {proc.returncode}: {tail[0][:200]}", wall
    finally:
        if os.path.exists(out):
            os.unlink(out)


def _merge(into: dict, doc: dict) -> None:
    for key in ("problems", "kernels", "compile"):
        into[key].extend(doc.get(key, []))


def run_pass(projects: dict[str, list[Path]], targets: list[str], timeout: float, config: str | None,
             cwd: str, code: Path = ROOT) -> dict:
    """Every project checked, with per-file re-runs for a project whose process failed."""
    data: dict = {"problems": [], "kernels": [], "compile": [], "crashed": [], "seconds": {}, "projectOf": {}}
    for name, files in projects.items():
        if not files:
            continue
        print(f"  {name}: {len(files)} files ...", file=sys.stderr, flush=True)
        doc, why, wall = _run_check(files, targets, timeout, config, cwd, code)
        if doc is None:
            print(f"  {name}: {why}; re-running file by file", file=sys.stderr, flush=True)
            wall = 0.0
            for f in files:
                one, why_one, w = _run_check([f], targets, timeout, config, cwd, code)
                wall += w
                if one is None:
                    data["crashed"].append({"path": str(f), "reason": why_one})
                else:
                    _merge(data, one)
        else:
            _merge(data, doc)
        data["seconds"][name] = wall
        for f in files:
            data["projectOf"][str(f.resolve())] = name
    return data


# Messages differ by names, numbers and paths; these make one reason of them.
_NORMALISE = [
    (re.compile(r"^(\S+ does not compile|\S+ was not compiled|compiling \S+) "), ""),
    (re.compile(r"^(for |on )?sm_\d+a? (in [^:]*?)?(: |(?=timed out|crashed|failed inside))"), ""),
    # Short quoted names say what failed (an attribute, a module); long quotes are IR or code.
    (re.compile(r"(['\"`])([^'\"`\n]*)\1"), lambda m: m.group(0) if len(m.group(2)) <= 40 else "'…'"),
    (re.compile(r"\b\d+\b"), "N"),
    (re.compile(r"/[\w./+-]+"), "PATH"),
]


def reason(message: str, width: int = 110) -> str:
    text = message
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    for stop in (". Fix this line", ". The offline compile", ". Nothing is known"):
        text = text.split(stop)[0]
    return text[:width]


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def summarise(label: str, data: dict, projects: dict[str, list[Path]]) -> dict:
    kernels = [k for k in data["kernels"] if k.get("language") == "triton"]
    n = len(kernels)
    problems = data["problems"]
    warn_err = [p for p in problems if p["severity"] in ("warning", "error")]
    infos = [p for p in problems if p["severity"] == "info"]
    files = sum(len(v) for v in projects.values())
    wall = sum(data["seconds"].values())
    print(f"\n== {label} ==")
    print(f"files {files}, Triton kernels found {n}, files that broke the tool {len(data['crashed'])}")
    for c in data["crashed"]:
        print(f"  broke the tool: {c['path']}: {c['reason']}")
    print(f"wall {wall:.1f} s, {wall / max(n, 1) * 1000:.0f} ms per kernel; per project: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in data["seconds"].items()))
    print(f"warning+error findings: {len(warn_err)} ({len(warn_err) / max(n, 1):.2f} per kernel)")
    by_sev = Counter(p["severity"] for p in warn_err)
    print("  by severity: " + ", ".join(f"{s} {c}" for s, c in by_sev.most_common()))
    by_code = Counter((p["code"], p["severity"]) for p in warn_err)
    for (code, sev), c in sorted(by_code.items(), key=lambda kv: -kv[1]):
        print(f"  {code} {sev:8} {c:5}  {c / max(n, 1):.3f} per kernel")
    by_proj: dict[str, Counter] = defaultdict(Counter)
    for p in warn_err:
        by_proj[data["projectOf"].get(p["path"], "?")][p["code"]] += 1
    kern_proj = Counter(data["projectOf"].get(k["path"], "?") for k in kernels)
    for proj in projects:
        c = by_proj.get(proj, Counter())
        print(f"  {proj}: {kern_proj[proj]} kernels, {sum(c.values())} findings: "
              + ", ".join(f"{k} {v}" for k, v in c.most_common()))
    print("information findings by code: " + (", ".join(f"{k} {v}" for k, v in
                                                       Counter(p["code"] for p in infos).most_common()) or "none"))
    summary = {"label": label, "files": files, "kernels": n, "crashed": data["crashed"], "wallSeconds": wall,
               "warningsErrors": len(warn_err), "byCode": {f"{k}/{s}": c for (k, s), c in by_code.items()}}
    if data["compile"] or any(p["code"].startswith("KC") for p in problems):
        summary["compile"] = _compile_figures(data, kernels, problems)
    return summary


# Every code that says a kernel was not compiled, or not in every configuration: user errors (KC001), tool failures
# (KC006), code the offline compile does not run (KC008), values it does not know (KC009), a construct the installed
# triton lacks (KC010).
NOT_COMPILED = ("KC001", "KC006", "KC008", "KC009", "KC010")


def _compile_figures(data: dict, kernels: list[dict], problems: list[dict]) -> dict:
    jobs: dict[tuple, list[dict]] = defaultdict(list)
    for j in data["compile"]:
        jobs[(j["path"], j["kernel"])].append(j)
    kc: dict[tuple, set] = defaultdict(set)
    for p in problems:
        if p["code"] in NOT_COMPILED and p.get("kernel"):
            kc[(p["path"], p["kernel"])].add(p["code"])
    all_ok = some_ok = 0
    kinds = Counter()
    # @jit helpers called by other kernels are compiled inside their callers, not on their own.
    attempted = [k for k in kernels if (k["path"], k["name"]) in jobs or kc.get((k["path"], k["name"]))]
    for k in attempted:
        key = (k["path"], k["name"])
        js = jobs.get(key, [])
        oks = sum(1 for j in js if j["ok"])
        if js and oks == len(js) and not kc.get(key):
            all_ok += 1
        elif oks:
            some_ok += 1
        # A kernel counts once per failure kind it has.
        for code in kc.get(key, ()):
            kinds[code] += 1
    n = len(attempted)
    print(f"compile coverage: {all_ok}/{n} kernels attempted compiled in every configuration ({_pct(all_ok, n)}), "
          f"{some_ok} more in some ({len(kernels) - n} @jit helpers compiled only within their callers); "
          f"{len(data['compile'])} jobs, {sum(1 for j in data['compile'] if j['ok'])} ok, "
          f"{sum(1 for j in data['compile'] if j['cached'])} cached")
    secs = [j["seconds"] for j in data["compile"] if not j["cached"]]
    if secs:
        secs.sort()
        print(f"compile job seconds (uncached): median {secs[len(secs) // 2]:.2f}, max {secs[-1]:.1f}, "
              f"total {sum(secs):.0f}")
    print("kernels failing, by kind: " + ", ".join(f"{c} {kinds[c]}" for c in NOT_COMPILED))
    top = {}
    for code in NOT_COMPILED:
        reasons = Counter(reason(p["message"]) for p in problems if p["code"] == code)
        top[code] = reasons.most_common(8)
        if reasons:
            print(f"  {code} top reasons ({sum(reasons.values())} findings):")
            for r, c in reasons.most_common(8):
                print(f"    {c:4}  {r}")
    errors = Counter(j["error"]["kind"] for j in data["compile"] if j["error"])
    print("failed jobs by error kind: " + (", ".join(f"{k} {v}" for k, v in errors.most_common()) or "none"))
    return {"allOk": all_ok, "someOk": some_ok, "attempted": n, "helpers": len(kernels) - n, "failingKernels": dict(kinds), "topReasons": top,
            "jobErrorKinds": dict(errors)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="the corpus folder (one sub-folder per project)")
    ap.add_argument("--project", help="only these projects (comma-separated sub-folder names)")
    ap.add_argument("--limit", type=int, help="at most this many files per project")
    ap.add_argument("--target", default="sm_90", help="target of the compile pass (default sm_90)")
    ap.add_argument("--no-compile", action="store_true", help="the static pass only")
    ap.add_argument("--no-static", action="store_true", help="the compile pass only")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per kernel-lsp process (default 3600)")
    ap.add_argument("--workers", type=int, default=0, help="compileWorkers setting (default 0: cores minus one)")
    ap.add_argument("--cache-dir", help="where compile results are cached (default: a fresh temporary folder, so "
                    "every compile is timed; give a folder to re-use them across runs)")
    ap.add_argument("--code", default=str(ROOT), help="the kernel-lsp source tree to run (default: this one); e.g. "
                    "`git archive COMMIT | tar -x -C DIR` to measure a commit while the working tree changes")
    ap.add_argument("--from-json", metavar="FILE", help="print the figures of a saved --json run without checking")
    ap.add_argument("--json", help="save every finding, kernel and compile job here, for triage")
    args = ap.parse_args()

    if args.from_json:
        with open(args.from_json, encoding="utf-8") as fh:
            saved = json.load(fh)
        for label, data in saved["passes"].items():
            projects = defaultdict(list)
            for path, name in data["projectOf"].items():
                projects[name].append(Path(path))
            summarise(f"{label} pass" if label != "static" else "static pass (no compile)", data, dict(projects))
        return 0
    projects = _project_files(Path(args.folder).resolve(), args.project, args.limit)
    if not projects:
        print(f"no project folders under {args.folder}", file=sys.stderr)
        return 2
    cwd = args.cache_dir or tempfile.mkdtemp(prefix="kernel-lsp-corpus-")
    os.makedirs(cwd, exist_ok=True)
    config = None
    if args.workers:
        config = os.path.join(cwd, "corpus-settings.json")
        with open(config, "w", encoding="utf-8") as fh:
            json.dump({"compileWorkers": args.workers}, fh)
    saved: dict = {"folder": str(Path(args.folder).resolve()), "code": str(Path(args.code).resolve()), "passes": {}}
    passes = ([] if args.no_static else [("static", [])]) + ([] if args.no_compile else [(args.target, [args.target])])
    for label, targets in passes:
        print(f"pass {label} ...", file=sys.stderr, flush=True)
        data = run_pass(projects, targets, args.timeout, config, cwd, Path(args.code).resolve())
        summary = summarise(f"{label} pass" if targets else "static pass (no compile)", data, projects)
        saved["passes"][label] = {"summary": summary, **{k: data[k] for k in ("problems", "kernels", "compile",
                                                                             "crashed", "seconds", "projectOf")}}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(saved, fh, indent=1)
        print(f"\nraw data: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
