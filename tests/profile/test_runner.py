"""The whole profiling path (plan process, ncu run, three report imports, parsing) with a fake `ncu` that prints
the fixture pages; and the errors a user meets: no ncu, no GPU, counters not permitted, kernel never launched,
timeout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import kernel_lsp.engine.profile as prof
from kernel_lsp.engine.profile import NO_GPU, profile_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fused_softmax.py"
# A spec'd "kernel" whose file imports neither torch nor triton: the plan is quick, and the driver imports torch
# only to ask for a GPU.
LIGHT = '''from kernel_lsp.spec import spec


def softmax_kernel():
    pass


def launch(*args):
    softmax_kernel()


@spec(kernel=softmax_kernel, launcher=launch, reference=lambda *a: None, shapes=[(4, 8)])
def inputs(shape, dtype, device):
    return ()
'''


@pytest.fixture
def light(tmp_path) -> Path:
    path = tmp_path / "light.py"
    path.write_text(LIGHT)
    return path


def test_profile_a_file_end_to_end(fake_ncu, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    path = tmp_path / "fused_softmax.py"
    shutil.copy(EXAMPLE, path)
    keep = tmp_path / "out"
    report = profile_file(str(path), path.read_text(), None, str(tmp_path), keep_dir=str(keep))
    assert report.errors == []
    [p] = report.profiles  # one spec, one bench shape
    assert p.kernel == "softmax_kernel" and p.device == "NVIDIA H200" and p.reasons_from == "instructions"
    assert p.shape == (4096, 4096)  # the spec's bench shape, from the plan process
    hot = max(p.lines, key=lambda ln: ln.share)
    assert path.read_text().splitlines()[hot.line].strip() == "numerator = tl.exp(x - row_max)"
    assert hot.stalls[0][0] == "long scoreboard"
    assert sum(ln.share for ln in p.lines) == pytest.approx(1.0)
    assert p.registers == 16 and p.advice[0].kind == "OPT"
    profile_call = next(c for c in fake_ncu.calls() if "-i" not in c)
    assert profile_call[:6] == ["--set", "full", "--import-source", "yes", "--profile-from-start", "off"]
    assert profile_call[profile_call.index("-k") + 1] == "regex:^softmax_kernel$"
    assert profile_call[profile_call.index("-c") + 1] == "1"
    assert profile_call[-7:-2] == [prof.sys.executable, "-P", "-B", "-m", "kernel_lsp.engine.profile.driver"]
    imports = [c[c.index("--page") + 1] for c in fake_ncu.calls() if "-i" in c]
    assert imports == ["source", "details", "raw"]
    assert sorted(f.name.split(".", 1)[1] for f in keep.glob("softmax_kernel-4096x4096.*.csv")) == [
        "details.csv", "raw.csv", "source.csv"]


def test_only_the_kernel_asked_for(fake_ncu, light):
    report = profile_file(str(light), LIGHT, ["other_kernel"])
    assert report.profiles == [] and report.errors == [f"no spec'd kernel to profile in {light} among other_kernel"]


def test_without_the_raw_page_totals_per_line_only(fake_ncu, light, monkeypatch):
    monkeypatch.delenv("FAKE_NCU_RAW")
    report = profile_file(str(light), LIGHT)
    [p] = report.profiles
    assert p.reasons_from == "none" and any("totals per line only" in n for n in p.notes)
    assert all(ln.stalls == () for ln in p.lines) and sum(ln.share for ln in p.lines) == pytest.approx(1.0)


def test_no_ncu(monkeypatch, light, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(prof, "NCU_PLACES", ())
    monkeypatch.setattr(prof, "gpu_present", lambda: False)
    assert profile_file(str(light), LIGHT).errors == [NO_GPU]
    monkeypatch.setattr(prof, "gpu_present", lambda: True)
    [error] = profile_file(str(light), LIGHT).errors
    assert error.startswith("Nsight Compute (ncu) was not found")


def test_no_gpu_seen_by_the_driver(fake_ncu, light):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the driver sees it")
    fake_ncu.mode("run-target")  # the real driver runs, on this machine without a GPU
    assert profile_file(str(light), LIGHT).errors == [NO_GPU]


def test_counters_not_permitted(fake_ncu, light):
    fake_ncu.mode("perm")
    [error] = profile_file(str(light), LIGHT).errors
    assert "ERR_NVGPUCTRPERM" in error and "NVreg_RestrictProfilingToAdminUsers" in error


def test_kernel_never_launched(fake_ncu, light):
    fake_ncu.mode("nokernel")
    [error] = profile_file(str(light), LIGHT).errors
    assert "softmax_kernel never launched under Nsight Compute" in error


def test_timeout_kills_ncu(fake_ncu, light):
    fake_ncu.mode("hang")
    report = profile_file(str(light), LIGHT, timeout_s=1.0)
    [error] = report.errors
    assert "did not finish profiling softmax_kernel within 1 s" in error  # the hanging ncu was killed


def test_file_that_does_not_import(fake_ncu, tmp_path):
    path = tmp_path / "broken.py"
    text = "from kernel_lsp.spec import spec\nraise RuntimeError('boom')\n"
    path.write_text(text)
    [error] = profile_file(str(path), text).errors
    assert "importing the file failed at line 2" in error and "boom" in error


def test_an_autotuned_kernel_is_profiled_with_the_configuration_it_picks(fake_ncu, tmp_path, monkeypatch):
    """The autotuner picks in a run without the profiler; the profiled run is pinned to that pick."""
    path = tmp_path / "light.py"
    path.write_text(LIGHT)
    pick = {"kwargs": {"BLOCK": 128}, "num_warps": 8, "num_stages": 3, "label": "BLOCK: 128, num_warps: 8"}
    asked = []
    monkeypatch.setattr(prof, "_plan", lambda *a: [{"spec": "inputs", "kernel": "softmax_kernel",
                                                    "shape": [4, 8], "dtype": "float32", "autotuned": True}])
    monkeypatch.setattr(prof, "_pick", lambda *a: asked.append(a) or pick)
    keep = tmp_path / "out"
    report = profile_file(str(path), LIGHT, None, str(tmp_path), keep_dir=str(keep))
    assert report.errors == [] and len(asked) == 1
    [request] = [json.loads(f.read_text()) for f in keep.glob("*.request.json")]
    assert request["pin"] == pick
    [p] = report.profiles
    assert p.config == pick["label"]
    assert any("configuration the autotuner picks without the profiler" in n for n in p.notes), p.notes
    profile_call = next(c for c in fake_ncu.calls() if "-i" not in c)
    assert profile_call[profile_call.index("--clock-control") + 1] == "base"


def test_pin_leaves_the_autotuner_one_configuration():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import sys

    from kernel_lsp.engine.profile.driver import pin_config

    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import matmul_autotune
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    kernel = matmul_autotune.matmul_kernel
    saved = list(kernel.configs)
    try:
        chosen = saved[2]
        pin = {"kwargs": dict(chosen.kwargs), "num_warps": chosen.num_warps, "num_stages": chosen.num_stages}
        assert pin_config(kernel, {**pin, "num_warps": 32}) is None and kernel.configs == saved
        assert pin_config(kernel, pin) == str(chosen) and kernel.configs == [chosen]
    finally:
        kernel.configs = saved
