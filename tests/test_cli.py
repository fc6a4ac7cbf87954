"""`kernel-lsp check` as CI runs it: formats, exit codes, rule selection, suppression comments."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slow import scaled

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
BUGGY_CODES = {"TR001", "TR002", "TR004", "TR007", "TR008", "TR009", "TR010", "TR011"}

KERNEL = """import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, tl.arrange(0, BLOCK) + x, mask=offs < n)
"""


def run(*args: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernel_lsp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def test_examples_text_report_and_exit_code():
    proc = run("check", "examples")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(line.startswith("examples/buggy_kernels.py:") for line in lines[:-1]), lines
    assert {line.split()[2] for line in lines[:-1]} == BUGGY_CODES
    assert "8 Triton kernels, 1 NKI kernel" in lines[-1]
    assert run("check", "examples", "--exit-zero").returncode == 0


def test_correct_examples_are_clean():
    correct = [str(p) for p in EXAMPLES.glob("*.py") if p.name != "buggy_kernels.py"]
    proc = run("check", *correct, "--fail-on", "info")
    assert proc.returncode == 0, proc.stdout
    assert "no problems" in proc.stdout


def test_json_report():
    proc = run("check", "examples", "--format", "json")
    doc = json.loads(proc.stdout)
    assert {p["code"] for p in doc["problems"]} == BUGGY_CODES
    typo = next(p for p in doc["problems"] if p["code"] == "TR007")
    assert typo["fix"]["edits"][0]["text"].endswith("arange")
    names = {k["name"] for k in doc["kernels"]}
    assert {"add_kernel", "softmax_kernel", "matmul_kernel"} <= names
    assert any(k["language"] == "nki" for k in doc["kernels"])


def test_sarif_report():
    proc = run("check", "examples", "--format", "sarif")
    doc = json.loads(proc.stdout)
    assert doc["version"] == "2.1.0"
    run0 = doc["runs"][0]
    assert {r["ruleId"] for r in run0["results"]} == BUGGY_CODES
    ids = [r["id"] for r in run0["tool"]["driver"]["rules"]]
    for result in run0["results"]:
        assert ids[result["ruleIndex"]] == result["ruleId"]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1


def test_select_ignore_and_suppression(tmp_path):
    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    proc = run("check", str(f))
    assert proc.returncode == 1 and " TR007 " in proc.stdout
    assert run("check", str(f), "--ignore", "TR007").returncode == 0
    assert run("check", str(f), "--select", "NK").returncode == 0
    assert run("check", str(f), "--select", "TR0").returncode == 1
    f.write_text(KERNEL.replace("+ x, mask=offs < n)", "+ x, mask=offs < n)  # kernel-lsp: ignore[TR007]"))
    assert run("check", str(f)).returncode == 0
    f.write_text("# kernel-lsp: ignore-file[TR007]\n" + KERNEL)
    assert run("check", str(f)).returncode == 0


def test_bad_paths_and_options(tmp_path):
    proc = run("check", str(tmp_path / "missing.py"))
    assert proc.returncode == 2 and "no such file" in proc.stdout
    proc = run("check", "examples", "--select", "not a code")
    assert proc.returncode == 2 and "not a rule code" in proc.stderr
    bad = tmp_path / "cfg.json"
    bad.write_text("{")
    assert run("check", "examples", "--config", str(bad)).returncode == 2


def test_config_file(tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"ignore": ["TR"], "severity": {"NK": "hint"}}))
    assert run("check", "examples", "--config", str(cfg)).returncode == 0


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage", "caf\xe9 = 1\n".encode("latin-1")])
def test_unreadable_files_are_reported_not_fatal(tmp_path, content):
    (tmp_path / "bad.py").write_bytes(content)
    (tmp_path / "k.py").write_text(KERNEL)
    proc = run("check", str(tmp_path), "--format", "json")
    codes = {p["code"] for p in json.loads(proc.stdout)["problems"]}
    assert codes == {"KL002", "TR007"}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_under_a_source_name_is_reported_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")  # nothing ever writes to it: opening it to read would wait forever
    (tmp_path / "k.py").write_text(KERNEL)
    proc = run("check", str(tmp_path), "--format", "json", timeout=scaled(120))
    problems = json.loads(proc.stdout)["problems"]
    assert {(Path(p["path"]).name, p["code"]) for p in problems} == {("pipe.py", "KL002"), ("k.py", "TR007")}
    assert "named pipe" in next(p["message"] for p in problems if p["code"] == "KL002")


def test_rules_listing():
    proc = run("rules")
    assert proc.returncode == 0 and "TR007" in proc.stdout and "NK001" in proc.stdout
    proc = run("rules", "tr002")
    assert "Wrong:" in proc.stdout and "Right:" in proc.stdout
    assert run("rules", "XX999").returncode == 2


def test_serve_tcp_option_validation():
    proc = run("serve", "--tcp", "nonsense")
    assert proc.returncode == 2 and "HOST:PORT" in proc.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_over_tcp():
    import socket
    import time

    port = _free_port()
    token = "a-session-token-of-the-test"
    proc = subprocess.Popen([sys.executable, "-m", "kernel_lsp", "serve", "--tcp", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "KERNEL_LSP_TOKEN": token})
    try:
        deadline = time.monotonic() + scaled(20)
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "server did not listen"
                time.sleep(0.05)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"processId": None, "rootUri": None, "capabilities": {},
                                      "initializationOptions": {"token": token}}}).encode()
        conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < int(
                data.split(b"Content-Length: ")[1].split(b"\r\n")[0]):
            chunk = conn.recv(65536)
            assert chunk, "connection closed"
            data += chunk
        reply = json.loads(data.split(b"\r\n\r\n", 1)[1])
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "kernel-lsp"
        assert reply["result"]["capabilities"]["diagnosticProvider"]["interFileDependencies"] is True
        conn.close()
    finally:
        proc.kill()
        proc.wait()


# --- compiling with --target (kernels compiled offline in worker processes; results cached in the workspace) ---

COMPILE_ERROR = ROOT / "tests" / "compile" / "fixtures" / "error_in_helper.py"


def _compile_workspace(tmp_path: Path, *names: Path) -> Path:
    for src in names:
        (tmp_path / src.name).write_text(src.read_text())
    return tmp_path


def test_check_with_target_reports_resources_in_json(tmp_path):
    pytest.importorskip("triton")
    ws = _compile_workspace(tmp_path, EXAMPLES / "vector_add.py")
    r = run("check", "vector_add.py", "--target", "sm_90", "--format", "json", cwd=ws)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    [entry] = doc["compile"]
    assert (entry["kernel"], entry["target"], entry["ok"]) == ("add_kernel", "sm_90", True)
    assert entry["constexprs"] == {"BLOCK_SIZE": 1024}
    res = entry["resources"]
    assert res["registers"] > 0 and res["spillBytes"] == 0 and res["sharedBytes"] is not None
    assert 0 < res["occupancy"] <= 1 and res["loadWidths"]
    assert (ws / ".kernel-lsp" / "triton-cache").is_dir()
    text = run("check", "vector_add.py", "--target", "hopper", cwd=ws)  # the same target by its alias: cached
    assert text.returncode == 0
    assert re.search(r"vector_add\.py:\d+ add_kernel sm_90 \[BLOCK_SIZE=1024\] \d+ regs, 0 B spill, 0 B smem, "
                     r"occ \d+%, ld/st 128b", text.stdout), text.stdout
    assert "(1 cached)" in text.stdout


def test_check_with_target_compile_error_exits_1_with_kc001(tmp_path):
    pytest.importorskip("triton")
    ws = _compile_workspace(tmp_path, COMPILE_ERROR)
    r = run("check", "error_in_helper.py", "--target", "sm_90", "--format", "json", cwd=ws)
    assert r.returncode == 1, r.stderr
    [kc001] = [p for p in json.loads(r.stdout)["problems"] if p["code"] == "KC001"]
    assert (kc001["line"], kc001["column"]) == (7, 12) and "sm_90" in kc001["message"]
    assert kc001["related"][0]["line"] == 13


def test_check_with_target_runs_none_of_the_files_code(tmp_path, monkeypatch):
    """`--target` compiles offline: every hostile kernel is reported not compiled (KC008), none leaves its marker."""
    pytest.importorskip("triton")
    from tests.compile.test_offline import CASES, _source

    marks = tmp_path / "marks"
    monkeypatch.setenv("KERNEL_LSP_TEST_MARKS", str(marks))
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in CASES:
        (ws / f"{name}.py").write_text("import os\n" + "print('module level') or " + _source(name).replace(
            "import triton\n", "open(os.environ['KERNEL_LSP_TEST_MARKS'], 'a').write('module ')\nimport triton\n", 1))
    r = run("check", ".", "--target", "sm_90", "--format", "json", cwd=ws)
    assert r.returncode in (0, 1) and r.stdout, r.stderr  # 1: static rules find `exec` and friends in kernels
    codes = {(Path(p["path"]).stem, p["code"]) for p in json.loads(r.stdout)["problems"] if p["code"].startswith("KC")}
    assert codes == {(name, "KC008") for name in CASES}, codes
    assert not marks.exists(), marks.read_text()


def test_check_without_target_compiles_nothing(tmp_path):
    ws = _compile_workspace(tmp_path, COMPILE_ERROR, EXAMPLES / "vector_add.py")
    r = run("check", ".", "--format", "json", cwd=ws)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert "compile" not in doc and not [p for p in doc["problems"] if p["code"].startswith("KC")]
    assert not (ws / ".kernel-lsp").exists()


def test_check_rejects_unknown_target(tmp_path):
    r = run("check", str(EXAMPLES / "vector_add.py"), "--target", "sm_90,sm_91")
    assert r.returncode == 2 and "sm_91" in r.stderr and "gfx942" in r.stderr


def test_config_file_targets_turn_compiling_on(tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"targets": ["hopper"]}))
    proc = run("check", str(EXAMPLES / "vector_add.py"), "--config", str(cfg), "--format", "json", cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert [c["target"] for c in doc["compile"]] == ["sm_90"]


def test_target_without_triton_is_a_usage_error(tmp_path):
    # A `triton` that cannot be found: a package directory shadowing it with no spec.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(
        "import sys\nclass _Hide:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'triton':\n            raise ModuleNotFoundError(name)\n        return None\n"
        "sys.meta_path.insert(0, _Hide())\n")
    import os

    env = {**os.environ, "PYTHONPATH": f"{shadow}{os.pathsep}{ROOT}"}
    proc = subprocess.run([sys.executable, "-m", "kernel_lsp", "check", str(EXAMPLES / "vector_add.py"),
                           "--target", "sm_90"], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "needs triton" in proc.stderr


def test_trust_and_untrust_a_folder(tmp_path, monkeypatch, capsys):
    from kernel_lsp.cli import main
    from kernel_lsp.engine import trust

    monkeypatch.setenv(trust.TRUST_FILE_ENV, str(tmp_path / "config" / "trusted.json"))
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    assert not trust.is_trusted(project)
    assert main(["trust", str(project)]) == 0
    assert trust.is_trusted(project) and trust.is_trusted(project / "sub") and not trust.is_trusted(tmp_path)
    assert main(["trust", "--list"]) == 0 and str(project.resolve()) in capsys.readouterr().out
    assert main(["untrust", str(project / "sub")]) == 0
    assert "a folder above it is" in capsys.readouterr().out and trust.is_trusted(project / "sub")
    assert main(["untrust", str(project)]) == 0 and not trust.is_trusted(project)
    assert main(["trust", str(tmp_path / "missing")]) == 2


# --- the JSON report's schema, latency, progress and --watch ---

SCHEMA = ROOT / "kernel_lsp" / "schema" / "check-report.schema.json"


def _validate(doc: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [f"{e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert not errors, errors[:10]


def _keys(value, path="$"):
    """Every key of a JSON document with where it is, constexpr names (the user's) aside."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield path, k
            if k != "constexprs":
                yield from _keys(v, f"{path}.{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v, f"{path}[]")


def test_json_report_follows_its_schema_with_one_key_style():
    doc = json.loads(run("check", "examples", "--format", "json").stdout)
    _validate(doc)
    assert doc["$schema"] == json.loads(SCHEMA.read_text())["$id"]
    odd = [(where, k) for where, k in _keys(doc) if k != "$schema" and not re.fullmatch(r"[a-z][A-Za-z0-9]*", k)]
    assert not odd, odd
    # 1-based lines: the kernels' def lines are where the file has them.
    text = (EXAMPLES / "vector_add.py").read_text().splitlines()
    [add] = [k for k in doc["kernels"] if k["name"] == "add_kernel"]
    assert text[add["line"] - 1].startswith("def add_kernel(")


@pytest.mark.timeout(600)
def test_run_checks_reports_latency_in_text_and_json(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    (tmp_path / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text())
    args = ("check", "vector_add.py", "--run-checks", "--check-device", "interpreter", "--target", "sm_90,sm_80")
    proc = run(*args, "--format", "json", cwd=tmp_path, timeout=500)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # not a terminal: no progress
    doc = json.loads(proc.stdout)
    _validate(doc)
    lines = (tmp_path / "vector_add.py").read_text().splitlines()
    [verdict] = doc["checks"]
    assert verdict["status"] == "correct" and lines[verdict["kernelLine"] - 1].startswith("def add_kernel(")
    assert lines[verdict["specLine"] - 1].startswith("def add_inputs(")
    assert doc["latencySource"] == "estimate"
    chosen = [e for e in doc["latency"] if e["chosen"]]
    assert {e["device"] for e in chosen} == {"H200", "A100"}
    for e in chosen:
        assert e["source"] == "estimate" and e["us"] > 0 and e["label"].endswith(f"{e['device']} est.")
        assert lines[e["line"] - 1].startswith("def add_kernel(") and e["flops"] > 0 and e["dramBytes"] > 0
    proc = run(*args, cwd=tmp_path, timeout=500)
    assert re.search(r"^vector_add\.py:\d+ add_kernel \(16777216,\) float32: ≈[\d.]+ µs H200 est\. \[BLOCK_SIZE=1024",
                     proc.stdout, re.MULTILINE), proc.stdout
    assert "latency figures (estimated by the latency model, no GPU)" in proc.stdout.splitlines()[-1]
    # The second run's estimate equals the first one's: nothing to compare, no "+0%".
    assert "vs previous" not in proc.stdout


def _on_terminal(*args: str, cwd: Path) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal (stdout a pipe, as `kernel-lsp check ... > report.json`)."""
    import os
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "kernel_lsp", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=slave, env={**os.environ, "COLUMNS": "120", "TERM": "xterm"})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=300), b"".join(chunks).decode(errors="replace")


@pytest.mark.timeout(600)
def test_progress_on_stderr_only_on_a_terminal(tmp_path):
    pytest.importorskip("triton")
    (tmp_path / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text())
    code, err = _on_terminal("check", ".", "--target", "sm_90", "--format", "json", cwd=tmp_path)
    assert code == 0 and "compiling kernel files" in err, err
    code, err = _on_terminal("check", ".", "--target", "sm_90", "--quiet", cwd=tmp_path)
    assert code == 0 and "compiling" not in err, err


def _watch(tmp_path, ends_run, *extra: str):
    """`kernel-lsp check . --watch` on a file with one problem, fixed after the first report: stdout's lines of
    the two runs (each complete when stderr says it is watching again and `ends_run` accepts a line of stdout),
    and the exit code after Ctrl-C."""
    import signal
    import threading

    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    # SIGINT as a terminal would deliver it: earlier tests of the session (a Ray driver among them) may leave this
    # process ignoring SIGINT, and a child would inherit that and never see the Ctrl-C.
    proc = subprocess.Popen([sys.executable, "-m", "kernel_lsp", "check", ".", "--watch", *extra], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out: list[str] = []
    waits: list[str] = []
    seen = threading.Condition()

    def read(stream, lines: list[str], marker: str) -> None:
        for line in stream:
            if marker in line:
                with seen:
                    lines.append(line)
                    seen.notify_all()

    for stream, lines, marker in ((proc.stdout, out, ""), (proc.stderr, waits, "watching")):
        threading.Thread(target=read, args=(stream, lines, marker), daemon=True).start()
    def done(n: int) -> bool:
        return len(waits) >= n and sum(map(ends_run, out)) >= n

    runs: list[list[str]] = []
    try:
        with seen:
            assert seen.wait_for(lambda: done(1), timeout=scaled(60)), "no first report"
            runs.append(list(out))
        f.write_text(KERNEL.replace("tl.arrange", "tl.arange"))
        with seen:
            assert seen.wait_for(lambda: done(2), timeout=scaled(60)), "no report after the change"
            runs.append(out[len(runs[0]):])
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=scaled(30))
    return runs, code


def test_watch_checks_again_after_a_change(tmp_path):
    (first, second), code = _watch(tmp_path, lambda line: " checked: " in line)
    assert "1 problem" in [line for line in first if " checked: " in line][0]
    assert "no problems" in [line for line in second if " checked: " in line][0]
    assert code == 0  # the last check found nothing


def test_watch_json_prints_one_document_per_line_and_run(tmp_path):
    (first, second), code = _watch(tmp_path, lambda line: line.startswith("{"), "--format", "json")
    assert len(first) == 1 and len(second) == 1, (first, second)  # NDJSON: a line per run
    before, after = json.loads(first[0]), json.loads(second[0])
    for doc in (before, after):
        _validate(doc)
    [typo] = before["problems"]  # tl.arrange, on line 9
    assert typo["code"] == "TR007" and typo["line"] == 9 and "arrange" in typo["message"]
    assert after["problems"] == []
    assert code == 0
