"""What `kernel-lsp record` buys on real projects: offline compile coverage before and after recording their own
tests, the recording's overhead on the test command's wall time, and the record's size.

    python bench/record_coverage.py --project liger --dir /tmp/liger [--repeat 2] [--extra-path DIR]

The project is checked out beforehand at the commit in PROJECTS (never inside this repository); `--extra-path`
adds folders to the test command's PYTHONPATH (e.g. test-only dependencies installed with `pip --target`).
For each project: its test command runs plainly and under `kernel-lsp record --fresh` (alternating, `--repeat`
times each; the medians give the overhead ratio), then `kernel-lsp check --target sm_90 --format json` runs over the
files of the kernels the tests launched, once with the record moved aside (before) and once with it (after).
A launched kernel is covered when at least one configuration compiled for sm_90. Compile failures of recorded
configurations are listed: each is either the kernel's (it fails for that triton) or the tool's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROJECTS = {
    "liger": {
        "repo": "linkedin/Liger-Kernel", "commit": "ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c",
        "pythonpath": ["src", "."],
        # The test files that collect without a GPU (test_tvd.py asks torch.cpu for device properties), minus the
        # losses over 32k-entry vocabularies, which take hours under the interpreter on 2 cores.
        # test_dtensor_* start process groups and wait for devices: left out with -k.
        "command": ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--timeout=300",
                    "-k", "not dtensor",
                    *[f"test/transformers/test_{name}.py" for name in (
                        "softmax", "rms_norm", "layer_norm", "swiglu", "geglu", "dyt", "sparsemax", "relu_squared",
                        "poly_norm", "group_norm", "embedding", "fused_add_rms_norm", "rope", "llama4_rope",
                        "qwen2vl_mrope")]],
        # The overhead is timed on a part of the suite (the whole one runs for minutes under the interpreter on
        # 2 shared cores): plain and recorded, alternating.
        "timing_command": ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "test/transformers/test_softmax.py", "test/transformers/test_sparsemax.py",
                           "test/transformers/test_embedding.py"],
    },
}


def env_for(project: dict, folder: Path, extra: list[str]) -> dict[str, str]:
    paths = [str(folder / p) for p in project["pythonpath"]] + extra
    return {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(paths),
            "PYTHONDONTWRITEBYTECODE": "1"}


def timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    with log.open("a") as out:
        code = subprocess.call(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    return time.perf_counter() - t0, code


def compiled(folder: Path, files: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-m", "kernel_lsp", "check", "--target", "sm_90", "--format", "json",
                           "--fail-on", "never", *files], cwd=folder, env={**env, "TRITON_INTERPRET": ""},
                          capture_output=True, text=True, timeout=3600)
    return json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", choices=sorted(PROJECTS), required=True)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--extra-path", action="append", default=[])
    ap.add_argument("--timing-only", action="store_true", help="only the plain/recorded timing pairs")
    ap.add_argument("--compile-only", action="store_true",
                    help="only the compile before/after, with the record already there (no test runs)")
    ap.add_argument("--bounds-only", action="store_true",
                    help="only replay launch 1 of every recorded kernel with `repro --check-bounds` (needs a record)")
    args = ap.parse_args()
    ap_compile_only = args.compile_only
    if args.bounds_only:
        return bounds(args.dir.resolve(), env_for(PROJECTS[args.project], args.dir.resolve(), args.extra_path))
    project, folder = PROJECTS[args.project], args.dir.resolve()
    env = env_for(project, folder, args.extra_path)
    env["PYTHONPATH"] += os.pathsep + str(ROOT)  # kernel_lsp itself, for the `record` wrapper
    def record(cmd: list[str]) -> list[str]:
        return [sys.executable, "-m", "kernel_lsp", "record", "--fresh", "--", *cmd]

    test = [sys.executable, *project["command"]]
    timing = [sys.executable, *project.get("timing_command", project["command"])]
    log = folder / ".kernel-lsp-bench.log"
    log.unlink(missing_ok=True)
    plain: list[float] = []
    recorded: list[float] = []
    tcode = rcode = full_wall = None
    for _ in range(0 if ap_compile_only else args.repeat):
        t, tcode = timed(timing, folder, env, log)
        plain.append(round(t, 2))
        t, _ = timed(record(timing), folder, env, log)
        recorded.append(round(t, 2))
    if args.timing_only:
        print(f"timed command exit {tcode}: plain {statistics.median(plain):.1f} s, recorded "
              f"{statistics.median(recorded):.1f} s (x{statistics.median(recorded) / statistics.median(plain):.2f}; "
              f"runs plain {plain}, recorded {recorded})")
        return 0
    if not ap_compile_only:
        full_wall, rcode = timed(record(test), folder, env, log)
    store = folder / ".kernel-lsp" / "launches.json"
    data = json.loads(store.read_text())
    size = store.stat().st_size
    launched = [(k["file"], k["qualname"]) for k in data["kernels"]]
    files = sorted({f for f, _ in launched})
    aside = store.with_suffix(".aside")
    shutil.move(store, aside)
    try:
        before = compiled(folder, files, env)
    finally:
        shutil.move(aside, store)
    after = compiled(folder, files, env)

    def covered(doc: dict) -> set[tuple[str, str]]:
        return {(os.path.relpath(c["path"], folder), c["kernel"]) for c in doc["compile"] if c["ok"]}

    cov_before, cov_after = covered(before), covered(after)
    kernels = set(launched)
    failures = [c for c in after["compile"] if not c["ok"] and "recorded" in c.get("valuesFrom", {}).values()]
    not_compiled = sorted(kernels - cov_after)
    why = {}
    for p in after["problems"]:
        if p["code"] == "KC009":
            why[(os.path.relpath(p["path"], folder), p["message"].split(" ")[0])] = p["message"]
    print(f"project {args.project} ({project['repo']} @ {project['commit'][:10]}), triton "
          f"{', '.join(r.get('triton', ['?'])[0] if r.get('triton') else '?' for r in data['runs'])}")
    if plain:
        print(f"timed command exit {tcode}; full command under record: exit {rcode}, {full_wall:.0f} s")
        print(f"overhead on the timed part: plain {statistics.median(plain):.1f} s, recorded "
              f"{statistics.median(recorded):.1f} s (x{statistics.median(recorded) / statistics.median(plain):.2f}; "
              f"runs plain {plain}, recorded {recorded})")
    print(f"record: {size / 1024:.0f} KiB, {len(kernels)} kernels launched, "
          f"{sum(len(k['launches']) for k in data['kernels'])} distinct launches, "
          f"{sum(k['seen'] for k in data['kernels'])} launches")
    print(f"offline compile for sm_90 of the launched kernels: before {len(kernels & cov_before)}/{len(kernels)} "
          f"({len(kernels & cov_before) / max(1, len(kernels)):.0%}), after {len(kernels & cov_after)}/{len(kernels)} "
          f"({len(kernels & cov_after) / max(1, len(kernels)):.0%})")
    print(f"compile jobs after: {len(after['compile'])}, failed with recorded values: {len(failures)}")
    for c in failures:
        print(f"  FAILED {os.path.relpath(c['path'], folder)}::{c['kernel']} {c['config'][:60]}: "
              f"{(c['error'] or {}).get('kind')}: {((c['error'] or {}).get('message') or '').splitlines()[0][:160]}")
    for f, q in not_compiled:
        print(f"  not compiled: {f}::{q}: {why.get((f, q), '(no KC009; see the report)')[:200]}")
    return 0


def bounds(folder: Path, env: dict[str, str]) -> int:
    data = json.loads((folder / ".kernel-lsp" / "launches.json").read_text())
    env = {**env, "PYTHONPATH": env["PYTHONPATH"] + os.pathsep + str(ROOT)}
    tally: dict[str, int] = {}
    t0 = time.perf_counter()
    for k in data["kernels"]:
        proc = subprocess.run([sys.executable, "-m", "kernel_lsp", "repro", f"{k['file']}::{k['qualname']}",
                               "--launch", "1", "--check-bounds"], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=1800)
        out = proc.stdout.strip()
        kind = ("in bounds" if "in bounds (" in out else "out-of-bounds" if "out-of-bounds" in out
                else "not checked")
        tally[kind] = tally.get(kind, 0) + 1
        if kind != "in bounds":
            print(f"  {kind}: {out[:300]}")
    print(f"bounds at recorded launch 1 of {len(data['kernels'])} kernels: {tally} "
          f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
