"""Offline resources against the GPU driver's: registers, local memory (spills) and shared memory per kernel.

    python bench/gpu_resources.py [--out DIR] [--offline-only]

For each case (an example kernel, a dtype and a problem shape):

1. plan the CompileJob for sm_90 with kernel-lsp's own planner (`plan_jobs`, the example's launch sites, and
   `pins` for what the launch below decides at run time: pointer dtypes, BLOCK_SIZE, num_warps), and compile it
   with kernel-lsp's worker (`python -m kernel_lsp.engine.compile.worker`) in a subprocess that sees no GPU
   (CUDA_VISIBLE_DEVICES=""), cannot import torch, pygls or lsprotocol, and has its own triton cache;
2. launch the real kernel on the GPU through the example's launcher with torch tensors (sizes multiples of 16,
   contiguous, so the JIT adds the divisibility and stride-1 specializations the planner assumes), in a separate
   triton cache, and take the CompiledKernel the JIT cached: `n_regs` and `n_spills` (the driver's
   CU_FUNC_ATTRIBUTE_NUM_REGS and CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES / 4) and `metadata.shared`;
3. compare the JIT's specialization (its ASTSource: signature, constexprs, attrs; num_warps, num_stages) with the
   job's, then the numbers, and print a table; everything also goes to DIR/gpu_resources.json
   (DIR: --out, else $OUT, else the current directory).

Resources.spill_bytes is ptxas' "bytes spill stores" and Resources.stack_bytes its "bytes stack frame"; the
driver's LOCAL_SIZE_BYTES is the per-thread local memory, i.e. the stack frame, so the spill column compares
stack_bytes with n_spills * 4 (spill stores are printed beside it).

Needs a CUDA GPU with torch and triton; --offline-only runs step 1 alone (no GPU needed). Exits 0 unless the
script itself breaks; mismatches are reported, not raised.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Only the compile core and the analyzers: nothing here may need pygls/lsprotocol.
from analyzers.analyze import analyze_source
from kernel_lsp.engine.compile.jobs import CompileJob, CompileResult
from kernel_lsp.engine.compile.specialize import plan_jobs

TARGET = "sm_90"
KERNELS = {"vector_add": "add_kernel", "fused_softmax": "softmax_kernel", "layernorm": "layernorm_fwd_kernel",
           "matmul_autotune": "matmul_kernel"}

# The offline worker: kernel-lsp's standalone worker entry point, with torch and the LSP packages made unimportable.
_CHILD = r"""
import importlib.abc, sys
BLOCKED = {"torch", "pygls", "lsprotocol"} if "--block" in sys.argv else set()
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} must not be imported by the offline compile")
sys.meta_path.insert(0, _Block())
sys.argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a != "--block"]
from kernel_lsp.engine.compile.worker import main
main()
"""


# ----------------------------------------------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    name: str  # row label
    example: str  # examples/<example>.py
    config: str  # human description of the launch
    pins: dict  # for plan_jobs
    launch: str  # key into LAUNCHES
    params: dict  # shapes/dtypes for the launch
    pick: dict = field(default_factory=dict)  # constexprs the planned job must have (autotune config choice)
    direct: bool = False  # launched through kernel[grid] rather than the example's launcher


def _dtype_word(name: str) -> str:
    return {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[name]


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def build_cases() -> list[Case]:
    """Specializations the launches below will hit. BLOCK_SIZE/num_warps follow the launchers' own rules (checked
    again against the JIT's cache entry after the launch)."""
    cases = []
    for dt, n in (("float32", 98_304), ("float16", 98_304)):
        p = "*" + _dtype_word(dt)
        cases.append(Case(f"vector_add {_dwd(dt)}", "vector_add", f"n={n} BLOCK_SIZE=1024 w4",
                          {"x_ptr": p, "y_ptr": p, "out_ptr": p, "BLOCK_SIZE": 1024, "num_warps": 4},
                          "add", {"dtype": dt, "n": n}))
    for dt, rows, cols in (("float32", 4096, 1024), ("float16", 1024, 4096)):
        p, block = "*" + _dtype_word(dt), _next_pow2(cols)
        warps = 16 if block >= 8192 else 8 if block >= 2048 else 4  # examples/fused_softmax.py:_num_warps_for
        cases.append(Case(f"fused_softmax {_dwd(dt)}", "fused_softmax", f"{rows}x{cols} BLOCK_SIZE={block} w{warps}",
                          {"out_ptr": p, "in_ptr": p, "BLOCK_SIZE": block, "num_warps": warps},
                          "softmax", {"dtype": dt, "rows": rows, "cols": cols}))
    # One row of 8192 fp32 values in one warp: 256 values per thread, more than 255 registers hold -> spills.
    cases.append(Case("fused_softmax fp32 spill", "fused_softmax", "64x8192 BLOCK_SIZE=8192 w1 (forced)",
                      {"out_ptr": "*fp32", "in_ptr": "*fp32", "BLOCK_SIZE": 8192, "num_warps": 1},
                      "softmax_direct", {"dtype": "float32", "rows": 64, "cols": 8192, "block": 8192, "warps": 1},
                      direct=True))
    for dt, rows, cols in (("float32", 4096, 1024), ("bfloat16", 1024, 4096)):
        p, block = "*" + _dtype_word(dt), _next_pow2(cols)
        warps = min(max(block // 256, 1), 8)  # examples/layernorm.py:layer_norm
        cases.append(Case(f"layernorm {_dwd(dt)}", "layernorm", f"{rows}x{cols} BLOCK_SIZE={block} w{warps}",
                          {"x_ptr": p, "y_ptr": p, "w_ptr": p, "b_ptr": p, "mean_ptr": "*fp32", "rstd_ptr": "*fp32",
                           "BLOCK_SIZE": block, "num_warps": warps},
                          "layernorm", {"dtype": dt, "rows": rows, "cols": cols}))
    # Every autotune config of the matmul: the planner makes one job per config (num_warps/num_stages from it).
    configs = [  # examples/matmul_autotune.py:MATMUL_CONFIGS, checked against the module's list at launch time
        ((128, 256, 64, 8), 8, 3), ((128, 128, 64, 8), 4, 4), ((128, 64, 32, 8), 4, 4), ((64, 128, 32, 8), 4, 4),
        ((64, 64, 64, 4), 4, 3), ((32, 64, 32, 4), 2, 5),
    ]
    for i, ((bm, bn, bk, g), w, s) in enumerate(configs):
        cases.append(Case(f"matmul cfg{i + 1} fp16", "matmul_autotune", f"1024^3 {bm}x{bn}x{bk} g{g} w{w} s{s}",
                          {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16"}, "matmul",
                          {"dtype": "float16", "M": 1024, "N": 1024, "K": 1024, "config": i},
                          pick={"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g,
                                "num_warps": w, "num_stages": s}))
    return cases


def _dwd(dt: str) -> str:
    return _dtype_word(dt)


def plan(case: Case) -> CompileJob:
    path = EXAMPLES / f"{case.example}.py"
    text = path.read_text()
    sites = [(s, text) for s in analyze_source(text).launch_sites]
    jobs = plan_jobs(text, KERNELS[case.example], [TARGET], path=str(path), launch_sites=sites, pins=case.pins)
    if case.pick:
        want = dict(case.pick)
        warps, stages = want.pop("num_warps"), want.pop("num_stages")
        jobs = [j for j in jobs if all(dict(j.constexprs).get(k) == v for k, v in want.items())
                and j.num_warps == warps and j.num_stages == stages]
    if len(jobs) != 1:
        raise RuntimeError(f"{case.name}: expected one planned job, got {len(jobs)}")
    return jobs[0]


# ----------------------------------------------------------------------------------------------------------------
# Step 1: offline compile (no GPU visible, no torch)


def compile_offline(job: CompileJob, cache_dir: str) -> tuple[CompileResult, dict]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "KERNEL_LSP_TRITON_CACHE_DIR": cache_dir,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop("TRITON_CACHE_DIR", None)
    info = {"blocked_imports": True}
    for block in (True, False):
        cmd = [sys.executable, "-c", _CHILD, "--no-sass"] + (["--block"] if block else [])
        proc = subprocess.run(cmd, input=pickle.dumps(job), capture_output=True, cwd=str(REPO), env=env,
                              timeout=300, check=False)
        if proc.returncode == 0:
            result = pickle.loads(proc.stdout)
            blocked_import = (not result.ok and result.error is not None
                              and "must not be imported by the offline compile" in result.error.message)
            if not blocked_import:
                info["blocked_imports"] = block
                return result, info
            info["blocked_import_error"] = result.error.message
        else:
            info[f"child_failure_block={block}"] = proc.stderr.decode(errors="replace")[-2000:]
    raise RuntimeError(f"offline worker failed: {info}")


# ----------------------------------------------------------------------------------------------------------------
# Step 2: the real launch


def _load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cache_entries(jit_fn) -> dict:
    """{cache key: CompiledKernel} of a JITFunction, over devices (triton 3.x: device_caches[device][0])."""
    out = {}
    caches = getattr(jit_fn, "device_caches", None)
    if caches:
        for dev, entry in caches.items():
            table = entry[0] if isinstance(entry, tuple) else entry
            for k, v in dict(table).items():
                out[(dev, k)] = v
    else:  # older: jit_fn.cache[device] = {key: kernel}
        for dev, table in getattr(jit_fn, "cache", {}).items():
            for k, v in table.items():
                out[(dev, k)] = v
    return out


def launch(case: Case, mods: dict) -> tuple[object, float, str]:
    """Launch the case; returns (the CompiledKernel the JIT cached for it, max abs error vs torch, how)."""
    import torch

    torch.manual_seed(0)
    p, dev = case.params, "cuda"
    dtype = getattr(torch, p["dtype"])
    if case.launch == "add":
        m = mods["vector_add"]
        jit_fn = m.add_kernel
        x, y = (torch.randn(p["n"], device=dev, dtype=dtype) for _ in range(2))
        before = set(_cache_entries(jit_fn))
        got, want = m.add(x, y), m.reference_add(x, y)
        how = "examples/vector_add.py:add(x, y)"
    elif case.launch == "softmax":
        m = mods["fused_softmax"]
        jit_fn = m.softmax_kernel
        x = torch.randn(p["rows"], p["cols"], device=dev, dtype=dtype) * 4
        before = set(_cache_entries(jit_fn))
        got, want = m.softmax(x), m.reference_softmax(x)
        how = "examples/fused_softmax.py:softmax(x)"
    elif case.launch == "softmax_direct":
        m = mods["fused_softmax"]
        jit_fn = m.softmax_kernel
        x = torch.randn(p["rows"], p["cols"], device=dev, dtype=dtype) * 4
        out = torch.empty_like(x)
        before = set(_cache_entries(jit_fn))
        returned = jit_fn[(p["rows"],)](out, x, x.stride(0), out.stride(0), p["cols"], BLOCK_SIZE=p["block"],
                                        num_warps=p["warps"])
        got, want = out, m.reference_softmax(x)
        how = f"softmax_kernel[(rows,)](..., BLOCK_SIZE={p['block']}, num_warps={p['warps']})"
    elif case.launch == "layernorm":
        m = mods["layernorm"]
        jit_fn = m.layernorm_fwd_kernel
        x = (torch.randn(p["rows"], p["cols"], device=dev) * 3 + 1.5).to(dtype)
        w = torch.randn(p["cols"], device=dev).to(dtype)
        b = torch.randn(p["cols"], device=dev).to(dtype)
        before = set(_cache_entries(jit_fn))
        got, want = m.layer_norm(x, w, b)[0], m.reference_layer_norm(x, w, b)[0]
        how = "examples/layernorm.py:layer_norm(x, w, b)"
    elif case.launch == "matmul":
        m = mods["matmul_autotune"]
        jit_fn = m.matmul_kernel.fn
        config = m.MATMUL_CONFIGS[p["config"]]
        kw = dict(config.kwargs)
        expect = {k: v for k, v in case.pick.items() if k not in ("num_warps", "num_stages")}
        if kw != expect or (config.num_warps, config.num_stages) != (case.pick["num_warps"], case.pick["num_stages"]):
            raise RuntimeError(f"MATMUL_CONFIGS[{p['config']}] is {config}, the case expects {case.pick}")
        a = torch.randn(p["M"], p["K"], device=dev, dtype=dtype)
        b = torch.randn(p["K"], p["N"], device=dev, dtype=dtype)
        before = set(_cache_entries(jit_fn))
        got, want = m.matmul(a, b, config), m.reference_matmul(a, b)
        how = f"examples/matmul_autotune.py:matmul(a, b, MATMUL_CONFIGS[{p['config']}]) -> matmul_kernel.fn[grid]"
    else:
        raise ValueError(case.launch)
    torch.cuda.synchronize()
    err = (got.float() - want.float()).abs().max().item()
    entries = _cache_entries(jit_fn)
    new = [v for k, v in entries.items() if k not in before]
    if len(new) != 1:
        raise RuntimeError(f"{case.name}: the launch added {len(new)} entries to the JIT cache, expected 1")
    kernel = new[0]
    if case.direct and returned is not kernel:
        raise RuntimeError(f"{case.name}: kernel[grid](...) returned another object than the new cache entry")
    if getattr(kernel, "n_regs", None) is None and hasattr(kernel, "_init_handles"):
        kernel._init_handles()
    return kernel, err, how


def _driver_attributes(kernel) -> dict:
    """Best effort: the same function handle asked through cuda-python (NUM_REGS, LOCAL_SIZE_BYTES, static shared,
    the dynamic shared maximum triton set), as an independent read of the driver."""
    try:
        from cuda.bindings import driver as cu
    except Exception as exc:  # noqa: BLE001
        return {"unavailable": f"{type(exc).__name__}: {exc}"}
    A = cu.CUfunction_attribute
    out = {}
    try:
        fn = cu.CUfunction(int(kernel.function))
        for key, attr in (("num_regs", A.CU_FUNC_ATTRIBUTE_NUM_REGS), ("local_bytes", A.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
                          ("static_shared_bytes", A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                          ("max_dynamic_shared_bytes", A.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)):
            err, value = cu.cuFuncGetAttribute(attr, fn)
            out[key] = int(value) if int(err) == 0 else f"error {err}"
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


# ----------------------------------------------------------------------------------------------------------------
# Step 3: comparison


def job_specialization(job: CompileJob) -> dict:
    """The job as the worker hands it to triton (equal_to_1 ints become constexpr 1, like the JIT does)."""
    signature = dict(job.signature)
    constexprs = {k: v for k, v in job.constexprs}
    attrs: dict[str, list[str]] = {}
    for name, attr in job.attrs:
        if attr == "equal_to_1":
            signature[name], constexprs[name] = "constexpr", 1
        else:
            attrs.setdefault(name, []).append(attr)
    return {"signature": signature, "constexprs": constexprs, "attrs": {k: sorted(v) for k, v in attrs.items()},
            "num_warps": job.num_warps, "num_stages": job.num_stages}


def jit_specialization(kernel) -> dict:
    """The JIT's ASTSource for the cached kernel, in the same form."""
    src, meta = kernel.src, kernel.metadata
    names = list(src.fn.arg_names)

    def name(path):
        return names[path[0]] if isinstance(path, tuple) else path

    constexprs = {name(k): (v.value if hasattr(v, "value") and type(v).__name__ == "constexpr" else v)
                  for k, v in getattr(src, "constants", getattr(src, "constexprs", {})).items()}
    attrs = {}
    for k, v in (src.attrs or {}).items():
        items = sorted(f"{a}={b}" for a, b in v)
        if items:
            attrs[name(k)] = items
    return {"signature": dict(src.signature), "constexprs": constexprs, "attrs": attrs,
            "num_warps": int(meta.num_warps), "num_stages": int(meta.num_stages)}


def _fmt(v) -> str:
    return "-" if v is None else str(v)


def run(out_dir: Path, offline_only: bool) -> dict:
    started = time.perf_counter()
    cases = build_cases()
    jobs = [plan(c) for c in cases]
    offline_cache = tempfile.mkdtemp(prefix="kl-offline-cache-")
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        offline = list(pool.map(lambda j: compile_offline(j, offline_cache), jobs))
    offline_wall = time.perf_counter() - t0

    env: dict = {"python": platform.python_version(), "target": TARGET,
                 "offline_compile_wall_s": round(offline_wall, 2)}
    mods: dict = {}
    if not offline_only:
        # A triton cache of its own for the JIT, so that nothing the offline worker built is reused.
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kl-jit-cache-")
        import torch
        import triton

        env.update(triton=triton.__version__, torch=torch.__version__, device=torch.cuda.get_device_name(0),
                   capability=".".join(map(str, torch.cuda.get_device_capability(0))))
        for name in KERNELS:
            mods[name] = _load_example(name)

    rows = []
    for case, job, (result, info) in zip(cases, jobs, offline):
        res = result.resources
        row = {
            "kernel": case.name, "config": case.config, "job_config_label": job.config_label,
            "job": {"signature": [list(x) for x in job.signature], "constexprs": [[k, v] for k, v in job.constexprs],
                    "attrs": [list(x) for x in job.attrs], "num_warps": job.num_warps, "num_stages": job.num_stages,
                    "notes": list(job.notes), "key": job.key},
            "offline": {"ok": result.ok, "error": result.error.message if result.error else None,
                        "seconds": round(result.seconds, 2), "triton": result.triton_version,
                        "resources": asdict(res), **info},
        }
        print(f"\n== {case.name} [{case.config}] job: {job.config_label}")
        print(f"   signature:  {', '.join(f'{n}:{t}' for n, t in job.signature)}")
        print(f"   constexprs: {dict(job.constexprs)}  num_warps={job.num_warps} num_stages={job.num_stages}")
        print(f"   attrs:      {', '.join(f'{n}:{a}' for n, a in job.attrs)}")
        print(f"   offline:    ok={result.ok} {result.seconds:.1f} s registers={res.registers} "
              f"spill_stores={res.spill_bytes} stack={res.stack_bytes} shared={res.shared_bytes}"
              + ("" if result.ok else f" error={result.error.message[:300]}"))
        if not offline_only:
            try:
                kernel, err, how = launch(case, mods)
                want, got = job_specialization(job), jit_specialization(kernel)
                diff = {k: {"job": want[k], "jit": got[k]} for k in want if want[k] != got[k]}
                driver = {"n_regs": int(kernel.n_regs), "n_spills": int(kernel.n_spills),
                          "local_bytes": int(kernel.n_spills) * 4, "shared": int(kernel.metadata.shared),
                          "cuda_attributes": _driver_attributes(kernel)}
                row["launch"] = {"how": how, "max_abs_error": err, "jit_specialization": got,
                                 "specialization_diff": diff, "jit_hash": getattr(kernel, "hash", None),
                                 "jit_target": str(kernel.metadata.target)}
                row["driver"] = driver
                row["match"] = {
                    "specialization": not diff,
                    "registers": res.registers == driver["n_regs"],
                    "local_memory": res.stack_bytes == driver["local_bytes"],
                    "shared": res.shared_bytes == driver["shared"],
                }
                row["match"]["all"] = all(row["match"].values())
                print(f"   launch:     {how}; max abs error vs torch {err:.3e}")
                print(f"   JIT:        specialization {'== job' if not diff else 'DIFFERS: ' + json.dumps(diff, default=str)}"
                      f"; n_regs={driver['n_regs']} n_spills={driver['n_spills']} shared={driver['shared']}"
                      f"; cuda attrs {driver['cuda_attributes']}")
            except Exception as exc:  # noqa: BLE001 - report and go on with the other cases
                row["launch"] = {"error": "".join(traceback.format_exception(exc))[-3000:]}
                row["match"] = {"all": False}
                print(f"   launch FAILED: {type(exc).__name__}: {exc}")
        rows.append(row)

    header = ("kernel", "config", "regs off/drv", "spill st off", "stack off/drv n_spills*4", "shared off/drv",
              "match")
    table = []
    for r in rows:
        res, d = r["offline"]["resources"], r.get("driver", {})
        m = r.get("match", {})
        verdict = ("yes" if m.get("all") else "no" + (" (spec differs)" if m.get("specialization") is False else "")
                   ) if m else "n/a"
        table.append((r["kernel"], r["config"], f"{_fmt(res['registers'])} / {_fmt(d.get('n_regs'))}",
                      _fmt(res["spill_bytes"]), f"{_fmt(res['stack_bytes'])} / {_fmt(d.get('local_bytes'))}",
                      f"{_fmt(res['shared_bytes'])} / {_fmt(d.get('shared'))}", verdict))
    widths = [max(len(str(x)) for x in col) for col in zip(header, *table)]
    lines = [" | ".join(str(x).ljust(w) for x, w in zip(header, widths)),
             "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(str(x).ljust(w) for x, w in zip(t, widths)) for t in table]
    env["total_wall_s"] = round(time.perf_counter() - started, 2)
    print(f"\nkernel-lsp offline ({TARGET}) vs driver; {json.dumps(env)}")
    print("\n".join(lines))
    n_match = sum(1 for r in rows if r.get("match", {}).get("all"))
    print(f"{n_match}/{len(rows)} rows match" if not offline_only else f"{len(rows)} jobs compiled offline")

    data = {"environment": env, "columns": header, "table": [list(t) for t in table], "rows": rows}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gpu_resources.json").write_text(json.dumps(data, indent=1, default=str))
    print(f"wrote {out_dir / 'gpu_resources.json'}")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for gpu_resources.json (default: $OUT, else .)")
    parser.add_argument("--offline-only", action="store_true", help="compile offline only (no GPU)")
    args = parser.parse_args(argv)
    run(Path(args.out or os.environ.get("OUT") or "."), args.offline_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
