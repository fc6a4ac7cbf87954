"""The CI set-ups the project publishes: the pre-commit hooks and the GitHub Actions example run commands that the
command line accepts, and a hook run on staged files checks them."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent


def _parses(command: str) -> None:
    from kernel_lsp.cli import build_parser

    words = shlex.split(command.replace("${KERNEL_LSP_SOURCE}", "x"))
    assert words[0] == "kernel-lsp", command
    build_parser().parse_args(words[1:])  # exits (SystemExit) on an option the CLI does not have


def test_pre_commit_hooks_run_the_checker_on_staged_files(tmp_path):
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert {h["id"] for h in hooks} == {"kernel-lsp", "kernel-lsp-compile"}
    for hook in hooks:
        assert hook["language"] == "python" and hook["types"] == ["python"] and hook["require_serial"] is True
        _parses(hook["entry"] + " staged.py")
    # pre-commit appends the staged files to the entry: a wrong kernel fails the commit, a right one passes.
    [static] = [h for h in hooks if h["id"] == "kernel-lsp"]
    wrong = tmp_path / "wrong.py"
    wrong.write_text((ROOT / "tests" / "test_cli.py").read_text().split('KERNEL = """', 1)[1].split('"""', 1)[0])
    right = tmp_path / "right.py"
    right.write_text((ROOT / "examples" / "vector_add.py").read_text())
    entry = shlex.split(static["entry"])[1:]
    for path, code in ((wrong, 1), (right, 0)):
        done = subprocess.run([sys.executable, "-m", "kernel_lsp", *entry, str(path)], capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == code, done.stdout + done.stderr


def test_github_actions_example_uploads_sarif_with_commands_the_cli_accepts():
    workflow = yaml.safe_load((ROOT / "examples" / "ci" / "github-actions.yml").read_text())
    steps = workflow["jobs"]["kernels"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    checks = [r for r in runs if r.startswith("kernel-lsp ")]
    assert len(checks) == 3
    for command in checks:
        _parses(command)
    sarif = next(r for r in checks if "--format sarif" in r)
    out = shlex.split(sarif)[shlex.split(sarif).index("-o") + 1]
    [upload] = [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    assert upload["with"]["sarif_file"] == out
    assert workflow["permissions"]["security-events"] == "write"
    install = next(r for r in runs if "pip install" in r)
    assert "pip install kernel-lsp" not in install and "torch==2.13.0" in install
