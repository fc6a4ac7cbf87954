"""The Python API without a server: trust, input checks, secrets kept out of results, and plain data out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernel_lsp import api
from kernel_lsp.api import ApiError, NotTrustedError, Workspace
from kernel_lsp.engine import trust

from .conftest import EXAMPLES


@pytest.fixture(autouse=True)
def own_trust_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trust.TRUST_FILE_ENV, str(tmp_path / "trusted.json"))


def test_version_is_semantic():
    assert re.fullmatch(r"\d+\.\d+\.\d+", api.API_VERSION)


def test_results_are_plain_json_data(workspace: Path):
    with Workspace(workspace) as ws:
        found = ws.analyze(path="buggy_kernels.py")
    data = json.loads(json.dumps(found.to_dict()))
    assert data["path"] == str(workspace / "buggy_kernels.py")
    assert any(f["code"] == "TR002" and f["line"] >= 1 for f in data["findings"])
    assert {k["name"] for k in data["kernels"]} >= {"scale_kernel"}


def test_bad_text_and_paths_are_refused_with_their_reason(workspace: Path):
    with Workspace(workspace) as ws:
        with pytest.raises(ApiError, match="not valid UTF-8"):
            ws.analyze(source="x = '\udcff'\n")
        with pytest.raises(ApiError, match="outside the workspace"):
            ws.analyze(path=str(EXAMPLES / "vector_add.py"))
        with pytest.raises(ApiError, match="limit is"):
            ws.analyze(source="#" * (3 * 2**20))
        with pytest.raises(ApiError, match="targets"):
            ws.compile(path="vector_add.py", targets=["sm_7"])
        with pytest.raises(ApiError, match="nothing to propose"):
            ws.propose_edit("vector_add.py", (workspace / "vector_add.py").read_text(encoding="utf-8"))
    with Workspace(workspace, allow_run=True) as ws, pytest.raises(ApiError, match="used twice"):
        ws.compare([{"name": "a", "source": "x = 1"}, {"name": "a", "source": "x = 2"}])


def test_code_runs_only_when_trusted_or_allowed(workspace: Path):
    marker = workspace / "ran.txt"
    source = f"open({str(marker)!r}, 'w').write('ran')\n"
    with Workspace(workspace) as ws:
        assert not ws.may_run
        with pytest.raises(NotTrustedError, match="nothing was run"):
            ws.check(source=source)
        with pytest.raises(NotTrustedError):
            ws.measure(source=source)
        assert not marker.exists()
        trust.trust(workspace)
        assert ws.may_run
        result = ws.check(source=source)  # runs the module level: no spec, so no verdict
    assert marker.read_text() == "ran"
    assert not result.ok and result.verdicts == [] and "no spec" in " ".join(result.errors)


def test_secrets_in_the_environment_never_reach_a_result(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("torch")
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("SOME_SERVICE_API_KEY", secret)
    leaky = (workspace / "vector_add.py").read_text(encoding="utf-8").replace(
        "    return x + y\n", "    import os\n    raise RuntimeError('key is ' + os.environ.get('SOME_SERVICE_API_KEY', "
        "'absent') + ', as text ' + " + repr(secret) + ")\n")
    with Workspace(workspace, allow_run=True) as ws:
        result = ws.check(source=leaky)
    text = json.dumps(result.to_dict())
    # Not in the checking process's environment, and blanked where the code knew it some other way.
    assert "key is absent, as text <redacted>" in text
    assert secret not in text


def test_propose_edit_never_writes_the_file(workspace: Path):
    original = (workspace / "vector_add.py").read_text(encoding="utf-8")
    new = original.replace("# 64-bit block start", "# 64-bit start of the block")
    with Workspace(workspace) as ws:
        proposal = ws.propose_edit("vector_add.py", new)
    assert (workspace / "vector_add.py").read_text(encoding="utf-8") == original
    written = Path(proposal.proposal_path).read_text(encoding="utf-8")
    assert "NOT verified" in written and "-    # 64-bit block start" in written
    assert "+    # 64-bit start of the block" in written and proposal.diff in written


def test_the_api_process_imports_no_heavy_or_protocol_library(workspace: Path):
    """Compiles and checks run in child processes: the caller (and the MCP server) never imports torch or triton,
    and the API knows nothing of the language server protocol."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from kernel_lsp.api import Workspace\n"
        "if __name__ == '__main__':\n"
        f"    with Workspace({str(workspace)!r}) as ws:\n"
        "        ws.analyze(path='vector_add.py')\n"
        "        ws.compile(path='vector_add.py')\n"
        "    print(sorted(m for m in ('torch', 'triton', 'anthropic', 'lsprotocol', 'pygls') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_first_example_of_the_api_documentation_runs(tmp_path: Path):
    """docs/api.md's first example, run as written from the repository root (it analyses and compiles only)."""
    import subprocess
    import sys

    pytest.importorskip("triton")
    repo = Path(__file__).resolve().parents[2]
    doc = (repo / "docs" / "api.md").read_text(encoding="utf-8")
    example = doc.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(example, encoding="utf-8")  # as written: its own guard keeps the compile workers quiet
    done = subprocess.run([sys.executable, str(script)], cwd=repo, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert "TR002 warning" in done.stdout
    assert len([x for x in lines if x.startswith("add_kernel sm_90")]) == 1, done.stdout  # printed once
    assert re.search(r"^add_kernel sm_90 launch at line 43 \d+ 0 0$", done.stdout, re.MULTILINE), done.stdout
    assert "add_kernel gfx942" in done.stdout


def test_analyze_again_sees_the_file_as_it_is_now(workspace: Path):
    """An unchanged file is answered from the last analysis; an edit between two calls is always seen."""
    path = workspace / "buggy_kernels.py"
    text = path.read_text(encoding="utf-8")
    with Workspace(workspace) as ws:
        first = ws.analyze(path="buggy_kernels.py")
        first.findings.clear()  # a caller's changes to its result do not reach the next answer
        again = ws.analyze(path="buggy_kernels.py")
        assert again.findings and again == ws.analyze(path="buggy_kernels.py")
        path.write_text(text + "\nimport triton\n\n@triton.jit\ndef late_kernel(x_ptr):\n    undefined_name\n",
                        encoding="utf-8")
        edited = ws.analyze(path="buggy_kernels.py")
        assert "late_kernel" in {k.name for k in edited.kernels}
        assert "late_kernel" not in {k.name for k in again.kernels}


def test_a_measured_latency_carries_its_roofline_fraction(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    """On a GPU, `measure` sets the measured time against the H200's roofs for the work counted under the
    interpreter. The GPU timing is played back here (no GPU on CI); the work counting is real."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from kernel_lsp.engine import gpu, latency

    def measured_on_h200(path, source, kernels=None, root=None, **kw):
        # vector_add's bench shape (2**24 fp32 elements: 201 MB moved) at 46.0 µs: 4.38 TB/s.
        point = {"kernel": "add_kernel", "spec": "add_inputs", "shape": [1 << 24], "dtype": "float32",
                 "device_name": "NVIDIA H200",
                 "kernel_timing": {"median_us": 46.0, "q1_us": 45.8, "q3_us": 46.3, "min_us": 45.5,
                                   "repetitions": 50}}
        return latency.LatencyReport(path, [latency.measured_entry(point, None)])

    monkeypatch.setattr(gpu, "gpu_present", lambda: True)
    monkeypatch.setattr(latency, "measure_file", measured_on_h200)
    with Workspace(workspace, allow_run=True) as ws:
        result = ws.measure(path="vector_add.py")
    assert result.source == "measured" and not result.errors
    (entry,) = result.entries
    assert entry.source == "measured" and entry.us == 46.0
    assert entry.spec == "add_inputs" and entry.iqr_us == pytest.approx(0.5) and entry.notes == []
    assert entry.change_vs_previous is None and entry.engine_us is None
    assert entry.achieved_tbps == pytest.approx(3 * 4 * (1 << 24) / 46.0e-6 / 1e12, rel=0.01)
    assert entry.peak_tbps == pytest.approx(4.8)
    assert entry.roofline_us == pytest.approx(3 * 4 * (1 << 24) / 4.8e12 * 1e6, rel=0.01)
    assert entry.fraction_of_roofline == pytest.approx(entry.roofline_us / 46.0)
    assert 0.85 < entry.fraction_of_roofline < 0.95
    assert entry.achieved_tflops == pytest.approx((1 << 24) / 46.0e-6 / 1e12, rel=0.01)  # one add per element
    # The bench shape was counted at a reduced shape and scaled: the count is labelled an estimate.
    assert entry.work_estimated is True
    assert "reduced shape" in entry.work_note and "an estimate" in entry.work_note


def test_a_measurement_without_counted_work_says_why_it_has_no_fraction(workspace: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    from kernel_lsp.engine import gpu, latency

    def measured_on_unknown_gpu(path, source, kernels=None, root=None, **kw):
        point = {"kernel": "add_kernel", "spec": "add_inputs", "shape": [1 << 24], "dtype": "float32",
                 "device_name": "Some Accelerator 9000",
                 "kernel_timing": {"median_us": 46.0, "q1_us": 45.8, "q3_us": 46.3, "min_us": 45.5,
                                   "repetitions": 50}}
        return latency.LatencyReport(path, [latency.measured_entry(point, None)])

    def no_counting(*args, **kw):
        raise latency.WorkerError("the interpreter is not installed")

    monkeypatch.setattr(gpu, "gpu_present", lambda: True)
    monkeypatch.setattr(latency, "measure_file", measured_on_unknown_gpu)
    monkeypatch.setattr(latency, "count_work", no_counting)
    with Workspace(workspace, allow_run=True) as ws:
        (entry,) = ws.measure(path="vector_add.py").entries
    assert entry.us == 46.0 and entry.fraction_of_roofline is None and entry.achieved_tbps is None
    assert entry.work_note == "work not counted, so no roofline fraction: the interpreter is not installed"


# --- what the front ends print, as typed fields ----------------------------------------------------------------


def _with_nki_example(workspace: Path) -> None:
    (workspace / "nki_matmul.py").write_text((EXAMPLES / "nki_matmul.py").read_text(encoding="utf-8"),
                                             encoding="utf-8")


def test_kernels_and_findings_carry_what_the_reports_print(workspace: Path):
    _with_nki_example(workspace)
    with Workspace(workspace) as ws:
        buggy = ws.analyze(path="buggy_kernels.py")
        nki = ws.analyze(path="nki_matmul.py")
    scale = next(k for k in buggy.kernels if k.name == "scale_kernel")
    assert scale.language == "triton" and scale.decorators == ["jit"] and scale.api is None
    assert scale.constexprs == ["BLOCK_SIZE"] and "BLOCK_SIZE" in scale.params
    (matmul,) = nki.kernels
    assert matmul.language == "nki" and matmul.api == "current" and matmul.decorators == ["jit"]
    # A launch problem points at the kernel it concerns, in the file that defines it.
    tr011 = next(f for f in buggy.findings if f.code == "TR011")
    (kernel_def,) = tr011.related
    assert kernel_def.path == str(workspace / "buggy_kernels.py") and kernel_def.message == "kernel defined here"
    assert (kernel_def.line, kernel_def.column) == (scale.line, 5) and kernel_def.end_line == scale.line
    assert buggy.to_dict()["findings"][buggy.findings.index(tr011)]["related"][0]["line"] == scale.line


def test_check_files_counts_and_history(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    """The batch's counts, and with `history=True` each checked kernel's timing history (figures without a device
    or a number are left out), with secrets blanked as everywhere else."""
    from kernel_lsp.engine.latency import history_name, record_history

    _with_nki_example(workspace)
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("SOME_SERVICE_TOKEN", secret)
    path = str(workspace / "vector_add.py")
    record_history(workspace, history_name(path, "add_kernel"),
                   {"shape": [98432], "dtype": "float32", "device": "NVIDIA H200", "us": 41.5})
    record_history(workspace, history_name(path, "add_kernel"),
                   {"shape": [98432], "dtype": "float32", "device": "H200", "us": 3.1, "source": "estimate"})
    record_history(workspace, history_name(path, "add_kernel"), {"shape": [98432], "dtype": "float32", "us": 2.0})
    record_history(workspace, history_name(path, "add_kernel"),
                   {"shape": [98432], "dtype": "float32", "device": f"GPU {secret}", "us": 40.0})
    with Workspace(workspace) as ws:
        plain = ws.check_files(["vector_add.py", "nki_matmul.py"])
        found = ws.check_files(["vector_add.py", "nki_matmul.py"], history=True)
    assert plain.history == []
    assert found.stats.files == 2 and found.stats.kernel_files == 2
    assert (found.stats.triton_kernels, found.stats.nki_kernels) == (1, 1) and found.stats.launch_sites >= 1
    measured, estimated, hidden = found.history
    assert (measured.path, measured.kernel, measured.source, measured.device) == (path, "add_kernel", "measured",
                                                                                  "NVIDIA H200")
    assert measured.shape == [98432] and measured.us == 41.5 and measured.time is not None
    assert (estimated.source, estimated.us) == ("estimate", 3.1)
    assert hidden.device == "GPU <redacted>" and secret not in json.dumps(found.to_dict())


def test_compiled_configs_say_where_and_how_the_kernel_compiled(workspace: Path):
    pytest.importorskip("triton")
    with Workspace(workspace) as ws:
        built = ws.compile(path="vector_add.py", targets=["sm_90"])
        kernel = ws.analyze(path="vector_add.py").kernels[0]
    config = next(c for c in built.configs if c.ok)
    assert config.path == str(workspace / "vector_add.py") and config.line == kernel.line
    assert config.values == "BLOCK_SIZE=1024" and config.error_kind is None and config.uses_tma is False
    assert config.load_widths and config.store_widths and max(config.load_widths) <= 128
    assert config.stack_bytes is not None and config.stack_bytes >= 0


def test_a_cuda_kernel_in_a_batch_has_its_resources(tmp_path: Path):
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    (tmp_path / "saxpy.cu").write_text(
        "// y = a x + y\n__global__ void saxpy(int n, float a, float *x, float *y) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = a * x[i] + y[i];\n}\n",
        encoding="utf-8")
    with Workspace(tmp_path) as ws:
        found = ws.check_files(["saxpy.cu"], targets=["sm_90"])
    (kernel,) = found.cuda
    assert (kernel.path, kernel.name, kernel.line, kernel.target) == (str(tmp_path / "saxpy.cu"), "saxpy", 2, "sm_90")
    assert kernel.registers and kernel.spill_bytes == 0 and kernel.shared_bytes == 0
    assert found.compile_targets == [] and found.compiled == []  # no Triton kernel to compile


def test_a_verdict_carries_its_lines_and_cases(workspace: Path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from kernel_lsp.settings import parse_settings

    settings, _ = parse_settings({"checkDevice": "interpreter"})
    text = (workspace / "vector_add.py").read_text(encoding="utf-8")
    with Workspace(workspace, settings=settings, allow_run=True) as ws:
        checked = ws.check(path="vector_add.py")
        kernel = ws.analyze(path="vector_add.py").kernels[0]
    (verdict,) = checked.verdicts
    assert verdict.ok and verdict.kernel_line == kernel.line
    assert text.splitlines()[verdict.spec_line - 1].lstrip().startswith("def ")
    assert verdict.cases and all(isinstance(c.seed, int) and c.line is None for c in verdict.cases)
    assert all(c.first_index is None for c in verdict.cases if c.ok)


def test_an_nki_estimate_carries_its_counted_work_and_engine_times(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    """Without a GPU, `measure` answers the estimate; an NKI kernel's is the NeuronCore model's, from counters that
    are played back here (the NKI model's run is tested in tests/nki/)."""
    from kernel_lsp.engine import gpu, latency

    counts = {"hbm_read_bytes": 2 * 128 * 512 * 2, "hbm_write_bytes": 128 * 512 * 4, "matmul_flops": 2 * 128**2 * 512,
              "vector_elements": 1000, "scalar_elements": 24, "tensor_columns": {"bf16": 512}, "vector_steps": 8}

    def estimated(path, source, targets, kernels=None, root=None, **kw):
        base = {"kernel": "matmul_kernel", "spec": "matmul_inputs", "shape": (128, 128, 512), "dtype": "bfloat16"}
        return latency.LatencyReport(path, [latency.nki_entry(base, counts, [64, 128, 512])])

    monkeypatch.setattr(gpu, "gpu_present", lambda: False)
    monkeypatch.setattr(latency, "estimate_file", estimated)
    with Workspace(workspace, allow_run=True) as ws:
        result = ws.measure(path="vector_add.py")
    (entry,) = result.entries
    assert result.source == "estimate" and entry.spec == "matmul_inputs" and entry.shape == [128, 128, 512]
    assert entry.dram_bytes == counts["hbm_read_bytes"] + counts["hbm_write_bytes"]
    assert entry.flops == counts["matmul_flops"] + 1000 + 24
    assert set(entry.engine_us) == {"DMA", "Tensor Engine", "Vector Engine", "Scalar Engine"}
    assert entry.us == pytest.approx(max(entry.engine_us.values()))
    assert entry.notes and entry.notes[-1] == "counted at (64, 128, 512) and scaled to the bench shape"
    assert entry.iqr_us is None and entry.change_vs_previous is None
    assert json.loads(json.dumps(result.to_dict()))["entries"][0]["engine_us"] == entry.engine_us
