"""`kernel-lsp ir-diff`: one kernel compiled two ways (for sm_90, without a GPU) and its IR compared."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .slow import scaled

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "vector_add.py"
TARGET = "vector_add.py::add_kernel"
A, B = "BLOCK_SIZE=256,num_warps=4", "BLOCK_SIZE=1024,num_warps=8"


def ir_diff(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernel_lsp", "ir-diff", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=scaled(200))


@pytest.fixture
def work(tmp_path) -> Path:
    shutil.copy(EXAMPLE, tmp_path / "vector_add.py")
    return tmp_path


def _mapped(path: Path, needle: str) -> set[int]:
    """The source lines (0-based) that the IR lines containing `needle` come from, by the file's line mapping."""
    ir = path.read_text().splitlines()
    mapping = json.loads(Path(f"{path}.lines.json").read_text())
    assert mapping["source"] == str(path.parents[2] / "vector_add.py")
    return {u for i, line in enumerate(ir) if needle in line for u in mapping["lines"].get(str(i), [])}


@pytest.mark.timeout(600)
def test_two_configurations_side_by_side(work):
    proc = ir_diff(work, TARGET, "--stage", "ptx", "--a", A, "--b", B)
    assert proc.returncode == 0, proc.stderr
    diff = proc.stdout.splitlines()
    assert diff[0].startswith("--- ") and "BLOCK_SIZE=256, num_warps=4 (triton " in diff[0]
    assert diff[1].startswith("+++ ") and "BLOCK_SIZE=1024, num_warps=8 (triton " in diff[1]
    # 4 warps are 128 threads, 8 are 256: the launch bound differs, and the diff shows it.
    assert "-.reqntid 128" in diff and "+.reqntid 256" in diff
    files = sorted((work / ".kernel-lsp" / "ir").glob("*.ptx"))
    assert [f.name.split(".")[2][0] for f in files] == ["a", "b"]
    assert diff[0].split("\t")[0] == f"--- {files[0]}" and diff[1].split("\t")[0] == f"+++ {files[1]}"
    load_line = EXAMPLE.read_text().splitlines().index("    x = tl.load(x_ptr + offsets, mask=in_bounds)")
    for f in files:
        text = f.read_text()
        assert "vector_add.py" in text and "kernel-lsp-" not in text  # the user's file, not the compiled module
        assert load_line in _mapped(f, "ld.global")  # Show IR's mapping: the loads come from the tl.load line


@pytest.mark.timeout(600)
def test_json_and_another_interpreter(work):
    """Side B compiled by another interpreter (here: this one, started apart) says which, and its triton."""
    proc = ir_diff(work, TARGET, "--a", A, "--b", A, "--b-python", sys.executable, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["stage"] == "ttgir" and doc["target"] == "sm_90" and doc["identical"] is True
    import triton

    for side in ("a", "b"):
        got = doc[side]
        assert got["tritonVersion"] == triton.__version__ and got["python"] == sys.executable
        assert got["constexprs"] == {"BLOCK_SIZE": 256} and got["numWarps"] == 4
        assert Path(got["path"]).is_file() and Path(got["path"]).suffix == ".ttgir"
    assert doc["a"]["path"] != doc["b"]["path"]


@pytest.mark.skipif(not os.environ.get("KERNEL_LSP_OTHER_TRITON_PYTHON"),
                    reason="set KERNEL_LSP_OTHER_TRITON_PYTHON to a Python with another triton version")
@pytest.mark.timeout(600)
def test_two_triton_versions(work):
    other = os.environ["KERNEL_LSP_OTHER_TRITON_PYTHON"]
    proc = ir_diff(work, TARGET, "--a", A, "--b", A, "--b-python", other, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["a"]["tritonVersion"] != doc["b"]["tritonVersion"] and doc["b"]["python"] == other
    assert doc["b"]["tritonVersion"] in Path(doc["b"]["path"]).name


@pytest.mark.parametrize(("args", "code", "message"), [
    (("--a", "BLOCK_SIZE 256"), 2, "expected NAME=VALUE"),
    (("--b", "BLOCKSIZE=256"), 1, "B: add_kernel has no parameter BLOCKSIZE"),
    (("--b", "num_warps=(4, 8)"), 1, "B: num_warps: expected an integer, got (4, 8)"),
    (("--b", "num_stages=2.5"), 1, "B: num_stages: expected an integer, got 2.5"),
    (("--b-python", "/nonexistent/python"), 1, "B: no Python interpreter at /nonexistent/python"),
    (("--target", "sm_999"), 2, "sm_999"),
])
def test_bad_input_says_what_is_wrong(work, args, code, message):
    proc = ir_diff(work, TARGET, "--a", A, *args)
    assert proc.returncode == code and message in proc.stderr, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr


def test_unknown_kernel_lists_the_files_kernels(work):
    proc = ir_diff(work, "vector_add.py::nope")
    assert proc.returncode == 2 and "no Triton kernel nope" in proc.stderr and "add_kernel" in proc.stderr
