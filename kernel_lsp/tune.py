"""`kernel-lsp tune FILE::KERNEL`: the tiling search of "Optimize tiling" from the command line, through the Python
API (`kernel_lsp.api.Workspace.tune`, the same operation `kernel-lsp mcp` serves).

Prints the table of configurations (estimated, and measured where this machine has a GPU) and the winner; with
`--format json`, `{"winner": {each tunable by name}, "measured": true|false, "table": [...], ...}` for scripts.
The search runs the file's launcher and spec (in separate processes), as `check --run-checks` does: only in a
trusted folder (`kernel-lsp trust`) or with `--allow-run`. With
`--executor ray` the candidates are timed on a Ray cluster's GPUs, one task per GPU at a time, each candidate
against the current configuration timed on the same GPU (engine/latency/cluster.py); the table names the node that
timed each candidate and the report gives the spread of the reference's time between nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .api import TuneResult

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parser(sub) -> None:
    tune = sub.add_parser("tune", help="search a kernel's tiling (block sizes, num_warps, num_stages) and print the "
                          "table and the winner; runs the file's launcher and spec in separate processes")
    tune.add_argument("target", metavar="FILE::KERNEL", help="the file and the name of a kernel with a @spec")
    tune.add_argument("--device", default="H200",
                      help="the device the model estimates for (H200, H100, A100, B200, MI300X, sm_90, ...)")
    tune.add_argument("--format", choices=["text", "json"], default="text")
    tune.add_argument("--estimate-only", action="store_true",
                      help="rank by the model only, even where a GPU could time the candidates")
    tune.add_argument("--compile-budget", type=int, default=None, metavar="N",
                      help="compile the model's N best-ranked candidates (and the current configuration) for their "
                      "registers, shared memory and spills; the others are ranked on assumed resources. 0: none "
                      "(default 12, as the editor's searchCompileBudget setting)")
    tune.add_argument("--allow-run", action="store_true",
                      help="run the file's launcher and spec although its folder is not trusted (kernel-lsp trust)")
    tune.add_argument("--no-verify", action="store_true", help="do not check the winner against the reference")
    tune.add_argument("--no-cache", action="store_true", help="search again even if this search was run before")
    tune.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    tune.add_argument("--executor", choices=["local", "ray"], default="local",
                      help="where candidates are timed: this machine's GPU (local) or a Ray cluster's GPUs (ray; "
                      "needs kernel-lsp[ray]); an unreachable cluster falls back to local with a message")
    tune.add_argument("--ray-address", default=None, metavar="HOST:PORT",
                      help="the Ray cluster for --executor ray (default: RAY_ADDRESS, else the cluster `ray start` "
                      "began on this machine)")


def split_target(target: str) -> tuple[str, str] | None:
    path, sep, kernel = target.rpartition("::")
    return (path, kernel) if sep and path and kernel.isidentifier() else None


def workspace_root(path: str) -> str:
    """The workspace a command-line run on `path` belongs to (its caches, its IR): the current folder when the
    file is inside it, else the file's folder."""
    here = os.path.realpath(os.getcwd())
    file_dir = os.path.dirname(os.path.realpath(path))
    return here if (file_dir + os.sep).startswith(here + os.sep) else file_dir


def to_json(found: TuneResult) -> dict:
    current = next((t.overrides for t in found.table if t.config == found.current), None)
    return {
        "kernel": found.kernel, "device": found.device,
        "winner": dict(found.winner_overrides) if found.winner_overrides else None,
        "measured": found.source == "measured", "status": found.status,
        "current": dict(current) if current else None,
        "winner_us": found.winner_us, "current_us": found.current_us, "speedup": found.speedup,
        "verified": found.verified, "verify_message": found.verify_message,
        "space_size": found.space_size, "measured_fraction": found.measured_fraction, "drawn_from": found.drawn_from,
        "frozen": list(found.frozen), "cached": found.cached, "errors": list(found.errors),
        "tunables": dict(found.tunables), "noise": found.noise, "within_noise": list(found.within_noise),
        "nodes": list(found.nodes), "compared": found.compared,
        "table": [{"config": dict(t.overrides), "label": t.config, "estimated_us": t.estimated_us,
                   "measured_us": t.measured_us, "source": t.source, "note": t.note, "node": t.node,
                   "resources": t.resources} for t in found.table],
    }


