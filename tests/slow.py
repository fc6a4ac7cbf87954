"""How long a test waits for something to happen, scaled for the machine that runs the suite.

Every bounded wait of the suite (a condition polled until a deadline, a request awaited, an editor started)
goes through `scaled`. A passing test waits only as long as the work takes; the limit matters when the machine
is busy (a 2-core CI runner beside other jobs), where the work takes longer. Set KERNEL_LSP_TEST_TIME_SCALE to
stretch (or shrink) every limit at once; no test asserts how long something took (bench/ measures that).
"""

from __future__ import annotations

import os

ENV = "KERNEL_LSP_TEST_TIME_SCALE"
DEFAULT_SCALE = 3.0  # the limits below were first chosen on an idle machine


def _scale() -> float:
    try:
        value = float(os.environ.get(ENV) or DEFAULT_SCALE)
    except ValueError:
        return DEFAULT_SCALE
    return value if value > 0 else DEFAULT_SCALE


TIME_SCALE = _scale()


def scaled(seconds: float) -> float:
    """A limit of `seconds` on an idle machine, for this one."""
    return seconds * TIME_SCALE
