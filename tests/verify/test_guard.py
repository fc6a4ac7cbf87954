"""GPU checks keep the interpreter's bounds guard and race detector: a guard pass on the CPU interpreter first,
then the GPU pass for the specs it did not decide (process._guarded)."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import pytest

from kernel_lsp.engine import gpu
from kernel_lsp.engine.verify import CheckReport, CheckRequest, Verdict, from_json, process, run_checks, to_json

FIXTURES = Path(__file__).parent / "fixtures"
GPU = "NVIDIA H200"
UNFINISHED = "bounds and race guard did not complete on the CPU interpreter: "


def _verdict(spec: str, line: int, status: str, device: str, failed_check: str | None = None,
             duration_s: float = 0.5, message: str | None = None) -> Verdict:
    return Verdict(kernel=f"{spec}_kernel", spec=spec, spec_line=line, kernel_line=0, status=status, device=device,
                   message=message or f"what the {device} said", duration_s=duration_s, failed_check=failed_check)


class FakePasses:
    """Stands in for process._check_once: one canned report per device, and a record of each pass."""

    def __init__(self, interpreter: CheckReport, cuda: CheckReport, cancel: threading.Event | None = None):
        self.reports = {"interpreter": interpreter, "cuda": cuda}
        self.calls: list[tuple[str, list[str]]] = []
        self.cancel = cancel

    def __call__(self, request, cancel=None, skip=None):
        self.calls.append((request.device, list(skip or ())))
        report = self.reports[request.device]
        skipped = set(skip or ())
        if self.cancel is not None:  # cancelled during this pass
            self.cancel.set()
            return CheckReport(report.path, (), ((None, "check cancelled"),))
        return CheckReport(report.path, tuple(v for v in report.verdicts if v.spec not in skipped), report.errors)


def _fake(monkeypatch, interpreter: list[Verdict], cuda: list[Verdict], interpreter_errors=(), cuda_errors=(),
          cancel=None) -> FakePasses:
    fake = FakePasses(CheckReport("k.py", tuple(interpreter), tuple(interpreter_errors)),
                      CheckReport("k.py", tuple(cuda), tuple(cuda_errors)), cancel)
    monkeypatch.setattr(process, "_check_once", fake)
    return fake


def _by_spec(report: CheckReport) -> dict[str, Verdict]:
    return {v.spec: v for v in report.verdicts}


def test_out_of_bounds_found_by_the_guard_wins_and_is_not_run_on_the_gpu(monkeypatch):
    fake = _fake(monkeypatch,
                 interpreter=[_verdict("missing_mask", 10, "out-of-bounds", "CPU interpreter"),
                              _verdict("add", 20, "correct", "CPU interpreter", duration_s=1.5)],
                 cuda=[_verdict("missing_mask", 10, "correct", GPU), _verdict("add", 20, "correct", GPU)])
    report = process.check(CheckRequest("k.py", "", device="cuda"))
    assert fake.calls == [("interpreter", []), ("cuda", ["missing_mask"])]
    assert [v.spec for v in report.verdicts] == ["missing_mask", "add"]
    oob, add = report.verdicts
    assert (oob.status, oob.device) == ("out-of-bounds", "CPU interpreter")
    assert any("not run on the GPU" in n and "guard" in n for n in oob.notes)
    assert (add.status, add.device) == ("correct", GPU)
    assert add.notes == ("bounds and race guard: passed on the CPU interpreter before the GPU run (1.5 s)",)


def test_a_race_or_bounds_failed_check_is_decided_by_the_guard(monkeypatch):
    fake = _fake(monkeypatch,
                 interpreter=[_verdict("race", 5, "rejected", "CPU interpreter", failed_check="race"),
                              _verdict("bounds", 9, "rejected", "CPU interpreter", failed_check="bounds"),
                              _verdict("swallowed", 14, "rejected", "CPU interpreter", failed_check="fallback")],
                 cuda=[_verdict("race", 5, "mismatch", GPU), _verdict("bounds", 9, "correct", GPU),
                       _verdict("swallowed", 14, "rejected", GPU, failed_check="fallback")])
    verdicts = _by_spec(process.check(CheckRequest("k.py", "", device="cuda")))
    assert fake.calls[1] == ("cuda", ["race", "bounds"])
    assert verdicts["race"].device == verdicts["bounds"].device == "CPU interpreter"
    assert verdicts["race"].failed_check == "race" and verdicts["bounds"].failed_check == "bounds"
    # Other honesty checks run on the GPU too: its verdict stands.
    assert verdicts["swallowed"].device == GPU


def test_a_failing_device_assert_is_decided_by_the_guard(monkeypatch):
    # GPU kernels compile tl.device_assert out unless triton's debug mode is on: only the interpreter sees it fail.
    fake = _fake(monkeypatch,
                 interpreter=[_verdict("asserts", 4, "error", "CPU interpreter", failed_check="device-assert",
                                       message="device assertion failed at line 12: AssertionError: n > 0"),
                              _verdict("inputs", 9, "error", "CPU interpreter",
                                       message="the inputs function raised for shape (3,): ValueError")],
                 cuda=[_verdict("asserts", 4, "correct", GPU), _verdict("inputs", 9, "correct", GPU)])
    verdicts = _by_spec(process.check(CheckRequest("k.py", "", device="cuda")))
    assert fake.calls[1] == ("cuda", ["asserts"])
    assert (verdicts["asserts"].status, verdicts["asserts"].device) == ("error", "CPU interpreter")
    assert (verdicts["inputs"].status, verdicts["inputs"].device) == ("correct", GPU)


def test_an_interpreter_mismatch_does_not_replace_the_gpu_verdict(monkeypatch):
    _fake(monkeypatch,
          interpreter=[_verdict("bf16", 3, "mismatch", "CPU interpreter"),
                       _verdict("asm", 8, "timeout", "CPU interpreter",
                                message="timeout: the check did not finish within 60 s and was stopped")],
          cuda=[_verdict("bf16", 3, "correct", GPU), _verdict("asm", 8, "mismatch", GPU)])
    verdicts = _by_spec(process.check(CheckRequest("k.py", "", device="cuda")))
    assert (verdicts["bf16"].status, verdicts["bf16"].device) == ("correct", GPU)
    assert verdicts["bf16"].notes == (UNFINISHED + "mismatch: what the CPU interpreter said",)
    assert (verdicts["asm"].status, verdicts["asm"].device) == ("mismatch", GPU)
    # A message that already starts with its status is not prefixed twice.
    assert verdicts["asm"].notes == (UNFINISHED + "timeout: the check did not finish within 60 s and was stopped",)


def test_the_errors_are_the_gpu_pass_errors_once(monkeypatch):
    imported = (None, "kernel foo has no correctness spec in this file")
    _fake(monkeypatch, interpreter=[], cuda=[_verdict("add", 2, "correct", GPU)],
          interpreter_errors=[imported, (3, "crashed: the checking process exited with code 1")],
          cuda_errors=[imported])
    report = process.check(CheckRequest("k.py", "", device="cuda"))
    assert report.errors == (imported,)
    (add,) = report.verdicts
    # The guard pass never got to the spec: the note says why.
    assert add.notes == (UNFINISHED + "crashed: the checking process exited with code 1",)


def test_an_import_error_of_the_gpu_pass_keeps_only_the_guard_decisions(monkeypatch):
    _fake(monkeypatch,
          interpreter=[_verdict("oob", 2, "out-of-bounds", "CPU interpreter"),
                       _verdict("add", 7, "correct", "CPU interpreter")],
          cuda=[], cuda_errors=[(1, "the module raised on import: CUDA error")])
    report = process.check(CheckRequest("k.py", "", device="cuda"))
    assert [v.spec for v in report.verdicts] == ["oob"]
    assert report.errors == ((1, "the module raised on import: CUDA error"),)


def test_every_spec_decided_by_the_guard_needs_no_gpu_pass(monkeypatch):
    fake = _fake(monkeypatch, interpreter=[_verdict("oob", 2, "out-of-bounds", "CPU interpreter")], cuda=[])
    report = process.check(CheckRequest("k.py", "", device="cuda"))
    assert fake.calls == [("interpreter", [])]
    assert [v.status for v in report.verdicts] == ["out-of-bounds"] and report.errors == ()


def test_cancel_during_the_guard_pass_skips_the_gpu_pass(monkeypatch):
    cancel = threading.Event()
    fake = _fake(monkeypatch, interpreter=[], cuda=[_verdict("add", 2, "correct", GPU)], cancel=cancel)
    report = process.check(CheckRequest("k.py", "", device="cuda"), cancel)
    assert fake.calls == [("interpreter", [])]
    assert report.verdicts == () and report.errors == ((None, "check cancelled"),)


def test_guard_false_runs_one_pass(monkeypatch):
    fake = _fake(monkeypatch, interpreter=[_verdict("oob", 2, "out-of-bounds", "CPU interpreter")],
                 cuda=[_verdict("oob", 2, "correct", GPU)])
    report = process.check(CheckRequest("k.py", "", device="cuda", guard=False))
    assert fake.calls == [("cuda", [])]
    assert [(v.status, v.device, v.notes) for v in report.verdicts] == [("correct", GPU, ())]


@pytest.mark.parametrize(("device", "present", "passes"), [
    ("auto", True, ["interpreter", "auto"]), ("auto", False, ["auto"]), ("cuda", False, ["interpreter", "cuda"]),
    ("interpreter", True, ["interpreter"])])
def test_which_requests_get_the_guard_pass(monkeypatch, device, present, passes):
    monkeypatch.setattr(gpu, "gpu_present", lambda: present)
    fake = _fake(monkeypatch, interpreter=[_verdict("add", 2, "correct", "CPU interpreter")], cuda=[])
    fake.reports["auto"] = fake.reports["cuda"]
    process.check(CheckRequest("k.py", "", device=device))
    assert [d for d, _ in fake.calls] == passes


def test_guard_round_trips_through_json():
    request = CheckRequest("k.py", "src", ("add",), device="cuda", guard=False)
    assert from_json(to_json(request)) == request
    assert from_json('{"kind": "request", "path": "k.py", "source": ""}').guard is True


OFF_BY_ONE_OVER = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    from kernel_lsp.spec import spec

    @triton.jit
    def scale_mask_over(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs <= n  # one past the end
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    def scale(x):
        out = torch.empty_like(x)
        scale_mask_over[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
        return out

    @spec(kernel=scale_mask_over, launcher=scale, reference=lambda x: x * 2, shapes=[(1000,)], seeds=1)
    def mask_over(shape, dtype, device):
        return (torch.randn(shape, dtype=dtype, device=device),)
''')


def test_the_guard_pass_runs_for_real_where_auto_falls_back_to_the_interpreter(monkeypatch):
    """On a machine whose torch sees no GPU, "auto" with a GPU present runs both passes on the interpreter: the
    spec the guard decided is not checked again, and the second pass's own verdicts carry no guard note."""
    monkeypatch.setattr(gpu, "gpu_present", lambda: True)
    path = FIXTURES / "buggy.py"
    report = run_checks(CheckRequest(str(path), path.read_text(), kernels=("scale_no_mask", "mul_kernel"),
                                     device="auto", timeout_s=60))
    verdicts = _by_spec(report)
    assert set(verdicts) == {"missing_mask", "bf16_mul"}, report
    assert verdicts["missing_mask"].status == "out-of-bounds"
    assert any("not run on the GPU" in n for n in verdicts["missing_mask"].notes)
    assert verdicts["bf16_mul"].device == "CPU interpreter"
    assert not any("guard" in n for n in verdicts["bf16_mul"].notes)


