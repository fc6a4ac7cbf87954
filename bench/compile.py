"""Compile latency through the language server, and re-opening a compiled workspace from the cache.

Edit to compile diagnostic: a 20-kernel module (bench/common.big_kernel_file) is opened with background
compiles on (`compile: open`, target sm_90, `compileDebounceMs: 0` so the figure is the compile path itself;
the debounce a user sets comes on top). Once every kernel is compiled, one line is inserted into one vector-add
kernel that makes it fail to compile (`tl.arange(0, 16) + tl.arange(0, 32)`); the time runs from that didChange
to the publishDiagnostics of the same version carrying the new KC001. A second scenario changes what the kernel
computes (`x + y` -> `x + 2 * y`), so it compiles all the way; its time runs to the publication that follows
the compile (the second one of that version). Only that kernel may be recompiled (the
status command's compile counters are checked). The target is the kernel's own cold compile time plus 200 ms:
that is measured in this process with kernel-lsp's worker (`run_job`, triton already imported and warmed up on
another kernel, an empty triton cache).

Re-open from cache: a workspace of 10 files holding 50 kernels is compiled by one server (`compile:
workspace`), which is then shut down; a second server on the same folder is timed from `initialized` until
every kernel file has its compile results, all from the on-disk cache (no compile job runs).

    python bench/compile.py [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import Figure, ServerSession, big_kernel_file, common_args, kernel_file, load_line, print_table, write_files, write_json

BAD_LINE = "    _shapes = tl.arange(0, 16) + tl.arange(0, 32)"
OPTIONS = {"compile": "open", "targets": ["sm_90"], "compileDebounceMs": 0}


async def wait_compiled(session: ServerSession, files: int, timeout: float = 600.0) -> dict:
    deadline = time.perf_counter() + timeout
    while True:
        st = await session.status()
        if st["compile"].get("filesCompiled", 0) >= files and st["queued"] == 0:
            return st
        if time.perf_counter() > deadline:
            raise TimeoutError(f"not compiled after {timeout} s: {st['compile']}")
        await asyncio.sleep(0.02)


def cold_compile_seconds(text: str, kernel: str, path: str, warm_text: str, warm_kernel: str,
                         expect_ok: bool) -> float:
    """kernel's own compile time in a warm worker-like process with an empty triton cache."""
    from analyzers import analyze_source
    from kernel_lsp.engine.compile.specialize import plan_jobs
    from kernel_lsp.engine.compile.worker import run_job

    analysis = analyze_source(text, path)
    sites = [(s, text, path) for s in analysis.launch_sites]
    with tempfile.TemporaryDirectory() as warm_cache, tempfile.TemporaryDirectory() as cache:
        warm_sites = [(s, warm_text, path) for s in analyze_source(warm_text, path).launch_sites]
        run_job(plan_jobs(warm_text, warm_kernel, ["sm_90"], path=path, launch_sites=warm_sites)[0], warm_cache,
                sass=False)
        job = plan_jobs(text, kernel, ["sm_90"], path=path, launch_sites=sites)[0]
        t0 = time.perf_counter()
        result = run_job(job, cache, sass=False)
        elapsed = time.perf_counter() - t0
    assert result.ok == expect_ok, result.error
    return elapsed


