"""Tiling search: enumerate a kernel's tiling space (block sizes up to 4x either way, a diverse sample when it is
large), rank it by the model on counted work (analyzers.config_model where the device is calibrated, else the
roofline), time candidates on the GPU when there is one by successive halving around the model's picks (at most
30% of the space: analyzers.tiling.search_plan), verify the winner with the correctness checker on the edited file,
and propose the edit.

Each block size is followed from the launch to where its value is written, to the grid and to the kernel's loops
(analyzers.tunables): free where the search can change it safely (a constant written once, in a local the grid is
computed from too: the edit goes to that constant, so the grid follows), tied where the kernel's correctness depends
on it (a block computed to cover a row that the grid does not use and no loop steps by: it is never shrunk), frozen
where it cannot be written safely; the proposal says which and why. Where the launch site cannot be read (the
launcher lives in another file), a tuple grid freezes every block size. The start is timed in the same run as the
candidates, and a measured winner must beat it by more than the measured noise. The edit: new values where the
block sizes are written and keyword values at the launch site, or, for an autotuned kernel, the winning config put
first in its config list.

Without a GPU (or with `measure=False`) the search ranks by the model alone and says so: the proposal's source is
"estimated" and its progress never speaks of timing. A finished search is kept by content (file text, kernel,
device model, search parameters, whether it measured) under the workspace's cache, so the same request again is
answered at once.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from analyzers.analyze import analyze_source
from analyzers.source import parse_python
from analyzers.model import Span, TextEdit, apply_edits
from analyzers.config_model import configuration_estimate
from analyzers.roofline import Resources
from analyzers.tiling import Candidate, choose, config_key, enumerate_space, format_config, rank, search_plan, space_size
from analyzers.tunables import LAUNCH_OPTIONS, grid_expressions as _grid_expressions, own_nodes as _own_nodes
from analyzers.tunables import tunables as find_tunables

from ..gpu import gpu_present
from . import WorkerError, count_work, measure_file, resolve_device, work_from_json
from .resources import CandidateResources, Compiler, candidate_resources, service_compiler

SEARCH_CACHE_VERSION = 4  # 2: candidates compiled for their resources; 3: the best-ranked ones, up to a budget;
# 4: block sizes followed to where they are written, every tile shape a candidate, the start timed against noise
DEFAULT_COMPILE_BUDGET = 12  # candidates compiled for their resources (the model's best, on assumed resources)
VERIFY_ATTEMPTS = 3  # configurations verified at most, best first, until one is correct


@dataclass
class Tried:
    label: str
    overrides: dict
    estimated_us: float | None
    measured_us: float | None = None
    source: str = "estimated"  # "measured" | "estimated"
    note: str | None = None
    node: str | None = None  # the cluster node that timed it (a search on Ray)
    # What the compiler reported for this configuration on the device's target (registers, shared_bytes and
    # spill_bytes); None where it was not compiled and the model assumed them (the note says why).
    resources: dict | None = None


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
    drawn_from: int = 0  # configurations the candidates were drawn from (every tile shape among the candidates)
    errors: list[str] = field(default_factory=list)
    frozen: list[str] = field(default_factory=list)  # block sizes kept at their values (tied or frozen)
    # Each block size: {"status": "free" | "tied" | "frozen", "reason": why} (analyzers.tunables).
    tunables: dict[str, dict] = field(default_factory=dict)
    # Measured searches: the relative noise of repeated timings a winner had to beat the start by, and the
    # candidates as fast as the winner within it (empty: the winner stands out, the pick is repeatable).
    noise: float | None = None
    within_noise: list[str] = field(default_factory=list)
    cached: bool = False  # answered from the cache of an identical earlier search
    # A search on a Ray cluster (cluster.py): per node, its device, the reference's timings and the candidates it
    # timed; how the figures compare; or why nothing was timed.
    nodes: list[dict] = field(default_factory=list)
    compared: str | None = None
    not_measured_because: str | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def measured(self) -> bool:
        return self.source == "measured"

    @property
    def status(self) -> str:
        """What the winner's figure is: measured on the GPU, or the model's ranking only."""
        if self.source == "measured":
            drawn = (f", drawn from {self.drawn_from:,} configurations" if self.drawn_from > self.space_size
                     else "")
            return (f"measured on the GPU ({self.measured_fraction:.0%} of {self.space_size} configurations "
                    f"timed{drawn})")
        if self.source == "estimated":
            return "estimated; not measured" + (f" ({self.not_measured_because})" if self.not_measured_because else "")
        return "no result"


Progress = Callable[[str, float], None]


def search_tiling(path: str, source: str, kernel: str, target: str = "H200", root: str | None = None, *,
                  measure: bool | None = None, verify: bool = True, progress: Progress | None = None,
                  cancel: threading.Event | None = None, radius: int = 2, limit: int = 128,
                  hardware=None, cache: bool = True, timer=None, compiler: Compiler | None = None,
                  compile_budget: int = DEFAULT_COMPILE_BUDGET) -> TilingProposal:
    """Search the tiling of `kernel` in the file `path` (buffer text `source`) for device `target`.
    `measure`: time candidates on the GPU (None: where this machine has one). `progress(message, 0..1)`.
    `cache`: answer from, and keep the result in, the workspace's cache (`root`). `timer`: a
    `cluster.ClusterTimer` that times the candidates on a Ray cluster's GPUs instead of this machine's.
    `compiler`: how candidates are compiled for their registers, shared memory and spills (default: the
    workspace's compile service). `compile_budget`: how many of the model's best-ranked candidates are compiled
    (and the current configuration besides); the others are ranked on assumed resources. 0: none is compiled."""
    def say(msg: str, frac: float):
        if progress:
            progress(msg, frac)

    if source is None:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    hw = resolve_device(target, hardware)
    if hw is None:
        proposal = TilingProposal(kernel, str(target), None, None, "none", None, None, None, None)
        proposal.errors.append(f"no hardware model for {target!r}")
        return proposal
    timed = (timer.gpus_for(hw.name) > 0 if timer is not None else gpu_present()) if measure is None else bool(measure)
    store, key = None, None
    if cache and root:
        from ..cache import ResultCache

        store = ResultCache.for_workspace(Path(root))
        key = search_key(source, kernel, hw, timed=timed, verify=verify, radius=radius, limit=limit,
                         compile_budget=compile_budget, **({"on": "ray"} if timer is not None and timed else {}))
        hit = store.get(key)
        if isinstance(hit, TilingProposal):
            hit.cached = True
            say("done: the same search was run before on this text", 1.0)
            return hit
    unmeasured = None  # why nothing is timed, where it was not the caller's choice
    if not timed and measure is None:
        unmeasured = "no GPU on this machine" if timer is None else f"no GPU on the Ray cluster at {timer.address}"
    proposal = _search(path, source, kernel, hw, root, timed=timed, verify=verify, say=say, cancel=cancel,
                       radius=radius, limit=limit, timer=timer if timed else None, unmeasured=unmeasured,
                       compiler=compiler or service_compiler(root), compile_budget=max(0, int(compile_budget)))
    if timer is not None:
        proposal.not_measured_because = unmeasured
    if store is not None and key is not None and not proposal.errors and not (cancel is not None and cancel.is_set()):
        store.put(key, proposal)
    return proposal


def search_key(source: str, kernel: str, hw, **params) -> str:
    """Content key of a search: what it reads (file text, kernel, device model) and how it searches."""
    data = json.dumps({"v": SEARCH_CACHE_VERSION, "source": source, "kernel": kernel, "device": repr(hw),
                       **params}, sort_keys=True, default=repr)
    return "tiling-" + hashlib.sha256(data.encode()).hexdigest()


def _search(path, source, kernel, hw, root, *, timed, verify, say, cancel, radius, limit,
            compiler: Compiler, compile_budget: int, timer=None, unmeasured=None) -> TilingProposal:
    proposal = TilingProposal(kernel, hw.name, None, None, "none", None, None, None, None)
    say("counting the work of the current configuration (Triton's interpreter, on the CPU)", 0.05)
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
    found = analyze_source(source, "<search>").kernel(kernel)
    param_order = [p.name for p in found.params] if found is not None else None

    def shown(c: Candidate) -> str:  # as the user writes it: the kernel's parameter order
        return format_config(c.constexprs, c.num_warps, c.num_stages, param_order)

    launches = point["launches"]
    autotuned = any(lc.get("config_index") is not None for lc in launches)
    grid_free = all(lc.get("grid_callable") for lc in launches)
    works = [work_from_json(lc) for lc in launches]
    configs = [Candidate(tuple(sorted((k, v) for k, v in w.constexprs if isinstance(v, int))), w.num_warps,
                         w.num_stages) for w in works]
    sites: dict = {}  # block size -> the constant its value is written at, where that is not the launch keyword
    current = configs[0]
    if autotuned:
        space = enumerate_space({}, configs=configs, radius=radius, limit=limit)
    else:
        names = [n for n, _ in current.constexprs]
        # Each block size is followed from the launch to where its value is written, to the grid and to the
        # kernel's loops (analyzers.tunables): free, tied to what it must cover, or frozen, each with its reason.
        # Where the launch cannot be read (it lives in another file) a function grid frees every block size and a
        # tuple grid freezes them all.
        followed = find_tunables(source, kernel)
        if followed is None:
            why = ("the launch is not in this file; the grid is a function of the meta-parameters" if grid_free
                   else "the launch is not in this file, and its tuple grid may be computed from it")
            decided = {n: {"status": "free" if grid_free else "frozen", "reason": why} for n in names}
        else:
            decided = {n: {"status": followed[n].status, "reason": followed[n].reason} for n in names if n in followed}
            for n in names:
                decided.setdefault(n, {"status": "frozen", "reason": "not a keyword of the launch"})
            sites = {n: followed[n].site for n in names if n in followed and followed[n].site is not None}
        tunable = [n for n in names if decided[n]["status"] == "free"]
        proposal.tunables = {n: d for n, d in decided.items() if _pow2(dict(current.constexprs)[n])}
        proposal.frozen = [n for n in names if n not in tunable and _pow2(dict(current.constexprs)[n])]
        space = enumerate_space(dict(current.constexprs), tunable, current.num_warps, current.num_stages,
                                radius=radius, limit=limit)
        proposal.drawn_from = space_size(dict(current.constexprs), tunable, current.num_warps, current.num_stages,
                                         radius=radius)
    proposal.space_size = len(space)
    proposal.current = shown(current)
    points = {c: {"spec": point.get("spec"), "kernel": kernel, "shape": point.get("shape"),
                  "dtype": point.get("dtype"), "overrides": c.overrides} for c in space}
    say(f"estimating {len(space)} configurations with the model (work counted on the CPU)", 0.15)
    try:
        counted = count_work(path, source, list(points.values()), root=root, cancel=cancel, samples=4)
    except WorkerError as exc:
        proposal.errors.append(f"work counting failed: {exc}")
        return proposal
    work = dict(zip(space, counted))
    # The configurations the file's own launch runs were counted in full above, as `check` counts them: their
    # figures come from that count, so tune, check, the lens and the report show one estimate per configuration.
    for c in set(configs):
        if c in work:
            work[c] = {**point, "launches": [lc for lc, cc in zip(launches, configs) if cc == c]}
    estimated: dict[Candidate, float | None] = {}
    notes: dict[Candidate, str] = {}
    # First every candidate is ranked on assumed resources; then the best-ranked ones (up to `compile_budget`, and
    # the current configuration) are compiled for the device's target and ranked again on what the compiler says.
    # The others keep the model's assumed registers and shared memory, and say so.
    for c in space:
        estimated[c], note = _estimate(work[c], hw, CandidateResources(assumed="assumed"))
        if note:
            notes[c] = note
    first = rank([c for c in space if estimated.get(c) is not None], estimated)
    chosen = first[:compile_budget] if compile_budget > 0 else []
    if compile_budget > 0 and current in work and current not in chosen:
        chosen.append(current)
    compiled: dict[Candidate, CandidateResources] = {}
    if chosen:
        def told(message: str) -> None:
            say(message, 0.25)

        try:
            compiled.update(candidate_resources(path, source, kernel, hw.target, chosen, compiler, cancel=cancel,
                                                say=told))
        except Exception as exc:  # noqa: BLE001 - a compile service failure leaves resources assumed, not a failed search
            compiled.update(dict.fromkeys(chosen, CandidateResources(assumed=f"not compiled: {exc}")))
    skipped = (f"not compiled: outside the {compile_budget} best-ranked candidates compiled" if compile_budget > 0
               else "not compiled: the compile budget is 0")
    for c in space:
        res = compiled.get(c) or CandidateResources(assumed=skipped)
        notes.pop(c, None)
        if res.failed:
            estimated[c], notes[c] = None, res.failed
            continue
        estimated[c], note = _estimate(work[c], hw, res)
        if note:
            notes[c] = note
        elif res.assumed and estimated[c] is not None:
            notes[c] = f"resources assumed ({res.assumed})"[:300]
    ranked = rank([c for c in space if estimated.get(c) is not None], estimated)
    # The GPU times from the whole ranking, as it would without compiling: a timing does not rest on assumed
    # resources, and keeping to the compiled few would shrink the measured share to a fraction of the budget.
    timeable = ranked
    measured: dict[Candidate, float] = {}
    planned: Candidate | None = None
    nodes: dict[Candidate, str] = {}  # which cluster node timed each (a search on Ray)
    if timed and timeable:
        # Successive halving around the model's picks (analyzers.tiling.search_plan): each round is timed in one
        # GPU worker; at most 30% of the space is measured.
        by_key = {config_key(c.overrides): c for c in timeable}
        rounds = [0]
        reference = current if current in timeable else timeable[0]  # timed beside the candidates on a cluster

        def time_round(batch: list[dict]) -> list[float | None]:
            if cancel is not None and cancel.is_set():
                return [None] * len(batch)
            rounds[0] += 1
            cands = [by_key[config_key(b)] for b in batch]
            if timer is not None:
                gpus = min(len(cands), timer.gpus_for(hw.name))
                say(f"timing {len(cands)} configurations on {gpus} GPU(s) of the Ray cluster (round {rounds[0]})",
                    min(0.75, 0.35 + 0.07 * rounds[0]))
                timings = timer.time_round(path, source, root, points[reference], [points[c] for c in cands],
                                           hw.name, cancel)
                for c, t in zip(cands, timings):
                    if t.us is None:
                        notes[c] = t.error or "not timed"
                    elif t.node:
                        nodes[c] = t.node
                return [t.us for t in timings]
            say(f"timing {len(cands)} configurations on the GPU (round {rounds[0]})",
                min(0.75, 0.35 + 0.07 * rounds[0]))
            report = measure_file(path, source, root=root, cancel=cancel, history=False,
                                  points=[points[c] for c in cands], repetitions=20)
            proposal.errors += [e for e in report.errors if e not in proposal.errors]
            out: list[float | None] = []
            for c, e in zip(cands, report.entries):
                out.append(e.us)
                if e.us is None and e.error:
                    notes[c] = e.error
            return out

        plan = search_plan([c.overrides for c in timeable], lambda cfg: estimated[by_key[config_key(cfg)]],
                           time_round, current=current.overrides if current in timeable else None)
        measured = {by_key[k]: us for k, us in plan.measured.items() if math.isfinite(us)}
        proposal.noise = plan.noise
        proposal.within_noise = [shown(by_key[k]) for k in plan.within_noise]
        planned = by_key[config_key(plan.winner)] if plan.winner is not None else None
        if timer is not None:
            proposal.nodes, proposal.compared = timer.report(), timer.basis()
    elif ranked:
        say(f"ranked {len(ranked)} configurations by the model: estimated; not measured"
            + (f" ({unmeasured})" if unmeasured else ""), 0.8)
    winner, source_kind = choose(ranked, measured)
    # A configuration that could not be estimated (its compile failed) has no figure: the current one among them
    # is then beaten by any candidate. A measured winner must beat the start, timed in the same run, by more than
    # the measured noise (search_plan decided it); an estimated one by 2%.
    figures = measured if source_kind == "measured" else {c: us for c, us in estimated.items() if us is not None}
    margin = proposal.noise if source_kind == "measured" and proposal.noise is not None else 0.02
    if source_kind == "measured" and planned is not None:
        winner = planned
    if (winner is not None and current in figures and winner in figures
            and figures[winner] * (1 + margin) >= figures[current]):
        winner = current  # not faster than what the user has by more than the margin: no edit is worth proposing
    proposal.tried = [Tried(shown(c), c.overrides, estimated.get(c), measured.get(c),
                            "measured" if c in measured else "estimated", notes.get(c),
                            nodes.get(c),
                            compiled[c].as_dict() if c in compiled and not compiled[c].assumed
                            and not compiled[c].failed else None) for c in space]
    proposal.measured_fraction = len(measured) / max(1, len(space))
    if winner is None:
        proposal.errors.append("no configuration could be estimated")
        return proposal
    proposal.winner, proposal.winner_overrides, proposal.source = shown(winner), winner.overrides, source_kind
    proposal.winner_us = figures.get(winner)
    proposal.current_us = figures.get(current)
    if proposal.current_us and proposal.winner_us:
        proposal.speedup = proposal.current_us / proposal.winner_us
    if winner == current:
        say("done: the current configuration stays", 1.0)
        return proposal
    proposal.edits = edit_for(source, kernel, winner, current, autotuned, sites)
    if not proposal.edits:
        proposal.errors.append("the winning configuration could not be written into the file (launch site not found)")
        return proposal
    if verify:
        # A freed block size can make the kernel wrong (a block shorter than the row it must cover): the next
        # best configurations with other block sizes are verified in turn, a few at most.
        limit = figures.get(current, math.inf) / (1 + margin)
        order = [winner, *sorted((c for c in figures if figures[c] < limit and c != winner),
                                 key=lambda c: figures[c])]
        tried = {t.label: t for t in proposal.tried}
        failed: set[tuple] = set()
        attempts, verified = 0, False
        for cand in order:
            if attempts >= VERIFY_ATTEMPTS or (cancel is not None and cancel.is_set()):
                break
            if cand.constexprs in failed:
                continue
            edits = edit_for(source, kernel, cand, current, autotuned, sites)
            if not edits:
                continue
            attempts += 1
            say(f"verifying {shown(cand)} against the reference", min(0.95, 0.8 + 0.05 * attempts))
            ok, message = _verify(path, source, kernel, edits, root, cancel)
            if ok is False:
                failed.add(cand.constexprs)
                tried[shown(cand)].note = f"fails its check: {message}"[:300]
                continue
            proposal.winner, proposal.winner_overrides = shown(cand), cand.overrides
            proposal.winner_us, proposal.edits = figures.get(cand), edits
            proposal.speedup = proposal.current_us / proposal.winner_us \
                if proposal.current_us and proposal.winner_us else None
            proposal.verified, proposal.verify_message = ok, message
            verified = True
            break
        if not verified:  # nothing proposed: what the user has stays
            proposal.winner, proposal.winner_overrides = shown(current), current.overrides
            proposal.winner_us, proposal.edits, proposal.speedup = figures.get(current), [], None
            if failed:
                proposal.errors.append(f"the faster configurations tried fail the spec's check (block sizes "
                                       f"{', '.join(sorted(_sizes(c) for c in failed))}): the current one stays")
            elif cancel is not None and cancel.is_set():
                proposal.errors.append("cancelled")
    say("done", 1.0)
    return proposal


def _estimate(p: dict, hw, res: CandidateResources) -> tuple[float | None, str | None]:
    """The figure for one candidate (its counted work `p`, on `res`'s registers, shared memory and spills where
    they were compiled, else assumed), from the estimate check, the lens and the report show
    (config_model.configuration_estimate): the launches of the configuration add up. A note where it cannot
    launch or was not counted."""
    if p.get("error") or not p.get("launches"):
        return None, p.get("error") or "not launched"
    resources = None if res.assumed else Resources(res.registers, res.shared_bytes, res.spill_bytes)
    total = 0.0
    for lc in p["launches"]:
        est = configuration_estimate(work_from_json(lc), hw, resources)
        if not est.launchable:
            return None, est.notes[0] if est.notes else f"cannot launch on {hw.name}"
        total += est.us
    return (total if math.isfinite(total) else None), None


def _sizes(constexprs) -> str:
    return "/".join(f"{k}={v}" for k, v in constexprs) or "-"


def _pow2(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


def tied_block_sizes(source: str, kernel: str) -> set[str] | None:
    """Keyword arguments of the launches of `kernel` in `source` whose value a tuple launch grid is computed from
    (through the launcher's assignments); None where the file has no launch of `kernel` to read."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return None
    tied: set[str] = set()
    found = False
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        nodes = list(_own_nodes(scope))
        bound: dict[str, list[ast.AST]] = {}
        for node in nodes:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    for name in ast.walk(t):
                        if isinstance(name, ast.Name):
                            bound.setdefault(name.id, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) and node.value:
                bound.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and hasattr(node, "name"):
                bound.setdefault(node.name, []).append(node)
        for node in nodes:
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)):
                continue
            callee = node.func.value
            called = callee.id if isinstance(callee, ast.Name) else callee.attr if isinstance(callee, ast.Attribute) \
                else None
            if called != kernel:
                continue
            found = True
            texts = _grid_expressions(node.func.slice, bound)
            if texts is None:  # a function of the meta-parameters follows every block size
                continue
            for kw in node.keywords:
                if kw.arg and kw.arg not in LAUNCH_OPTIONS and ast.unparse(kw.value) in texts:
                    tied.add(kw.arg)
    return tied if found else None


def edit_for(source: str, kernel: str, winner: Candidate, current: Candidate, autotuned: bool,
             sites: dict[str, tuple[int, int, int, int]] | None = None
             ) -> list[tuple[tuple[int, int, int, int], str]]:
    """(range, new text) edits that make the file launch `winner`. `sites`: block sizes whose value is written at
    a constant elsewhere (`tile = 16`, a dict entry): that constant is edited, so a grid computed from it follows."""
    sites = sites or {}
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
    launches = [s for s in analysis.launch_sites if s.target == kernel]
    if not launches:
        return []
    edits = []
    for name, value in winner.constexprs:
        if name in sites and dict(current.constexprs).get(name) != value:
            edits.append((sites[name], str(value)))
    for site in launches:
        wanted = {k: v for k, v in winner.overrides.items() if k not in sites}
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
