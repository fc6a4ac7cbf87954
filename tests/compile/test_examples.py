"""The examples compile offline for NVIDIA and AMD targets with sane resources, measured by the compilers' own
reports; registers and spills equal an independent `ptxas -v` of the same PTX; nothing imports torch; cached
results are re-mapped to where the kernel sits now.

Every job is compiled once per module in two spawned worker processes, in a fresh triton cache.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from analyzers.analyze import analyze_source
from analyzers.targets import parse_target
from kernel_lsp.engine.compile.specialize import plan_jobs
from kernel_lsp.engine.compile.worker import parse_ptxas_log, relocate, run_job

from .pool import compile_all, report

pytest.importorskip("triton")  # a dev dependency on Linux x86-64; elsewhere there is nothing to compile with

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# The label of vector_add's launch-site configuration: "launch at line N", N the 1-based line of the launch.
VECTOR_ADD_LAUNCH = "launch at line " + str(1 + (EXAMPLES / "vector_add.py").read_text().splitlines().index(
    "    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size, num_warps=4)"))
KERNELS = {"vector_add": "add_kernel", "fused_softmax": "softmax_kernel", "layernorm": "layernorm_fwd_kernel",
           "matmul_autotune": "matmul_kernel"}
# These launchers compute BLOCK_SIZE from the row length at run time: kernel-lsp compiles them only once pinned.
PINS = {"fused_softmax": {"BLOCK_SIZE": 1024}, "layernorm": {"BLOCK_SIZE": 1024}}


def _plan(name: str, targets, **kw):
    text = (EXAMPLES / f"{name}.py").read_text()
    sites = [(s, text) for s in analyze_source(text).launch_sites]
    kw["pins"] = {**PINS.get(name, {}), **kw.get("pins", {})}
    return plan_jobs(text, KERNELS[name], list(targets), path=str(EXAMPLES / f"{name}.py"), launch_sites=sites, **kw)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("triton-cache"))


@pytest.fixture(scope="module")
def compiled(cache_dir, request):
    jobs = {}
    for name in KERNELS:
        for job in _plan(name, ["sm_90", "gfx942"]):
            jobs[f"{name} {job.target.name} {job.config_label}"] = job
    jobs["matmul sm_80 config 2"] = _plan("matmul_autotune", ["sm_80"])[1]
    # One row of 8192 fp32 values in a single warp: 256 values per thread do not fit in 255 registers.
    jobs["softmax spills sm_90"] = _plan("fused_softmax", ["sm_90"], pins={"BLOCK_SIZE": 8192, "num_warps": 1})[0]
    results, wall = compile_all(jobs, cache_dir, sass=(f"vector_add sm_90 {VECTOR_ADD_LAUNCH}",))
    report(request, "examples, cold compiles", results, wall)
    return jobs, results


def test_every_example_and_autotune_config_compiles(compiled) -> None:
    jobs, results = compiled
    assert sum(1 for k in jobs if k.startswith("matmul_autotune")) == 12  # 6 configs x 2 targets
    failed = {k: r.error for k, r in results.items() if not r.ok}
    assert not failed


def test_resources_are_sane(compiled) -> None:
    jobs, results = compiled
    for name, r in results.items():
        job, res = jobs[name], r.resources
        spec = parse_target(job.target.name)
        assert 0 < res.registers <= spec.registers_per_thread, name
        assert res.num_warps == job.num_warps and res.num_stages == job.num_stages
        assert res.shared_bytes is not None and res.shared_bytes >= 0
        fits = res.shared_bytes <= spec.shared_per_block
        assert (res.occupancy > 0) == fits and 0 <= res.occupancy <= 1, (name, res)
        if job.target.backend == "cuda" and "spills" not in name:
            assert res.spill_bytes == 0, (name, res)
        assert res.load_widths and res.store_widths, name
    # gfx942 has 64 KB of LDS: the two largest tiles (96 KB of pipelined operands) cannot launch there.
    too_big = sorted(n.split(" (")[0] for n, r in results.items() if r.resources.occupancy == 0)
    assert too_big == ["matmul_autotune gfx942 autotune config 1", "matmul_autotune gfx942 autotune config 2"]


def test_matrix_instructions_per_target(compiled) -> None:
    jobs, results = compiled
    for name, r in results.items():
        mma = r.resources.matrix_instructions
        if not name.startswith("matmul"):
            assert mma == (), name
        elif jobs[name].target.name == "sm_90":
            m = dict(jobs[name].constexprs)["BLOCK_SIZE_M"]
            # wgmma needs a warp group (4 warps) over at least 64 rows; the 32-row, 2-warp config uses mma.sync.
            assert mma == (("wgmma",) if m >= 64 and jobs[name].num_warps >= 4 else ("mma",)), name
        elif jobs[name].target.name == "sm_80":
            assert mma == ("mma",)
        else:
            assert mma == ("mfma",), name


def test_vector_add_uses_128_bit_global_accesses(compiled) -> None:
    _, results = compiled
    for target in ("sm_90", "gfx942"):
        res = results[f"vector_add {target} {VECTOR_ADD_LAUNCH}"].resources
        assert res.load_widths == (128,) and res.store_widths == (128,), target
    # Contiguous, 16-divisible accesses everywhere: no example has a block access left scalar (KC007).
    assert {name: r.resources.scalar_accesses for name, r in results.items() if r.resources.scalar_accesses} == {}
    r = results[f"vector_add sm_90 {VECTOR_ADD_LAUNCH}"]
    assert "LDG.E.128" in r.asm["sass"] and "ld.global.v4.b32" in r.asm["ptx"]
    assert set(results[f"vector_add gfx942 {VECTOR_ADD_LAUNCH}"].asm) >= {"ttir", "ttgir", "llir", "amdgcn"}


def _ptxas_report(ptx: str, tmp_path: Path) -> dict[str, int]:
    """An independent `ptxas -v` of the PTX, with the options triton's backend passes for a default build."""
    from triton.backends.nvidia.compiler import CUDABackend, get_ptxas

    gpu = re.search(r"^\.target\s+(\w+)", ptx, re.MULTILINE).group(1)
    arch = int(re.match(r"sm_(\d+)", gpu).group(1))
    extra = ["--regAllocOptLevel=2"] if "regAllocOptLevel" in inspect.getsource(CUDABackend.make_cubin) else []
    (tmp_path / "k.ptx").write_text(ptx)
    cmd = [get_ptxas(arch).path, "-lineinfo", "-v", *extra, f"--gpu-name={gpu}", str(tmp_path / "k.ptx"), "-o",
           str(tmp_path / "k.cubin")]
    log = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    used = re.search(r"Used (\d+) registers", log)
    props = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    cuobjdump = Path(get_ptxas(arch).path).parent / "cuobjdump"
    usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", str(tmp_path / "k.cubin")], capture_output=True,
                           text=True, check=True).stdout
    return {"registers": int(used.group(1)), "stack": int(props.group(1)), "spill_stores": int(props.group(2)),
            "cubin_registers": int(re.search(r"REG:(\d+)", usage).group(1))}


