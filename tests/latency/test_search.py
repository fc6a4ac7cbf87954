"""The tiling search without a GPU, through `search_tiling` and `kernel-lsp tune`: which block sizes are free, what
its progress says, cancelling, and the cache of finished searches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kernel_lsp.engine.latency import WorkerError
from kernel_lsp.engine.latency import search as search_mod
from kernel_lsp.engine.latency.search import search_tiling, tied_block_sizes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

ROWS = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl
    from kernel_lsp.spec import spec


    @triton.jit
    def row_scale_kernel(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0)
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + tl.arange(0, BLOCK_SIZE)
            ok = cols < n_cols
            x = tl.load(x_ptr + row * n_cols + cols, mask=ok)
            tl.store(y_ptr + row * n_cols + cols, x * 2.0, mask=ok)


    def row_scale(x):
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = 256
        row_scale_kernel[(n_rows,)](x, y, n_cols, BLOCK_SIZE=block, num_warps=4)
        return y


    @spec(kernel=row_scale_kernel, launcher=row_scale, reference=lambda x: x * 2, shapes=[(3, 300)],
          dtypes=["float32"], bench_shapes=[(64, 1024)])
    def rows_inputs(shape, dtype, device):
        return (torch.randn(shape, dtype=dtype, device=device),)
''')


def test_tuple_grids_tie_only_the_block_sizes_they_are_computed_from():
    layernorm = (EXAMPLES / "layernorm.py").read_text()
    assert tied_block_sizes(layernorm, "layernorm_fwd_kernel") == set()  # grid (n_rows,): BLOCK_SIZE is free
    assert tied_block_sizes((EXAMPLES / "vector_add.py").read_text(), "add_kernel") == {"BLOCK_SIZE"}
    source = textwrap.dedent('''
        def through_names(x, n):
            BLOCK = 1024
            grid = (triton.cdiv(n, BLOCK),)
            k[grid](x, n, BLOCK_SIZE=BLOCK, OTHER=64, num_warps=4)

        def literal(x, n):
            k[(triton.cdiv(n, 512),)](x, n, BLOCK_SIZE=512, OTHER=64)

        def function_grid(x, n):
            k[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, n, BLOCK_SIZE=128)

        def def_grid(x, n):
            def grid(meta):
                return (triton.cdiv(n, meta["OTHER"]),)
            k[grid](x, n, OTHER=128)
    ''')
    assert tied_block_sizes(source, "k") == {"BLOCK_SIZE"}
    assert tied_block_sizes(source, "not_launched_here") is None
    assert tied_block_sizes("def broken(:\n", "k") is None


def _rows_file(tmp_path: Path) -> Path:
    path = tmp_path / "rows.py"
    path.write_text(ROWS)
    return path


def test_search_without_a_gpu_ranks_by_the_model_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(search_mod, "gpu_present", lambda: False)
    path = _rows_file(tmp_path)
    messages = []
    found = search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path), verify=False,
                          progress=lambda m, f: messages.append(m), compile_budget=2)
    assert found.errors == [], found.errors
    assert found.source == "estimated" and not found.measured and found.measured_fraction == 0
    assert found.status == "estimated; not measured"
    # The grid (n_rows,) does not follow BLOCK_SIZE: it is searched, not frozen.
    assert found.frozen == []
    assert {t.overrides["BLOCK_SIZE"] for t in found.tried} == {64, 128, 256, 512, 1024}  # 4x either way
    assert all(t.measured_us is None and t.estimated_us for t in found.tried)
    # The two best-ranked candidates and the current configuration were compiled offline for the H200's target:
    # the model read ptxas' registers, not a default. The others say their resources were assumed.
    compiled = [t for t in found.tried if t.resources]
    assert 2 <= len(compiled) <= 3 and found.current in {t.label for t in compiled}
    assert all(t.resources["registers"] > 0 and t.resources["spill_bytes"] == 0 for t in compiled)
    assert all(t.note.startswith("resources assumed (not compiled: outside the 2 best-ranked")
               for t in found.tried if not t.resources), [(t.label, t.note) for t in found.tried]
    assert any(m.startswith(f"compiling candidate 1/{len(compiled)}") and "sm_90" in m for m in messages), messages
    assert not any("timing" in m or "GPU" in m and "no GPU" not in m for m in messages), messages
    assert any("estimated; not measured" in m for m in messages), messages

    # The same request again is answered from the cache, without counting anything.
    def no_counting(*a, **k):
        raise WorkerError("counted again")

    monkeypatch.setattr(search_mod, "count_work", no_counting)
    again = search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path), verify=False,
                          compile_budget=2)
    assert again.cached and again.winner == found.winner and len(again.tried) == len(found.tried)
    # A changed text is a different search.
    changed = search_tiling(str(path), path.read_text() + "\n# edited\n", "row_scale_kernel", "H200",
                            str(tmp_path), verify=False, compile_budget=2)
    assert not changed.cached and "counted again" in changed.errors[0]


def test_search_can_be_cancelled(tmp_path, monkeypatch):
    monkeypatch.setattr(search_mod, "gpu_present", lambda: False)
    path = _rows_file(tmp_path)
    cancel = threading.Event()
    found = search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path), verify=False,
                          progress=lambda m, f: cancel.set(), cancel=cancel)
    assert found.winner is None and "cancelled" in found.errors[0], found.errors
    # A cancelled search is not kept: the next one runs.
    monkeypatch.setattr(search_mod, "count_work", lambda *a, **k: [])
    assert not search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path),
                             verify=False).cached


def _tune(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-P", "-m", "kernel_lsp", "tune", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900, env=env, check=False)


def test_tune_command_prints_the_table_and_a_json_winner(tmp_path):
    _rows_file(tmp_path)
    proc = _tune("rows.py::row_scale_kernel", "--format", "json", "--estimate-only", "--no-verify",
                 "--compile-budget", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert set(answer["winner"]) == {"BLOCK_SIZE", "num_warps", "num_stages"}
    assert answer["measured"] is False and answer["status"] == "estimated; not measured"
    assert len(answer["table"]) == 100 and answer["table"][0]["config"] == {"BLOCK_SIZE": 256, "num_warps": 4,
                                                                           "num_stages": 3}
    assert all(row["measured_us"] is None and row["estimated_us"] > 0 for row in answer["table"])
    # The best-ranked candidate and the current configuration were compiled; the rest ranked on assumed resources.
    compiled = [row for row in answer["table"] if row["resources"]]
    assert 1 <= len(compiled) <= 2 and all(row["resources"]["registers"] > 0 for row in compiled)
    assert all(row["note"].startswith("resources assumed") for row in answer["table"] if not row["resources"])
    assert "estimated; not measured" in proc.stderr  # the progress, on stderr

    text = _tune("rows.py::row_scale_kernel", "--estimate-only", "--no-verify", "-q", "--compile-budget", "1",
                 cwd=tmp_path)
    assert text.returncode == 0 and text.stderr == ""
    assert text.stdout.splitlines()[0].split() == ["configuration", "estimated", "measured", "note"]
    assert "estimated; not measured [cached]" in text.stdout


@pytest.mark.parametrize("target, message", [("rows.py", "expected FILE::KERNEL"),
                                             ("missing.py::k", "cannot read missing.py")])
def test_tune_command_refuses_bad_targets(tmp_path, target, message):
    _rows_file(tmp_path)
    proc = _tune(target, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr


ONE_BLOCK = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl
    from kernel_lsp.spec import spec


    @triton.jit
    def row_double_kernel(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_SIZE)  # one block must cover the whole row
        ok = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=ok)
        tl.store(y_ptr + row * n_cols + cols, x * 2.0, mask=ok)


    def row_double(x):
        y = torch.zeros_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        row_double_kernel[(n_rows,)](x, y, n_cols, BLOCK_SIZE=block, num_warps=4)
        return y


    @spec(kernel=row_double_kernel, launcher=row_double, reference=lambda x: x * 2, shapes=[(3, 1000)],
          dtypes=["float32"], seeds=1, bench_shapes=[(8192, 1024)])
    def rows_inputs(shape, dtype, device):
        return (torch.randn(shape, dtype=dtype, device=device),)
''')


def test_a_block_that_must_cover_the_row_is_tied_and_never_shrunk(tmp_path, monkeypatch):
    """BLOCK_SIZE = triton.next_power_of_2(n_cols), the grid (n_rows,) does not use it and no loop steps by it: one
    block covers the row, so a smaller one would compute part of it. The search ties it, says why, and searches
    only the launch options: no candidate, and so no winner, has a smaller block."""
    monkeypatch.setattr(search_mod, "gpu_present", lambda: False)
    path = tmp_path / "one_block.py"
    path.write_text(ONE_BLOCK)
    found = search_tiling(str(path), ONE_BLOCK, "row_double_kernel", "H200", str(tmp_path), compile_budget=2)
    assert found.frozen == ["BLOCK_SIZE"]
    assert found.tunables["BLOCK_SIZE"]["status"] == "tied"
    assert "must cover `n_cols`" in found.tunables["BLOCK_SIZE"]["reason"]
    assert {t.overrides["BLOCK_SIZE"] for t in found.tried} == {1024}
    assert len({(t.overrides["num_warps"], t.overrides["num_stages"]) for t in found.tried}) > 1
    assert found.winner_overrides is None or found.winner_overrides["BLOCK_SIZE"] == 1024
    assert not any(t.note and t.note.startswith("fails its check") for t in found.tried)


def _compiled_as(spilling: dict, failing: dict, untimely: dict):
    """A compiler seam: every candidate compiles with the same resources, except a spilling one, one the compiler
    rejects and one whose compile times out (each matched by its overrides)."""
    from kernel_lsp.engine.compile.jobs import CompileError, CompileResult, Resources

    def overrides(job):
        return {**{k: v for k, v in job.constexprs if isinstance(v, int)}, "num_warps": job.num_warps,
                "num_stages": job.num_stages}

    def compiler(jobs, done, cancel):
        out = []
        for i, job in enumerate(jobs):
            cfg = overrides(job)
            if cfg == failing:
                out.append(CompileResult(job.key, False, CompileError("out of resource: shared memory", 12, 4,
                                                                      "compilation")))
            elif cfg == untimely:
                out.append(CompileResult(job.key, False, CompileError("no answer within 60 s", None, None,
                                                                      "timeout")))
            else:
                spills = 2048 if cfg == spilling else 0
                out.append(CompileResult(job.key, True, resources=Resources(
                    registers=255 if spills else 40, spill_bytes=spills, shared_bytes=0)))
            done(i + 1, len(jobs))
        return out

    return compiler


def test_a_candidate_whose_compile_spills_ranks_below_an_equal_one_that_does_not(tmp_path, monkeypatch):
    """Two configurations that differ only in pipelining stages do the same work on a kernel without loads to
    pipeline: the model tells them apart only by what the compiler reports. The one that spills ranks lower; one
    the compiler rejects is left out with its reason; one whose compile timed out stays, on assumed resources."""
    monkeypatch.setattr(search_mod, "gpu_present", lambda: False)
    path = _rows_file(tmp_path)
    spilling = {"BLOCK_SIZE": 256, "num_warps": 4, "num_stages": 3}  # the current configuration
    equal = {"BLOCK_SIZE": 256, "num_warps": 4, "num_stages": 2}
    failing = {"BLOCK_SIZE": 1024, "num_warps": 8, "num_stages": 3}
    untimely = {"BLOCK_SIZE": 512, "num_warps": 4, "num_stages": 3}
    messages = []
    found = search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path), verify=False,
                          cache=False, compiler=_compiled_as(spilling, failing, untimely),
                          progress=lambda m, f: messages.append(m), compile_budget=128)  # above the 100 candidates
    assert found.errors == [], found.errors
    rows = {json.dumps(t.overrides, sort_keys=True): t for t in found.tried}
    spilled, clean = rows[json.dumps(spilling, sort_keys=True)], rows[json.dumps(equal, sort_keys=True)]
    assert spilled.resources == {"registers": 255, "shared_bytes": 0, "spill_bytes": 2048}
    assert clean.resources == {"registers": 40, "shared_bytes": 0, "spill_bytes": 0}
    assert spilled.estimated_us > clean.estimated_us
    assert found.winner_overrides != spilling  # the spilling current configuration is not kept

    rejected = rows[json.dumps(failing, sort_keys=True)]
    assert rejected.estimated_us is None and rejected.resources is None
    assert rejected.note.startswith("does not compile for sm_90: out of resource: shared memory")
    assumed = rows[json.dumps(untimely, sort_keys=True)]
    assert assumed.estimated_us and assumed.resources is None
    assert assumed.note.startswith("resources assumed (not compiled: no answer within 60 s")
    assert any(m.startswith(f"compiling candidate {len(found.tried)}/{len(found.tried)} for sm_90")
               for m in messages), messages


def test_a_current_configuration_that_does_not_compile_is_replaced(tmp_path, monkeypatch):
    """The compiler rejects the configuration the file has: it has no estimate, and any candidate that compiles
    is proposed in its place."""
    monkeypatch.setattr(search_mod, "gpu_present", lambda: False)
    path = _rows_file(tmp_path)
    current = {"BLOCK_SIZE": 256, "num_warps": 4, "num_stages": 3}
    found = search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path), verify=False,
                          cache=False, compiler=_compiled_as({}, current, {}), compile_budget=128)
    assert found.errors == [], found.errors
    rows = {json.dumps(t.overrides, sort_keys=True): t for t in found.tried}
    assert rows[json.dumps(current, sort_keys=True)].estimated_us is None
    assert found.winner_overrides not in (None, current) and found.winner_us
    assert found.current_us is None and found.speedup is None and found.edits


def test_a_space_larger_than_the_budget_compiles_only_the_best_ranked_and_labels_the_rest(tmp_path, monkeypatch):
    """100 candidates (5 blocks x 5 num_warps x 4 num_stages), a budget of 5: the model ranks all of them on assumed resources, the five it ranks best and
    the current configuration are compiled, ranked again on the compiler's figures; the others are marked."""
    monkeypatch.setattr(search_mod, "gpu_present", lambda: False)
    path = _rows_file(tmp_path)
    none = {"BLOCK_SIZE": -1}
    asked: list[dict] = []
    seam = _compiled_as(none, none, none)

    def compiler(jobs, done, cancel):
        asked.extend({**{k: v for k, v in job.constexprs if isinstance(v, int)}, "num_warps": job.num_warps,
                      "num_stages": job.num_stages} for job in jobs)
        return seam(jobs, done, cancel)

    found = search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path), verify=False,
                          cache=False, compiler=compiler, compile_budget=5)
    assert found.errors == [], found.errors
    assert len(found.tried) == 100
    current = next(t for t in found.tried if t.label == found.current)
    assert 5 <= len(asked) <= 6 and current.overrides in asked
    compiled = [t for t in found.tried if t.resources]
    assert sorted(json.dumps(t.overrides, sort_keys=True) for t in compiled) == \
        sorted(json.dumps(a, sort_keys=True) for a in asked)
    assert all(t.resources == {"registers": 40, "shared_bytes": 0, "spill_bytes": 0} for t in compiled)
    rest = [t for t in found.tried if not t.resources]
    assert len(rest) == 100 - len(asked)
    assert all(t.estimated_us and t.note == "resources assumed (not compiled: outside the 5 best-ranked candidates "
               "compiled)" for t in rest), [(t.label, t.note) for t in rest]
    # Without a budget nothing is compiled and every row says so.
    asked.clear()
    bare = search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path), verify=False,
                         cache=False, compiler=compiler, compile_budget=0)
    assert asked == [] and bare.winner
    assert all(t.resources is None and t.note.startswith("resources assumed (not compiled: the compile budget is 0")
               for t in bare.tried)


