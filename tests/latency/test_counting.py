"""Work counting under the interpreter (a worker process each, CPU only)."""

import textwrap
from pathlib import Path

import pytest

from kernel_lsp.engine.latency import estimate_file, measure_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

ADD = textwrap.dedent('''
    import torch, triton, triton.language as tl
    from kernel_lsp.spec import spec
    from vector_add import add_kernel, add

    @spec(kernel=add_kernel, launcher=add, reference=lambda x, y: x + y, shapes=[(1000,)], dtypes=["float16"],
          bench_shapes=[(65537,), (1 << 22,)])
    def add_inputs(shape, dtype, device):
        return (torch.randn(shape, dtype=dtype, device=device), torch.randn(shape, dtype=dtype, device=device))
''')

MATMUL = textwrap.dedent('''
    import torch
    from kernel_lsp.spec import spec
    from matmul_autotune import matmul_kernel, matmul, reference_matmul

    @spec(kernel=matmul_kernel, launcher=matmul, reference=reference_matmul, shapes=[(64, 64, 64)],
          dtypes=["float16"], bench_shapes=[(256, 512, 128)])
    def mm_inputs(shape, dtype, device):
        M, N, K = shape
        return (torch.randn(M, K, dtype=dtype, device=device), torch.randn(K, N, dtype=dtype, device=device))
''')


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(f"import sys\nsys.path.insert(0, {str(EXAMPLES)!r})\n" + text)
    return path


def test_vector_add_bytes_are_three_n_elements(tmp_path):
    path = _write(tmp_path, "add_spec.py", ADD)
    report = estimate_file(str(path), path.read_text(), ["H200", "sm_80"], root=str(tmp_path))
    assert report.errors == []
    by_shape = {}
    for e in report.entries:
        by_shape.setdefault(e.shape, []).append(e)
    for (n,), entries in by_shape.items():
        work = entries[0].work
        assert work["load_bytes"] + work["store_bytes"] == 3 * n * 2
        assert {e.device for e in entries} == {"H200", "A100"}
        assert all("est." in e.label for e in entries)
    # Counted at a reduced size and scaled, the bytes above exact: 2**22 at one block (and two), 65537 at one
    # block plus its ragged element (and two blocks plus it).
    assert by_shape[(1 << 22,)][0].work["counted_shape"] == [1024]
    assert by_shape[(65537,)][0].work["counted_shape"] == [1025]
    big = next(e for e in by_shape[(1 << 22,)] if e.device == "H200")
    assert big.bound == "memory" and big.fraction_of_roofline > 0.5  # 24 MB: the 3 µs launch is a third of it


def test_matmul_flops_are_2mnk_for_every_autotune_config(tmp_path):
    path = _write(tmp_path, "mm_spec.py", MATMUL)
    report = estimate_file(str(path), None, ["H200"], root=str(tmp_path))
    assert report.errors == [] and len(report.entries) == 6
    for e in report.entries:
        assert sum(e.work["tensor_flops"].values()) == pytest.approx(2 * 256 * 512 * 128)
        assert "fp16" in e.work["tensor_flops"]
    assert sum(e.chosen for e in report.entries) == 1


def test_file_without_spec_and_broken_file(tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    assert "no spec" in estimate_file(str(plain), None, ["H200"]).errors[0]
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    assert "boom" in estimate_file(str(broken), None, ["H200"]).errors[0]
    assert "no hardware model" in estimate_file(str(plain), None, ["sm_89"]).errors[0]


@pytest.mark.gpu
def test_measured_vector_add(tmp_path):
    path = _write(tmp_path, "add_spec.py", ADD)
    report = measure_file(str(path), None, root=str(tmp_path))
    assert report.errors == [] and report.entries
    for e in report.entries:
        assert e.source == "measured" and e.us > 0 and e.reference_us > 0


def test_a_file_that_patches_torch_or_reaches_into_the_worker_is_not_timed(tmp_path):
    patched = _write(tmp_path, "patched.py", "import time\ntime.perf_counter = lambda: 0.0\n" + ADD)
    errors = estimate_file(str(patched), None, ["H200"], root=str(tmp_path)).errors
    assert errors and "not timed: time.perf_counter replaced when the file was imported" in errors[0]
    frames = _write(tmp_path, "frames.py", "import sys\n_caller = sys._getframe\n" + ADD)
    errors = estimate_file(str(frames), None, ["H200"], root=str(tmp_path)).errors
    assert errors and "not timed: line 4 uses sys._getframe" in errors[0]  # _write puts two lines above


MATMUL_POINTS = textwrap.dedent('''
    import sys
    sys.path.insert(0, EXAMPLES)

    def matmul_point(shape, dtype, device):
        import torch
        from matmul_autotune import matmul, matmul_kernel
        M, N, K = shape
        args = (torch.randn(M, K, dtype=dtype, device=device), torch.randn(K, N, dtype=dtype, device=device))
        return matmul_kernel, matmul, args
''')


def _totals(launch):
    out = {"flops": sum(launch["tensor_flops"].values()), "vector": launch["vector_flops"]}
    for a in launch["args"]:
        for k in ("load_bytes", "store_bytes", "footprint_bytes"):
            out[(a["name"], k)] = a[k]
    return out


def _count(tmp_path, shape, **kw):
    from kernel_lsp.engine.latency import count_work

    path = tmp_path / "points.py"
    path.write_text(MATMUL_POINTS.replace("EXAMPLES", repr(str(EXAMPLES))))
    point = {"factory": "matmul_point", "kernel": "matmul_kernel", "shape": list(shape), "dtype": "float16",
             "overrides": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8,
                           "num_warps": 4, "num_stages": 3}}
    [result] = count_work(str(path), None, [point], root=str(tmp_path), samples=4, timeout=900, **kw)
    assert result["error"] is None, result["error"]
    return result


