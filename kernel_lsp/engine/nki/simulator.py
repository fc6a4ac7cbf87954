"""AWS's NKI simulator beside the model: whether it is installed, a spec run in it, and the comparison of its
verdict with the model's.

`nki.simulate` comes only from AWS's package index (PyPI's `nki` is a placeholder). Where it is installed, a
kernel is run in both: the simulator's verdict stands, and the model's is compared with it. A disagreement is a
problem of the tools (the model, or the simulator), reported at information level with both results, never
counted against the kernel.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import linecache
import sys
from pathlib import Path

from analyzers.rules.verification import TOOL_NOTE

from . import MODEL_LABEL

SIMULATOR = "nki.simulate"


def available() -> bool:
    """Whether the current `nki` package with its simulator is installed (found without importing it)."""
    try:  # on the import path, not in sys.modules (where the model may stand in for it)
        found = importlib.machinery.PathFinder.find_spec("nki", sys.path)
    except (ImportError, ValueError):
        return False
    if found is None or found.origin is None and not found.submodule_search_locations:
        return False
    roots = list(found.submodule_search_locations or [])
    return any((Path(r) / "simulator").exists() or "def simulate" in _read(Path(r) / "__init__.py") for r in roots)


def _read(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


def not_installed_note(what: str) -> str:
    return f"{SIMULATOR} is not installed here: the {what} ran in the {MODEL_LABEL} only"


def cross_check(by_simulator: dict, by_model: dict, what: str = "port") -> list[str]:
    """What the model's run adds to the simulator's verdict, which stands: agreement, a limit of the model, or a
    disagreement naming both results."""
    if by_model.get("status") == "unsupported":
        return [f"not cross-checked: the {MODEL_LABEL} cannot run this {what} ({by_model.get('message')})"]
    if bool(by_model.get("ok")) == bool(by_simulator.get("ok")) and by_model.get("status") == by_simulator.get(
            "status"):
        return [f"cross-checked: the {MODEL_LABEL} agrees ({by_model.get('message')})"]
    return [f"{TOOL_NOTE} {SIMULATOR} and the {MODEL_LABEL} disagree on this {what}; {SIMULATOR}: "
            f"{by_simulator.get('message')}; {MODEL_LABEL}: {by_model.get('message')}"]


def simulated_call(kernel):
    """`kernel` run through `nki.simulate`, recorded as a kernel run for the comparison in check.py."""
    from . import OUTCOMES, Outcome
    from .tensor import Counters

    simulated = importlib.import_module("nki").simulate(kernel)  # AWS's package, not on every machine

    def call(*arrays):
        OUTCOMES.append(Outcome(None, Counters()))
        out = simulated(*arrays)
        OUTCOMES[-1].value = out
        return out
    return call


def _model_modules() -> dict:
    return {k: v for k, v in sys.modules.items() if k in ("nki", "neuronxcc") or k.startswith(("nki.", "neuronxcc."))}


def check_in_simulator(spec) -> dict | None:
    """The spec run in `nki.simulate` in this checking process, whose `nki` is the model: the user's module is
    imported again against AWS's package, then the model's modules come back. None where the spec's launcher is
    not the kernel itself (only a kernel can be handed to the simulator)."""
    from ..verify.loading import load_user_module
    from .check import check_spec

    if spec.launcher is not spec.kernel:
        return None
    module = sys.modules.get(getattr(spec.inputs, "__module__", ""))
    path = getattr(module, "__file__", None)
    if not path:
        return None
    source = "".join(linecache.getlines(path))
    saved = _model_modules()
    for name in saved:
        del sys.modules[name]
    try:
        again = load_user_module(path, source)
        from kernel_lsp.spec import specs_in

        twin = next((s for s in specs_in(again) if s.name == spec.name), None)
        if twin is None:
            return None
        return check_spec(twin, simulated_call(twin.kernel), label=SIMULATOR)
    finally:
        for name in _model_modules():
            del sys.modules[name]
        sys.modules.update(saved)