def test_the_gpu_times_the_whole_ranking_and_the_current_configuration_not_only_the_compiled_few(tmp_path,
                                                                                                monkeypatch):
    """A compile budget bounds what is compiled, not what the GPU times: the rounds draw on every ranked
    configuration (up to 30% of the space), and the user's own configuration is timed, so a speed-up is known."""
    monkeypatch.setattr(search_mod, "gpu_present", lambda: True)
    path = _rows_file(tmp_path)
    timed: list[dict] = []

    class Entry:
        def __init__(self, us):
            self.us, self.error = us, None

    class Report:
        def __init__(self, n):
            self.errors, self.entries = [], [Entry(10.0 + i) for i in range(n)]

    def measure_file(path, source, *, points, **kwargs):
        timed.extend(p["overrides"] for p in points)
        return Report(len(points))

    monkeypatch.setattr(search_mod, "measure_file", measure_file)
    none = {"BLOCK_SIZE": -1}
    found = search_tiling(str(path), path.read_text(), "row_scale_kernel", "H200", str(tmp_path), verify=False,
                          cache=False, compiler=_compiled_as(none, none, none), compile_budget=1)
    compiled = [t.overrides for t in found.tried if t.resources]
    current = next(t.overrides for t in found.tried if t.label == found.current)
    assert found.measured and current in timed and found.current_us is not None, (timed, found.current)
    assert len(compiled) <= 2 and any(o not in compiled for o in timed), (timed, compiled)


