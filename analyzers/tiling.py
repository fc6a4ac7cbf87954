"""The tiling space of a kernel and the pure steps of searching it: enumerate, prune by compile facts, rank by the
model, pick what to measure, choose the winner. No triton/torch import; never raises on odd values.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field
from typing import Any

WARPS = (1, 2, 4, 8, 16)
STAGES = (2, 3, 4, 5)
MIN_BLOCK, MAX_BLOCK = 16, 4096  # bounds of a block-size constexpr's candidates (only when the current value is)
MEASURE_FRACTION = 0.3


@dataclass(frozen=True, order=True)
class Candidate:
    constexprs: tuple[tuple[str, int], ...]
    num_warps: int
    num_stages: int

    @property
    def overrides(self) -> dict:
        return {**dict(self.constexprs), "num_warps": self.num_warps, "num_stages": self.num_stages}

    @property
    def label(self) -> str:
        return format_config(self.constexprs, self.num_warps, self.num_stages)


def format_config(constexprs, num_warps: int, num_stages: int, order=None, **options) -> str:
    """"BLOCK_SIZE=1024, num_warps=4, num_stages=3": a configuration as the user writes it, the constexprs in
    `order` (the kernel's parameter order; others after them) where given. `options` (num_ctas, maxnreg, ...)
    are shown only where set away from triton's defaults."""
    pairs = list(constexprs)
    if order is not None:
        rank = {name: i for i, name in enumerate(order)}
        pairs.sort(key=lambda kv: rank.get(kv[0], len(rank)))
    parts = [f"{k}={v}" for k, v in pairs]
    parts += [f"num_warps={num_warps}", f"num_stages={num_stages}"]
    parts += [f"{k}={v}" for k, v in options.items() if v is not None and not (k == "num_ctas" and v == 1)]
    return ", ".join(parts)


def _pow2(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


def _around(value: int, radius: int, lo: int, hi: int) -> list[int]:
    vals = {value}
    for r in range(1, radius + 1):
        vals.add(value << r)
        vals.add(value >> r)
    return sorted(v for v in vals if lo <= v <= hi or v == value)


def enumerate_space(constexprs: dict[str, object], tunable: list[str] | None = None, num_warps: int = 4,
                    num_stages: int = 3, *, radius: int = 1, configs: list[Candidate] | None = None,
                    vary_launch: bool = True, limit: int = 256) -> list[Candidate]:
    """Candidates: each tunable power-of-two constexpr at value x 2**-radius .. 2**radius (bounded), num_warps and
    num_stages one step either side; or, for an autotuned kernel, its configs plus those neighbours of each.
    The current configuration comes first. At most `limit` candidates."""
    if configs:
        out: list[Candidate] = list(dict.fromkeys(configs))
        for c in configs:
            for extra in enumerate_space(dict(c.constexprs), None, c.num_warps, c.num_stages, radius=radius,
                                         configs=None, vary_launch=vary_launch, limit=limit):
                if extra not in out:
                    out.append(extra)
        return out[:limit]
    pow2: dict[str, int] = {}
    for n in (tunable if tunable is not None else constexprs):
        value = constexprs.get(n)
        if isinstance(value, int) and _pow2(value):
            pow2[n] = value
    names = list(pow2)
    fixed: dict[str, Any] = {k: v for k, v in constexprs.items() if k not in pow2}  # passed through as they are
    choices = []
    for n in names:
        v = pow2[n]
        lo, hi = (min(MIN_BLOCK, v), max(MAX_BLOCK, v)) if v >= MIN_BLOCK else (1, max(v, 8))
        choices.append(_around(v, radius, lo, hi))
    warps, stages = launch_choices(num_warps, num_stages, vary_launch)
    current = Candidate(tuple(sorted({**fixed, **pow2}.items())),
                        num_warps, num_stages)
    everything = [Candidate(tuple(sorted({**fixed, **dict(zip(names, values))}.items())), w, s)
                  for values in itertools.islice(itertools.product(*choices), 20000) for w in warps for s in stages]
    shapes = [Candidate(tuple(sorted({**fixed, **dict(zip(names, values))}.items())),
                        _scaled_warps(num_warps, [v / pow2[n] for n, v in zip(names, values)], warps), num_stages)
              for values in itertools.islice(itertools.product(*choices), 20000)] if names else []
    return _diverse(current, everything, limit, shapes)


def launch_choices(num_warps: int, num_stages: int, vary_launch: bool = True) -> tuple[list[int], list[int]]:
    """num_warps two steps either side of the current value (2 -> 1..8, 4 -> 1..16) and every num_stages: a
    large tile wants 8 warps and more stages than a poor start has."""
    if not vary_launch:
        return [num_warps], [num_stages]
    warps = [w for w in WARPS if abs(math.log2(w) - math.log2(max(1, num_warps))) <= 2]
    stages = sorted(set(STAGES) | {num_stages})
    return warps, stages


def space_size(constexprs: dict[str, object], tunable: list[str] | None = None, num_warps: int = 4,
               num_stages: int = 3, *, radius: int = 1, vary_launch: bool = True) -> int:
    """How many configurations enumerate_space draws its candidates from (before its limit)."""
    size = 1
    for n in (tunable if tunable is not None else constexprs):
        v = constexprs.get(n)
        if isinstance(v, int) and _pow2(v):
            lo, hi = (min(MIN_BLOCK, v), max(MAX_BLOCK, v)) if v >= MIN_BLOCK else (1, max(v, 8))
            size *= len(_around(v, radius, lo, hi))
    warps, stages = launch_choices(num_warps, num_stages, vary_launch)
    return size * len(warps) * len(stages)


def _scaled_warps(num_warps: int, ratios: list[float], warps: list[int]) -> int:
    """The warps a tile of another size is tried with first: a tile `ratio` times the current one's elements gets
    sqrt(ratio) times the warps (each thread's share grows too), at most 8, within the choices."""
    if not warps:
        return num_warps
    want = math.log2(max(1, num_warps)) + 0.5 * sum(math.log2(r) for r in ratios if r > 0)
    want = min(want, 3.0)
    return min(warps, key=lambda w: (abs(math.log2(w) - want), w))


def _diverse(current: Candidate, everything: list[Candidate], limit: int,
             shapes: list[Candidate] | None = None) -> list[Candidate]:
    """At most `limit` candidates, the current one first, then every tile shape (each combination of the block
    sizes, with the warps scaled to it: the large tiles are there before the space narrows), then every
    single-tunable change of the current one (each value of each tunable is seen), then an even, seeded sample of
    the rest: cutting a list sorted by size would keep only the small tiles."""
    out = [current]
    seen = {current}
    singles = [c for c in everything if sum(a != b for a, b in zip(_axes(c), _axes(current))) == 1]
    rest = [c for c in everything if c not in seen and c not in singles]
    random.Random(0).shuffle(rest)
    shapes = list(shapes or [])
    room = max(limit // 2, limit - 1 - len(singles))
    if len(shapes) > room:  # too many shapes to try each: a seeded, even sample of them
        random.Random(1).shuffle(shapes)
        shapes = shapes[:room]
    for c in shapes + singles + rest:
        if len(out) >= limit:
            break
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def _axes(c: Candidate) -> tuple:
    return tuple(v for _, v in c.constexprs) + (c.num_warps, c.num_stages)


@dataclass(frozen=True)
class Facts:
    """What compiling a candidate told: None where unknown."""

    shared_bytes: int | None = None
    spill_bytes: int | None = None
    registers: int | None = None
    error: str | None = None


def prune(candidates: list[Candidate], facts: dict[Candidate, Facts], shared_limit: int | None
          ) -> tuple[list[Candidate], dict[Candidate, str]]:
    """Drop candidates that do not compile, need more shared memory than the target allows, or spill."""
    kept, dropped = [], {}
    for c in candidates:
        f = facts.get(c)
        if f is None:
            kept.append(c)
        elif f.error:
            dropped[c] = f"does not compile: {f.error}"
        elif shared_limit is not None and f.shared_bytes is not None and f.shared_bytes > shared_limit:
            dropped[c] = f"needs {f.shared_bytes // 1024} KB of shared memory, the target allows {shared_limit // 1024}"
        elif f.spill_bytes:
            dropped[c] = f"spills {f.spill_bytes} bytes"
        else:
            kept.append(c)
    return kept, dropped


def rank(candidates: list[Candidate], estimated_us: dict[Candidate, float | None]) -> list[Candidate]:
    """Fastest estimate first; candidates without an estimate last, in their original order."""
    def key(c: Candidate):
        us = estimated_us.get(c)
        return (us is None or not math.isfinite(us), us if us is not None and math.isfinite(us) else 0.0)
    return sorted(candidates, key=key)


def to_measure(ranked: list[Candidate], fraction: float = MEASURE_FRACTION, current: Candidate | None = None,
               space_size: int | None = None) -> list[Candidate]:
    """The best-ranked candidates to time on the GPU: at most `fraction` of the space (at least one), the current
    configuration included so the proposal is compared against what the user has."""
    size = space_size if space_size is not None else len(ranked)
    budget = max(1, int(fraction * size))
    picked = ranked[:budget]
    if current is not None and current in ranked and current not in picked:
        picked = picked[:budget - 1] + [current] if budget > 1 else picked
    return picked


def choose(ranked: list[Candidate], measured_us: dict[Candidate, float]) -> tuple[Candidate | None, str]:
    """The winner and where its figure comes from: the fastest measured one when any was measured, else the
    best estimate."""
    timed = [(us, c) for c, us in measured_us.items() if us is not None and math.isfinite(us)]
    if timed:
        return min(timed, key=lambda t: t[0])[1], "measured"
    return (ranked[0], "estimated") if ranked else (None, "none")


# ----------------------------------------------------------------------------------------------------------------
# An adaptive measured search: the model proposes, measurements decide.


@dataclass
class SearchPlan:
    winner: dict | None
    measured: dict[str, float]  # configuration key -> median of its measurements, microseconds
    runs: int  # measurements taken (re-measurements of close finalists included)
    rounds: int
    start_us: float | None = None  # median of the current configuration's timings (None: not given or failed)
    noise: float = 0.0  # relative spread of repeated timings of one configuration (the largest seen), at least
    # `spread`: a winner must beat the start by more than this, every timing of it below every one of the start
    within_noise: list[str] = field(default_factory=list)  # keys of the candidates as fast as the winner within
    # the noise (the winner first): which of them wins is not repeatable


def config_key(cfg: dict) -> str:
    return ", ".join(f"{k}={cfg[k]}" for k in sorted(cfg))


def _steps(space: list[dict]) -> dict[str, list]:
    """Each tunable's distinct values in order: a step is to the next value up or down."""
    out: dict[str, set] = {}
    for cfg in space:
        for k, v in cfg.items():
            out.setdefault(k, set()).add(v)
    return {k: sorted(v, key=lambda x: (not isinstance(x, (int, float)), x)) for k, v in out.items() if len(v) > 1}


def _neighbours(cfg: dict, steps: dict[str, list], index: dict[str, dict]) -> list[dict]:
    out = []
    for k, values in steps.items():
        if k not in cfg:
            continue
        i = values.index(cfg[k])
        for j in (i - 1, i + 1):
            if 0 <= j < len(values):
                other = index.get(config_key({**cfg, k: values[j]}))
                if other is not None:
                    out.append(other)
    return out


def search_plan(space: list[dict], estimate_us, measure, *, current: dict | None = None,
                fraction: float = MEASURE_FRACTION, spread: float = 0.03) -> SearchPlan:
    """Which configurations to time, and the winner: successive halving around the model's picks.

    Round one times the model's best quarter of the budget, plus, for every value of every tunable, the
    best-estimated configuration with that value (so a model that is wrong about one tunable cannot hide that part
    of the space), plus the current configuration. Each later round keeps the faster half of what was timed and
    times the unmeasured one-step neighbours of the survivors (those of the fastest first, each survivor's by
    estimate) until the budget (`fraction` of the space) is spent or nothing new is near the survivors.
    Finalists within `spread` (the timing's relative noise) of the fastest are timed twice more and compared by
    their medians. `estimate_us(cfg)` may return None
    (no estimate: ranked last); `measure(cfgs)` times one round and returns microseconds per configuration, None
    or inf for one that failed."""
    if not space:
        return SearchPlan(None, {}, 0, 0)
    index = {config_key(c): c for c in space}
    budget = max(2, int(fraction * len(space)))
    est = {}
    for c in space:
        try:
            e = estimate_us(c)
        except Exception:  # noqa: BLE001 - a model failure ranks the configuration last, never stops the search
            e = None
        est[config_key(c)] = e if e is not None and math.isfinite(e) else math.inf
    ranked = sorted(space, key=lambda c: est[config_key(c)])
    runs: dict[str, list[float]] = {}

    def time(cfgs: list[dict]) -> None:
        """One round of measurements (a GPU worker times a batch in one process)."""
        if not cfgs:
            return
        try:
            got = list(measure(cfgs))
        except Exception:  # noqa: BLE001 - a failed round records its configurations as failed
            got = []
        got += [None] * (len(cfgs) - len(got))
        for cfg, us in zip(cfgs, got):
            ok = isinstance(us, (int, float)) and math.isfinite(us)
            runs.setdefault(config_key(cfg), []).append(float(us) if ok else math.inf)

    def median(key: str) -> float:
        values = sorted(runs[key])
        return values[len(values) // 2]

    # The current configuration is timed first, in the same run as the candidates: the proposal is compared with
    # what the user has, never with a figure from elsewhere.
    start = index.get(config_key(current)) if current is not None else None
    first: list[dict] = ([start] if start is not None else [])
    first += [c for c in ranked[:max(1, budget // 4)] if c is not start]
    steps = _steps(space)
    for k, values in steps.items():
        for v in values:
            pick = next((c for c in ranked if c.get(k) == v), None)
            if pick is not None and pick not in first:
                first.append(pick)
    time(first[:budget])
    rounds = 1
    while len(runs) < budget:
        timed = sorted(runs, key=median)
        survivors = timed[:max(2, len(timed) // 2)]
        fresh: list[dict] = []
        origin: dict[str, int] = {}  # neighbour -> measured rank of the survivor it was found next to
        for rank_, key in enumerate(survivors):
            for n in _neighbours(index[key], steps, index):
                if config_key(n) not in runs and config_key(n) not in origin:
                    origin[config_key(n)] = rank_
                    fresh.append(n)
        if not fresh:
            break
        # Next to the fastest measured first; the model orders the neighbours of one survivor.
        fresh.sort(key=lambda c: (origin[config_key(c)], est[config_key(c)]))
        room = budget - len(runs)
        time(fresh[:max(1, min(room, len(survivors)))])
        rounds += 1
    timed = sorted(runs, key=median)
    start_key = config_key(start) if start is not None else None
    if timed and math.isfinite(median(timed[0])):
        best = median(timed[0])
        close = [k for k in timed[:4] if median(k) <= best * (1 + spread)]
        # The start is timed again beside the finalists: its repeats measure the noise a winner must beat.
        if start_key is not None and start_key != timed[0] and start_key not in close:
            close.append(start_key)
        if len(close) > 1:
            time([index[k] for k in close])
            time([index[k] for k in close])
        timed = sorted(runs, key=median)
    noise = spread
    for values in runs.values():
        finite = [v for v in values if math.isfinite(v)]
        if len(finite) > 1:
            mid = sorted(finite)[len(finite) // 2]
            noise = max(noise, (max(finite) - min(finite)) / mid if mid > 0 else 0.0)
    winner_key = timed[0] if timed and math.isfinite(median(timed[0])) else None
    start_us = median(start_key) if start_key in runs and math.isfinite(median(start_key)) else None
    if winner_key is not None and start_us is not None and start_key is not None and winner_key != start_key:
        # Faster than the start by more than the noise, and every timing of it below every timing of the start:
        # the fastest of many noisy medians is biased low, so a median alone would crown noise.
        apart = max(runs[winner_key]) < min(runs[start_key])
        if median(winner_key) * (1 + noise) >= start_us or not apart:
            winner_key = start_key  # what the user has stays
    within = []
    if winner_key is not None:
        top = median(winner_key)
        within = [winner_key] + [k for k in timed if k != winner_key and median(k) <= top * (1 + noise)]
    return SearchPlan(index[winner_key] if winner_key is not None else None, {k: median(k) for k in runs},
                      sum(len(v) for v in runs.values()), rounds, start_us, noise,
                      within if len(within) > 1 else [])
