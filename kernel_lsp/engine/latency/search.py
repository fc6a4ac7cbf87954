"""Tiling search: enumerate a kernel's tiling space, rank it by the roofline model on counted work, time the best
candidates on the GPU when there is one (at most 30% of the space), verify the winner with the correctness checker
on the edited file, and propose the edit.

Block-size constexprs are varied only when the kernel's grid is a function of its meta-parameters (a lambda over
`meta`, or an autotuner): a tuple grid computed by the launcher would not follow a changed block size. Otherwise
only num_warps and num_stages vary. The edit: new keyword values at the launch site, or, for an autotuned kernel,
the winning config put first in its config list.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from analyzers.analyze import analyze_source
from analyzers.model import Span, TextEdit, apply_edits
from analyzers.roofline import estimate
from analyzers.tiling import Candidate, choose, enumerate_space, rank, to_measure

from . import WorkerError, count_work, measure_file, resolve_device, work_from_json


@dataclass
class Tried:
    label: str
    overrides: dict
    estimated_us: float | None
    measured_us: float | None = None
    source: str = "estimated"  # "measured" | "estimated"
    note: str | None = None


@dataclass
class TilingProposal:
    kernel: str
    device: str
    winner: str | None  # label of the winning configuration
    winner_overrides: dict | None
    source: str  # "measured" | "estimated" | "none"
    current: str | None
    current_us: float | None
    winner_us: float | None
    speedup: float | None
    edits: list[tuple[tuple[int, int, int, int], str]] = field(default_factory=list)  # (range, new text), 0-based
    verified: bool | None = None  # None: not verified (no checker or nothing to change)
    verify_message: str | None = None
    tried: list[Tried] = field(default_factory=list)
    space_size: int = 0
    measured_fraction: float = 0.0
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


Progress = Callable[[str, float], None]


def search_tiling(path: str, source: str, kernel: str, target: str = "H200", root: str | None = None, *,
                  measure: bool | None = None, verify: bool = True, progress: Progress | None = None,
                  cancel: threading.Event | None = None, radius: int = 1, limit: int = 48,
                  hardware=None) -> TilingProposal:
    """Search the tiling of `kernel` in the file `path` (buffer text `source`) for device `target`.
    `measure`: time candidates on the GPU (None: when torch sees one in the worker). `progress(message, 0..1)`."""
    def say(msg: str, frac: float):
        if progress:
            progress(msg, frac)

    hw = resolve_device(target, hardware)
    proposal = TilingProposal(kernel, hw.name if hw else str(target), None, None, "none", None, None, None, None)
    if hw is None:
        proposal.errors.append(f"no hardware model for {target!r}")
        return proposal
    say("counting the current configuration", 0.05)
    try:
        base = count_work(path, source, kernels=[kernel], root=root, cancel=cancel)
    except WorkerError as exc:
        proposal.errors.append(f"work counting failed: {exc}")
        return proposal
    base = [p for p in base if p.get("kernel") == kernel]
    if not base or base[0].get("error") or not base[0].get("launches"):
        proposal.errors.append(base[0]["error"] if base and base[0].get("error") else
                               f"no spec for {kernel}: the search needs a @spec with bench shapes")
        return proposal
    point = base[0]
    launches = point["launches"]
    autotuned = any(lc.get("config_index") is not None for lc in launches)
    grid_free = all(lc.get("grid_callable") for lc in launches)
    works = [work_from_json(lc) for lc in launches]
    configs = [Candidate(tuple(sorted((k, v) for k, v in w.constexprs if isinstance(v, int))), w.num_warps,
                         w.num_stages) for w in works]
    current = configs[0]
    if autotuned:
        space = enumerate_space({}, configs=configs, radius=radius, limit=limit)
    else:
        space = enumerate_space(dict(current.constexprs), None if grid_free else [], current.num_warps,
                                current.num_stages, radius=radius, limit=limit)
    proposal.space_size = len(space)
    proposal.current = current.label
    say(f"estimating {len(space)} configurations", 0.15)
    points = {c: {"spec": point.get("spec"), "kernel": kernel, "shape": point.get("shape"),
                  "dtype": point.get("dtype"), "overrides": c.overrides} for c in space}
    try:
        counted = count_work(path, source, list(points.values()), root=root, cancel=cancel, samples=4)
    except WorkerError as exc:
        proposal.errors.append(f"work counting failed: {exc}")
        return proposal
    estimated: dict[Candidate, float | None] = {}
    notes: dict[Candidate, str] = {}
    for c, p in zip(space, counted):
        if p.get("error") or not p.get("launches"):
            estimated[c], notes[c] = None, p.get("error") or "not launched"
            continue
        est = [estimate(work_from_json(lc), hw) for lc in p["launches"][:1]]
        estimated[c] = est[0].us if est and math.isfinite(est[0].us) else None
        if est and not est[0].launchable:
            notes[c] = est[0].notes[0] if est[0].notes else "cannot launch"
    ranked = rank([c for c in space if estimated.get(c) is not None], estimated)
    measured: dict[Candidate, float] = {}
    if measure is not False and ranked:
        picked = to_measure(ranked, current=current, space_size=len(space))
        say(f"timing {len(picked)} configurations on the GPU", 0.4)
        report = measure_file(path, source, root=root, cancel=cancel, history=False,
                              points=[points[c] for c in picked], repetitions=20)
        if report.errors and measure:
            proposal.errors += report.errors
        for c, e in zip(picked, report.entries):
            if e.us is not None:
                measured[c] = e.us
            elif e.error:
                notes[c] = e.error
    winner, source_kind = choose(ranked, measured)
    figures = measured if source_kind == "measured" else estimated
    if (winner is not None and current in figures and figures.get(winner) is not None
            and figures[winner] >= figures[current] * 0.98):
        winner = current  # within 2% of what the user has: no edit is worth proposing
    proposal.tried = [Tried(c.label, c.overrides, estimated.get(c), measured.get(c),
                            "measured" if c in measured else "estimated", notes.get(c)) for c in space]
    proposal.measured_fraction = len(measured) / max(1, len(space))
    if winner is None:
        proposal.errors.append("no configuration could be estimated")
        return proposal
    proposal.winner, proposal.winner_overrides, proposal.source = winner.label, winner.overrides, source_kind
    proposal.winner_us = figures.get(winner)
    proposal.current_us = figures.get(current)
    if proposal.current_us and proposal.winner_us:
        proposal.speedup = proposal.current_us / proposal.winner_us
    if winner == current:
        return proposal
    proposal.edits = edit_for(source, kernel, winner, current, autotuned)
    if not proposal.edits:
        proposal.errors.append("the winning configuration could not be written into the file (launch site not found)")
        return proposal
    if verify:
        say("verifying the winner", 0.85)
        proposal.verified, proposal.verify_message = _verify(path, source, kernel, proposal.edits, root, cancel)
    say("done", 1.0)
    return proposal


def edit_for(source: str, kernel: str, winner: Candidate, current: Candidate, autotuned: bool
             ) -> list[tuple[tuple[int, int, int, int], str]]:
    """(range, new text) edits that make the file launch `winner`."""
    analysis = analyze_source(source, "<search>")
    if autotuned:
        k = analysis.kernel(kernel)
        if k is None or not k.autotune_configs:
            return []
        first = k.autotune_configs[0].span
        kwargs = ", ".join(f'"{n}": {v}' for n, v in winner.constexprs)
        indent = " " * first.start_col
        text = (f"triton.Config({{{kwargs}}}, num_warps={winner.num_warps}, num_stages={winner.num_stages}),\n"
                f"{indent}")
        return [((first.start_line, first.start_col, first.start_line, first.start_col), text)]
    sites = [s for s in analysis.launch_sites if s.target == kernel]
    if not sites:
        return []
    edits = []
    for site in sites:
        wanted = winner.overrides
        have = {a.keyword: a for a in site.kwargs if a.keyword}
        missing = []
        for name, value in wanted.items():
            if dict(current.overrides).get(name) == value and name in have:
                continue
            arg = have.get(name)
            if arg is not None:
                span = arg.value_span or arg.span
                if arg.value_span is None:
                    edits.append(((span.start_line, span.start_col, span.end_line, span.end_col), f"{name}={value}"))
                else:
                    edits.append(((span.start_line, span.start_col, span.end_line, span.end_col), str(value)))
            elif dict(current.overrides).get(name) != value:
                missing.append(f"{name}={value}")
        if missing:
            last = (site.kwargs or site.args)[-1] if (site.kwargs or site.args) else None
            if last is None:
                continue
            end = last.span
            edits.append(((end.end_line, end.end_col, end.end_line, end.end_col), ", " + ", ".join(missing)))
    return edits


def apply(source: str, edits: list[tuple[tuple[int, int, int, int], str]]) -> str:
    return apply_edits(source, [TextEdit(Span(*r), t) for r, t in edits])


def _verify(path, source, kernel, edits, root, cancel) -> tuple[bool | None, str]:
    try:
        from kernel_lsp.engine.verify import run_checks
        from kernel_lsp.engine.verify.results import CheckRequest
    except ImportError:
        return None, "the correctness checker is not available"
    new_source = apply(source, edits)
    try:
        report = run_checks(CheckRequest(path, new_source, kernels=(kernel,), device="auto", root=root), cancel)
    except Exception as exc:  # noqa: BLE001 - a checker failure leaves the proposal unverified, not broken
        return None, f"verification failed to run: {exc}"
    verdicts = [v for v in report.verdicts if v.kernel == kernel]
    if not verdicts:
        return None, "no spec verdict for the kernel"
    ok = all(v.status == "correct" for v in verdicts)
    return ok, "; ".join(re.sub(r"\s+", " ", v.message)[:200] for v in verdicts)
