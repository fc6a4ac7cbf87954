"""A hostile workspace through every CLI command: code in the module level, a constexpr default, a launcher and a
spec, each leaving a mark when it runs. Untrusted and without a flag that asks for it by name, no command runs any
of it; `report` and `tune` run it only with `--run-checks` / `--allow-run` or in a trusted folder, and say why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.test_trust import HOSTILE
from tests.slow import scaled

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def hostile(tmp_path) -> tuple[Path, dict]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hostile.py").write_text(HOSTILE)
    trust_file = tmp_path / "trusted.json"
    trust_file.write_text(json.dumps({"trusted": []}))
    env = {**os.environ, "KERNEL_LSP_TRUST_FILE": str(trust_file), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return ws, env


def kernel_lsp(ws: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "kernel_lsp", *args], cwd=ws, env=env, capture_output=True,
                          text=True, timeout=scaled(300), check=False)


def marks(ws: Path) -> list[str]:
    path = ws / "marks"
    return path.read_text().splitlines() if path.exists() else []


def test_report_runs_no_code_untrusted_and_says_how_to_ask(hostile):
    ws, env = hostile
    done = kernel_lsp(ws, env, "report", ".", "-o", "page.html", "-q")
    assert done.returncode == 0, done.stderr
    assert marks(ws) == []
    page = (ws / "page.html").read_text()
    assert "is not trusted" in page and "--run-checks" in page


def test_tune_needs_trust_or_allow_run(hostile):
    ws, env = hostile
    done = kernel_lsp(ws, env, "tune", "hostile.py::add_kernel", "--estimate-only", "--no-verify", "-q")
    assert done.returncode == 2 and "not trusted" in done.stderr and "--allow-run" in done.stderr, done.stderr
    assert marks(ws) == []


def test_check_and_compile_commands_run_no_code(hostile):
    pytest.importorskip("triton")
    ws, env = hostile
    for args in (("check", "."), ("check", ".", "--target", "sm_90", "--format", "json"),
                 ("ir-diff", "hostile.py::add_kernel", "--a", "BLOCK=16", "--b", "BLOCK=32")):
        kernel_lsp(ws, env, *args)
        assert marks(ws) == [], args


def test_report_in_a_trusted_folder_runs_the_checks_and_says_so(hostile):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    ws, env = hostile
    Path(env["KERNEL_LSP_TRUST_FILE"]).write_text(json.dumps({"trusted": [str(ws.resolve())]}))
    done = kernel_lsp(ws, env, "report", ".", "-o", "page.html", "-q", "--check-device", "interpreter")
    assert done.returncode == 0, done.stderr
    assert "trusted folder" in done.stderr
    assert "module level" in marks(ws)
    assert "trusted folder" in (ws / "page.html").read_text()
