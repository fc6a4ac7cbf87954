"""What a candidate may change (engine/assistant/integrity.py), the tautological-spec check, and the labels.

Pure: syntax trees only, nothing runs. Each refused candidate is a trick a model (or a person) could try; each
allowed one is an ordinary change that must not be refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_lsp.engine.assistant.code import splice
from kernel_lsp.engine.assistant.integrity import refusals, spec_changes, tautology
from kernel_lsp.engine.assistant.session import (
    CORRECT,
    NOT_SHOWN_FASTER,
    UNVERIFIED,
    CandidateRecord,
    is_verified,
    status_of,
    tally,
)
from kernel_lsp.engine.assistant.verify import Timing, spec_untouched, speed_evidence

from .conftest import EXAMPLE

REPO = Path(__file__).resolve().parents[2]
ONLY = "a candidate may change only the kernel, its launcher and @triton.jit helpers"
LAUNCH = "    out = torch.empty_like(x)\n"
REFERENCE = "def reference_add("


def before_reference(statement: str) -> str:
    """The example with a module-level statement added before its reference (after the launcher)."""
    return EXAMPLE.replace(REFERENCE, statement + "\n\n\n" + REFERENCE)


def in_launcher(lines: str) -> str:
    return EXAMPLE.replace(LAUNCH, LAUNCH + lines)


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def refused(new: str, action: str = "optimize", old: str = EXAMPLE, kernel: str = "add_kernel") -> str:
    found = refusals(old, new, kernel, action)
    assert found, "the candidate was not refused"
    return found[0]


# -- module-level side effects -------------------------------------------------------------------------------------


@pytest.mark.parametrize("statement, what", [
    ("torch.randn = lambda *a, **k: torch.zeros(*a, **k)", "assigns torch.randn at module level"),
    ("setattr(torch, 'allclose', lambda *a, **k: True)", "calls setattr at module level"),
    ("torch.testing.assert_close = print", "assigns torch.testing.assert_close at module level"),
    ("tl.load = tl.store", "assigns triton.language.load at module level"),
    ("torch.manual_seed(0)", "calls torch.manual_seed at module level"),
    ("del torch.randn", "deletes torch.randn at module level"),
    ("if True:\n    torch.randn = torch.zeros", "runs an `if` statement at module level"),
    ("try:\n    import os\nexcept ImportError:\n    pass", "runs a `try` statement at module level"),
    ("class Patch:\n    torch.randn = torch.zeros", "defines the class Patch at module level"),
    ("SEED = torch.manual_seed(0)", "calls torch.manual_seed at import"),
    ("BLOCK = (lambda: setattr(torch, 'randn', None))()", "calls lambda: setattr(torch, 'randn', None) at import"),
    ("BLOCK = [x := 3]", "assigns x at import (`:=`)"),
    ("add_kernel = triton.jit(reference_add)", "assigns add_kernel, which already names a definition"),
    ("tl = None", "assigns tl, which already names an import"),
])
def test_module_level_side_effects_are_refused_at_their_line(statement, what):
    new = before_reference(statement)
    why = refused(new)
    first = statement.splitlines()[0]
    assert why.startswith(f"line {line_of(new, first)} {what}"), why
    assert why.endswith(ONLY), why


@pytest.mark.parametrize("statement, why", [
    ("import os", "imports os: a candidate may import only torch, triton, math, numpy, typing"),
    ("import subprocess as torch_ops", "imports subprocess"),
    ("from . import sibling", "imports .: a candidate may import only"),
    ("from math import *", "imports * from math"),
    ("import numpy as torch", "imports numpy as torch, which already names something else in the file"),
    ("from kernel_lsp.spec import spec as tl", "imports kernel_lsp.spec"),
])
def test_only_whitelisted_imports_that_rebind_nothing(statement, why):
    assert why in refused(before_reference(statement))


def test_decorators_and_defaults_run_at_import_so_they_are_checked_too():
    new = before_reference("@functools.cache\ndef launch_cached(x):\n    return x")
    assert "defines launch_cached decorated with @functools.cache" in refused(new)
    new = before_reference("def helper(x=setattr(torch, 'randn', None)):\n    return x")
    assert refused(new).startswith(f"line {line_of(new, 'def helper')} calls setattr in the decorators or defaults "
                                   "of helper")
    new = EXAMPLE.replace("@triton.jit\ndef add_kernel(", "@triton.autotune(configs=print(), key=[])\n@triton.jit\n"
                          "def add_kernel(")
    assert "calls print in the decorators or defaults of add_kernel" in refused(new)


# -- the spec, its reference, inputs and what they read ----------------------------------------------------------

HELPED = EXAMPLE.replace("def reference_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n    return x + y\n",
                         "ATOL = 0.0\n\n\ndef _sum(x, y):\n    return x + y\n\n\n"
                         "def reference_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n"
                         "    return _sum(x, y)\n") \
    .replace("    bench_shapes=[(1 << 24,)],\n", "    bench_shapes=[(1 << 24,)],\n    atol=ATOL,\n")


@pytest.mark.parametrize("old, new, why", [
    (EXAMPLE, EXAMPLE.replace("    return x + y\n", "    return x - y\n", 1),
     "changes reference_add, the spec's reference"),
    (EXAMPLE, EXAMPLE.replace("(4097,)]", "(4096,)]"), "changes add_inputs, the @spec inputs function"),
    (EXAMPLE, EXAMPLE.replace("return (torch.randn(shape", "return (torch.zeros(shape"), "changes add_inputs"),
    (HELPED, HELPED.replace("    return x + y\n", "    return x * 0 + y\n", 1), "changes _sum, read by reference_add"),
    (HELPED, HELPED.replace("ATOL = 0.0", "ATOL = 1e9"), "changes ATOL, the spec's atol"),
])
def test_the_spec_and_everything_it_reads_may_not_change(old, new, why):
    found = refused(new, old=old)
    assert why in found and found.endswith("the spec, its reference, inputs and tolerances may not change"), found
    assert not spec_untouched(old, new)


def test_a_new_module_level_name_may_not_shadow_what_the_spec_reads():
    # reference_add reads `_sum`; a shadowing definition later in the file would replace it at import
    new = HELPED + "\n\ndef _sum_unused():\n    return 0\n"
    assert refusals(HELPED, new, "add_kernel", "optimize") == []
    assert spec_changes(HELPED, HELPED.replace("return _sum(x, y)", "return _sum(y, x)")) == ["reference_add"]


def test_other_functions_may_not_change():
    old = before_reference("def describe(t):\n    return str(t.shape)")
    new = old.replace("return str(t.shape)", "return repr(t)")
    assert refused(new, old=old).startswith(f"line {line_of(new, 'def describe')} changes describe, which is "
                                            "neither the kernel, its launcher")


# -- code that reaches outside itself, wherever it runs ------------------------------------------------------------


@pytest.mark.parametrize("lines, what", [
    ("    torch.allclose = lambda *a, **k: True\n", "assigns torch.allclose in add"),
    ("    t = torch\n    t.randn = torch.zeros\n", "assigns t.randn in add"),
    ("    setattr(torch, 'randn', torch.zeros)\n", "calls setattr in add"),
    ("    caller = sys._getframe(1)\n", "calls sys._getframe in add"),
    ("    import gc\n", "imports gc in add"),
    ("    f = inspect.currentframe()\n", "calls inspect.currentframe in add"),
    ("    global CACHE\n", "declares global CACHE in add"),
    ("    g = add.__globals__\n", "reads add.__globals__ in add"),
    ("    want = globals()['reference_add'](x, y)\n", "calls globals in add"),
    ("    __builtins__['setattr'](torch, 'randn', None)\n", "reads __builtins__ in add"),
    ("    d = getattr(torch, '__dict__')\n", "names '__dict__' in add"),
])
def test_a_launcher_may_not_patch_modules_or_reach_other_frames(lines, what):
    new = in_launcher(lines)
    why = refused(new)
    assert why.startswith(f"line {line_of(new, lines.splitlines()[-1].strip())} {what}"), why
    assert why.endswith("a candidate may not patch modules or reach other frames or globals")


def test_what_the_users_own_code_already_did_is_not_held_against_the_candidate():
    old = in_launcher("    torch.backends.cuda.matmul.allow_tf32 = True\n")
    new = old.replace("num_warps=4", "num_warps=8")
    assert refusals(old, new, "add_kernel", "optimize") == []


# -- ordinary changes are not refused ------------------------------------------------------------------------------


def test_kernel_launcher_helpers_constants_and_plain_imports_are_allowed():
    new = EXAMPLE.replace("num_warps=4", "num_warps=NUM_WARPS").replace(
        "import triton.language as tl\n", "import triton.language as tl\nimport math\nimport numpy as np\n").replace(
        REFERENCE, "NUM_WARPS = 8\nBLOCK: tl.constexpr = tl.constexpr(2048)\n\n\n@triton.jit\ndef _twice(v):\n"
        "    return v * 2\n\n\ndef grid_of(n, block):\n    return (triton.cdiv(n, block),)\n\n\n" + REFERENCE)
    new = new.replace("x + y, mask", "_twice(x) - x + y, mask").replace("    x, y = x.contiguous()",
                                                                          "    out_rows = []\n    x, y = x.contiguous()")
    assert refusals(EXAMPLE, new, "add_kernel", "optimize") == []


def test_autotune_configs_and_the_launchers_helpers_may_change():
    matmul = (REPO / "examples" / "matmul_autotune.py").read_text()
    new = matmul.replace("num_warps=2, num_stages=5", "num_warps=4, num_stages=4")
    assert refusals(matmul, new, "matmul_kernel", "optimize") == []
    softmax = (REPO / "examples" / "fused_softmax.py").read_text()
    new = softmax.replace("    if block_size >= 2048:", "    if block_size >= 4096:")  # _num_warps_for, a heuristic
    assert refusals(softmax, new, "softmax_kernel", "optimize") == []


def test_a_candidate_that_repeats_the_file_changes_nothing():
    for name in ("vector_add.py", "matmul_autotune.py", "fused_softmax.py", "layernorm.py", "nki_matmul.py"):
        text = (REPO / "examples" / name).read_text()
        assert refusals(text, text, "any", "optimize") == []


def test_action_specific_additions():
    port = EXAMPLE.replace("import triton.language as tl\n", "import triton.language as tl\nimport nki\n"
                           "import nki.language as nl\n").replace(
        REFERENCE, "@nki.jit\ndef add_kernel_nki(a, b):\n    return nl.add(a, b)\n\n\n" + REFERENCE)
    assert refusals(EXAMPLE, port, "add_kernel", "port") == []
    assert "imports nki" in refused(port, "optimize")


def test_splice_keeps_statements_that_define_nothing_so_that_they_are_refused():
    code = "import torch\n\ntorch.randn = torch.zeros\n\n\nif __name__ == '__main__':\n    print(1)\n"
    new, _ = splice(EXAMPLE, code, protected=set())
    assert "torch.randn = torch.zeros" in new and "__main__':\n    print(1)" not in new
    assert "assigns torch.randn at module level" in refused(new)


# -- Write a spec: a reference that runs the kernel certifies nothing ---------------------------------------------

WITHOUT_SPEC = EXAMPLE[:EXAMPLE.index("def reference_add(")]
SPEC = ("from kernel_lsp.spec import spec\n\n\n{helpers}\n\n\n"
        "@spec(kernel=add_kernel, launcher=add, reference={reference}, shapes=[(5,)], dtypes=['float32'])\n"
        "def add_spec_inputs(shape, dtype, device):\n    return (torch.randn(shape), torch.randn(shape))\n")


def with_spec(reference: str, helpers: str = "") -> str:
    return WITHOUT_SPEC + SPEC.format(reference=reference, helpers=helpers or "X = 0")


CERTIFY = "a kernel cannot certify itself; write the reference in plain PyTorch"


@pytest.mark.parametrize("reference, helpers, why", [
    ("ref", ("def ref(x, y):\n    out = torch.empty_like(x)\n    add_kernel[(1,)](x, y, out, x.numel(), "
             "BLOCK_SIZE=1024)\n    return out"), "the reference calls add_kernel (ref -> add_kernel)"),
    ("ref", "def ref(x, y):\n    return add(x, y)", "the reference calls add, which launches add_kernel (ref -> add)"),
    ("add", "", "the reference calls add_kernel (add -> add_kernel)"),
    ("lambda x, y: add(x, y)", "", "the reference calls add, which launches add_kernel"),
    ("ref", "def _inner(x, y):\n    return add(x, y) + 0\n\n\ndef ref(x, y):\n    return _inner(x, y)",
     "the reference calls add, which launches add_kernel (ref -> _inner -> add)"),
    ("ref", "def ref(x, y):\n    return globals()['ad' + 'd'](x, y)", "the reference calls globals"),
    ("ref", "import vector_add\n\n\ndef ref(x, y):\n    return vector_add.add(x, y)", None),
    ("ref", "def ref(x, y):\n    import vector_add\n    return vector_add.add(x, y)",
     "the reference imports vector_add"),
    ("ref", "def ref(x, y):\n    f = 'add'\n    return x + y", "the reference names 'add' in a string"),
])
def test_a_reference_that_calls_the_kernel_or_its_launcher_is_refused(reference, helpers, why):
    text = with_spec(reference, helpers)
    found = tautology(text, "add_kernel")
    if why is None:  # an import of the user's own module is refused as an import instead
        assert "imports vector_add" in refused(text, "spec", old=WITHOUT_SPEC)
        return
    assert found is not None and found.startswith(why) and found.endswith(CERTIFY), found


def test_a_plain_pytorch_reference_is_accepted():
    text = with_spec("ref", "def _plus(x, y):\n    return torch.add(x, y)\n\n\ndef ref(x, y):\n    return _plus(x, y)")
    assert tautology(text, "add_kernel") is None
    assert refusals(WITHOUT_SPEC, text, "add_kernel", "spec") == []
    assert tautology(with_spec("lambda x, y: x + y"), "add_kernel") is None


# -- labels: one function, so the table, the summary and the count agree ----------------------------------------


def test_labels_come_from_the_verification_facts():
    assert status_of(False, "mismatch", ran=False) == "mismatch"
    assert status_of(True, "", ran=False) == UNVERIFIED
    assert status_of(True, "", ran=True) == CORRECT
    assert status_of(True, "", ran=True, faster=False) == NOT_SHOWN_FASTER
    assert status_of(True, "", ran=False, faster=True) == UNVERIFIED  # speed never makes up for not running it
    assert is_verified(CORRECT) and is_verified(NOT_SHOWN_FASTER) and not is_verified(UNVERIFIED)
    records = [CandidateRecord(1, 1, "NKI rules", "NK001"), CandidateRecord(1, 2, UNVERIFIED, "not simulated")]
    assert tally(records) == "2 attempts, 0 verified, 1 unverified"
    assert tally([CandidateRecord(1, 1, CORRECT, "")]) == "1 attempt, 1 verified"


def test_speed_evidence_needs_both_timings_at_one_shape_and_device():
    key = ((1 << 24,), "float32", "H200")
    before, after = Timing(100.0, "≈100 µs H200 est.", False, "H200", key), Timing(50.0, "≈50 µs H200 est.", False,
                                                                                  "H200", key)
    assert speed_evidence(before, "", after, "") == (True, "≈100 µs -> ≈50 µs H200 est. (-50%)")
    assert speed_evidence(after, "", before, "") == (False, "≈50 µs -> ≈100 µs H200 est. (+100%)")
    assert speed_evidence(before, "", None, "the worker crashed") == (False, "timing failed: the worker crashed")
    assert speed_evidence(None, "no GPU", after, "")[1] == "the current kernel could not be timed: no GPU"
    other = Timing(50.0, "50.0 µs on NVIDIA H200", True, "NVIDIA H200", ((1 << 24,), "float32", "NVIDIA H200"))
    assert speed_evidence(before, "", other, "")[0] is False


def test_rebinding_an_import_the_inputs_use_is_a_spec_change():
    assert "rebinds torch, read by add_inputs" in refused(before_reference("torch = None"))