def test_registers_and_spills_equal_ptxas_own_report(compiled, tmp_path) -> None:
    _, results = compiled
    checked = 0
    for name, r in results.items():
        if "ptx" not in r.asm:
            continue
        want = _ptxas_report(r.asm["ptx"], tmp_path)
        got = r.resources
        assert (got.registers, got.spill_bytes, got.stack_bytes) == (
            want["registers"], want["spill_stores"], want["stack"]), name
        assert want["cubin_registers"] == want["registers"]
        checked += 1
    assert checked == 11  # 3 single-config examples, 6 matmul configs on sm_90, 1 on sm_80, the spill case
    spill = results["softmax spills sm_90"].resources
    assert spill.spill_bytes > 0 and spill.registers == 255


def test_cache_hit_reports_the_same_and_relocates_positions(compiled, cache_dir) -> None:
    jobs, results = compiled
    name = next(n for n in jobs if n.startswith("matmul_autotune sm_90 autotune config 3 "))
    text = (EXAMPLES / "matmul_autotune.py").read_text()
    moved_text = text.replace("import os\n", "import os\n" + "\n# moved down\n" * 5, 1)
    moved = plan_jobs(moved_text, "matmul_kernel", ["sm_90"], path="m.py")[2]
    assert moved.key == jobs[name].key and moved.line_map != jobs[name].line_map
    # A triton cache hit (ptxas does not run again); how fast it is, bench/compile.py measures (re-open from cache).
    again = run_job(moved, cache_dir, sass=False)
    assert again.resources == results[name].resources
    # An error computed for the old position lands on the new one.
    broken = text.replace("acc = tl.dot(a, b, acc)", "acc = tl.dot(a, b, acc, bogus=1)")
    old = plan_jobs(broken, "matmul_kernel", ["sm_90"], path="m.py")[2]
    res = run_job(old, cache_dir, sass=False)
    assert not res.ok and res.error.line is not None
    new = plan_jobs(broken.replace("import os\n", "import os\n\n\n", 1), "matmul_kernel", ["sm_90"], path="m.py")[2]
    assert new.key == old.key
    assert relocate(res, new).error.line == res.error.line + 2


