"""`kernel-lsp record -- CMD` on a small project whose pytest launches two kernels under Triton's interpreter; the
compile then uses the recorded values (through the CLI), says so, and says when they went stale."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lsp.engine.record import store
from kernel_lsp.settings import parse_settings

ROOT = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).parent / "fixtures" / "project"
SCHEMA_DIR = ROOT / "kernel_lsp" / "schema"


def cli(*args: str, cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernel_lsp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def validate(doc: dict, schema_name: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SCHEMA_DIR / schema_name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [f"{e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert not errors, errors[:10]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    project = tmp_path_factory.mktemp("rec") / "project"
    shutil.copytree(PROJECT, project)
    proc = cli("record", "--", sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
               "tests", cwd=project, env={"TRITON_INTERPRET": "1", "PYTHONPATH": str(project)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout  # the command ran as the user ran it, its output untouched
    assert "launches of 2 kernel(s)" in proc.stderr, proc.stderr
    return project


def test_record_keeps_each_distinct_launch_with_its_values(recorded):
    doc = json.loads((recorded / ".kernel-lsp" / "launches.json").read_text())
    validate(doc, "launches.schema.json")
    [run] = doc["runs"]
    assert run["command"].endswith("-m pytest -q -p no:xdist -p no:cacheprovider tests") and run["exit_code"] == 0
    kernels = {k["qualname"]: k for k in doc["kernels"]}
    assert set(kernels) == {"scale_kernel", "row_sum_kernel"}
    assert {k["file"] for k in kernels.values()} == {"ops/kernels.py"}
    scale = kernels["scale_kernel"]
    assert sorted(launch["args"]["BLOCK"]["v"] for launch in scale["launches"]) == [128, 1024]
    big = next(launch for launch in scale["launches"] if launch["args"]["BLOCK"]["v"] == 1024)
    assert big["args"]["x_ptr"] == {"t": "tensor", "dtype": "float32", "shape": [4096], "strides": [1],
                                    "align16": True, "device": "cpu"}
    assert big["args"]["n"] == {"t": "int", "v": 4096} and big["args"]["factor"] == {"t": "float", "v": 2.0}
    assert big["grid"] == [4] and big["interpreted"] is True
    assert big["stack"][0]["file"] == "ops/kernels.py" and big["stack"][1]["function"] == "test_scale"
    rows = kernels["row_sum_kernel"]
    assert sorted(launch["args"]["SQUARE"]["v"] for launch in rows["launches"]) == [False, True]
    assert {launch["args"]["x_ptr"]["dtype"] for launch in rows["launches"]} == {"float16"}
    assert rows["source_sha256"] == store.source_hash((recorded / "ops" / "kernels.py").read_text(),
                                                      "row_sum_kernel")


def test_offline_compile_uses_recorded_values_and_says_so_then_reports_staleness(recorded, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(recorded, project)
    # Without the record, row_sum_kernel's BLOCK_COLS is computed at run time: not compiled.
    bare = tmp_path / "bare"
    shutil.copytree(PROJECT, bare)
    before = json.loads(cli("check", "--target", "sm_90", "--format", "json", ".", cwd=bare).stdout)
    assert not [c for c in before["compile"] if c["kernel"] == "row_sum_kernel"]

    proc = cli("check", "--target", "sm_90", "--format", "json", ".", cwd=project)
    doc = json.loads(proc.stdout)
    validate(doc, "check-report.schema.json")
    rows = [c for c in doc["compile"] if c["kernel"] == "row_sum_kernel"]
    assert sorted(c["constexprs"]["SQUARE"] for c in rows) == [False, True]
    for c in rows:
        assert c["ok"], c
        assert c["constexprs"]["BLOCK_COLS"] == 64
        assert c["config"].startswith("recorded launch ") and "-m pytest -q" in c["config"]
        assert c["valuesFrom"]["BLOCK_COLS"] == "recorded" and c["valuesFrom"]["x_ptr"] == "recorded"
    text = cli("check", "--target", "sm_90", ".", cwd=project).stdout
    assert "row_sum_kernel sm_90 [BLOCK_COLS=64, SQUARE=True]" in text and "(values from recorded launch" in text

    kernels = project / "ops" / "kernels.py"
    kernels.write_text(kernels.read_text().replace("x = x * x", "x = x * x + 0.0"))
    doc = json.loads(cli("check", "--target", "sm_90", "--format", "json", ".", cwd=project).stdout)
    assert not [c for c in doc["compile"] if c["kernel"] == "row_sum_kernel"]
    [why] = [p["message"] for p in doc["problems"] if p["code"] == "KC009"]
    assert "row_sum_kernel" in why and "2 launches recorded by" in why and "are stale" in why
    # The untouched kernel keeps its recorded values.
    assert {c["config"].split(" (")[0] for c in doc["compile"] if c["kernel"] == "scale_kernel"} == {
        "recorded launch 1", "recorded launch 2"}


def test_repro_writes_a_script_that_replays_the_launch(recorded, tmp_path):
    listing = cli("repro", "ops/kernels.py::scale_kernel", "--list", cwd=recorded)
    assert listing.returncode == 0 and "x_ptr: float32[4096]" in listing.stdout
    index = next(line.split(":")[0] for line in listing.stdout.splitlines() if "[4096]" in line)
    out = tmp_path / "repro.py"
    proc = cli("repro", "ops/kernels.py::scale_kernel", "--launch", index, "-o", str(out), cwd=recorded)
    assert proc.returncode == 0, proc.stderr
    script = out.read_text()
    assert "def scale_kernel(" in script and "[4096]" in script
    ran = subprocess.run([sys.executable, str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TRITON_INTERPRET": "1"})
    assert ran.returncode == 0, ran.stderr
    assert "launched scale_kernel grid (4,)" in ran.stdout
    bad = cli("repro", "ops/kernels.py::scale_kernel", "--launch", "9", cwd=recorded)
    assert bad.returncode == 2 and "has launches 1 to 2" in bad.stderr
    missing = cli("repro", "ops/kernels.py::nope", cwd=recorded)
    assert missing.returncode == 2 and "no recorded launch" in missing.stderr


def test_record_passes_the_exit_code_on_and_says_when_nothing_was_launched(tmp_path):
    proc = cli("record", "--", sys.executable, "-c", "import sys; sys.exit(3)", cwd=tmp_path)
    assert proc.returncode == 3
    assert "no Triton kernel of this workspace was launched (triton was never imported)" in proc.stderr
    proc = cli("record", "--", sys.executable, "-E", "-c", "pass", cwd=tmp_path)
    assert proc.returncode == 0 and "no Python process of the command loaded the recorder" in proc.stderr
    assert cli("record", cwd=tmp_path).returncode == 2
    assert cli("record", "--", "no-such-command-kernel-lsp", cwd=tmp_path).returncode == 127


def test_unreadable_record_is_reported_not_overwritten(tmp_path):
    path = tmp_path / ".kernel-lsp" / "launches.json"
    path.parent.mkdir()
    path.write_text('{"format": "kernel-lsp-launches", "version": 99, "runs": [], "kernels": []}')
    proc = cli("record", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert proc.returncode == 2 and "version 99" in proc.stderr and "--fresh" in proc.stderr
    assert "99" in path.read_text()
    assert cli("record", "--fresh", "--", sys.executable, "-c", "pass", cwd=tmp_path).returncode == 0
    assert json.loads(path.read_text())["version"] == 1


# ------------------------------------------------------------------------------------------------------------
# The record format, below the CLI


def _shard(file: Path, launches: list[dict], seen: int | None = None) -> dict:
    return {"kernels": [{"file": str(file), "qualname": "k", "name": "k", "line": 1, "seen": seen or len(launches),
                         "dropped": 0, "launches": launches}], "triton": "3.9.0"}


def _launch(n: int, count: int = 1) -> dict:
    return {"args": {"n": {"t": "int", "v": n}}, "grid": [1], "options": {}, "interpreted": True, "count": count,
            "stack": [{"file": "/x/a.py", "line": 1, "function": "f"}] * 6}


def test_merge_deduplicates_caps_and_drops_launches_of_an_edited_kernel(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("def k(n):\n    return n\n")
    run1 = {"id": "r1", "command": "pytest", "started": "2026-12-01T00:00:00Z"}
    record, summary = store.merge(None, run1, [_shard(src, [_launch(1), _launch(2)]),
                                               _shard(src, [_launch(2, 3)])], tmp_path, max_per_kernel=2)
    [k] = record["kernels"]
    assert [x["args"]["n"]["v"] for x in k["launches"]] == [1, 2] and k["launches"][1]["count"] == 4
    assert summary["distinct"] == 2
    record, _ = store.merge(record, {**run1, "id": "r2"}, [_shard(src, [_launch(3)])], tmp_path, max_per_kernel=2)
    [k] = record["kernels"]
    assert len(k["launches"]) == 2 and k["dropped"] == 1
    src.write_text("def k(n):\n    return n + 1\n")
    record, _ = store.merge(record, {**run1, "id": "r3"}, [_shard(src, [_launch(5)])], tmp_path)
    [k] = record["kernels"]
    assert [x["args"]["n"]["v"] for x in k["launches"]] == [5]
    assert [r["id"] for r in record["runs"]] == ["r3"]  # runs no launch refers to are gone
    many = [_launch(i) for i in range(200)]
    record, summary = store.merge(None, run1, [_shard(src, many)], tmp_path, max_per_kernel=200, max_bytes=20_000)
    assert len(json.dumps(record)) <= 20_000 and summary["trimmed"] > 0
    assert record["kernels"][0]["dropped"] == summary["trimmed"]


def test_outside_the_workspace_is_counted_not_kept(tmp_path):
    other = tmp_path.parent / f"{tmp_path.name}-elsewhere.py"
    record, summary = store.merge(None, {"id": "r", "command": "x", "started": ""}, [_shard(other, [_launch(1)])],
                                  tmp_path)
    assert record["kernels"] == [] and summary["outside"] == {f"{other}::k": 1}


def test_source_hash_ignores_other_code_and_indentation():
    a = "import x\n\n@jit\ndef k(n):\n    return n   \n"
    b = "import y\nZ = 1\n\n@jit(debug=True)\ndef k(n):\n    return n\n\ndef other():\n    pass\n"
    assert store.source_hash(a, "k") == store.source_hash(b, "k") is not None
    assert store.source_hash(a.replace("return n", "return n + 1"), "k") != store.source_hash(a, "k")
    nested = "class C:\n    def k(n):\n        return n\n"
    assert store.source_hash(nested, "C.k") == store.source_hash(a, "k")
    assert store.source_hash("def f(:", "k") is None and store.source_hash(a, "missing") is None


def test_pins_keyed_by_file_and_kernel_and_the_bare_form_still_works_with_a_message(tmp_path):
    settings, messages = parse_settings({"pins": {"ops/attn.py::_fwd_kernel": {"BLOCK": 64},
                                                  "_fwd_kernel": {"BLOCK": 32, "num_warps": 8}}})
    [message] = messages
    assert "'_fwd_kernel' is a bare kernel name" in message and "deprecated" in message
    attn, other = tmp_path / "ops" / "attn.py", tmp_path / "ops" / "other.py"
    assert store.pins_for(settings.pins, tmp_path, attn, "_fwd_kernel") == {"BLOCK": 64, "num_warps": 8}
    assert store.pins_for(settings.pins, tmp_path, other, "_fwd_kernel") == {"BLOCK": 32, "num_warps": 8}
    assert store.pins_for(settings.pins, tmp_path, other, "add") is None
    settings, messages = parse_settings({"pins": {"attn.py::_fwd_kernel": {"BLOCK": 16}}})
    assert messages == [] and store.pins_for(settings.pins, tmp_path, attn, "_fwd_kernel") == {"BLOCK": 16}
    _, messages = parse_settings({"pins": {"::k": {}}})
    assert messages and "expected `path/to/file.py::kernel_name`" in messages[0]


def test_plan_from_recorded_launches_follows_the_jits_specialization():
    from kernel_lsp.engine.compile.specialize import plan_jobs

    text = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
            "def k(x_ptr, y_ptr, bias_ptr, n, one, BLOCK: tl.constexpr):\n"
            "    offs = tl.arange(0, BLOCK)\n    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * n * one)\n")
    run = store.Run("r1", "pytest tests/", "2026-12-02T10:00:00Z")

    def launch(index: int, n: int, aligned: bool, block: int) -> store.Launch:
        tensor = {"t": "tensor", "dtype": "bfloat16", "shape": [n], "strides": [1], "align16": aligned}
        args = {"x_ptr": tensor, "y_ptr": {**tensor, "align16": True}, "bias_ptr": {"t": "none"},
                "n": {"t": "int", "v": n}, "one": {"t": "int", "v": 1},
                "BLOCK": {"t": "int", "v": block, "constexpr": True}}
        return store.Launch(index, run, 1, args, (1,), {"num_warps": 2}, None, (), "3.9.0", True)

    jobs = plan_jobs(text, "k", ["sm_90"], recorded=[launch(1, 4096, True, 64), launch(2, 8192, True, 64),
                                                     launch(3, 100, False, 128)])
    assert len(jobs) == 2  # launches 1 and 2 specialise alike: one job standing for both
    first, second = jobs
    assert first.config_label.startswith("2 recorded launches like launch 1 (by `pytest tests/` on 2026-12-02")
    assert dict(first.signature)["x_ptr"] == "*bf16" and dict(first.signature)["bias_ptr"] == "constexpr"
    assert ("bias_ptr", None) in first.constexprs and ("BLOCK", 64) in first.constexprs
    assert set(first.attrs) == {("x_ptr", "tt.divisibility=16"), ("y_ptr", "tt.divisibility=16"),
                                ("n", "tt.divisibility=16"), ("one", "equal_to_1")}
    assert first.num_warps == 2 and first.notes == ()
    assert ("x_ptr", "tt.divisibility=16") not in second.attrs and ("n", "tt.divisibility=16") not in second.attrs
    assert dict(second.values_from) == {"x_ptr": "recorded", "y_ptr": "recorded", "bias_ptr": "recorded",
                                        "n": "recorded", "one": "recorded", "BLOCK": "recorded",
                                        "num_warps": "recorded", "num_stages": "default"}
    # A pin still wins over a recorded value, and says so.
    pinned = plan_jobs(text, "k", ["sm_90"], recorded=[launch(1, 4096, True, 64)], pins={"BLOCK": 32})[0]
    assert ("BLOCK", 32) in pinned.constexprs and dict(pinned.values_from)["BLOCK"] == "pin"


def test_a_nested_kernel_is_known_by_its_qualified_name():
    text = ("import triton\n\n\ndef test_x():\n    @triton.jit\n    def kernel(x):\n        pass\n\n\n"
            "class Ops:\n    @triton.jit\n    def kernel(x):\n        pass\n")
    assert store.qualname_at(text, 5, "kernel") == "test_x.<locals>.kernel"
    assert store.qualname_at(text, 11, "kernel") == "Ops.kernel"
    assert store.qualname_at(text, 0, "kernel") == "kernel"  # not a def line: the bare name
    assert store.source_hash(text, "test_x.<locals>.kernel") == store.source_hash(text, "Ops.kernel")
    settings, messages = parse_settings({"pins": {"t.py::test_x.<locals>.kernel": {"x": "*fp16"}}})
    assert messages == [] and store.pins_for(settings.pins, "/w", "/w/t.py", "test_x.<locals>.kernel") == {
        "x": "*fp16"}


def test_bounds_check_at_recorded_shapes_finds_a_planted_out_of_bounds_store(recorded, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(recorded, project)
    clean = cli("repro", "ops/kernels.py::scale_kernel", "--check-bounds", cwd=project)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.count("in bounds (interpreter, synthesised inputs)") == 2
    kernels = project / "ops" / "kernels.py"
    text = kernels.read_text()
    kernels.write_text(text.replace("tl.store(out_ptr + offs, x * factor, mask=mask)", "tl.store(out_ptr + offs, x * factor)"))
    line = next(i for i, t in enumerate(kernels.read_text().splitlines(), 1) if "tl.store(out_ptr + offs" in t)
    planted = cli("repro", "ops/kernels.py::scale_kernel", "--check-bounds", cwd=project)
    assert planted.returncode == 1, planted.stdout + planted.stderr
    # n=100 with BLOCK=128 stores past the end; n=4096 is a multiple of the block and stays in bounds.
    assert f"ops/kernels.py:{line}: ops/kernels.py::scale_kernel launch " in planted.stdout
    assert "out-of-bounds store" in planted.stdout and "out_ptr has 100 elements" in planted.stdout
    assert "changed since its launches were recorded" in planted.stderr


@pytest.mark.gpu
def test_compiled_launches_on_a_gpu_are_recorded_with_the_autotuners_choice(tmp_path):
    """The compiled path (JITFunction.run, the autotuner's run and benchmarking), as on the GPU machine's triton."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    (project / "ops" / "tuned.py").write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=2), "
        "triton.Config({'BLOCK': 256}, num_warps=4)], key=['n'])\n@triton.jit\n"
        "def tuned_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)\n\n\n"
        "def run(n):\n    x = torch.randn(n, device='cuda', dtype=torch.float16)\n    out = torch.empty_like(x)\n"
        "    tuned_kernel[lambda meta: (triton.cdiv(n, meta['BLOCK']),)](x, out, n)\n    torch.cuda.synchronize()\n")
    proc = cli("record", "--", sys.executable, "-c", "from ops.tuned import run; run(5000); run(5000)",
               cwd=project, env={"PYTHONPATH": str(project)})
    assert proc.returncode == 0, proc.stderr
    [k] = json.loads((project / ".kernel-lsp" / "launches.json").read_text())["kernels"]
    chosen = [x for x in k["launches"] if x.get("autotune") and "chosen" in x["autotune"]]
    trials = [x for x in k["launches"] if x.get("autotune") == {"trial": True}]
    assert chosen and trials and all(x["interpreted"] is False for x in k["launches"])
    assert chosen[0]["args"]["x_ptr"]["device"].startswith("cuda") and chosen[0]["args"]["x_ptr"]["dtype"] == "float16"
    assert chosen[0]["count"] >= 1 and chosen[0]["grid"] == [-(-5000 // chosen[0]["args"]["BLOCK"]["v"])]
    doc = json.loads(cli("check", "--target", "sm_90", "--format", "json", "ops/tuned.py", cwd=project).stdout)
    assert any(c["ok"] and c["config"].startswith("recorded launch") for c in doc["compile"]), doc["compile"]


def test_hover_and_hint_say_where_the_values_came_from():
    from kernel_lsp.api import CompiledConfig
    from kernel_lsp.features.resources import hint_label, hover_table

    label = "recorded launch 1 (by `pytest tests/` on 2026-12-02; x_ptr: float16[8, 48])"
    recorded = CompiledConfig("k", "sm_90", label, {"BLOCK": 64}, 4, 3, True, False, 0.5, registers=20,
                              spill_bytes=0, shared_bytes=0, values_from={"x_ptr": "recorded", "BLOCK": "recorded",
                                                                          "num_warps": "default"})
    assert hint_label([recorded]) == "sm_90: 20 regs · 0 B smem (recorded)"
    text = hover_table("k", [recorded])
    assert f"- {label}: recorded x_ptr, BLOCK; default num_warps" in text and "Compiled assuming" not in text
    stale = "2 launches recorded by `pytest` on 2026-12-01 are stale: the kernel changed since"
    guessed = CompiledConfig("k", "sm_90", "launch at line 40", {"BLOCK": 64}, 4, 3, True, False, 0.5,
                             registers=20, spill_bytes=0, shared_bytes=0, notes=["x_ptr: assumed *fp32", stale],
                             values_from={"x_ptr": "assumed", "BLOCK": "code"})
    assert hint_label([guessed]).endswith("(assumed)")
    text = hover_table("k", [guessed])
    assert stale in text and "Compiled assuming:\n- x_ptr: assumed *fp32" in text
    assert f"- {stale}" not in text  # the staleness is said once, not as an assumption
