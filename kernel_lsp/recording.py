"""`kernel-lsp record -- CMD` (record the launches of the user's own command) and `kernel-lsp repro FILE::KERNEL
--launch N` (a stand-alone script of one recorded launch)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EXIT_USAGE = 2


def add_parsers(sub) -> None:
    rec = sub.add_parser(
        "record", help="run your command (tests, a benchmark) and record its Triton launches in .kernel-lsp/, "
        "so kernels compile with the values they really get",
        description="Runs CMD as you would, with launch recording on in every Python process it starts, and "
        "merges the distinct launches of the workspace's kernels into .kernel-lsp/launches.json "
        "(docs/recording.md). Exits with CMD's exit code.")
    rec.add_argument("--root", default=".", help="the workspace whose .kernel-lsp/ keeps the record (default: .)")
    rec.add_argument("--max-per-kernel", type=int, default=32, metavar="N",
                     help="distinct launches kept per kernel (default: 32; the rest are counted)")
    rec.add_argument("--max-mb", type=float, default=4.0, metavar="MB", help="size cap of the record (default: 4)")
    rec.add_argument("--fresh", action="store_true", help="replace the record instead of adding to it")
    rec.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after `--`")

    repro = sub.add_parser("repro", help="write a stand-alone script that replays one recorded launch (bug "
                           "reports, Nsight)")
    repro.add_argument("kernel", metavar="FILE::KERNEL")
    repro.add_argument("--launch", type=int, default=None, metavar="N", help="which recorded launch (default: 1)")
    repro.add_argument("--root", default=".", help="the workspace (default: .)")
    repro.add_argument("-o", "--output", metavar="FILE", help="where to write the script (default: stdout)")
    repro.add_argument("--list", action="store_true", help="list the kernel's recorded launches instead")
    repro.add_argument("--check-bounds", action="store_true",
                       help="instead of writing the script, replay the launch (every launch without --launch) under "
                       "Triton's interpreter with the bounds guard, on synthesised inputs of the recorded shapes; "
                       "exit 1 when an access is out of bounds")


def run(args: argparse.Namespace) -> int:
    if args.command == "record":
        return _record(args)
    return _repro(args)


def _record(args: argparse.Namespace) -> int:
    from .engine.record import runner, store

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("kernel-lsp record: no command given; e.g. `kernel-lsp record -- python -m pytest tests/`",
              file=sys.stderr)
        return EXIT_USAGE
    if not os.path.isdir(args.root):
        print(f"kernel-lsp record: --root {args.root} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    if args.max_per_kernel < 1 or args.max_mb <= 0:
        print("kernel-lsp record: --max-per-kernel and --max-mb must be positive", file=sys.stderr)
        return EXIT_USAGE
    try:
        outcome = runner.record(cmd, args.root, max_per_kernel=args.max_per_kernel,
                                max_bytes=int(args.max_mb * 1024 * 1024), fresh=args.fresh)
    except FileNotFoundError:
        print(f"kernel-lsp record: command not found: {cmd[0]}", file=sys.stderr)
        return 127
    except store.StoreError as exc:
        print(f"kernel-lsp record: {exc}; nothing was run (use --fresh to start a new record)", file=sys.stderr)
        return EXIT_USAGE
    for line in runner.describe(outcome, Path(args.root).resolve()):
        print(line, file=sys.stderr)
    return outcome.exit_code if outcome.exit_code >= 0 else 128 - outcome.exit_code


def _repro(args: argparse.Namespace) -> int:
    from .engine.record import repro, store

    file, sep, qualname = args.kernel.rpartition("::")
    if not sep or not file or not qualname:
        print(f"kernel-lsp repro: expected FILE::KERNEL, got {args.kernel!r}", file=sys.stderr)
        return EXIT_USAGE
    root = Path(args.root).resolve()
    try:
        current = store.load(root)
    except store.StoreError as exc:
        print(f"kernel-lsp repro: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rel = store.relative(root, Path(file).resolve()) or file
    record = current.find(rel, qualname) if current is not None else None
    if record is None or not record.launches:
        print(f"kernel-lsp repro: no recorded launch of {rel}::{qualname} in {store.store_path(root)}; run "
              "`kernel-lsp record -- CMD` with a command that launches it", file=sys.stderr)
        return EXIT_USAGE
    if args.list:
        for launch in record.launches:
            print(f"{launch.index}: x{launch.count} grid={list(launch.grid or [])} {launch.shapes()} "
                  f"(by `{launch.run.command}` on {launch.run.date})")
        return 0
    if args.check_bounds:
        return _check_bounds(args, rel, qualname, root, record)
    args.launch = args.launch or 1
    if not 1 <= args.launch <= len(record.launches):
        print(f"kernel-lsp repro: --launch {args.launch}: {rel}::{qualname} has launches 1 to "
              f"{len(record.launches)} (see --list)", file=sys.stderr)
        return EXIT_USAGE
    try:
        text = (root / rel).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"kernel-lsp repro: cannot read {rel}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        script, notes = repro.script(text, rel, record, record.launches[args.launch - 1])
    except repro.ReproError as exc:
        print(f"kernel-lsp repro: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for note in notes:
        print(f"kernel-lsp repro: {note}", file=sys.stderr)
    if args.output:
        Path(args.output).write_text(script, encoding="utf-8")
        print(f"kernel-lsp repro: wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(script)
    return 0


def _check_bounds(args: argparse.Namespace, rel: str, qualname: str, root: Path, record) -> int:
    from .engine.record import repro

    if args.launch is not None and not 1 <= args.launch <= len(record.launches):
        print(f"kernel-lsp repro: --launch {args.launch}: {rel}::{qualname} has launches 1 to "
              f"{len(record.launches)} (see --list)", file=sys.stderr)
        return EXIT_USAGE
    from .engine.record.store import source_hash

    text = (root / rel).read_text(encoding="utf-8")
    if record.source_sha256 != source_hash(text, qualname):
        print(f"kernel-lsp repro: {rel}::{qualname} changed since its launches were recorded: the edited kernel is "
              "checked at the shapes its former version was launched with", file=sys.stderr)
    launches = [record.launches[args.launch - 1]] if args.launch else list(record.launches)
    found = 0
    for launch in launches:
        what = f"{rel}::{qualname} launch {launch.index} ({launch.shapes() or 'no tensors'}; grid {list(launch.grid or [])})"
        try:
            script, _ = repro.script(text, rel, record, launch)
        except repro.ReproError as exc:
            print(f"{what}: not checked: {exc}")
            continue
        outcome = repro.check_bounds(script)
        if outcome["bounds"] == "ok":
            print(f"{what}: in bounds (interpreter, synthesised inputs)")
        elif outcome["bounds"] == "out-of-bounds":
            found += 1
            where = f"{rel}:{outcome['line']}: " if outcome.get("line") else ""
            print(f"{where}{what}: {outcome['message']}")
        else:
            print(f"{what}: not checked: the replay {outcome['bounds']}: {outcome.get('message', '')}")
    print("inputs are synthesised from the recorded dtypes, shapes and strides: integer tensors hold values 0..15, "
          "so an access that depends on index values is checked only for those", file=sys.stderr)
    return 1 if found else 0
