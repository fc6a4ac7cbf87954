"""A port's check against AWS's simulator where it is installed, cross-checked with the kernel-lsp NKI model.
AWS's package cannot be installed here: a stand-in `nki` (tests/nki/standin) goes on the import path instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernel_lsp.engine.assistant import nki_sim

pytest.importorskip("torch")

SPEC_FILE = Path(__file__).parent / "specs" / "scale_rows_nki.py"
STANDIN = Path(__file__).parent / "standin"


def simulate(tmp_path) -> dict:
    return nki_sim.simulate(str(tmp_path / "scale_rows_nki.py"), SPEC_FILE.read_text(), "scale_rows", "scale_rows",
                            str(tmp_path), timeout=300)


def with_standin(monkeypatch, offset: float = 0.0) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(STANDIN), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("STANDIN_NKI_OFFSET", str(offset))


def test_without_the_simulator_the_answer_says_only_the_model_ran(tmp_path):
    answer = simulate(tmp_path)
    assert answer["ok"] and answer["message"] == "correct on 8 cases (kernel-lsp NKI model)", answer
    assert answer["ran"] == ["kernel-lsp NKI model"]
    assert answer["notes"] == ["nki.simulate is not installed here: the port ran in the kernel-lsp NKI model only"]


def test_with_the_simulator_both_run_and_the_simulators_verdict_stands_with_the_models_agreement(tmp_path,
                                                                                                  monkeypatch):
    with_standin(monkeypatch)
    answer = simulate(tmp_path)
    assert answer["ok"] and answer["message"] == "correct on 8 cases (nki.simulate)", answer
    assert answer["ran"] == ["nki.simulate", "kernel-lsp NKI model"]
    assert answer["notes"] == ["cross-checked: the kernel-lsp NKI model agrees (correct on 8 cases (kernel-lsp NKI "
                               "model))"]


def test_a_disagreement_is_a_tool_problem_at_information_level_naming_both_results(tmp_path, monkeypatch):
    with_standin(monkeypatch, offset=1.0)
    answer = simulate(tmp_path)
    assert not answer["ok"] and answer["message"].startswith("differs from the reference"), answer
    assert answer["message"].endswith("(nki.simulate)")
    [note] = answer["notes"]
    assert note.startswith("tool problem, information: nki.simulate and the kernel-lsp NKI model disagree")
    assert "nki.simulate: differs from the reference" in note
    assert "kernel-lsp NKI model: correct on 8 cases (kernel-lsp NKI model)" in note


def test_kernel_lsp_check_runs_an_nki_spec_in_the_simulator_too_and_reports_a_disagreement_as_information(
        tmp_path, monkeypatch):
    import json
    import subprocess
    import sys

    with_standin(monkeypatch, offset=1.0)
    path = tmp_path / "scale_rows_nki.py"
    path.write_text(SPEC_FILE.read_text())
    done = subprocess.run([sys.executable, "-m", "kernel_lsp.cli", "check", "--run-checks", "--format", "json",
                           str(path)], check=False, capture_output=True, text=True, timeout=600)
    document = json.loads(done.stdout)
    [verdict] = document["checks"]
    # The simulator's verdict stands (this stand-in adds 1 to every result) ...
    assert verdict["device"] == "nki.simulate" and verdict["status"] == "mismatch", verdict
    # ... and the model's different answer is a tool problem at information level naming both results.
    [info] = [p for p in document["problems"] if p["code"] == "KV007"]
    assert info["severity"] == "info", info  # information level
    assert "nki.simulate: differs from the reference" in info["message"]
    assert "kernel-lsp NKI model: correct on 8 cases (kernel-lsp NKI model)" in info["message"]
    assert info["line"] == SPEC_FILE.read_text().splitlines().index("def scale_rows(x):") + 1
