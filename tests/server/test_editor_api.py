"""The Python API's calls for an editor (`Workspace.compile_buffer`, `ir_buffer`, `check_buffer`, `measure_buffer`),
which the language server's compiles, checks and timing go through: they keep the API's rules (trust, the workspace's bounds, the size limit),
return the API's result types, and what they refuse reaches the user as the API's message."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kernel_lsp.api import ApiError, CheckResult, CompileResult, MeasureResult, NotTrustedError, Workspace
from kernel_lsp.engine.trust import TRUST_FILE_ENV
from kernel_lsp.settings import Settings

EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "vector_add.py").read_text()
NO_SPEC = "import triton\n\n\n@triton.jit\ndef k(x_ptr):\n    pass\n"


@pytest.fixture(params=["vscode"])
def profile(request) -> str:
    return request.param


async def test_nothing_runs_in_an_untrusted_folder(tmp_path, monkeypatch):
    trust = tmp_path / "trusted.json"
    trust.write_text(json.dumps({"trusted": []}))
    monkeypatch.setenv(TRUST_FILE_ENV, str(trust))
    ws = Workspace(tmp_path)
    with pytest.raises(NotTrustedError, match="kernel-lsp trust"):
        await ws.check_buffer(tmp_path / "k.py", NO_SPEC)
    with pytest.raises(NotTrustedError, match="kernel-lsp trust"):
        await ws.measure_buffer(tmp_path / "k.py", NO_SPEC, kernels=["k"], gpu=False)


async def test_bounds_and_size_limit_of_a_buffer(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root, settings=dataclasses.replace(Settings(), max_file_bytes=200), allow_run=True)
    outside = tmp_path / "elsewhere.py"
    with pytest.raises(ApiError, match="outside the workspace"):
        await ws.check_buffer(outside, NO_SPEC)
    with pytest.raises(ApiError, match="maxFileBytes"):
        await ws.check_buffer(root / "k.py", NO_SPEC + "#" * 200)
    with pytest.raises(ApiError, match="maxFileBytes"):
        await ws.measure_buffer(root / "k.py", NO_SPEC + "#" * 200, gpu=False)
    # A file the editor opened from elsewhere is checked when the caller says so (it has no spec: nothing to
    # report), under the name the editor uses.
    result = await ws.check_buffer(outside, NO_SPEC, confined=False)
    assert result == CheckResult(str(outside), False, [], [], [])


async def test_a_check_the_api_refuses_answers_with_its_message(start):
    s = await start({"vector_add.py": EXAMPLE}, options={"checkDevice": "interpreter", "maxFileBytes": 1000})
    uri = s.open("vector_add.py")
    answer = await s.command("kernel-lsp.runChecks", {"uri": uri})
    assert "maxFileBytes" in answer["error"] and "internal error" not in answer["error"], answer
    status = await s.command("kernel-lsp.status")
    assert status["checks"]["run"] == 0 and status["checks"]["running"] == 0


async def test_the_editor_gets_the_result_check_returns(tmp_path):
    (tmp_path / "vector_add.py").write_text(EXAMPLE)
    settings = dataclasses.replace(Settings(), check_device="interpreter")
    with Workspace(tmp_path, settings=settings, allow_run=True) as ws:
        edited = await ws.check_buffer(tmp_path / "vector_add.py", EXAMPLE)
        checked = ws.check(path="vector_add.py")
    assert isinstance(edited, CheckResult) and edited.ok and edited.verdicts
    def seen(r: CheckResult) -> list[tuple]:  # what a person reads of each verdict (each case has its own seed)
        return [(v.kernel, v.spec, v.status, v.device, v.message, v.spec_line, v.kernel_line, len(v.cases))
                for v in r.verdicts]

    assert seen(edited) == seen(checked)
    assert all(v.kernel_line and not v.on_gpu for v in edited.verdicts)


async def test_the_editor_gets_the_result_measure_returns(tmp_path):
    (tmp_path / "vector_add.py").write_text(EXAMPLE)
    settings = dataclasses.replace(Settings(), targets=("sm_90",))  # checkDevice "auto": the GPU where there is one
    with Workspace(tmp_path, settings=settings, allow_run=True) as ws:
        # Both choose alike: measured on a GPU machine, estimated without one.
        edited = await ws.measure_buffer(tmp_path / "vector_add.py", EXAMPLE, history=False)
        measured = ws.measure(path="vector_add.py", targets=["H200"])
    assert isinstance(edited, MeasureResult) and edited.entries and edited.source == measured.source
    assert [(e.kernel, e.shape, e.dtype, e.device, e.source) for e in edited.entries] == \
        [(e.kernel, e.shape, e.dtype, e.device, e.source) for e in measured.entries]
    if edited.source == "estimate":  # an estimate is the same figure each time; two measurements are not
        assert [(e.us, e.label) for e in edited.entries] == [(e.us, e.label) for e in measured.entries]


async def test_the_editor_gets_the_result_compile_returns(tmp_path):
    path = tmp_path / "vector_add.py"
    path.write_text(EXAMPLE)
    settings = dataclasses.replace(Settings(), targets=("sm_90",))
    with Workspace(tmp_path, settings=settings) as ws:  # compiling runs none of the folder's code: no trust needed
        partial: list[CompileResult] = []
        edited = await ws.compile_buffer(path, EXAMPLE, on_partial=partial.append)
        assert ws.compile_counts()["cacheHits"] + ws.compile_counts()["cacheMisses"] == len(edited.configs)
        chosen = next(c for c in edited.configs if c.ok)
        ir = await ws.ir_buffer(path, EXAMPLE, chosen, "ttir")
        missing = await ws.ir_buffer(path, EXAMPLE, chosen, "amdgcn")
        with pytest.raises(ApiError, match="compile it again"):
            await ws.ir_buffer(path, EXAMPLE.replace("num_warps=4", "num_warps=8"), chosen, "ttir")
        await ws.close_compiles()
        assert ws.compile_counts() == {}
        compiled = ws.compile(path="vector_add.py", targets=["sm_90"])

    def seen(r: CompileResult) -> tuple:  # all but how long each took and whether the cache answered
        return ([dataclasses.replace(c, seconds=0.0, cached=False) for c in r.configs], r.findings, r.not_compiled,
                r.uncompiled)

    assert isinstance(edited, CompileResult) and edited.configs and seen(edited) == seen(compiled)
    assert all(not c.ir for c in edited.configs)  # IR text comes from ir_buffer
    # Each job's result was shown as it finished, as a CompileResult too; the last has them all.
    assert len(partial) == len(edited.configs) and partial[-1] == edited
    assert [len(p.configs) for p in partial] == list(range(1, len(edited.configs) + 1))
    assert ir.text is not None and str(path) in ir.text and ir.stage == "ttir" and ir.config == chosen.config
    load = next(i for i, line in enumerate(EXAMPLE.splitlines(), start=1) if "tl.load(" in line)
    assert any(load in users for users in ir.lines.values()) and "ttir" in ir.available
    assert missing.text is None and missing.available == ir.available and "amdgcn" not in missing.available


@pytest.mark.gpu
async def test_a_measurement_without_its_roofline_fraction_counts_no_work(tmp_path):
    # The assistant compares candidates' figures only: measure_buffer(roofline=False) times them and skips the
    # work count on the CPU that a roofline fraction needs.
    (tmp_path / "vector_add.py").write_text(EXAMPLE)
    with Workspace(tmp_path, allow_run=True) as ws:
        full = await ws.measure_buffer(tmp_path / "vector_add.py", EXAMPLE, gpu=True, history=False)
        bare = await ws.measure_buffer(tmp_path / "vector_add.py", EXAMPLE, gpu=True, history=False, roofline=False)
    assert full.source == bare.source == "measured" and full.entries and len(bare.entries) == len(full.entries)
    assert any(e.fraction_of_roofline is not None for e in full.entries)
    assert all(e.us is not None and e.fraction_of_roofline is None and e.roofline_us is None for e in bare.entries)