CENTRE = '''
import triton
import triton.language as tl


@triton.jit
def centre_kernel(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=ok, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    tl.store(y_ptr + row * n_cols + cols, x - mean, mask=ok)
'''


def test_candidates_compiled_offline_report_the_spills_the_model_charges(tmp_path):
    """A whole 16384-element row held by one warp (512 values a thread) spills when compiled for sm_90; held by
    eight warps it does not. The search's compile reads both through the compile service, and the model charges
    the spilling one for its local-memory traffic."""
    pytest.importorskip("triton")
    from dataclasses import replace

    from analyzers import config_model
    from analyzers.hardware import get_device
    from analyzers.tiling import Candidate
    from kernel_lsp.engine.latency.resources import candidate_resources, service_compiler

    path = tmp_path / "centre.py"
    path.write_text(CENTRE)
    one_warp, eight_warps = Candidate((("BLOCK_SIZE", 16384),), 1, 3), Candidate((("BLOCK_SIZE", 16384),), 8, 3)
    messages = []
    found = candidate_resources(str(path), CENTRE, "centre_kernel", "sm_90", [one_warp, eight_warps],
                                service_compiler(str(tmp_path)), say=messages.append)
    spilling, clean = found[one_warp], found[eight_warps]
    assert spilling.failed is None and spilling.assumed is None and spilling.spill_bytes > 0, spilling
    assert clean.failed is None and clean.assumed is None and clean.spill_bytes == 0, clean
    assert messages[-1] == "compiling candidate 2/2 for sm_90", messages

    hw = get_device("H200")
    launch = config_model.Launch(programs=8192, num_warps=1, num_stages=3, dram_bytes=8192 * 16384 * 8.0,
                                 l2_bytes=0.0, tensor_flops=0.0, tensor_dtype="fp32", elements=8192 * 16384 * 3.0,
                                 iterations=1.0, bytes_per_iteration=16384 * 8.0, block_elements=16384.0,
                                 registers=spilling.registers, shared_bytes=spilling.shared_bytes)
    charged = config_model.estimate(replace(launch, spill_bytes=spilling.spill_bytes), hw)
    uncharged = config_model.estimate(launch, hw)
    assert charged.us > uncharged.us


