"""The offline compile runs none of the workspace's code: every way a file could make the compile worker run its
code is tried, each leaves a marker if it runs; none may, and each kernel is reported as not compiled (KC008,
information) at the line that needs the code, never as a compile error of the user's."""

from __future__ import annotations

import pytest

from kernel_lsp.engine.compile.service import KernelCompileReport, JobReport, compile_problems
from kernel_lsp.engine.compile.specialize import plan_jobs
from kernel_lsp.engine.compile.specialize import make_target

from .pool import compile_all

pytest.importorskip("triton")

# Appends the case's name to the file named by $KERNEL_LSP_TEST_MARKS when it runs.
RUN = "open(__import__('os').environ['KERNEL_LSP_TEST_MARKS'], 'a').write('{name} ')"
HEAD = "import triton\nimport triton.language as tl\n"
BODY = ("    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)\n")

# name -> (source, substring of the reason); the line that needs the code ends with `# here`.
CASES = {
    "constexpr_default": (HEAD + "@triton.jit\n"
                          "def kernel(x_ptr, BLOCK: tl.constexpr = ({run} and 16) or 16):  # here\n" + BODY,
                          "the default of `BLOCK`"),
    "annotation": (HEAD + "@triton.jit\n"
                   "def kernel(x_ptr: {run}, BLOCK: tl.constexpr = 16):  # here\n" + BODY,
                   "the annotation of `x_ptr`"),
    "helper_default": (HEAD + "@triton.jit\n"
                       "def helper(x, k: tl.constexpr = {run}):  # here\n"
                       "    return x\n\n"
                       "@triton.jit\ndef kernel(x_ptr, BLOCK: tl.constexpr = 16):\n" + BODY
                       + "    helper(x_ptr)\n", "the default of `k`"),
    "constexpr_function": (HEAD + "@triton.constexpr_function\n"
                           "def block():\n"
                           "    {run}\n"
                           "    return 16\n\n"
                           "@triton.jit\ndef kernel(x_ptr):\n"
                           "    BLOCK: tl.constexpr = block()  # here\n" + BODY,
                           "constexpr_function"),
    "module_constant": (HEAD + "import os\n"
                        "N = os.system('true') or {run} or 16\n"
                        "@triton.jit\ndef kernel(x_ptr):\n"
                        "    BLOCK: tl.constexpr = N  # here\n" + BODY, "`N` (line"),
    "shadowed_math": (HEAD + "import math\n"
                      "from triton.language.core import builtins as math\n"
                      "N = math.pow(2, 4) or ({run} and 16)\n"
                      "@triton.jit\ndef kernel(x_ptr):\n"
                      "    BLOCK: tl.constexpr = N  # here\n" + BODY, "bound more than once"),
    "body_through_triton_language": (HEAD + "@triton.jit\ndef kernel(x_ptr, BLOCK: tl.constexpr = 16):\n"
                                     "    tl.core.builtins.exec(\"{run}\")  # here\n" + BODY,
                                     "tl.core.builtins"),
    "body_through_triton": (HEAD + "@triton.jit\ndef kernel(x_ptr, BLOCK: tl.constexpr = 16):\n"
                            "    triton.language.core.inspect.os.system('true')  # here\n" + BODY,
                            "triton.language.core.inspect"),
    "body_imported_module": (HEAD + "from triton.language.core import builtins as b\n"
                             "@triton.jit\ndef kernel(x_ptr, BLOCK: tl.constexpr = 16):\n"
                             "    b.exec(\"{run}\")  # here\n" + BODY, "`b`"),
    "body_local_alias": (HEAD + "@triton.jit\ndef kernel(x_ptr, BLOCK: tl.constexpr = 16):\n"
                         "    c = tl.core  # here\n"
                         "    c.builtins.exec(\"{run}\")\n" + BODY, "as a value"),
    "body_wrapped_module": (HEAD + "@triton.jit\ndef kernel(x_ptr, BLOCK: tl.constexpr = 16):\n"
                            "    tl.constexpr(tl.core).value.builtins.exec(\"{run}\")  # here\n" + BODY,
                            "as a value"),
    "body_getattr": (HEAD + "@triton.jit\ndef kernel(x_ptr, BLOCK: tl.constexpr = 16):\n"
                     "    getattr(tl.core, 'builtins').exec(\"{run}\")  # here\n" + BODY, "builtin `getattr`"),
    "body_dunder": (HEAD + "@triton.jit\ndef kernel(x_ptr, BLOCK: tl.constexpr = 16):\n"
                    "    tl.float32.__class__.__init__.__globals__['builtins'].exec(\"{run}\")  # here\n" + BODY,
                    "reaches `__"),
    "body_builtin": (HEAD + "@triton.jit\ndef kernel(x_ptr, BLOCK: tl.constexpr = 16):\n"
                     "    exec(\"{run}\")  # here\n" + BODY, "builtin `exec`"),
}


