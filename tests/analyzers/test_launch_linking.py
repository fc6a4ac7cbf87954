"""Launch checks against kernels found elsewhere (another file), and discovery details they rely on."""

from __future__ import annotations

from analyzers import analyze_source, check_launch_sites, check_source
from analyzers.model import Severity

KERNELS = '''\
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 512})], key=["n"])
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
'''

CALLER = '''\
import torch
import triton
from mylib.kernels import add_kernel


def add(x: torch.Tensor, y: torch.Tensor):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, BLOCK=256, num_warp=4)
    return out
'''


def test_launch_against_kernel_in_another_file() -> None:
    kernels = analyze_source(KERNELS, "/ws/mylib/kernels.py")
    caller = analyze_source(CALLER, "/ws/app.py")
    (site,) = caller.launch_sites
    assert (site.target, site.module) == ("add_kernel", "mylib.kernels")

    def lookup(s):
        if s.module == "mylib.kernels":
            k = kernels.kernel(s.target)
            return (k, "/ws/mylib/kernels.py") if k else None
        return None

    problems = check_launch_sites(caller, lookup)
    assert sorted(p.code for p in problems) == ["TR010", "TR011", "TR012"]
    kernel = kernels.kernel("add_kernel")
    for p in problems:
        assert p.kernel == "add_kernel"
        assert any(r.path == "/ws/mylib/kernels.py" and r.span == kernel.name_span for r in p.related), p
    (missing,) = [p for p in problems if p.code == "TR010"]
    assert "`n`" in missing.message and "BLOCK" not in missing.message
    (tuned,) = [p for p in problems if p.code == "TR012"]
    # the config that tunes BLOCK, in the kernel's file
    assert any(r.path == "/ws/mylib/kernels.py" and r.span.start_line == 4 for r in tuned.related)
    # the same file on its own cannot see the kernel: nothing is reported
    assert not [p for p in check_source(CALLER).problems if p.code.startswith("TR01")]


def test_fix_ranges_and_severities() -> None:
    text = KERNELS + '''

def launch(x, out):
    n = x.shape[0]
    add_kernel[(1,)](x, x, out, n, num_warps=4)
'''
    result = check_source(text)
    (p,) = [p for p in result.problems if p.code == "TR012"]
    assert p.severity == Severity.ERROR and p.fix is not None
    (edit,) = p.fix.edits
    line = text.splitlines()[edit.span.start_line]
    assert line[edit.span.start_col:edit.span.end_col] == ", num_warps=4"


def test_runtime_size_reassigned_is_not_a_size() -> None:
    text = '''\
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x):
    n = x.shape[0]
    block = x.shape[0]
    k[(1,)](x, n, BLOCK=block)
    block = triton.next_power_of_2(block)
    k[(1,)](x, n, BLOCK=block)
'''
    # `block` is rebound to a bucketed value: the name is no longer treated as a runtime size
    assert not [p for p in check_source(text).problems if p.code == "TR012"]


def test_broken_code_does_not_raise() -> None:
    for text in [
        "import triton\n@triton.autotune(configs=[triton.Config()], key=[1, None])\n@triton.jit\ndef k(x): pass\n",
        "import triton\n@triton.heuristics(values=None)\n@triton.jit\ndef k(x): pass\nk[(1,)](*[], **{})\n",
        (
            "import triton\n@triton.autotune(configs=[triton.Config({**d}), triton.Config({**d})], key=['x'])\n"
            "@triton.jit\ndef k(x): pass\nk[(1,)](1, 2, x=3, num_warps=-3)\n"
        ),
        "import triton\n@triton.jit\ndef k(x, *, B):\n    pass\nk[g](1, B=2)\nk[g](\n",
    ]:
        result = check_source(text)
        assert not [p for p in result.problems if p.code == "KL900"], result.problems
