"""Extraction of a self-contained module and planning of jobs: pure source analysis, no triton import."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from analyzers.analyze import analyze_source
from kernel_lsp.engine.compile.extract import ExtractionError, extract_module
from kernel_lsp.engine.compile.specialize import job_key, plan_jobs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

LIBRARY = '''\
"""A kernel file with the usual company: torch, helpers, constants, stacked decorators."""
import math
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from .common import fused_gelu

LOG2E = tl.constexpr(1.4426950408889634)
HALF: tl.constexpr = tl.constexpr(0.5)
TILE = tl.constexpr(2 ** 7)
DEVICE = torch.device("cuda")
FMAX = tl.constexpr(torch.finfo(torch.float16).max)


@triton.jit
def _unused(x):
    return x


@triton.jit
def _exp(x):
    return libdevice.exp2(x * LOG2E)


@triton.jit
def _softplus(x):
    return tl.log(1.0 + _exp(x)) * HALF


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4)], key=["n"])
@triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
@triton.jit(do_not_specialize=["n"])
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, _softplus(x) + TILE * 0, mask=offs < n)


def launch(x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel())
    return out
'''


def _exec_lines(src: str) -> None:
    ast.parse(src)  # the module must at least be valid Python on its own


def test_module_holds_kernel_helpers_constants_and_triton_imports_only() -> None:
    m = extract_module(LIBRARY, "kernel", "lib.py")
    _exec_lines(m.source)
    assert "torch" not in m.source and "DEVICE" not in m.source and "fused_gelu" not in m.source
    assert "from triton.language.extra import libdevice" in m.source
    assert "from triton import language as tl" in m.source or "import triton.language as tl" in m.source
    assert m.functions == ("_exp", "_softplus", "kernel")  # file order, _unused left out
    assert set(m.constants) == {"LOG2E", "HALF", "TILE"}
    assert "@triton.autotune" not in m.source and "@triton.heuristics" not in m.source
    assert "@triton.jit(do_not_specialize=['n'])" in m.source
    assert m.jit_options == {"do_not_specialize": ["n"]}
    assert m.uses_dot is False
    # FMAX is not read by the kernel, so its torch dependency does not matter.
    assert m.unresolved == ()


def test_line_map_points_at_the_same_text() -> None:
    text = LIBRARY
    user = text.splitlines()
    m = extract_module(text, "kernel", "lib.py")
    for i, line in enumerate(m.source.splitlines()):
        u = m.line_map[i]
        if u == 0:
            assert "import" in line
        elif line.lstrip().startswith("@triton.jit"):
            assert "jit" in user[u - 1]  # the decorator we write stands for the user's @triton.jit line
        else:
            assert line == user[u - 1]


def test_unresolved_names_are_reported_not_imported() -> None:
    text = LIBRARY.replace("_softplus(x) + TILE * 0", "_softplus(x) * FMAX + fused_gelu(x)")
    m = extract_module(text, "kernel", "lib.py")
    reasons = dict(m.unresolved)
    assert set(reasons) == {"FMAX", "fused_gelu"}
    assert "cannot be computed offline" in reasons["FMAX"] and "torch.finfo" in reasons["FMAX"]
    assert ".common" in reasons["fused_gelu"]
    assert "torch" not in m.source and "fused_gelu" not in m.source.split("def kernel")[0]


def test_missing_kernel() -> None:
    with pytest.raises(ExtractionError, match="no @triton.jit function named 'nope'"):
        extract_module(LIBRARY, "nope", "lib.py")


def test_kernel_nested_in_a_class_keeps_its_columns() -> None:
    text = ("import triton\nimport triton.language as tl\n\nclass Ops:\n    @triton.jit\n    def k(x_ptr):\n"
            "        tl.store(x_ptr, 1.0)\n")
    m = extract_module(text, "Ops.k", "c.py")
    _exec_lines(m.source)
    assert "    def k(x_ptr):" in m.source.splitlines()


# ---------------------------------------------------------------------------------------------------------------
# The cache key


def _key(text: str, kernel: str = "kernel", target: str = "sm_90") -> str:
    return plan_jobs(text, kernel, [target], triton_version="x")[0].key


def test_key_ignores_position_but_not_content() -> None:
    base = _key(LIBRARY)
    above = LIBRARY.replace('import math\n', 'import math\n\n\n# a comment and some code above\nX = 1\n')
    assert _key(above) == base, "an edit above the kernel must not change the key"
    unrelated = LIBRARY.replace("return x\n", "return x + 1\n", 1)  # _unused's body
    assert _key(unrelated) == base
    body = LIBRARY.replace("tl.store(out_ptr + offs, _softplus(x)", "tl.store(out_ptr + offs, 2 * _softplus(x)")
    assert _key(body) != base
    helper = LIBRARY.replace("libdevice.exp2(x * LOG2E)", "libdevice.exp2(x * LOG2E) + 0.0")
    assert _key(helper) != base
    constant = LIBRARY.replace("tl.constexpr(0.5)", "tl.constexpr(0.25)")
    assert _key(constant) != base
    assert _key(LIBRARY, target="sm_80") != base
    assert _key(LIBRARY, target="gfx942") != base


def test_key_covers_signature_options_and_version() -> None:
    job = plan_jobs(LIBRARY, "kernel", ["sm_90"], triton_version="3.9.0")[0]
    assert job.key == job_key(job, "3.9.0")
    assert job_key(job, "3.6.0") != job.key
    for change in ({"num_warps": 8}, {"num_stages": 2}, {"signature": job.signature[:-1] + (("EVEN", "i32"),)},
                   {"constexprs": (("BLOCK", 128), ("EVEN", True))}, {"attrs": ()}):
        assert job_key(dataclasses.replace(job, **change), "3.9.0") != job.key, change


# ---------------------------------------------------------------------------------------------------------------
# Specialization


def _jobs(name: str, kernel: str, targets=("sm_90",), **kw):
    text = (EXAMPLES / f"{name}.py").read_text()
    sites = [(s, text) for s in analyze_source(text).launch_sites]
    return plan_jobs(text, kernel, list(targets), path=name, launch_sites=sites, **kw)


def test_vector_add_takes_block_size_and_warps_from_its_launch_site() -> None:
    (job,) = _jobs("vector_add", "add_kernel")
    assert dict(job.constexprs) == {"BLOCK_SIZE": 1024}  # `BLOCK_SIZE=block_size`, block_size: int = 1024
    assert job.num_warps == 4 and job.num_stages == 3
    assert dict(job.signature) == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32",
                                   "BLOCK_SIZE": "constexpr"}
    assert set(job.attrs) == {(p, "tt.divisibility=16") for p in ("x_ptr", "y_ptr", "out_ptr", "n_elements")}
    assert any("*fp32 (default)" in n for n in job.notes)
    assert job.config_label == "launch at line 43"


def test_matmul_one_job_per_autotune_config_and_target() -> None:
    jobs = _jobs("matmul_autotune", "matmul_kernel", ("sm_90", "gfx942"))
    assert len(jobs) == 12
    cfgs = [(dict(j.constexprs)["BLOCK_SIZE_M"], j.num_warps, j.num_stages) for j in jobs[:6]]
    assert cfgs == [(128, 8, 3), (128, 4, 4), (128, 4, 4), (64, 4, 4), (64, 4, 3), (32, 2, 5)]
    sm90, amd = jobs[0], jobs[6]
    assert dict(sm90.signature)["a_ptr"] == "*fp16"  # tl.dot kernel: 16-bit inputs assumed
    assert {a for p, a in sm90.attrs if p == "stride_ak"} == {"equal_to_1"}  # contiguous innermost strides
    assert {a for p, a in sm90.attrs if p == "stride_am"} == {"tt.divisibility=16"}
    assert ("a_ptr", "tt.pointer_range=32") in amd.attrs and ("a_ptr", "tt.pointer_range=32") not in sm90.attrs
    assert len({j.key for j in jobs}) == 12


def test_launch_literals_specialize_like_the_jit() -> None:
    text = (
        "import triton\nimport triton.language as tl\n\n@triton.jit\n"
        "def k(x_ptr, n, stride, scale, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n    tl.store(x_ptr + offs * stride, scale, mask=offs < n)\n\n"
        "def run(x):\n    k[(1,)](x, 1000, 1, 0.5, BLOCK=256, num_warps=2)\n    k[(1,)](x, 17, 32, 0.5, 64)\n"
    )
    sites = [(s, text) for s in analyze_source(text).launch_sites]
    a, b = plan_jobs(text, "k", ["sm_90"], launch_sites=sites, triton_version="x")
    assert dict(a.constexprs) == {"BLOCK": 256} and a.num_warps == 2
    assert dict(a.signature)["scale"] == "fp32"
    assert ("n", "tt.divisibility=16") not in a.attrs  # 1000 % 16 != 0
    assert ("stride", "equal_to_1") in a.attrs
    assert dict(b.constexprs) == {"BLOCK": 64} and b.num_warps == 4
    assert ("stride", "tt.divisibility=16") in b.attrs and ("n", "tt.divisibility=16") not in b.attrs


def test_pins_override_everything() -> None:
    (job,) = _jobs("vector_add", "add_kernel", pins={"x_ptr": "*bf16", "BLOCK_SIZE": 256, "num_warps": 8})
    assert dict(job.signature)["x_ptr"] == "*bf16" and dict(job.constexprs)["BLOCK_SIZE"] == 256
    assert job.num_warps == 8


# How launchers spell their block sizes: each must reach the compile as the value the launch passes.
LAUNCHERS = {
    "tuple assignment": ("BLOCK_M, BLOCK_N = 16, 128", "BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N", (16, 128)),
    "dict literal": ('cfg = {"BLOCK_M": 32, "BLOCK_N": 64}', 'BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"]',
                     (32, 64)),
    "config object": ("cfg = Config(BLOCK_M=64, BLOCK_N=32)", "BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N", (64, 32)),
    "next_power_of_2 and min": ("bm = triton.next_power_of_2(100)", "BLOCK_M=bm, BLOCK_N=min(64, bm * 4)",
                                (128, 64)),
    "max of constants": ("", "BLOCK_M=max(16, SMALL), BLOCK_N=SMALL * 2", (16, 16)),
}


@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_launcher_patterns_give_the_launched_values(name) -> None:
    setup, kwargs, expected = LAUNCHERS[name]
    text = ("import triton\nimport triton.language as tl\nSMALL = 8\n\n@triton.jit\n"
            "def k(x_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):\n"
            "    tl.store(x_ptr + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :], 1.0)\n\n"
            f"def launch(x):\n    {setup or 'pass'}\n    k[(1,)](x, {kwargs})\n")
    sites = [(s, text) for s in analyze_source(text).launch_sites]
    (job,) = plan_jobs(text, "k", ["sm_90"], launch_sites=sites)
    assert (dict(job.constexprs)["BLOCK_M"], dict(job.constexprs)["BLOCK_N"]) == expected
    assert not any("BLOCK" in n for n in job.notes)  # read from the launch, not assumed


def test_an_unknown_constexpr_is_never_made_up() -> None:
    from kernel_lsp.engine.compile.jobs import NOT_COMPILED
    from kernel_lsp.engine.compile.specialize import ValueNotKnown

    text = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
            "def k(x_ptr, n, BLOCK: tl.constexpr):\n    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)\n\n"
            "def launch(x, n):\n    k[(1,)](x, n, BLOCK=triton.next_power_of_2(n))\n")
    sites = [(s, text) for s in analyze_source(text).launch_sites]
    for given in ((), sites):
        with pytest.raises(ValueNotKnown) as err:
            plan_jobs(text, "k", ["sm_90"], launch_sites=given)
        assert str(err.value).startswith(NOT_COMPILED) and "`BLOCK`" in str(err.value) and "pins" in str(err.value)
    (job,) = plan_jobs(text, "k", ["sm_90"], launch_sites=sites, pins={"BLOCK": 256})
    assert dict(job.constexprs) == {"BLOCK": 256}


def test_a_heuristic_is_computed_from_known_values_or_assumed_and_said() -> None:
    text = ("import triton\nimport triton.language as tl\n\n"
            '@triton.heuristics({"HALF": lambda a: a["BLOCK"] // 2, "EVEN": lambda a: a["n"] % a["BLOCK"] == 0})\n'
            "@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr, HALF: tl.constexpr, EVEN: tl.constexpr):\n"
            "    tl.store(x_ptr + tl.arange(0, HALF), 1.0)\n\n"
            "def launch(x, n):\n    k[(1,)](x, n, BLOCK=64)\n")
    sites = [(s, text) for s in analyze_source(text).launch_sites]
    (job,) = plan_jobs(text, "k", ["sm_90"], launch_sites=sites)
    assert dict(job.constexprs) == {"BLOCK": 64, "HALF": 32, "EVEN": True}
    assert any(n.startswith("EVEN = True") for n in job.notes) and not any(n.startswith("HALF") for n in job.notes)


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "mypkg"
    (pkg / "common").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "utils.py").write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\nSCALE = tl.constexpr(2.0)\n\n"
        "@triton.jit\ndef _twice(x):\n    return x * SCALE\n\n@triton.jit\ndef helper(x):\n    return _twice(x) + 1\n\n"
        "DEVICE = torch.device('cuda')\n")
    (pkg / "common" / "__init__.py").write_text(
        "import triton.language as tl\nBLOCK = tl.constexpr(128)\nRUNTIME = compute()\n")
    kernel = pkg / "kern.py"
    kernel.write_text(
        "import triton\nimport triton.language as tl\nfrom .utils import helper as h\n"
        "from mypkg.common import BLOCK, RUNTIME\n\n"
        "@triton.jit\ndef kernel(x_ptr):\n    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, h(tl.load(x_ptr + offs)))\n\n"
        "@triton.jit\ndef other(x_ptr):\n    tl.store(x_ptr, RUNTIME)\n")
    return kernel


def test_helpers_and_constants_imported_from_the_workspace_come_along(tmp_path) -> None:
    kernel = _package(tmp_path)
    m = extract_module(kernel.read_text(), "kernel", str(kernel))
    assert not m.unresolved, m.unresolved
    assert "def helper(x):" in m.source and "def _twice(x):" in m.source and "h = helper" in m.source
    assert "BLOCK = tl.constexpr(128)" in m.source and "SCALE = tl.constexpr(2.0)" in m.source
    assert "torch" not in m.source and "DEVICE" not in m.source  # the other module is sliced, never imported
    from kernel_lsp.engine.compile import offline

    assert offline.unsafe_statements(m.source) == []
    # A name that is not a literal there stays out, and says why.
    other = extract_module(kernel.read_text(), "other", str(kernel))
    assert [n for n, _ in other.unresolved] == ["RUNTIME"] and "not a literal" in other.unresolved[0][1]


SPECCED = """import torch
import triton
import triton.language as tl
from kernel_lsp.spec import spec