def test_a_tile_that_reaches_the_grid_through_a_local_is_searched_and_edited_where_it_is_assigned(tmp_path,
                                                                                                  monkeypatch):
    """`tile = 16`, a grid computed from `tile` and `TILE=tile`: the tile is searched, not frozen; a stand-in GPU
    times larger tiles faster, the start is timed in the same run, and the edit changes the local, so the grid
    follows the new tile."""
    source = (ROOT / "tests" / "tiling" / "tunables" / "transpose_local_tile.py").read_text() + textwrap.dedent('''

        from kernel_lsp.spec import spec


        @spec(kernel=transpose_kernel, launcher=transpose, reference=lambda x: x.t().contiguous(),
              shapes=[(40, 72)], dtypes=["float32"], seeds=1, bench_shapes=[(1024, 1024)])
        def transpose_inputs(shape, dtype, device):
            return (torch.randn(shape, dtype=dtype, device=device),)
    ''')
    path = tmp_path / "transpose.py"
    path.write_text(source)
    monkeypatch.setattr(search_mod, "gpu_present", lambda: True)
    timed: list[dict] = []

    class Entry:
        def __init__(self, us):
            self.us, self.error = us, None

    class Report:
        def __init__(self, entries):
            self.errors, self.entries = [], entries

    def measure_file(path, source, *, points, **kwargs):
        timed.extend(p["overrides"] for p in points)
        return Report([Entry(400.0 / p["overrides"]["TILE"] + p["overrides"]["num_stages"]) for p in points])

    monkeypatch.setattr(search_mod, "measure_file", measure_file)
    found = search_tiling(str(path), source, "transpose_kernel", "H200", str(tmp_path), verify=False, cache=False,
                          compile_budget=0)
    assert found.errors == [] and found.frozen == []
    assert found.tunables["TILE"]["status"] == "free" and "`tile = 16`" in found.tunables["TILE"]["reason"]
    assert {t.overrides["TILE"] for t in found.tried} >= {16, 32, 64}
    assert timed[0]["TILE"] == 16 and found.current_us is not None  # the start, timed first
    assert found.measured and found.winner_overrides["TILE"] > 16 and found.speedup > 1
    edited = search_mod.apply(source, found.edits)
    assert f"    tile = {found.winner_overrides['TILE']}\n" in edited
    assert "grid = (triton.cdiv(M, tile), triton.cdiv(N, tile))" in edited and "TILE=tile" in edited


