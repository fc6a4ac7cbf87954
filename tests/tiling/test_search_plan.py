"""The adaptive tiling search and the configuration model, judged on the H200 sweeps kept in bench/sweeps/ and on
spaces built to fool a model."""

from __future__ import annotations

import itertools
import json
import math
import random
import sys
from pathlib import Path

import pytest

from analyzers import config_model
from analyzers.hardware import get_device
from analyzers.tiling import config_key, search_plan

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _each(one):
    return lambda cfgs: [one(c) for c in cfgs]


def _space():
    return [dict(BLOCK=b, num_warps=w, num_stages=s)
            for b, w, s in itertools.product([64, 128, 256, 512, 1024], [1, 2, 4, 8], [1, 2, 3])]


def _truth(cfg: dict) -> float:
    # Fastest at BLOCK=512, 8 warps, 2 stages; each step away costs time.
    return (100 + 30 * abs(math.log2(cfg["BLOCK"] / 512)) + 20 * abs(math.log2(cfg["num_warps"] / 8))
            + 5 * abs(cfg["num_stages"] - 2))


def test_a_model_wrong_about_one_tunable_does_not_hide_the_best() -> None:
    space = _space()
    # The model ranks small blocks first (wrong) but gets the warps right.
    wrong = lambda c: 100 + c["BLOCK"] / 10 + 20 * abs(math.log2(c["num_warps"] / 8))  # noqa: E731
    plan = search_plan(space, wrong, _each(_truth), current=dict(BLOCK=64, num_warps=1, num_stages=1))
    assert plan.winner == dict(BLOCK=512, num_warps=8, num_stages=2)
    assert len(plan.measured) <= int(0.3 * len(space))


def test_failures_of_the_model_and_of_measurements_are_survived() -> None:
    space = _space()

    def model(c):
        if c["BLOCK"] == 1024:
            raise ValueError("no estimate")
        return None if c["num_warps"] == 1 else _truth(c)

    def measure(c):
        if c["BLOCK"] == 512 and c["num_warps"] == 8 and c["num_stages"] == 2:
            return math.inf  # this one fails at launch
        return _truth(c)

    plan = search_plan(space, model, _each(measure))
    assert plan.winner is not None and plan.winner != dict(BLOCK=512, num_warps=8, num_stages=2)
    assert _truth(plan.winner) <= 110
    assert all(math.isfinite(us) or key == config_key(dict(BLOCK=512, num_warps=8, num_stages=2))
               for key, us in plan.measured.items())


def test_close_finalists_are_timed_again_before_one_wins() -> None:
    space = _space()
    rng = random.Random(0)
    calls: dict[str, int] = {}

    def noisy(c):
        calls[config_key(c)] = calls.get(config_key(c), 0) + 1
        return _truth(c) * (1 + rng.uniform(-0.01, 0.01))

    plan = search_plan(space, _truth, _each(noisy), spread=0.2)
    assert plan.runs > len(plan.measured)  # finalists within 20% were re-timed
    assert max(calls.values()) == 3


def test_an_empty_space_has_no_winner() -> None:
    plan = search_plan([], lambda c: 1.0, _each(lambda c: 1.0))
    assert plan.winner is None and plan.measured == {}


def test_more_bytes_in_flight_is_never_slower_and_spills_cost() -> None:
    hw = get_device("H200")
    base = config_model.Launch(programs=8192, num_warps=4, num_stages=1, dram_bytes=256e6, elements=64e6,
                               iterations=16, bytes_per_iteration=1024, registers=32, shared_bytes=0)
    wider = config_model.Launch(**{**base.__dict__, "bytes_per_iteration": 8192, "iterations": 2})
    assert config_model.estimate(wider, hw).us <= config_model.estimate(base, hw).us
    spilled = config_model.Launch(**{**base.__dict__, "spill_bytes": 256})
    assert config_model.estimate(spilled, hw).us > config_model.estimate(base, hw).us
    too_big = config_model.Launch(**{**base.__dict__, "shared_bytes": 10 ** 7})
    assert not config_model.estimate(too_big, hw).launchable
    assert config_model.estimate(base, hw).calibrated_on == "H200"
    assert config_model.CALIBRATIONS["H200"].provenance


@pytest.fixture(scope="module")
def tiling_eval():
    sys.path.insert(0, str(BENCH))
    try:
        import tiling_eval
        yield tiling_eval
    finally:
        sys.path.remove(str(BENCH))