@triton.jit
def rows(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * stride + cols, mask=cols < n_cols)
    tl.store(out_ptr + tl.program_id(0) * stride + cols, x, mask=cols < n_cols)


def launch(x):
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    rows[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK=block, num_warps=8 if block > 256 else 4)
    return out


@spec(kernel=rows, launcher=launch, reference=lambda x: x, shapes=[(3, 1), (5, 300), (7, 260)])
def rows_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)
"""


def test_a_spec_gives_the_values_its_launcher_computes_from_the_shapes() -> None:
    sites = [(s, SPECCED) for s in analyze_source(SPECCED).launch_sites]
    jobs = plan_jobs(SPECCED, "rows", ["sm_90"], launch_sites=sites)
    # 300 and 260 columns both need a 512-wide block: one job per distinct specialization.
    got = {dict(j.constexprs)["BLOCK"]: j for j in jobs}
    assert sorted(got) == [1, 512]
    assert "with the spec `rows_inputs` at shape (3, 1)" in got[1].config_label
    # Runtime sizes keep the JIT's usual assumption, said in the notes: ragged test shapes are not tuned sizes.
    assert ("n_cols", "tt.divisibility=16") in got[512].attrs and any("n_cols" in n for n in got[512].notes)
    # num_warps is computed from the block: known at each case too.
    assert (got[1].num_warps, got[512].num_warps) == (4, 8)
    assert not any("num_warps" in n for j in jobs for n in j.notes)


def test_a_num_warps_computed_at_run_time_is_compiled_with_the_default_and_said() -> None:
    text = SPECCED.split("@spec(")[0].replace("BLOCK=block,", "BLOCK=256,").replace(
        "8 if block > 256 else 4", "pick_warps(x)")
    sites = [(s, text) for s in analyze_source(text).launch_sites]
    (job,) = plan_jobs(text, "rows", ["sm_90"], launch_sites=sites)
    assert job.num_warps == 4
    assert "num_warps: assumed 4 (triton's default; the launch computes its value at run time)" in job.notes


def test_without_a_spec_or_with_a_reshaped_input_the_value_stays_unknown() -> None:
    from kernel_lsp.engine.compile.specialize import ValueNotKnown

    alone = SPECCED.split("@spec(")[0]
    reshaped = SPECCED.replace("    out = torch.empty_like(x)\n", "    x = x.view(-1, 3)\n    out = torch.empty_like(x)\n")
    for text in (alone, reshaped):
        sites = [(s, text) for s in analyze_source(text).launch_sites]
        with pytest.raises(ValueNotKnown):
            plan_jobs(text, "rows", ["sm_90"], launch_sites=sites)


def test_a_host_tensor_descriptor_is_not_typed_as_a_pointer() -> None:
    from kernel_lsp.engine.compile.specialize import ValueNotKnown

    text = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
            "def k(desc, out_ptr, BLOCK: tl.constexpr):\n    x = desc.load([0, 0])\n"
            "    offs = tl.arange(0, BLOCK)\n    tl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], x)\n\n"
            "def launch(d, o):\n    k[(1,)](d, o, BLOCK=64)\n")
    sites = [(s, text) for s in analyze_source(text).launch_sites]
    with pytest.raises(ValueNotKnown) as err:
        plan_jobs(text, "k", ["sm_90"], launch_sites=sites)
    assert "the type of `desc` is not known" in str(err.value) and "tensordesc<" in str(err.value)
    (job,) = plan_jobs(text, "k", ["sm_90"], launch_sites=sites, pins={"desc": "tensordesc<fp16[64, 64]>"})
    assert dict(job.signature)["desc"] == "tensordesc<fp16[64, 64]>"


def test_an_import_chosen_by_a_version_check_keeps_every_branch_in_order() -> None:
    source = (
        "import triton\nimport triton.language as tl\nfrom pkg import compare_version\n\n"
        "if compare_version('triton', '3.0'):\n"
        "    try:\n        from triton.language.extra.libdevice import tanh\n"
        "    except ModuleNotFoundError:\n        from triton.language.extra.cuda.libdevice import tanh\n"
        "else:\n    from triton.language.math import tanh\n\n\n"
        "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n    tl.store(x_ptr + offs, tanh(tl.load(x_ptr + offs)))\n")
    m = extract_module(source, "k")
    lines = [line.strip() for line in m.source.splitlines()]
    order = [lines.index(f"from {mod} import tanh") for mod in (
        "triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice", "triton.language.math")]
    assert order == sorted(order)  # tried in the order the file has them; the worker keeps the first that imports
    assert "compare_version" not in m.source
