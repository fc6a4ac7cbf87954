"""How long a test waits for something to happen, scaled for the machine that runs the suite.

Every bounded wait of the suite (a condition polled until a deadline, a request awaited, an editor started)
goes through `scaled`. A passing test waits only as long as the work takes; the limit matters when the machine
is busy (a 2-core CI runner beside other jobs), where the work takes longer. Set KERNEL_LSP_TEST_TIME_SCALE to
stretch (or shrink) every limit at once; the per-test hang limits of pytest-timeout stretch with it
(`hang_limit`, applied in tests/conftest.py) but never shrink. No test asserts how long something took (bench/
measures that).
"""

from __future__ import annotations

import os

ENV = "KERNEL_LSP_TEST_TIME_SCALE"
DEFAULT_SCALE = 3.0  # the limits below were first chosen on an idle machine


def _scale() -> float:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_SCALE
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        # A typo must not quietly run the suite with other limits than the ones asked for.
        raise ValueError(f"{ENV}={raw!r}: expected a positive number, the factor every wait of the test suite is "
                         f"stretched by (default {DEFAULT_SCALE:g})")
    return value


TIME_SCALE = _scale()


def scaled(seconds: float) -> float:
    """A limit of `seconds` on an idle machine, for this one."""
    return seconds * TIME_SCALE


def hang_limit(seconds: float) -> float:
    """A pytest-timeout limit (chosen for a busy 2-core machine already) for this machine: stretched in proportion
    when the scale is above its default, never shortened."""
    return seconds * max(1.0, TIME_SCALE / DEFAULT_SCALE)