def test_on_the_h200_sweeps_the_search_reaches_95_percent_of_the_best_measuring_30_percent(tiling_eval) -> None:
    hw = get_device("H200")
    cases = tiling_eval.load()
    assert len(cases) >= 6
    for case, recs in cases:
        by_cfg = {json.dumps(r["config"], sort_keys=True): r for r in recs}
        space = [r["config"] for r in recs]
        est = {json.dumps(c, sort_keys=True): config_model.estimate(tiling_eval.launch_of(case, by_cfg[json.dumps(
            c, sort_keys=True)]), hw).us for c in space}
        start = max(recs, key=lambda r: r["us"])["config"]
        rng = random.Random(7)

        def measure(cfg, by_cfg=by_cfg, rng=rng):
            r = by_cfg[json.dumps(cfg, sort_keys=True)]
            return r["us"] + rng.gauss(0.0, max(1e-9, (r["us_q80"] - r["us_q20"]) / 2))

        plan = search_plan(space, lambda c, est=est: est[json.dumps(c, sort_keys=True)],
                           lambda cfgs, measure=measure: [measure(c) for c in cfgs],
                                   current=start)
        best = min(r["us"] for r in recs)
        reached = best / by_cfg[json.dumps(plan.winner, sort_keys=True)]["us"]
        assert reached >= 0.95, (case["case"], reached)
        assert len(plan.measured) <= 0.3 * len(space), case["case"]


def test_counted_work_becomes_the_models_launch() -> None:
    from analyzers.roofline import ArgTraffic, Work

    hw = get_device("H200")
    gemm = Work(programs=512, num_warps=8, num_stages=3,
                args=(ArgTraffic("a", 64e6, 0, 32e6, 32e6), ArgTraffic("b", 64e6, 0, 32e6, 32e6),
                      ArgTraffic("c", 0, 32e6, 32e6, 32e6)),
                tensor_flops={"fp16": 2.0 * 4096 ** 3},
                constexprs=(("BLOCK_SIZE_M", 128), ("BLOCK_SIZE_N", 256), ("BLOCK_SIZE_K", 64)))
    launch = config_model.launch_from_work(gemm, hw, registers=220, shared_bytes=147456)
    assert launch.iterations == 4096 / 64 and launch.warp_tile == 128 * 256 / 8
    rows = Work(programs=8192, num_warps=8, num_stages=2, args=(ArgTraffic("x", 268e6, 0, 268e6, 268e6),),
                constexprs=(("BLOCK", 2048),))
    launch = config_model.launch_from_work(rows, hw, registers=32, shared_bytes=0)
    assert launch.bytes_per_iteration == 2048 * 4
    assert math.isfinite(config_model.estimate(launch, hw).us)


def test_the_start_is_always_timed_and_a_winner_must_beat_it_by_more_than_the_noise() -> None:
    space = _space()
    start = dict(BLOCK=1024, num_warps=1, num_stages=3)  # the model ranks it last
    timed: list[str] = []

    def measure(cfgs):
        timed.extend(config_key(c) for c in cfgs)
        return [_truth(c) for c in cfgs]

    plan = search_plan(space, _truth, measure, current=start, fraction=0.05)  # 3 timings: the start among them
    assert timed[0] == config_key(start) and plan.start_us == _truth(start)
    assert plan.winner != start and _truth(plan.winner) * (1 + plan.noise) < plan.start_us

    # Every candidate as fast as the start, timings that wander by 5%: a winner beyond the noise is rare (the
    # fastest of many noisy medians is biased low), and the result says which ones are as fast.
    wrong = 0
    for seed in range(40):
        rng = random.Random(seed)
        flat = lambda c, rng=rng: 100 * (1 + rng.uniform(-0.025, 0.025))  # noqa: E731
        plan = search_plan(space, _truth, _each(flat), current=start)
        assert plan.noise >= 0.03
        wrong += plan.winner != start
        assert len(plan.within_noise) > 1
        if plan.winner == start:
            assert plan.within_noise[0] == config_key(start)
    assert wrong <= 2


def test_the_same_inputs_give_the_same_pick() -> None:
    space = _space()
    picks = set()
    for _ in range(3):
        rng = random.Random(7)
        noisy = lambda c, rng=rng: _truth(c) * (1 + rng.uniform(-0.01, 0.01))  # noqa: E731
        plan = search_plan(space, _truth, _each(noisy), current=dict(BLOCK=64, num_warps=1, num_stages=1))
        picks.add((config_key(plan.winner), tuple(plan.within_noise)))
    assert len(picks) == 1
