"""`kernel-lsp check --fix / --diff` apply or show the editor's quick fixes; `--format github` annotates a GitHub
Actions run; a missing path is an error everywhere (text, SARIF, GitHub) with exit code 2."""

from __future__ import annotations

import json
import shutil
import subprocess

from tests.test_cli import EXAMPLES, run

BUGGY = EXAMPLES / "buggy_kernels.py"


def test_diff_shows_the_editors_quick_fixes_and_writes_nothing(tmp_path):
    target = tmp_path / "buggy_kernels.py"
    shutil.copy(BUGGY, target)
    fixes = [p["fix"] for p in json.loads(run("check", str(target), "--format", "json").stdout)["problems"]
             if p.get("fix")]
    proc = run("check", "buggy_kernels.py", "--diff", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert target.read_text() == BUGGY.read_text()  # a preview only
    assert proc.stdout.startswith("--- a/buggy_kernels.py\n+++ b/buggy_kernels.py\n")
    added = [line[1:] for line in proc.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    for fix in fixes:  # each edit the editor would make is in the diff
        assert any(e["text"] in line for e in fix["edits"] for line in added), fix
    assert f"would fix {len(fixes)} problems in 1 file" in proc.stderr
    # `git apply` takes the diff as it is printed.
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "--check", "-"], cwd=tmp_path, input=proc.stdout, text=True, check=True)


def test_fix_writes_the_fixes_and_reports_what_is_left(tmp_path):
    target = tmp_path / "buggy_kernels.py"
    shutil.copy(BUGGY, target)
    proc = run("check", str(target), "--fix")
    fixed = target.read_text()
    assert "tl.arange(0, 128)" in fixed and "tl.arrange" not in fixed
    assert "def fill_kernel(out_ptr, value, n_elements, BLOCK: tl.constexpr):" in fixed
    assert 'other=float("-inf")' in fixed and "BLOCK_SIZE=1024)" in fixed
    assert "mask=offsets < n_elements" in fixed  # the missing masks, built from the kernel's own bound
    assert "fixed 8 problems in 1 file" in proc.stderr
    # What has no quick fix is still reported, at its line in the fixed file, and fails the run.
    assert proc.returncode == 1
    codes = {line.split()[2] for line in proc.stdout.splitlines()[:-1]}
    assert codes == {"TR010"}, proc.stdout
    assert "with a quick fix" not in proc.stdout
    again = run("check", str(target), "--diff")  # nothing left to fix
    assert again.returncode == 0 and again.stdout == ""


def test_fix_keeps_line_endings_and_unicode(tmp_path):
    source = ('import triton\r\nimport triton.language as tl\r\n\r\n\r\n@triton.jit\r\n'
              'def k(x_ptr, n, BLOCK: tl.constexpr):  # é\r\n'
              '    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\r\n'
              '    tl.store(x_ptr + offs, tl.arrange(0, BLOCK), mask=offs < n)  # ü\r\n')
    target = tmp_path / "k.py"
    target.write_bytes(source.encode())
    proc = run("check", str(target), "--fix")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert target.read_bytes() == source.replace("tl.arrange", "tl.arange").encode()


def test_github_annotations(tmp_path):
    proc = run("check", str(BUGGY.relative_to(EXAMPLES.parent)), "--format", "github")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    typo = next(line for line in lines if "TR007" in line)
    assert typo.startswith("::error file=examples/buggy_kernels.py,line=41,col=12,endColumn=22,"
                           "title=TR007 unknown-triton-name::tl.arrange does not exist")
    assert any(line.startswith("::notice file=") and "TR009" in line for line in lines)  # information
    assert all(line.startswith("::") for line in lines)
    assert len(lines) == 9


def test_a_missing_path_is_an_error_in_every_format(tmp_path):
    text = run("check", "missing.py", cwd=tmp_path)
    assert text.returncode == 2
    assert "missing.py: error: no such file or directory" in text.stdout
    assert "1 path not found" in text.stdout.splitlines()[-1]
    sarif = run("check", "missing.py", "--format", "sarif", cwd=tmp_path)
    assert sarif.returncode == 2
    invocation = json.loads(sarif.stdout)["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    note = invocation["toolExecutionNotifications"][0]
    assert note["level"] == "error" and note["message"]["text"] == "missing.py: no such file or directory"
    github = run("check", "missing.py", "--format", "github", cwd=tmp_path)
    assert github.returncode == 2 and github.stdout.startswith("::error title=kernel-lsp::missing.py: no such file")
    assert run("check", "missing.py", "--diff", cwd=tmp_path).returncode == 2
    assert run("check", str(tmp_path), "--fix", "--watch").returncode == 2


def test_assumptions_are_said_once_per_kernel():
    import pytest

    pytest.importorskip("triton")
    proc = run("check", "examples/fused_softmax.py", "--target", "sm_90", timeout=300)
    lines = proc.stdout.splitlines()
    resources = [line for line in lines if line.startswith("examples/fused_softmax.py:") and " regs, " in line]
    assert len(resources) == 4
    assert lines.count("    assumed for all 4 configurations:") == 1
    assert sum("tt.divisibility=16" in line for line in lines) == 1
    assert not any(line.startswith("    assumed: ") for line in lines)  # nothing differs between them
