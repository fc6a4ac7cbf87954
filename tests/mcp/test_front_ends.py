"""The command line uses the Python API for the operations it offers: `kernel-lsp tune` is `Workspace.tune`,
`kernel-lsp check` and `kernel-lsp report` are `Workspace.check_files`, and what the front ends print comes from
the API's typed results only."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernel_lsp import cli
from kernel_lsp.api import BatchResult, TuneResult, TuneRow, Workspace

from .conftest import EXAMPLES, REPO

# The front ends of docs/architecture.md: what they print or answer is the API's promise, not the engine's record.
FRONT_ENDS = ("kernel_lsp/report.py", "kernel_lsp/html_report.py", "kernel_lsp/cli.py", "kernel_lsp/mcp_server.py")
PRINTERS = ("kernel_lsp/report.py", "kernel_lsp/html_report.py")  # they print nothing but a BatchResult


def engine_result_uses(path: Path, printer: bool, root: Path = REPO) -> list[str]:
    """What a front end takes from the engine beyond the API: any engine import in a printer; elsewhere the engine's
    classes (result types and the like: the command line may call engine functions and read constants, for
    trust, watching and availability), and the batch record's module; and every `details` attribute."""
    from tests.test_architecture import imports_of

    found = []
    for module, line in imports_of(path, root):
        if not module.startswith("kernel_lsp.engine"):
            continue
        name = module.rpartition(".")[2]
        is_class = name[:1].isupper() and not name.isupper()
        if printer or is_class or module == "kernel_lsp.engine.batch" or module.startswith("kernel_lsp.engine.batch."):
            found.append(f"{path.name}:{line} imports {module}")
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "details":
            found.append(f"{path.name}:{node.lineno} reads .details")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and any(isinstance(a, ast.Constant) and a.value == "details" for a in node.args)):
            found.append(f"{path.name}:{node.lineno} reads details by name")
    return found


def test_front_ends_print_only_the_api_types():
    found = [use for rel in FRONT_ENDS for use in engine_result_uses(REPO / rel, rel in PRINTERS)]
    assert found == []


def test_the_front_end_check_sees_engine_records(tmp_path: Path):
    """The check above finds each way a front end could reach past the API."""
    (tmp_path / "kernel_lsp").mkdir()
    printer = tmp_path / "kernel_lsp" / "printer.py"
    printer.write_text("from .engine.compile.service import config_text\n"
                       "def show(batch):\n    return batch.details.problems\n", encoding="utf-8")
    other = tmp_path / "kernel_lsp" / "other.py"
    other.write_text("from .engine.cuda import CUDA_SUFFIXES, CudaKernel\nfrom .engine import batch\n"
                     "def show(batch):\n    return getattr(batch, 'details')\n", encoding="utf-8")
    assert engine_result_uses(printer, True, tmp_path) == [
        "printer.py:1 imports kernel_lsp.engine.compile.service",
        "printer.py:1 imports kernel_lsp.engine.compile.service.config_text", "printer.py:3 reads .details"]
    assert engine_result_uses(other, False, tmp_path) == ["other.py:1 imports kernel_lsp.engine.cuda.CudaKernel", "other.py:2 imports kernel_lsp.engine.batch",
                    "other.py:4 reads details by name"]


def test_tune_command_prints_what_the_api_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture):
    (tmp_path / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text(encoding="utf-8"),
                                            encoding="utf-8")
    calls = []

    def tune(self: Workspace, path=None, source=None, **kwargs) -> TuneResult:
        calls.append((self.root, self.allow_run, path, source is not None, kwargs))
        row = TuneRow("BLOCK_SIZE=4096, num_warps=8", {"BLOCK_SIZE": 4096, "num_warps": 8}, 40.5, None,
                      None, "estimated")
        return TuneResult("add_kernel", "H100", "estimated", "BLOCK_SIZE=1024", row.config, 45.0, 40.5, 45.0 / 40.5,
                          None, None, [row], [], [], dict(row.overrides), "estimated; not measured", 12, 0.0, [],
                          False)

    monkeypatch.setattr(Workspace, "tune", tune)
    monkeypatch.chdir(tmp_path)
    code = cli.main(["tune", "vector_add.py::add_kernel", "--device", "H100", "--estimate-only", "--no-verify",
                     "--format", "json", "-q", "--allow-run"])
    assert code == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["winner"] == {"BLOCK_SIZE": 4096, "num_warps": 8} and answer["device"] == "H100"
    assert answer["table"][0]["estimated_us"] == 40.5 and answer["space_size"] == 12
    ((root, allow_run, path, with_source, kwargs),) = calls
    assert root == tmp_path.resolve() and allow_run  # --allow-run is the consent to run the file (or its trust)
    assert path == str(tmp_path / "vector_add.py") and with_source
    assert kwargs["kernel"] == "add_kernel" and kwargs["target"] == "H100"
    assert kwargs["measure"] is False and kwargs["verify"] is False and kwargs["cache"] is True