@pytest.mark.gpu
def test_out_of_bounds_kernels_are_caught_on_the_gpu(tmp_path):
    path = FIXTURES / "buggy.py"
    report = run_checks(CheckRequest(str(path), path.read_text(), kernels=("scale_no_mask", "scale_off_by_one"),
                                     device="cuda", timeout_s=120))
    verdicts = _by_spec(report)
    # expect: out-of-bounds (missing mask): found by the guard pass, not run on the GPU.
    assert verdicts["missing_mask"].status == "out-of-bounds", verdicts["missing_mask"].message
    assert verdicts["missing_mask"].device == "CPU interpreter"
    assert any("not run on the GPU" in n for n in verdicts["missing_mask"].notes)
    # expect: mismatch tail (mask `offs < n - 1` stops short: in bounds, wrong): the GPU's verdict.
    assert verdicts["off_by_one"].status == "mismatch", verdicts["off_by_one"].message
    assert verdicts["off_by_one"].device != "CPU interpreter"
    assert any(n.startswith(UNFINISHED) for n in verdicts["off_by_one"].notes)

    over = tmp_path / "mask_over.py"  # a mask one past the end: reads out of bounds
    over.write_text(OFF_BY_ONE_OVER)
    (verdict,) = run_checks(CheckRequest(str(over), OFF_BY_ONE_OVER, device="cuda", timeout_s=120)).verdicts
    assert (verdict.status, verdict.device) == ("out-of-bounds", "CPU interpreter"), verdict.message
    assert verdict.line == 11  # 0-based: the line of the masked load

    # Without the guard the GPU pass alone runs (it has no bounds guard of its own).
    (alone,) = run_checks(CheckRequest(str(over), OFF_BY_ONE_OVER, device="cuda", timeout_s=120,
                                       guard=False)).verdicts
    assert alone.device != "CPU interpreter" and not any("guard" in n for n in alone.notes)