def _us(value: float | None) -> str:
    return f"{value:.1f} µs" if value else "-"


def text(found: TuneResult) -> str:
    rows = [("configuration", "estimated", "measured", "note")]
    rows += [(t.config, _us(t.estimated_us), _us(t.measured_us),
              " ".join(x for x in (f"[{t.node}]" if t.node else "", t.note or "") if x)) for t in found.table]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}".rstrip() for r in rows]
    lines.append("")
    if found.winner:
        mark = "current configuration stays" if found.winner == found.current else f"from {found.current}"
        speed = f", {found.speedup:.2f}x" if found.speedup and found.winner != found.current else ""
        lines.append(f"winner for {found.kernel} on {found.device}: {found.winner} ({mark}{speed})")
    lines.append(f"{found.status}" + (" [cached]" if found.cached else ""))
    if found.compared:
        lines.append(found.compared)
    for node in found.nodes:
        refs = ", ".join(f"{us:.1f}" for us in node["reference_us"])
        lines.append(f"  {node['node']}: {node['device'] or 'GPU'}, reference {refs} µs, "
                     f"{node['candidates']} candidate(s) timed")
    for name, told in found.tunables.items():
        lines.append(f"{name}: {'searched' if told['status'] == 'free' else told['status']} ({told['reason']})")
    if found.frozen and not found.tunables:
        lines.append(f"kept at their values: {', '.join(found.frozen)}")
    if found.within_noise:
        lines.append(f"as fast as the winner within the measured noise ({found.noise:.1%}): "
                     f"{'; '.join(found.within_noise[1:])}")
    if found.verified is not None:
        lines.append(("verified: " if found.verified else "FAILS its check: ") + (found.verify_message or ""))
    lines += [f"error: {e}" for e in found.errors]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    split = split_target(args.target)
    if split is None:
        print(f"kernel-lsp tune: expected FILE::KERNEL, got {args.target!r}", file=sys.stderr)
        return EXIT_USAGE
    path, kernel = split
    budget = args.compile_budget
    if budget is not None and budget < 0:
        print(f"kernel-lsp tune: --compile-budget must be 0 or more, got {budget}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"kernel-lsp tune: cannot read {path}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from .api import ApiError, NotTrustedError, Workspace
    from .engine.latency.search import DEFAULT_COMPILE_BUDGET

    def progress(message: str, fraction: float) -> None:
        if not args.quiet:
            print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)

    from .engine.latency.cluster import cluster_timer

    def say(line: str) -> None:
        print(f"kernel-lsp tune: {line}", file=sys.stderr, flush=True)

    # The search runs the file's launcher and spec: only in a trusted folder, or with --allow-run (the consent
    # asked for by name, as `check --run-checks` is). The API refuses otherwise, before anything runs.
    try:
        with cluster_timer(args.ray_address, say, wanted=args.executor == "ray" and not args.estimate_only) as timer, \
                Workspace(workspace_root(path), allow_run=args.allow_run) as workspace:
            found = workspace.tune(os.path.abspath(path), source, kernel=kernel, target=args.device,
                                   measure=False if args.estimate_only else None, verify=not args.no_verify,
                                   cache=not args.no_cache, progress=progress, timer=timer,
                                   compile_budget=DEFAULT_COMPILE_BUDGET if budget is None else budget)
    except NotTrustedError as exc:
        print(f"kernel-lsp tune: {str(exc).replace('an explicit allow-run flag', '--allow-run')}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as exc:
        print(f"kernel-lsp tune: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        print(json.dumps(to_json(found), indent=2, default=repr))
    else:
        print(text(found))
    return EXIT_OK if found.winner else EXIT_FAILED
