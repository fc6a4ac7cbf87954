import json
from pathlib import Path

from analyzers.tiling import Candidate, Facts, choose, enumerate_space, prune, rank, space_size, to_measure

FIXTURE = json.loads((Path(__file__).parent / "fixtures_tiling.json").read_text())


def test_enumeration_around_current_values():
    space = enumerate_space({"BLOCK": 1024, "EVEN": True}, num_warps=4, num_stages=3)
    assert space[0] == Candidate((("BLOCK", 1024), ("EVEN", True)), 4, 3)
    blocks = {dict(c.constexprs)["BLOCK"] for c in space}
    assert blocks == {512, 1024, 2048}
    # num_warps two steps either side, every num_stages: a poor start does not hide 8 warps or deep pipelines.
    assert {c.num_warps for c in space} == {1, 2, 4, 8, 16} and {c.num_stages for c in space} == {2, 3, 4, 5}
    assert len(space) == len(set(space)) == 3 * 5 * 4 == space_size({"BLOCK": 1024, "EVEN": True})
    fixed = enumerate_space({"BLOCK": 1024}, [], num_warps=4, num_stages=3)
    assert {dict(c.constexprs)["BLOCK"] for c in fixed} == {1024} and len(fixed) == 5 * 4
    assert len(enumerate_space({"A": 64, "B": 64, "C": 32}, limit=20)) == 20


def test_a_poor_start_still_reaches_the_large_tiles_before_the_space_narrows():
    """From a small matmul tile, every tile shape within 4x either way is a candidate (with warps scaled to it),
    the best one of the H200 sweep among them: 128x256x64, 8 warps, 3 stages."""
    start = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    space = enumerate_space(start, num_warps=4, num_stages=3, radius=2, limit=128)
    assert space[0] == Candidate(tuple(sorted(start.items())), 4, 3)
    assert Candidate((("BLOCK_K", 64), ("BLOCK_M", 128), ("BLOCK_N", 256)), 8, 3) in space
    shapes = {c.constexprs for c in space}
    assert len(shapes) == 5 * 5 * 4  # 16..256 for M and N, 16..128 for K: every combination
    assert {c.num_warps for c in space} >= {2, 4, 8} and {c.num_stages for c in space} == {2, 3, 4, 5}
    assert len(space) == 128 < space_size(start, num_warps=4, num_stages=3, radius=2)
    # Seeded: the same inputs give the same candidates in the same order.
    assert space == enumerate_space(start, num_warps=4, num_stages=3, radius=2, limit=128)
    # A tight limit samples the shapes evenly, large ones included, rather than cutting the list at small tiles.
    small = enumerate_space(start, num_warps=4, num_stages=3, radius=2, limit=48)
    assert max(dict(c.constexprs)["BLOCK_M"] * dict(c.constexprs)["BLOCK_N"] for c in small) >= 128 * 256


def test_autotune_space_keeps_configs_first():
    cfgs = [Candidate((("BM", 128), ("BN", 256)), 8, 3), Candidate((("BM", 64), ("BN", 64)), 4, 3)]
    space = enumerate_space({}, configs=cfgs, radius=1)
    assert space[:2] == cfgs and len(space) > 2


def test_prune_by_compile_facts():
    a, b, c, d = (Candidate((("B", v),), 4, 3) for v in (16, 32, 64, 128))
    kept, dropped = prune([a, b, c, d], {b: Facts(shared_bytes=300 * 1024), c: Facts(spill_bytes=64),
                                         d: Facts(error="out of resources")}, 227 * 1024)
    assert kept == [a]
    assert "300 KB" in dropped[b] and "spills 64" in dropped[c] and "does not compile" in dropped[d]


def _cands(table):
    out = {}
    for text, us in table.items():
        parts = dict(p.split("=") for p in text.split(", "))
        ce = tuple((k, int(v)) for k, v in parts.items() if k.startswith("BLOCK"))
        out[Candidate(ce, int(parts["num_warps"]), int(parts["num_stages"]))] = us
    return out


def test_search_selection_with_recorded_measurements():
    est = _cands(FIXTURE["estimated_us"])
    measured_all = _cands(FIXTURE["measured_us"])
    ranked = rank(list(est), est)
    assert [est[c] for c in ranked] == sorted(est.values())
    picked = to_measure(ranked, fraction=0.5)
    assert len(picked) == 2  # half of a 4-config space
    winner, source = choose(ranked, {c: measured_all[c] for c in picked if c in measured_all})
    # The model ranks 128x128 first, the measurement prefers 128x256: the measured winner is proposed.
    assert source == "measured" and dict(winner.constexprs)["BLOCK_N"] == 256
    assert choose(ranked, {}) == (ranked[0], "estimated")
    current = ranked[-1]
    assert current in to_measure(ranked, fraction=0.5, current=current)
