"""Nsight Compute's advice (KP001): reported from a real profile of the kernel on a GPU (`kernel-lsp.profileLines`,
`kernel_lsp.engine.profile`), not by a static check. Registered here so that codes, severities, suppression and
documentation work as for every rule.
"""

from __future__ import annotations

from ..model import Severity
from . import Rule, register

register(Rule(
    code="KP001", name="ncu-advice", language="checks", severity=Severity.INFO,
    summary="Nsight Compute's own advice for the profiled kernel (its OPT and WRN rule results).",
    wrong="", right="",
    explanation="`kernel-lsp.profileLines` profiles the kernel at its spec's bench shapes with Nsight Compute "
    "(`ncu --set full`). Each optimisation hint (OPT) or warning (WRN) of ncu's rules becomes one diagnostic on the "
    "kernel's def line, with the rule's name, the shape it was measured at and ncu's estimated speedup. The advice "
    "is ncu's, about one launch at one shape: a grid too small for the GPU at a tiny bench shape says more about "
    "the shape than the kernel. Shown until the file changes.",
))
