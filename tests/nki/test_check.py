"""`kernel-lsp check --run-checks` on a file whose specs name NKI kernels: run in the NKI model, with its label.
One file holds every variant (one checking process for all of them: CI has two cores)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SPEC_FILE = Path(__file__).parent / "specs" / "scale_rows_nki.py"
REPO = Path(__file__).resolve().parents[2]
BASE = SPEC_FILE.read_text()


def variant(name: str, old: str, new: str) -> str:
    """The spec file's kernel and spec under new names, with one change in the kernel."""
    kernel = BASE[BASE.index("@nki.jit"):BASE.index("def scale_reference")]
    spec_block = BASE[BASE.index("@spec("):]
    assert old in kernel
    return (kernel.replace(old, new).replace("scale_rows", name) + "\n" +
            spec_block.replace("scale_rows", name).replace("scale_inputs", f"{name}_inputs"))


EXTRA = "\n\n" + "\n\n".join([
    variant("wrong_scale", "operand0=3.0", "operand0=2.0"),
    variant("too_tall", "rows = min(128, n - t * 128)", "rows = min(256, n - t * 128)"),
    variant("uses_dropout", "nisa.tensor_scalar(dst=res,", "nisa.dropout(dst=res,"),
]) + '''

def flat(x):
    return scale_rows(x).reshape(-1)


def numpy_instead(x):
    scale_rows(x)
    return x * 3  # computed by the launcher, not by the kernel


@spec(kernel=scale_rows, launcher=flat, reference=lambda x: (x * 3).reshape(-1), shapes=[(5, 7)])
def flat_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)


@spec(kernel=scale_rows, launcher=numpy_instead, reference=scale_reference, shapes=[(5, 7)])
def numpy_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)


@nki.jit
def host_scale(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, x.data * 3)  # NumPy on the host, inside the kernel
    return out


@spec(kernel=host_scale, launcher=host_scale, reference=scale_reference, shapes=[(5, 7)])
def host_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)
'''
TEXT = BASE + EXTRA
LINES = TEXT.splitlines()


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("nki") / "kernels_nki.py"
    path.write_text(TEXT)
    done = subprocess.run([sys.executable, "-m", "kernel_lsp.cli", "check", "--run-checks", "--format", "json",
                           str(path)], check=False, capture_output=True, text=True, timeout=600, cwd=REPO)
    return {**json.loads(done.stdout), "exit_code": done.returncode}


@pytest.fixture(scope="module")
def verdicts(document) -> dict[str, dict]:
    return {v["spec"]: v for v in document["checks"]}


def test_a_correct_nki_kernel_gets_a_trainium2_estimate_from_the_models_counts(document):
    [first, *_] = [e for e in document["latency"] if e["kernel"] == "scale_rows" and e["spec"] == "scale_inputs"]
    assert first["device"] == "Trainium2" and first["source"] == "estimate", first
    assert first["label"].startswith("≈") and first["label"].endswith(" Trainium2 est."), first
    assert first["bound"] in ("DMA", "Vector Engine") and LINES[first["line"] - 1] == "def scale_rows(x):"
    assert any("one NeuronCore" in n for n in first["notes"]), first  # what the estimate assumes, said with it
    # Only kernels found correct are timed: the wrong one gets no figure.
    assert not [e for e in document["latency"] if e["kernel"] == "wrong_scale"]


def test_a_right_nki_kernel_is_correct_in_the_model(verdicts):
    v = verdicts["scale_inputs"]
    assert v["status"] == "correct" and v["message"] == "correct on 8 cases (kernel-lsp NKI model)", v


def test_a_wrong_nki_kernel_is_a_mismatch_at_the_store(verdicts):
    v = verdicts["wrong_scale_inputs"]
    assert v["status"] == "mismatch" and "(kernel-lsp NKI model)" in v["message"], v
    assert LINES[v["line"] - 1].strip().startswith("nisa.dma_copy(dst=out[")  # the JSON's lines are 1-based


def test_a_rule_broken_while_running_is_an_error_at_its_line(verdicts, document):
    v = verdicts["too_tall_inputs"]
    assert v["status"] == "rule-broken" and "[NK001]" in v["message"], v
    assert LINES[v["line"] - 1].strip().startswith("tile = nl.ndarray((rows, d)")
    # docs/specs.md: a broken NeuronCore rule is an error (KV008), so CI fails on it at the default --fail-on.
    [problem] = [p for p in document["problems"] if p["code"] == "KV008" and p["line"] == v["line"]]
    assert problem["severity"] == "error", problem
    assert document["exit_code"] == 1


def test_an_nki_call_the_model_lacks_is_not_checked_not_failed(verdicts):
    v = verdicts["uses_dropout_inputs"]
    assert v["status"] == "not-checked", v
    assert "the NKI model does not implement nki.isa.dropout" in v["message"]


def test_a_launcher_may_return_a_view_of_the_kernels_output_but_not_its_own_array(verdicts):
    assert verdicts["flat_inputs"]["status"] == "correct", verdicts["flat_inputs"]
    assert verdicts["numpy_inputs"]["status"] == "rejected"
    assert "not an output of the NKI kernel" in verdicts["numpy_inputs"]["message"]


def test_a_kernel_that_computes_on_the_host_and_stores_it_is_refused(verdicts):
    v = verdicts["host_inputs"]
    assert v["status"] != "correct" and "computed on the host inside the kernel" in v["message"], v


def test_nki_cases_draw_fresh_secret_seeds(verdicts):
    seeds = [c["seed"] for c in verdicts["scale_inputs"]["cases"]]
    assert len(set(seeds)) == len(seeds) and max(seeds) > 2**32