def test_a_file_importing_torch_compiles_without_torch(cache_dir) -> None:
    script = textwrap.dedent(f"""
        import importlib.abc, json, sys
        sys.path.insert(0, {str(ROOT)!r})

        class NoTorch(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch must not be imported by the compile worker")

        sys.meta_path.insert(0, NoTorch())
        from kernel_lsp.engine.compile.specialize import plan_jobs
        from kernel_lsp.engine.compile.worker import run_job
        text = open({str(EXAMPLES / "vector_add.py")!r}).read()
        assert "import torch" in text
        out = []
        for job in plan_jobs(text, "add_kernel", ["sm_90", "gfx942"], pins={{"BLOCK_SIZE": 1024}}):
            r = run_job(job, {cache_dir!r}, sass=False)
            out.append([r.ok, r.resources.registers])
        print(json.dumps({{"results": out, "torch": "torch" in sys.modules,
                           "triton": "triton" in sys.modules}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["triton"] and not data["torch"]
    assert all(ok and regs for ok, regs in data["results"])


def test_ptxas_log_parser() -> None:
    log = ("ptxas-blackwell info    : 0 bytes gmem\n"
           "ptxas-blackwell info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas-blackwell info    : Function properties for k\n"
           "    528 bytes stack frame, 536 bytes spill stores, 532 bytes spill loads\n"
           "ptxas-blackwell info    : Used 255 registers, used 0 barriers, 528 bytes cumulative stack size\n")
    assert parse_ptxas_log(log) == {"k": {"registers": 255, "stack": 528, "spill_stores": 536, "spill_loads": 532}}


def test_launch_specialization_matches_the_jit() -> None:
    """The specializer (no triton import) against triton's own native_specialize_impl on the same values."""
    import triton.language as tl
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import MockTensor

    values = [1, 16, 17, 0, -32, 2**31, 2**33 + 1, 1.5, True]
    params = ", ".join(f"a{i}" for i in range(len(values)))
    text = (f"import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, {params}):\n"
            f"    tl.store(x_ptr, 0.0)\n\ndef run(x):\n    k[(1,)](x, {', '.join(map(repr, values))})\n")
    site = analyze_source(text).launch_sites[0]
    job = plan_jobs(text, "k", ["sm_90"], launch_sites=[(site, text)], triton_version="x")[0]
    sig, attrs = dict(job.signature), {}
    for name, attr in job.attrs:
        attrs.setdefault(name, set()).add(attr)
    for i, value in enumerate(values):
        ty, spec = native_specialize_impl(BaseBackend, value, False, True, True)
        ours = (sig[f"a{i}"], attrs.get(f"a{i}", set()))
        if ty == "constexpr":
            assert spec == 1 and ours == ("i32", {"equal_to_1"}), value
        else:
            assert ours == (ty, {"tt.divisibility=16"} if spec == "D" else set()), value
    ty, spec = native_specialize_impl(BaseBackend, MockTensor(tl.float16), False, True, True)
    assert spec == "D" and attrs["x_ptr"] == {"tt.divisibility=16"}


def test_the_examples_specs_give_their_block_sizes_and_nothing_above_information(tmp_path) -> None:
    """fused_softmax and layernorm compute BLOCK_SIZE from the row length: their specs' shapes give the values, so
    `check --target` compiles them (labelled with the spec and shape) without a made-up size or a loud finding."""
    files = [str(EXAMPLES / "fused_softmax.py"), str(EXAMPLES / "layernorm.py")]
    proc = subprocess.run([sys.executable, "-m", "kernel_lsp", "check", *files, "--target", "sm_90", "--format",
                           "json"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert [p for p in doc["problems"] if p["severity"] in ("error", "warning")] == [], doc["problems"]
    assert not [p for p in doc["problems"] if p["code"] == "KC009"], doc["problems"]
    jobs = doc["compile"]
    assert jobs and all(j["ok"] for j in jobs)
    softmax = {j["constexprs"]["BLOCK_SIZE"]: j["config"] for j in jobs if j["kernel"] == "softmax_kernel"}
    # shapes (1, 1), (7, 33), (19, 300) and the bench shape (4096, 4096): next_power_of_2 of the column counts
    assert sorted(softmax) == [1, 64, 512, 4096]
    assert "the spec `softmax_inputs` at shape (7, 33)" in softmax[64]