async def edit_latency(runs: int, valid: bool) -> list[Figure]:
    """valid=False: the edit breaks the kernel (time to its KC001); True: the edit changes what the kernel
    computes (`x + y` -> `x + 2 * y`), so it compiles completely (time to the publication that follows it)."""
    text, kernels = big_kernel_file(n_kernels=20, min_lines=0)
    target = next(k for k in kernels if k.startswith("add_kernel"))
    lines = text.split("\n")
    at = next(i for i, ln in enumerate(lines) if ln.startswith(f"def {target}("))
    if valid:
        anchor = next(i for i in range(at, len(lines)) if "x + y, mask" in lines[i])
        col = lines[anchor].index("x + y") + 4
        change = ((anchor, col), (anchor, col), "2 * ")
        edited_lines = list(lines)
        edited_lines[anchor] = lines[anchor][:col] + "2 * " + lines[anchor][col:]
        edited = "\n".join(edited_lines)
    else:
        anchor = next(i for i in range(at, len(lines)) if "tl.program_id(" in lines[i])
        change = ((anchor, len(lines[anchor])), (anchor, len(lines[anchor])), "\n" + BAD_LINE)
        edited = "\n".join(lines[: anchor + 1] + [BAD_LINE] + lines[anchor + 1:])
    latencies, recompiles = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="kl-bench-compile-") as tmp:
            root = Path(tmp)
            path = root / "kernels.py"
            path.write_text(text)
            async with ServerSession("push", root=root, options=OPTIONS) as s:
                await s.start()
                await s.wait_ready()
                uri = path.as_uri()
                s.open(uri, text)
                before = await wait_compiled(s, 1)
                baseline = max((p.codes.count("KC001") for p in s.published.get(uri, [])), default=0)
                t0 = time.perf_counter()
                version = s.change(uri, *change)
                while True:
                    same = [p for p in s.published.get(uri, []) if p.version == version]
                    # The first publication of a version is the static analysis; the compile result follows.
                    hit = same[1:] if valid else [p for p in same if p.codes.count("KC001") > baseline]
                    if hit:
                        latencies.append(hit[0].time - t0)
                        break
                    if time.perf_counter() - t0 > 120:
                        raise TimeoutError("no KC001 for the edit")
                    await asyncio.sleep(0.002)
                after = await wait_compiled(s, 1)
                recompiles.append(after["compile"]["compiles"] - before["compile"]["compiles"])
    cold = cold_compile_seconds(edited, target, "/bench/kernels.py", text, target, expect_ok=valid)
    median = sorted(latencies)[len(latencies) // 2]
    what = "valid edit -> compile result published" if valid else "breaking edit -> KC001 published"
    note = (f"20-kernel module ({len(text.splitlines())} lines), kernel {target}; runs {len(latencies)}, "
            f"all {', '.join(f'{x * 1000:.0f}' for x in latencies)} ms; compile jobs run after the edit: "
            f"{recompiles}; {load_line()}")
    return [
        Figure(f"compile: {what}, median", median, "s", cold + 0.2, note),
        Figure(f"context: the edited kernel's cold compile ({'valid' if valid else 'breaking'} edit)", cold, "s",
               None, "kernel-lsp's run_job in this process after a warm-up compile, empty triton cache"),
    ]


async def reopen_from_cache() -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="kl-bench-reopen-") as tmp:
        root = Path(tmp)
        files, kernels = {}, 0
        i = 0
        while kernels < 50:
            text = kernel_file(i, ["vector_add.py", "fused_softmax.py", "layernorm.py"])
            files[f"pkg/mod{i}.py"] = text
            kernels += text.count("@triton.jit")
            i += 1
        write_files(root, files)
        options = {**OPTIONS, "compile": "workspace"}
        async with ServerSession("push", root=root, options=options) as s:
            await s.start()
            await s.wait_ready()
            first = await wait_compiled(s, len(files))
        async with ServerSession("push", root=root, options=options) as s:
            await s.start()
            t0 = s.t_initialized
            st = await wait_compiled(s, len(files))
            elapsed = time.perf_counter() - t0
        note = (f"{len(files)} files, {kernels} kernels; first server: {first['compile']['compiles']} compile jobs; "
                f"second server: {st['compile']['compiles']} compile jobs, {st['compile']['cacheHits']} cache hits; "
                f"{load_line()}")
        return [Figure("compile: re-open 50 compiled kernels, all results from cache", elapsed, "s", 2.0, note)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(parser)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    figures = (asyncio.run(edit_latency(args.runs, valid=False)) + asyncio.run(edit_latency(args.runs, valid=True))
               + asyncio.run(reopen_from_cache()))
    print_table("Background compilation through the language server", figures)
    write_json(args.json, figures)


if __name__ == "__main__":
    main()
