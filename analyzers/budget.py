"""Bounds on what analysing one file may cost, whatever the file says, and the checkpoints where a superseded
analysis stops.

The static evaluators fold constants the user wrote (`BLOCK * 2`, `1 << 10`, `cdiv(n, BLOCK)`); a hostile or
mistaken file can ask them for values that take minutes or gigabytes to build (`((10**64)**64)**64`,
`'a' * (1 << 34)`) or for work exponential in its size (`x2 = x1 + x1`, `x3 = x2 + x2`, ...). Every operation
checks the size of its result before building it (`bounded_binop`), and every evaluation step is paid from a
budget of steps per file, proportional to the file's length: past it, values are unknown, never wrong.

An analysis runs under one `Budget` (`analysis_budget`); its `cancel` event, set by whoever scheduled the analysis
when a newer version of the document arrives, makes the next checkpoint raise `AnalysisCancelled`. That exception is
a BaseException so that the analyzers' per-rule guards (`except Exception`) let it through.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

UNKNOWN = object()

MAX_INT_BITS = 4096  # far beyond any size, stride or block a kernel uses (2**4096 has 1,234 digits)
MAX_ITEMS = 4096  # characters of a string, items of a tuple or list
MAX_NESTING = 64  # evaluations in progress at once, through names and their bindings
BASE_STEPS = 50_000
STEPS_PER_LINE = 50
CHECK_EVERY = 256  # steps between two looks at the cancel event


class AnalysisCancelled(BaseException):
    """A newer version of the document superseded this analysis; nothing of it is delivered."""


class Budget:
    """Evaluation steps left to one analysis, and the event that cancels it."""

    def __init__(self, steps: int = BASE_STEPS, cancel: threading.Event | None = None):
        self.steps = steps
        self.used = 0
        self.nesting = 0
        self.exhausted = False
        self.cancel = cancel

    @classmethod
    def for_text(cls, text: str, cancel: threading.Event | None = None) -> Budget:
        return cls(BASE_STEPS + STEPS_PER_LINE * text.count("\n"), cancel)

    def step(self) -> bool:
        """Pay one step; False once the budget is spent (the caller answers UNKNOWN)."""
        return self.pay(1)

    def pay(self, steps: int) -> bool:
        """Pay `steps` (what a value's size costs to build); False once the budget is spent."""
        before, self.used = self.used, self.used + steps
        if before // CHECK_EVERY != self.used // CHECK_EVERY:
            self.checkpoint()
        if self.used > self.steps:
            self.exhausted = True
            return False
        return True

    def checkpoint(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise AnalysisCancelled


_current: ContextVar[Budget | None] = ContextVar("analysis_budget", default=None)


@contextmanager
def analysis_budget(budget: Budget) -> Iterator[Budget]:
    """Run the enclosed analysis under `budget` (in this thread or task only)."""
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def current() -> Budget | None:
    return _current.get()


def checkpoint() -> None:
    """Stop here (AnalysisCancelled) if the running analysis was superseded; a no-op outside an analysis."""
    budget = _current.get()
    if budget is not None:
        budget.checkpoint()


def too_big(value: object) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() > MAX_INT_BITS
    if isinstance(value, (str, bytes, tuple, list)):
        return len(value) > MAX_ITEMS
    return False


def _bits(value: object) -> int:
    return value.bit_length() if isinstance(value, int) else 0


def _repeat_ok(a: object, b: object) -> bool:
    """Whether `a * b` stays within the limits, decided before it is computed."""
    if isinstance(a, (str, bytes, tuple, list)) and isinstance(b, int):
        return len(a) * max(b, 0) <= MAX_ITEMS
    if isinstance(b, (str, bytes, tuple, list)) and isinstance(a, int):
        return len(b) * max(a, 0) <= MAX_ITEMS
    if isinstance(a, int) and isinstance(b, int):
        return _bits(a) + _bits(b) <= MAX_INT_BITS
    return isinstance(a, (int, float)) and isinstance(b, (int, float))  # a float product is one float


def _pow_ok(a: object, b: object) -> bool:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return False
    if abs(b) > 64:  # no kernel size needs more; a float result past 1e308 only overflows
        return False
    if isinstance(a, int) and isinstance(b, int) and b > 0:
        return _bits(abs(a)) <= 1 or _bits(abs(a)) * b <= MAX_INT_BITS
    return True


def _shift_ok(a: object, b: object) -> bool:
    return isinstance(a, int) and isinstance(b, int) and 0 <= b <= MAX_INT_BITS and _bits(a) + b <= MAX_INT_BITS


_SIZED = (int, float, str, bytes, tuple, list)


def bounded_binop(op: type[ast.operator], a: object, b: object) -> object:
    """`a op b` for the operators constant folding needs, or UNKNOWN where the result would exceed the limits
    (checked before it is built) or the operation fails."""
    if not isinstance(a, _SIZED) or not isinstance(b, _SIZED):
        return UNKNOWN
    if too_big(a) or too_big(b):
        return UNKNOWN
    try:
        if op is ast.Add:
            if isinstance(a, (str, bytes, tuple, list)) and isinstance(b, (str, bytes, tuple, list)) \
                    and len(a) + len(b) > MAX_ITEMS:
                return UNKNOWN
            value = a + b  # type: ignore[operator]
        elif op is ast.Sub:
            value = a - b  # type: ignore[operator]
        elif op is ast.Mult:
            if not _repeat_ok(a, b):
                return UNKNOWN
            value = a * b  # type: ignore[operator]
        elif op is ast.Pow:
            if not _pow_ok(a, b):
                return UNKNOWN
            value = a ** b  # type: ignore[operator]
        elif op is ast.LShift:
            if not _shift_ok(a, b):
                return UNKNOWN
            value = a << b  # type: ignore[operator]
        elif op is ast.Mod and isinstance(a, (str, bytes)):
            return UNKNOWN  # `"%0999999999d" % 1`: printf-style formatting sizes its own output
        elif op in _CHEAP:
            value = _CHEAP[op](a, b)
        else:
            return UNKNOWN
    except (ArithmeticError, TypeError, ValueError):
        return UNKNOWN
    return UNKNOWN if too_big(value) else value


# Results no larger than their operands.
_CHEAP = {ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Div: lambda a, b: a / b,
          ast.RShift: lambda a, b: a >> b, ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b,
          ast.BitXor: lambda a, b: a ^ b}