def test_reduced_count_matches_the_full_count(tmp_path):
    """A large shape is counted at a reduced shape and scaled: the same counts as interpreting the full shape
    (exact where the sizes are multiples of the tiles)."""
    fast, full = _count(tmp_path, (512, 512, 512)), _count(tmp_path, (512, 512, 512), scale=False)
    assert fast["counted_shape"] == [128, 128, 128] and "counted_shape" not in full
    got, want = fast["launches"][0], full["launches"][0]
    assert got["programs"] == want["programs"] == 64 and got["grid"] == want["grid"]
    assert got["constexprs"] == want["constexprs"]
    g, w = _totals(got), _totals(want)
    assert set(g) == set(w)
    for key in w:
        assert g[key] == pytest.approx(w[key], rel=1e-9, abs=1e-6), key


def test_reduced_count_of_ragged_sizes(tmp_path):
    """Sizes that are not multiples of the tiles keep their ragged edge in the reduced shape: the counts match
    what the tiles really do (flops of whole tiles, bytes of the lanes the masks let through) within 1%."""
    M, N, K = 1000, 600, 700
    fast = _count(tmp_path, (M, N, K))
    assert fast["counted_shape"] != [M, N, K]
    got = _totals(fast["launches"][0])
    tiles = {"M": -(-M // 64), "N": -(-N // 64), "K": -(-K // 32)}
    assert fast["launches"][0]["programs"] == tiles["M"] * tiles["N"]
    assert got["flops"] == pytest.approx(2 * tiles["M"] * tiles["N"] * tiles["K"] * 64 * 64 * 32, rel=0.01)
    assert got[("a_ptr", "load_bytes")] == pytest.approx(M * K * tiles["N"] * 2, rel=0.01)
    assert got[("b_ptr", "load_bytes")] == pytest.approx(K * N * tiles["M"] * 2, rel=0.01)
    assert got[("c_ptr", "store_bytes")] == pytest.approx(M * N * 2, rel=0.01)
    assert got[("a_ptr", "footprint_bytes")] == pytest.approx(M * K * 2, rel=0.05)
    assert got[("c_ptr", "footprint_bytes")] == pytest.approx(M * N * 2, rel=0.05)


def test_which_sizes_are_reduced():
    from kernel_lsp.engine.latency.counting import Reduction, reduced_shape

    # Multiples of the tiles halve onto them; a ragged size keeps its remainder modulo the largest block.
    assert reduced_shape((4096, 4096, 4096), 64) == {i: Reduction(128, 256, 4096, True) for i in range(3)}
    assert reduced_shape((1000,), 64) == {0: Reduction(168, 296, 1000, False)}  # 1000 = 168 + 13 * 64
    # Sizes under 4x the floor (128, or the largest block) stay; a block as large as the row leaves it whole.
    assert reduced_shape((500, 64), 64) == {}
    assert reduced_shape((8192, 4096), 4096) == {}
    # Power-law and straight-line growth: x^2 from 128 -> 256 carried to 1024; 3 + 2x from 1 -> 3 carried to 11.
    assert Reduction(128, 256, 1024, True).growth(1.0, 4.0) == 64.0
    assert Reduction(1, 3, 11, False).growth(5.0, 9.0) == 5.0