def _measured_on_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's batch check as on a machine with an H200: vector_add timed at its bench shape (2**24 fp32
    elements, 201 MB moved) in 46.0 µs. The timing is played back (no GPU on CI); the work counting the roofline
    fraction comes from is real, and is the API's, not the engine's."""
    from kernel_lsp.engine import batch, latency

    engine_check_paths = batch.check_paths

    def check_paths(paths, settings, *args, **kwargs):
        record = engine_check_paths(paths, settings, *args, **kwargs)
        (path,) = [p for p in record.problems if p.endswith("vector_add.py")]
        point = {"kernel": "add_kernel", "spec": "add_inputs", "shape": [1 << 24], "dtype": "float32",
                 "device_name": "NVIDIA H200",
                 "kernel_timing": {"median_us": 46.0, "q1_us": 45.8, "q3_us": 46.3, "min_us": 45.5,
                                   "repetitions": 50}}
        record.latency.append(latency.LatencyReport(path, [latency.measured_entry(point, None)]))
        record.latency_source = "measured"
        return record

    monkeypatch.setattr(batch, "check_paths", check_paths)


def test_check_command_is_the_api_batch_and_shows_a_measurements_roofline_fraction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    (tmp_path / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text(encoding="utf-8"),
                                            encoding="utf-8")
    _measured_on_h200(monkeypatch)
    calls = []
    api_check_files = Workspace.check_files

    def check_files(self: Workspace, paths, **kwargs) -> BatchResult:
        calls.append((self.root, list(paths), kwargs))
        return api_check_files(self, paths, **kwargs)

    monkeypatch.setattr(Workspace, "check_files", check_files)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "vector_add.py", "-q"]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if "46 µs on NVIDIA H200" in x)
    # 201 MB at the H200's 4.8 TB/s take 41.9 µs: 91% of the measured 46.0 µs. vector_add's bench shape is
    # counted at a reduced shape and scaled, so the count is said to be an estimate.
    assert "91% of roofline (work count estimated)" in line
    assert cli.main(["check", "vector_add.py", "-q", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (entry,) = doc["latency"]
    assert entry["source"] == "measured" and entry["fractionOfRoofline"] == pytest.approx(0.91, abs=0.01)
    assert any("reduced shape" in n and "an estimate" in n for n in entry["notes"])
    ((root, paths, kwargs), _) = calls
    assert root == tmp_path.resolve() and paths == ["vector_add.py"]
    assert kwargs["confined"] is False and kwargs["run_checks"] is False


def test_report_page_is_built_from_the_api_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    pytest.importorskip("plotly")
    from kernel_lsp.engine import compile as compiling

    (tmp_path / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text(encoding="utf-8"),
                                            encoding="utf-8")
    _measured_on_h200(monkeypatch)
    monkeypatch.setattr(compiling, "triton_installed", lambda: False)  # the page without compiling
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "vector_add.py", "--no-checks", "-q", "-o", "page.html"]) == 0
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert "46 µs" in page and "measured; work count estimated" in page and "91%" in page


def test_batch_result_is_plain_data_without_its_engine_record(tmp_path: Path):
    (tmp_path / "buggy_kernels.py").write_text((EXAMPLES / "buggy_kernels.py").read_text(encoding="utf-8"),
                                               encoding="utf-8")
    with Workspace(tmp_path) as ws:
        found = ws.check_files(["buggy_kernels.py", "missing.py"])
        with pytest.raises(Exception, match="outside the workspace"):
            ws.check_files(["/"])
    data = found.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert not hasattr(found, "details") and "details" not in data
    (checked,) = found.files
    assert checked.path == str(tmp_path / "buggy_kernels.py") and found.missing == ["missing.py"]
    assert found.worst == "error" and {f.code for f in checked.findings} >= {"TR001", "TR007", "TR010"}
    assert found.stats.files == 1 and found.stats.triton_kernels == 4 and found.stats.launch_sites == 2
    assert found.compiled == [] and found.compile_targets == [] and found.history == []
