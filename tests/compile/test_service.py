"""The compile service: cache hits and misses, per-kernel recompiles, timeouts, and the KC problems it reports.

One module-scoped service (two workers, its own workspace) compiles a small file twice and an edited copy once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from analyzers.analyze import analyze_source
from analyzers.model import Severity
from analyzers.targets import parse_target
from kernel_lsp.engine.compile.service import CompileService, KernelCompileReport, JobReport, compile_problems
from kernel_lsp.engine.compile.specialize import plan_jobs
from kernel_lsp.engine.pool import WorkerPool
from kernel_lsp.settings import Settings

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "error_in_helper.py"
GOOD = '''

@triton.jit
def good(x_ptr, n, BLOCK: tl.constexpr = 1024):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)
'''


def slow_job(job):  # a compile job that never finishes in time: stands in for a pathological kernel
    time.sleep(30)


def _compile(service: CompileService, path: str, text: str, targets=("sm_90",)) -> list[KernelCompileReport]:
    return asyncio.run(service.compile_file(path, text, analyze_source(text, path), list(targets)))


def _problems(reports: list[KernelCompileReport]):
    return [p for r in reports for p in compile_problems(r, parse_target(r.target.name))]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    svc = CompileService(tmp_path_factory.mktemp("workspace"), Settings(compile_workers=2))
    yield svc
    asyncio.run(svc.close())


@pytest.fixture(scope="module")
def first(service):
    text = FIXTURE.read_text() + GOOD
    return text, _compile(service, str(FIXTURE), text), dict(service.counts)


def test_compile_error_is_kc001_at_the_helper_line(first) -> None:
    text, reports, counts = first
    assert sorted(r.kernel for r in reports) == ["good", "kernel"]  # load_row is a helper: compiled with its caller
    assert counts["compiles"] == 2 and counts["cacheHits"] == 0
    problems = _problems(reports)
    [kc001] = [p for p in problems if p.code == "KC001"]
    assert (kc001.span.start_line, kc001.span.start_col) == (6, 11)
    assert "sm_90" in kc001.message and "constexpr" in kc001.message and "Fix this line" in kc001.message
    assert [(r.span.start_line, r.span.start_col) for r in kc001.related] == [(12, 10)]
    good = next(r for r in reports if r.kernel == "good")
    assert good.jobs[0].result.ok and good.jobs[0].result.resources.registers
    assert not [p for p in problems if p.kernel == "good"]


def test_same_file_again_is_all_cache_hits(service, first) -> None:
    text, _, counts = first
    reports = _compile(service, str(FIXTURE), text)
    assert all(jr.cached for r in reports for jr in r.jobs)
    assert service.counts["compiles"] == counts["compiles"]
    assert service.counts["cacheHits"] >= counts["cacheHits"] + 2
    kc001 = [p for p in _problems(reports) if p.code == "KC001"]
    assert [(p.span.start_line, p.span.start_col) for p in kc001] == [(6, 11)]


def test_moved_and_edited_kernels(service, first) -> None:
    text, _, _ = first
    before = service.counts["compiles"]
    # Two lines above everything (a cached result is re-mapped), and an edit of `good` only.
    edited = "# a comment\n# another\n" + text.replace("* 2.0", "* 3.0")
    reports = _compile(service, str(FIXTURE), edited)
    assert service.counts["compiles"] == before + 1
    by_kernel = {r.kernel: r for r in reports}
    assert by_kernel["kernel"].jobs[0].cached and not by_kernel["good"].jobs[0].cached
    [kc001] = [p for p in _problems(reports) if p.code == "KC001"]
    assert (kc001.span.start_line, kc001.span.start_col) == (8, 11)


def test_timeout_is_kc006_information_and_cached_with_its_timeout(tmp_path) -> None:
    def go(timeout: float):
        async def run():
            svc = CompileService(tmp_path, Settings(), pool=WorkerPool(1), fn_path=f"{__name__}:slow_job",
                                 timeout=timeout)
            try:
                text = FIXTURE.read_text()
                return await svc.compile_file(str(FIXTURE), text, analyze_source(text), ["sm_90"]), svc.counts
            finally:
                await svc.close()
        return asyncio.run(run())

    reports, counts = go(0.5)
    assert counts["timeouts"] == 1
    [kc006] = _problems(reports)
    assert kc006.code == "KC006" and "timed out" in kc006.message and "sm_90" in kc006.message
    assert kc006.severity == Severity.INFO and kc006.message.startswith("kernel-lsp could not compile")
    assert "compileTimeoutS" in kc006.message
    # A warm run with the same timeout does not wait for it again; a larger timeout tries again.
    reports, counts = go(0.5)
    assert counts["compiles"] == 0 and counts["cacheHits"] == 1
    assert [p.code for p in _problems(reports)] == ["KC006"]
    _, counts = go(0.8)
    assert counts["compiles"] == 1 and counts["timeouts"] == 1


def test_matmul_128x256x64_over_lds_on_gfx942_is_kc004(service) -> None:
    path = ROOT / "examples" / "matmul_autotune.py"
    text = path.read_text()
    analysis = analyze_source(text, str(path))
    job = plan_jobs(text, "matmul_kernel", ["gfx942"], path=str(path))[0]
    assert dict(job.constexprs)["BLOCK_SIZE_N"] == 256
    result, _ = asyncio.run(service.run_job(job))
    kernel = analysis.kernel("matmul_kernel")
    report = KernelCompileReport(str(path), kernel.name, job.target, kernel.name_span, [JobReport(job, result, False)])
    problems = compile_problems(report, parse_target("gfx942"))
    [kc004] = [p for p in problems if p.code == "KC004"]
    assert "fail at launch" in kc004.message and "gfx942" in kc004.message and "autotune config 1" in kc004.message
    assert kc004.span == kernel.name_span
    # The example's pointers carry no type: the 96 KB rest on the fp16 kernel-lsp assumed, so it is not an error.
    assert kc004.severity == Severity.INFO and "assumed *fp16" in kc004.message

    pinned = plan_jobs(text, "matmul_kernel", ["gfx942"], path=str(path),
                       pins={p: "*fp16" for p in ("a_ptr", "b_ptr", "c_ptr")})[0]
    result, _ = asyncio.run(service.run_job(pinned))
    report = KernelCompileReport(str(path), kernel.name, job.target, kernel.name_span,
                                 [JobReport(pinned, result, False)])
    [kc004] = [p for p in compile_problems(report, parse_target("gfx942")) if p.code == "KC004"]
    assert kc004.severity == Severity.ERROR and "fails at launch" in kc004.message


def test_the_kernel_the_user_looks_at_compiles_first(tmp_path):
    from analyzers import analyze_source
    from kernel_lsp.engine.compile.jobs import CompileResult
    from kernel_lsp.engine.compile.service import CompileService
    from kernel_lsp.settings import Settings

    examples = ROOT / "examples"
    text = (examples / "vector_add.py").read_text() + "\n\n" + (examples / "fused_softmax.py").read_text()
    analysis = analyze_source(text, "two.py")
    # The softmax launcher computes BLOCK_SIZE at run time: a pin gives the compile its value.
    service = CompileService(tmp_path, Settings(pins={"softmax_kernel": {"BLOCK_SIZE": 1024}}))
    seen = []

    async def fake_run_job(job, *, priority=0):
        seen.append((job.kernel, priority))
        return CompileResult(job_key=job.key, ok=True), False

    service.run_job = fake_run_job
    asyncio.run(service.compile_file("two.py", text, analysis, ["sm_90"], priority=3, first="softmax_kernel"))
    assert {p for k, p in seen if k == "softmax_kernel"} == {2}
    assert {p for k, p in seen if k == "add_kernel"} == {3}


STRIDED = """import triton
import triton.language as tl