def _source(name: str) -> str:
    source, _ = CASES[name]
    return source.replace("{run}", RUN.replace("{name}", name))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    marks = tmp_path_factory.mktemp("marks") / "marks"
    mp = pytest.MonkeyPatch()
    mp.setenv("KERNEL_LSP_TEST_MARKS", str(marks))  # the spawned workers inherit it
    try:
        jobs = {name: plan_jobs(_source(name), "kernel", ["sm_90"], path=f"{name}.py")[0] for name in CASES}
        results, _ = compile_all(jobs, str(tmp_path_factory.mktemp("triton-cache")))
    finally:
        mp.undo()
    return jobs, results, marks


def test_no_case_runs_code(compiled) -> None:
    *_, marks = compiled
    assert not marks.exists(), f"ran: {marks.read_text()}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_not_compiled_at_the_line_that_needs_code(compiled, name: str) -> None:
    jobs, results, _ = compiled
    result, (_, reason) = results[name], CASES[name]
    assert not result.ok and result.error is not None
    assert result.error.kind == "offline", result.error
    assert reason in result.error.message, result.error.message
    here = next(i for i, line in enumerate(_source(name).splitlines()) if line.endswith("# here"))
    assert result.error.line == here, (result.error, _source(name).splitlines()[result.error.line or 0])

    report = KernelCompileReport(path=f"{name}.py", kernel="kernel", target=make_target("sm_90"),
                                 span=_span(0), jobs=[JobReport(jobs[name], result, False)])
    problems = compile_problems(report)
    assert [p.code for p in problems] == ["KC008"], problems
    assert "says nothing wrong about the kernel" in problems[0].message


def test_literal_kernels_still_compile(tmp_path) -> None:
    """What the offline compile may evaluate: literals, names bound to them, tl.constexpr, math and pure builtins."""
    source = (HEAD + "import math\n"
              "LOG = int(math.log2(64))\n"
              "WIDTH = tl.constexpr(2 ** LOG)\n"
              "@triton.jit\ndef helper(x, k: tl.constexpr = WIDTH):\n"
              "    return x * k\n\n"
              "@triton.jit\ndef kernel(x_ptr, n: int, BLOCK: tl.constexpr = max(16, WIDTH)) -> None:\n"
              "    offs = tl.arange(0, BLOCK)\n"
              "    m = offs < n\n"
              "    tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs, mask=m), 2).to(tl.float32), mask=m)\n")
    jobs = {"ok": plan_jobs(source, "kernel", ["sm_90"], path="ok.py")[0]}
    results, _ = compile_all(jobs, str(tmp_path), workers=1)
    assert results["ok"].ok, results["ok"].error


def _span(line: int):
    from analyzers.model import Span
    return Span.point(line, 0)


def test_a_kernel_spelled_as_a_call_of_jit_compiles(tmp_path) -> None:
    """`add_kernel = triton.jit(add)`: the kernel is compiled under the name its launches use."""
    source = (HEAD + "def add(x_ptr, n, BLOCK: tl.constexpr):\n"
              "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
              "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)\n\n"
              "add_kernel = triton.jit(add)\n\n"
              "def launch(x):\n"
              "    add_kernel[(1,)](x, x.numel(), BLOCK=256)\n")
    jobs = {"wrapped": plan_jobs(source, "add_kernel", ["sm_90"], path="wrapped.py", pins={"BLOCK": 256})[0]}
    assert jobs["wrapped"].kernel == "add_kernel" and dict(jobs["wrapped"].constexprs) == {"BLOCK": 256}
    results, _ = compile_all(jobs, str(tmp_path), workers=1)
    assert results["wrapped"].ok, results["wrapped"].error


def test_a_version_guarded_import_compiles_with_what_the_installed_triton_has(tmp_path) -> None:
    """`try: from triton.language.extra import libdevice / except ImportError: from ...math import libdevice`:
    the guard comes along whole, so the worker takes the branch that exists; a guard with a non-triton branch
    does not."""
    body = ("@triton.jit\ndef kernel(x_ptr, n, BLOCK: tl.constexpr = 128):\n"
            "    offs = tl.arange(0, BLOCK)\n"
            "    x = tl.load(x_ptr + offs, mask=offs < n)\n"
            "    tl.store(x_ptr + offs, libdevice.tanh(x), mask=offs < n)\n")
    for first, second in (("triton.language.extra", "triton.language.math"),
                          ("triton.language.math", "triton.language.extra")):
        guarded = (HEAD + f"try:\n    from {first} import libdevice\n"
                   f"except (ImportError, AttributeError):\n    from {second} import libdevice\n" + body)
        jobs = {"guarded": plan_jobs(guarded, "kernel", ["sm_90"], path="guarded.py")[0]}
        assert "except (ImportError, AttributeError):" in jobs["guarded"].module_source
        results, _ = compile_all(jobs, str(tmp_path), workers=1)
        assert results["guarded"].ok, results["guarded"].error

    hostile = (HEAD + "try:\n    from triton.language.extra import libdevice\n"
               "except ImportError:\n    from os import system as libdevice\n" + body)
    job = plan_jobs(hostile, "kernel", ["sm_90"], path="hostile.py")[0]
    assert "import system" not in job.module_source and "try:" not in job.module_source