def _with_spec(fixture: str, spec_text: str) -> str:
    return (ROOT / "tests" / "tiling" / "tunables" / fixture).read_text() + textwrap.dedent(spec_text)


@pytest.mark.gpu
def test_on_a_gpu_the_one_pass_softmax_keeps_its_row_block_and_the_local_tile_is_searched(tmp_path):
    """The issue's failing cases, timed: the softmax's block stays the row's, the start is timed in the same run
    and any winner is verified; the transpose's tile, reached through a local, is searched and edited there."""
    softmax = _with_spec("softmax_one_pass.py", '''

        from kernel_lsp.spec import spec


        @spec(kernel=softmax_kernel, launcher=softmax, reference=lambda x: torch.softmax(x, -1), shapes=[(3, 1000)],
              dtypes=["float32"], seeds=1, bench_shapes=[(8192, 4000)])
        def softmax_inputs(shape, dtype, device):
            return (torch.randn(shape, dtype=dtype, device=device),)
    ''')
    path = tmp_path / "softmax_one_pass.py"
    path.write_text(softmax)
    found = search_tiling(str(path), softmax, "softmax_kernel", "H200", str(tmp_path), measure=True, cache=False)
    assert found.measured and found.current_us is not None, (found.errors, found.status)
    assert found.tunables["BLOCK_SIZE"]["status"] == "tied"
    assert {t.overrides["BLOCK_SIZE"] for t in found.tried} == {4096}
    assert found.winner_overrides["BLOCK_SIZE"] == 4096 and found.verified is not False

    transpose = _with_spec("transpose_local_tile.py", '''

        from kernel_lsp.spec import spec


        @spec(kernel=transpose_kernel, launcher=transpose, reference=lambda x: x.t().contiguous(),
              shapes=[(40, 72)], dtypes=["float32"], seeds=1, bench_shapes=[(8192, 8192)])
        def transpose_inputs(shape, dtype, device):
            return (torch.randn(shape, dtype=dtype, device=device),)
    ''')
    path = tmp_path / "transpose_local_tile.py"
    path.write_text(transpose)
    found = search_tiling(str(path), transpose, "transpose_kernel", "H200", str(tmp_path), measure=True,
                          cache=False)
    assert found.measured and found.current_us is not None, (found.errors, found.status)
    assert found.tunables["TILE"]["status"] == "free" and found.frozen == []
    assert any(t.measured_us and t.overrides["TILE"] != 16 for t in found.tried)
    if found.edits:
        assert found.verified is True and found.speedup > 1 + (found.noise or 0)
        assert f"    tile = {found.winner_overrides['TILE']}\n" in search_mod.apply(transpose, found.edits)
