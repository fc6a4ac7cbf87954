"""The tiling space of a kernel and the pure steps of searching it: enumerate, prune by compile facts, rank by the
model, pick what to measure, choose the winner. No triton/torch import; never raises on odd values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


def format_config(constexprs, num_warps: int, num_stages: int) -> str:
    """"BLOCK_SIZE=1024, num_warps=4, num_stages=3"."""
    parts = [f"{k}={v}" for k, v in constexprs]
    return ", ".join(parts + [f"num_warps={num_warps}", f"num_stages={num_stages}"])


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
    names = [n for n in (tunable if tunable is not None else constexprs) if _pow2(constexprs.get(n))]
    fixed = tuple((k, v) for k, v in constexprs.items() if k not in names)
    choices = []
    for n in names:
        v = int(constexprs[n])
        lo, hi = (min(MIN_BLOCK, v), max(MAX_BLOCK, v)) if v >= MIN_BLOCK else (1, max(v, 8))
        choices.append(_around(v, radius, lo, hi))
    warps = [w for w in WARPS if abs(math.log2(w) - math.log2(max(1, num_warps))) <= 1] if vary_launch else [num_warps]
    stages = [s for s in STAGES if abs(s - num_stages) <= 1] if vary_launch else [num_stages]
    current = Candidate(tuple(sorted({**dict(fixed), **{n: int(constexprs[n]) for n in names}}.items())),
                        num_warps, num_stages)
    out = [current]

    def rec(i: int, picked: dict):
        if len(out) >= limit:
            return
        if i == len(names):
            ce = tuple(sorted({**dict(fixed), **picked}.items()))
            for w in warps:
                for s in stages:
                    c = Candidate(ce, w, s)
                    if c not in out and len(out) < limit:
                        out.append(c)
            return
        for v in choices[i]:
            rec(i + 1, {**picked, names[i]: v})

    rec(0, {})
    return out


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