@triton.jit
def gather(x_ptr, y_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs, mask=offs < n)
    b = tl.load(y_ptr + offs * stride, mask=offs < n)
    tl.store(out_ptr + offs, a + b, mask=offs < n)


def launch(x, y, out, n, stride):
    gather[(triton.cdiv(n, 1024),)](x, y, out, n, stride, BLOCK=1024)
"""


def test_a_strided_block_load_left_scalar_is_kc007_on_its_line(service, tmp_path) -> None:
    path = str(tmp_path / "strided.py")
    problems = [p for p in _problems(_compile(service, path, STRIDED)) if p.code == "KC007"]
    assert [(p.span.start_line, p.kernel) for p in problems] == [(8, "gather")]  # the `offs * stride` load only
    assert "32-bit access per element" in problems[0].message and "8 elements" in problems[0].message


UNKNOWN_BLOCK = """import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def launch(x, n):
    scale[(1,)](x, n, BLOCK=triton.next_power_of_2(n))
"""


def test_an_unknown_constexpr_is_an_information_note_and_nothing_compiles(service, tmp_path) -> None:
    before = service.counts["compiles"]
    reports = _compile(service, str(tmp_path / "unknown.py"), UNKNOWN_BLOCK)
    assert service.counts["compiles"] == before and not reports[0].jobs
    [note] = _problems(reports)
    assert (note.code, note.severity) == ("KC009", Severity.INFO)
    assert "not compiled for sm_90" in note.message and "`BLOCK` is not known" in note.message
    assert "pins" in note.message and "Fix this line" not in note.message


def _run_one(service, text: str, kernel: str, **pins):
    job = plan_jobs(text, kernel, ["sm_90"], path="k.py", pins=pins)[0]
    result, _ = asyncio.run(service.run_job(job))
    span = analyze_source(text).kernel(kernel).name_span
    return compile_problems(KernelCompileReport("k.py", kernel, job.target, span, [JobReport(job, result, False)]))


def test_num_warps_3_is_the_users_error_not_kernel_lsps(service) -> None:
    [problem] = _run_one(service, UNKNOWN_BLOCK, "scale", BLOCK=128, num_warps=3)
    assert problem.code == "KC001" and problem.severity == Severity.ERROR
    assert "num_warps must be a power of 2" in problem.message and "kernel-lsp" not in problem.message
    # No line of the kernel is at fault: the message sends the user to where the configuration is set.
    assert "Fix this line" not in problem.message and "change it where it is set" in problem.message


def test_a_construct_the_installed_triton_lacks_is_named_with_the_version(service) -> None:
    import triton
    import triton.language as tl

    if hasattr(tl.math, "max"):
        pytest.skip("this triton still has tl.math.max")
    text = UNKNOWN_BLOCK.replace("* 2.0", "").replace("tl.load(x_ptr + offs, mask=offs < n)",
                                                      "tl.math.max(tl.load(x_ptr + offs, mask=offs < n), 0.0)")
    [problem] = _run_one(service, text, "scale", BLOCK=128)
    assert problem.code == "KC010" and problem.span.start_line == 7
    assert "`tl.math.max`" in problem.message and triton.__version__ in problem.message
    assert "tl.maximum" in problem.message


def test_a_helper_imported_from_a_sibling_module_compiles_with_its_caller(service, tmp_path) -> None:
    from .test_extract import _package

    kernel = _package(tmp_path)
    job = plan_jobs(kernel.read_text(), "kernel", ["sm_90"], path=str(kernel))[0]
    assert dict(job.constexprs) == {}  # BLOCK is the imported module constant, read from its file
    result, _ = asyncio.run(service.run_job(job))
    assert result.ok, result.error


def test_one_line_helpers_that_return_a_value_are_compiled_only_through_callers(service) -> None:
    """`def exp(x): return tl.exp(x)`, called from kernels in other files, is a helper, not a kernel of its own."""
    from analyzers import analyze_source

    text = ("import triton\nimport triton.language as tl\n\n"
            "if True:\n"
            "    @triton.jit\n"
            "    def exp(x): return tl.exp(x.to(tl.float32))\n\n"
            "@triton.jit\n"
            "def tanh(x):\n"
            "    return tl.sigmoid(2 * x) * 2 - 1\n")
    reports = asyncio.run(service.compile_file("op.py", text, analyze_source(text, "op.py"), ["sm_90"]))
    assert reports == []


def test_spills_under_a_num_warps_kernel_lsp_assumed_are_information_that_say_so() -> None:
    from kernel_lsp.engine.compile.jobs import CompileResult, Resources

    text = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
            "def wide(x_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
            "    tl.store(x_ptr + offs, 1.0, mask=offs < n)\n\n"
            "def launch(x, n):\n    wide[(1,)](x, n, BLOCK=16384, num_warps=pick(n))\n")
    analysis = analyze_source(text)
    kernel = analysis.kernel("wide")
    pinned = {"x_ptr": "*fp32"}
    for given, severity in (({}, Severity.INFO), ({"num_warps": 4}, Severity.WARNING)):
        (job,) = plan_jobs(text, "wide", ["sm_90"], launch_sites=analysis.launch_sites, pins={**pinned, **given})
        spilled = CompileResult(job.key, True, resources=Resources(registers=255, spill_bytes=512, num_warps=4))
        report = KernelCompileReport("k.py", "wide", job.target, kernel.name_span, [JobReport(job, spilled, False)])
        [kc003] = [p for p in compile_problems(report) if p.code == "KC003"]
        assert kc003.severity == severity, kc003.message
        assert ("num_warps: assumed 4" in kc003.message) == (severity == Severity.INFO)


def test_ptxas_performance_notes_are_information_on_the_kernel() -> None:
    from kernel_lsp.engine.compile.jobs import CompileResult, Resources
    from kernel_lsp.engine.compile.worker import parse_ptxas_notes

    log = ("ptxas info    : Compiling entry function 'mm' for 'sm_90a'\n"
           "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
           "insufficient register resources for the wgmma pipeline in the function 'mm' in line 5751\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 5152 bytes cumulative stack size\n")
    notes = parse_ptxas_notes(log)
    assert notes == ("(C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
                     "insufficient register resources for the wgmma pipeline",)
    assert parse_ptxas_notes("ptxas info    : Used 32 registers\n") == ()
    text = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
            "def mm(x_ptr, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
            "    tl.store(x_ptr + offs, 1.0)\n\n"
            "def launch(x):\n    mm[(1,)](x, BLOCK=64, num_warps=4)\n")
    analysis = analyze_source(text)
    (job,) = plan_jobs(text, "mm", ["sm_90"], launch_sites=analysis.launch_sites, pins={"x_ptr": "*fp32"})
    result = CompileResult(job.key, True, resources=Resources(registers=255, num_warps=4, ptxas_notes=notes))
    report = KernelCompileReport("k.py", "mm", job.target, analysis.kernel("mm").name_span,
                                 [JobReport(job, result, False)])
    [kc011] = [p for p in compile_problems(report) if p.code == "KC011"]
    assert kc011.severity == Severity.INFO
    assert "wgmma.mma_async instructions are serialized" in kc011.message and "mm" in kc011.message


def test_one_compiler_warning_on_two_lines_is_reported_on_each_line() -> None:
    from kernel_lsp.engine.compile.jobs import CompileError, CompileResult

    text = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
            "def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
            "    x = tl.load(x_ptr + offs, mask=offs < n)\n    tl.store(y_ptr + offs, x, mask=offs < n)\n\n"
            "def launch(x, y, n):\n    copy[(1,)](x, y, n, BLOCK=1024)\n")
    analysis = analyze_source(text)
    kernel = analysis.kernel("copy")
    (job,) = plan_jobs(text, "copy", ["sm_90"], launch_sites=analysis.launch_sites,
                       pins={"x_ptr": "*fp32", "y_ptr": "*fp32"})
    warned = CompileResult(job.key, True, warnings=(CompileError("unaligned access", 6, 8, "compilation"),
                                                    CompileError("unaligned access", 7, 4, "compilation")))
    report = KernelCompileReport("k.py", "copy", job.target, kernel.name_span, [JobReport(job, warned, False)])
    kc002 = [p for p in compile_problems(report) if p.code == "KC002"]
    assert sorted((p.span.start_line, p.span.start_col) for p in kc002) == [(6, 8), (7, 4)]


def test_shared_memory_past_the_limit_for_every_element_type_is_an_error() -> None:
    from kernel_lsp.engine.compile.jobs import CompileResult, Resources

    text = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
            "def mm(x_ptr, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
            "    tl.store(x_ptr + offs, tl.load(x_ptr + offs))\n\n"
            "def launch(x):\n    mm[(1,)](x, BLOCK=64, num_warps=4, num_stages=2)\n")
    analysis = analyze_source(text)
    (job,) = plan_jobs(text, "mm", ["sm_90"], launch_sites=analysis.launch_sites)
    assert any(": assumed *" in n for n in job.notes), job.notes

    def kc004(shared: int):
        result = CompileResult(job.key, True, resources=Resources(registers=64, num_warps=4, shared_bytes=shared))
        report = KernelCompileReport("k.py", "mm", job.target, analysis.kernel("mm").name_span,
                                     [JobReport(job, result, False)])
        [found] = [p for p in compile_problems(report) if p.code == "KC004"]
        return found

    # 1 MB with an assumed 16-bit type is still 512 KB with 1-byte elements: it fails whatever the type.
    worst = kc004(1 << 20)
    assert worst.severity == Severity.ERROR and "for every element type" in worst.message
    # 300 KB with 16-bit elements fits with 1-byte ones: which type runs decides, so it is information.
    maybe = kc004(300 << 10)
    assert maybe.severity == Severity.INFO and "for every element type" not in maybe.message
