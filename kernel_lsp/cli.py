"""The `kernel-lsp` command: `serve` runs the language server, `check` runs the same analysis in batch, `report`
writes it as one HTML page."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import tempfile
import time
from typing import ClassVar, Self

from . import __version__
from .settings import Settings, parse_settings

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
EXIT_INFRASTRUCTURE = 3  # checks whose result the infrastructure lost on every try: neither a pass nor a failure


def _codes(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        value = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}") from None
    if not host or not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, value


def _tcp_address(text: str) -> tuple[str, int]:
    return _host_port(text if ":" in text else f"127.0.0.1:{text}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernel-lsp", description="Language server and checker for GPU kernels.")
    parser.add_argument("--version", action="version", version=f"kernel-lsp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the language server (stdio by default)")
    mode = serve.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    mode.add_argument("--tcp", type=_tcp_address, metavar="[HOST:]PORT",
                      help="listen on a TCP address instead (HOST defaults to 127.0.0.1); one client, which must "
                      "pass the session token as initializationOptions.token (docs/editors.md)")
    serve.add_argument("--token-file", metavar="FILE",
                       help="with --tcp: the session token's file; read when it exists, else a new token is written "
                       "there (owner-only). Default: a new token in the user's runtime folder, named on stderr")
    serve.add_argument("--allow-remote", action="store_true",
                       help="with --tcp: listen on an address other than loopback (the token then crosses the "
                       "network in clear text: prefer an SSH tunnel to a loopback port)")
    serve.add_argument("--log-file", help="also write the server log to this file")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default=None)

    check = sub.add_parser("check", help="analyse files and folders; exit 1 when a problem at --fail-on is found")
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text",
                       help="json follows kernel_lsp/schema/check-report.schema.json; github prints GitHub Actions "
                       "annotations (docs/cli.md)")
    _common_options(check)
    _fix_options(check)
    check.add_argument("--fail-on", choices=["error", "warning", "info", "never"], default="error",
                       help="lowest severity that makes the exit code 1 (default: error)")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when problems are found (same as --fail-on never)")
    check.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    check.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    check.add_argument("--run-checks", action="store_true",
                       help="also run every correctness spec (docs/specs.md): each kernel against its PyTorch "
                       "reference, on the GPU when there is one, else through Triton's interpreter, then time each "
                       "kernel that passed at its bench shapes (measured on a GPU, else estimated). This runs the "
                       "files' code (in separate processes) and needs torch and triton")
    check.add_argument("--watch", action="store_true",
                       help="check again whenever a file under the paths changes (Ctrl-C stops); with --format "
                       "json each run prints its report on one line (NDJSON)")

    report = sub.add_parser("report", help="write one self-contained HTML page: per kernel its verdict, resources "
                            "per target and configuration, latency per shape with its history, and a roofline chart")
    report.add_argument("paths", nargs="+", metavar="PATH")
    report.add_argument("--output", "-o", metavar="FILE", default="kernel-lsp-report.html",
                        help="the page to write (default: kernel-lsp-report.html)")
    _common_options(report)
    _report_compiles_by_default(report)
    checks = report.add_mutually_exclusive_group()
    checks.add_argument("--run-checks", dest="run_checks", action="store_true", default=None,
                        help="also run the correctness specs and time the kernels, as check --run-checks does: "
                        "this runs the files' code. Without it they run only when every path is in a trusted "
                        "folder (kernel-lsp trust), which the output says")
    checks.add_argument("--no-checks", dest="run_checks", action="store_false",
                        help="do not run the specs nor time the kernels, even in a trusted folder")

    rules = sub.add_parser("rules", help="list the rules, or explain one")
    rules.add_argument("code", nargs="?")
    from . import tune  # `kernel-lsp tune FILE::KERNEL`: the tiling search (tune.py)

    tune.add_parser(sub)
    from . import ir_diff  # `kernel-lsp ir-diff FILE::KERNEL --a ... --b ...`: two compiles' IR compared

    ir_diff.add_parser(sub)

    trusting = sub.add_parser("trust", help="let the language server run a folder's code (compile, check and time "
                              "its kernels); remembered in your user configuration")
    trusting.add_argument("path", nargs="?", default=".", help="the folder (default: the current one)")
    trusting.add_argument("--list", action="store_true", help="list the trusted folders instead")
    untrusting = sub.add_parser("untrust", help="take a folder's trust back")
    untrusting.add_argument("path", nargs="?", default=".", help="the folder (default: the current one)")
    _add_mcp_parser(sub)
    from . import recording  # `kernel-lsp record -- CMD`, `kernel-lsp repro FILE::KERNEL --launch N`

    recording.add_parsers(sub)
    return parser


def _add_mcp_parser(sub) -> None:
    mcp = sub.add_parser("mcp", help="serve the engine to coding agents over the Model Context Protocol "
                         "(docs/agents.md; stdio by default)")
    mcp.add_argument("--http", type=_host_port, metavar="HOST:PORT", help="serve streamable HTTP at this address")
    mcp.add_argument("--root", default=".", help="the workspace folder tools work in (default: the current one)")
    mcp.add_argument("--allow-run", action="store_true",
                     help="run the workspace's code (check, measure, tune, compare) although the folder is not "
                     "trusted (kernel-lsp trust)")
    mcp.add_argument("--auth-token", metavar="TOKEN|@FILE",
                     help="with --http: every request must send Authorization: Bearer TOKEN (@FILE reads it from "
                     "FILE). Needed for an address other than loopback")
    mcp.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                     help="with --http: a Host name clients use besides the address served (repeatable)")
    mcp.add_argument("--max-parallel", type=int, default=2, metavar="N",
                     help="tool calls that run at once (default: 2)")
    mcp.add_argument("--memory-mb", type=int, default=4096, metavar="MB",
                     help="resident memory of each checking process (default: 4096)")


def _mcp(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.root):
        print(f"kernel-lsp: --root {args.root} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    if not _importable("mcp"):
        print("kernel-lsp: the MCP server needs the mcp package (pip install 'mcp>=2.3,<3')", file=sys.stderr)
        return EXIT_USAGE
    token = args.auth_token
    if token is not None and token.startswith("@"):
        try:
            with open(token[1:], encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as exc:
            print(f"kernel-lsp: cannot read --auth-token {token}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if token is not None and len(token) < 16:
        print("kernel-lsp: --auth-token must be at least 16 characters", file=sys.stderr)
        return EXIT_USAGE
    if args.http:
        from .transport import is_loopback

        if not is_loopback(args.http[0]) and token is None:
            print(f"kernel-lsp: mcp --http {args.http[0]}:{args.http[1]} is reachable from other machines, and "
                  "anyone who reaches it could use the tools (and run code where that is allowed): pass "
                  "--auth-token TOKEN (or @FILE), or serve on 127.0.0.1 (docs/agents.md)", file=sys.stderr)
            return EXIT_USAGE
    elif token is not None or args.allowed_host:
        print("kernel-lsp: --auth-token and --allowed-host apply to --http only", file=sys.stderr)
        return EXIT_USAGE
    from .mcp_server import run

    root = os.path.realpath(args.root)
    # As for `serve`: nothing relative may resolve in the workspace; workers get their folders explicitly.
    os.chdir(tempfile.gettempdir())
    run(root, http=args.http, allow_run=args.allow_run, max_parallel=args.max_parallel, memory_mb=args.memory_mb,
        auth_token=token, hosts=args.allowed_host)
    return EXIT_OK
def _common_options(parser: argparse.ArgumentParser) -> None:
    """The options `check` and `report` share: what is reported, the settings, the targets, where checks run."""
    parser.add_argument("--select", type=_codes, default=None, metavar="CODES",
                        help="comma-separated rule codes or prefixes to report (e.g. TR,NK001)")
    parser.add_argument("--ignore", type=_codes, default=None, metavar="CODES",
                        help="comma-separated rule codes or prefixes not to report")
    parser.add_argument("--config", metavar="FILE", help="a JSON file of settings (the keys of docs/configuration.md)")
    parser.add_argument("--target", action="append", type=_codes, default=None, metavar="TARGET",
                        help="also compile every kernel for this GPU target, without a GPU (sm_90, gfx942, hopper, ...;"
                        " repeatable or comma-separated): compile errors, spills, shared memory and resources are "
                        "reported. Without it (or `targets` in --config) nothing is compiled")
    parser.add_argument("--executor", choices=["local", "ray"], default=None,
                        help="where compiles and checks run: worker processes here (local, the default) or tasks on "
                        "an existing Ray cluster (ray; docs/scale.md). A cluster that cannot be reached or is lost "
                        "falls back to local with a message")
    parser.add_argument("--ray-address", metavar="HOST:PORT", default=None,
                        help="the Ray cluster for --executor ray (default: RAY_ADDRESS, else the cluster `ray start` "
                        "began on this machine); ray://HOST:PORT for Ray Client")
    parser.add_argument("--check-device", choices=["auto", "interpreter", "cuda"], default=None,
                        help="where correctness specs run kernels (default: the checkDevice setting, \"auto\")")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress on stderr (it is shown only when stderr is a terminal)")


def _trust(args: argparse.Namespace) -> int:
    from .engine import trust

    if args.command == "trust" and args.list:
        for folder in trust.trusted_folders():
            print(folder)
        return EXIT_OK
    if not os.path.isdir(args.path):
        print(f"kernel-lsp: {args.path} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "trust":
        print(f"trusted {trust.trust(args.path)} (in {trust.trust_file()})")
        return EXIT_OK
    if trust.untrust(args.path):
        print(f"no longer trusted: {os.path.realpath(args.path)}")
    else:
        below = trust.is_trusted(args.path)
        print(f"{os.path.realpath(args.path)} was not in the trust file"
              + (" (a folder above it is: untrust that one)" if below else ""))
    return EXIT_OK


class _Progress:
    """Progress of long work (compiling, checking, timing) on stderr through rich; silent when stderr is not a
    terminal (CI logs) or with --quiet."""

    TITLES: ClassVar[dict[str, str]] = {"analysing": "analysing files", "compiling": "compiling kernel files", "checking": "checking specs",
              "timing": "timing kernels"}

    def __init__(self, enabled: bool):
        self._bar = None
        self._tasks: dict[str, object] = {}
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)

    def __enter__(self) -> Self:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()

    def __call__(self, what: str, done: int, total: int) -> None:
        if self._bar is None:
            return
        if what not in self._tasks:
            self._tasks[what] = self._bar.add_task(self.TITLES.get(what, what), total=total or None)
        self._bar.update(self._tasks[what], completed=done, total=total or None)


def _show_progress(args: argparse.Namespace) -> bool:
    return not args.quiet and sys.stderr.isatty()


def _prepare(args: argparse.Namespace, compile_by_default: bool = False) -> tuple[Settings, list[str]] | int:
    """Settings (defaults, --config, the command line) and the targets to compile for; an exit code on bad input."""
    settings = Settings()
    if args.config:
        try:
            with open(args.config, encoding="utf-8") as fh:
                raw = json.load(fh)
        except (OSError, ValueError) as exc:
            print(f"kernel-lsp: cannot read --config {args.config}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        settings, messages = parse_settings(raw)
        for m in messages:
            print(f"kernel-lsp: {m}", file=sys.stderr)
        # A config file that names targets asks for compiling, like --target (the default targets do not).
        raw_targets = raw.get("targets") if isinstance(raw, dict) else None
        config_targets = list(settings.targets) if raw_targets else []
    else:
        config_targets = []
    overrides = {}
    if args.select is not None:
        overrides["select"] = args.select
    if args.ignore is not None:
        overrides["ignore"] = args.ignore
    if args.check_device is not None:
        overrides["checkDevice"] = args.check_device
    if args.executor is not None:
        overrides["executor"] = args.executor
    if args.ray_address is not None:
        overrides["rayAddress"] = args.ray_address
    if overrides:
        settings, messages = parse_settings(overrides, settings)
        if messages:
            for m in messages:
                print(f"kernel-lsp: {m}", file=sys.stderr)
            return EXIT_USAGE

    targets: list[str] = []
    if args.target:
        from analyzers.targets import UnknownTargetError, parse_target

        for name in (t for group in args.target for t in group):
            try:
                canonical = parse_target(name).name
            except UnknownTargetError as exc:
                print(f"kernel-lsp: --target: {exc}", file=sys.stderr)
                return EXIT_USAGE
            if canonical not in targets:
                targets.append(canonical)

    from .engine.compile import triton_installed

    if (targets or config_targets) and not triton_installed():
        from .install import add_command

        print(f"kernel-lsp: compiling for a target needs triton in this Python environment: "
              f"{add_command('triton>=3.6')}", file=sys.stderr)
        return EXIT_USAGE
    if compile_by_default and not (targets or config_targets) and triton_installed():
        config_targets = list(settings.targets)
    return settings, targets or config_targets


def _check(args: argparse.Namespace) -> int:
    prepared = _prepare(args)
    if isinstance(prepared, int):
        return prepared
    settings, targets = prepared
    from .engine.compile import triton_installed

    if args.run_checks and not (triton_installed() and _importable("torch")):
        print("kernel-lsp: --run-checks needs torch and triton in this Python environment", file=sys.stderr)
        return EXIT_USAGE
    if args.watch:
        if args.fix or args.diff:
            print("kernel-lsp: --fix and --diff do not combine with --watch", file=sys.stderr)
            return EXIT_USAGE
        return _watch(args, settings, targets)
    return _check_once(args, settings, targets)


def _report_compiles_by_default(report: argparse.ArgumentParser) -> None:
    """`report` compiles for the `targets` setting unless told otherwise (check compiles only when asked)."""
    for action in report._actions:
        if action.dest == "target":
            action.help = ("compile every kernel for this GPU target, without a GPU (sm_90, gfx942, hopper, ...; "
                           "repeatable or comma-separated). Without it the `targets` setting is used (default sm_90) "
                           "when triton is installed")


def _fix_options(check: argparse.ArgumentParser) -> None:
    check.add_argument("--fix", action="store_true",
                       help="apply the quick fixes the editor offers for the problems found, then report what is "
                       "left")
    check.add_argument("--diff", action="store_true",
                       help="print the quick fixes as a unified diff instead of writing them (exit 1 when there is "
                       "one)")


def _quick_fixes(args: argparse.Namespace, result) -> int:
    """Apply (or with --diff, print) the quick fixes of the problems found; the number of files they change."""
    from .fixing import apply_fixes, unified_diff
    from .report import display_path

    files = applied = skipped = 0
    for f in result.files:
        fixes = [p.fix for p in f.findings if p.fix]
        if not fixes:
            continue
        try:
            with open(f.path, encoding="utf-8", newline="") as fh:
                before = fh.read()
        except (OSError, ValueError) as exc:
            print(f"kernel-lsp: {display_path(f.path)}: not fixed, cannot read it: {exc}", file=sys.stderr)
            continue
        fixed = apply_fixes(before, fixes)
        skipped += len(fixed.skipped)
        if fixed.text == before:
            continue
        files += 1
        applied += len(fixed.applied)
        if args.diff:
            sys.stdout.write(unified_diff(display_path(f.path), before, fixed.text))
            continue
        try:
            with open(f.path, "w", encoding="utf-8", newline="") as fh:
                fh.write(fixed.text)
        except OSError as exc:
            print(f"kernel-lsp: {display_path(f.path)}: not fixed, cannot write it: {exc}", file=sys.stderr)
            files -= 1
            applied -= len(fixed.applied)
    if not args.quiet:
        verb = "would fix" if args.diff else "fixed"
        line = f"kernel-lsp: {verb} {applied} problem{'s' * (applied != 1)} in {files} file{'s' * (files != 1)}"
        if skipped:
            line += f"; {skipped} other fix{'es' * (skipped != 1)} overlap one applied: run again to apply them"
        print(line, file=sys.stderr)
    return files


def _check_once(args: argparse.Namespace, settings: Settings, targets: list[str]) -> int:
    from .report import github_report, json_report, sarif_report, text_report

    with _Progress(_show_progress(args)) as progress:
        result = _check_files(args, settings, targets, args.run_checks, progress)
    if getattr(args, "fix", False) or getattr(args, "diff", False):
        changed = _quick_fixes(args, result)
        if args.diff:
            return EXIT_USAGE if result.missing else (EXIT_PROBLEMS if changed else EXIT_OK)
        if changed:  # report what the fixes left, at its new positions
            with _Progress(_show_progress(args)) as progress:
                result = _check_files(args, settings, targets, args.run_checks, progress)
    for line in result.messages:  # where the jobs ran, when not where asked (a Ray cluster lost, ...)
        print(f"kernel-lsp: {line}", file=sys.stderr)
    if args.format == "json":
        out = json_report(result, one_line=args.watch)  # --watch: one document per line and run
    elif args.format == "sarif":
        out = sarif_report(result)
    elif args.format == "github":
        out = github_report(result)
    else:
        color = args.color == "always" or (args.color == "auto" and not args.output and sys.stdout.isatty())
        out = text_report(result, color=color)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(out)
    else:
        sys.stdout.write(out)
        sys.stdout.flush()
    if result.missing:
        return EXIT_USAGE
    if result.infrastructure_lost and not args.exit_zero:
        for line in result.infrastructure_lost:
            print(f"kernel-lsp: result lost, not checked: {line}", file=sys.stderr)
        return EXIT_INFRASTRUCTURE
    fail_on = "never" if args.exit_zero else args.fail_on
    order = ["error", "warning", "information", "hint"]
    threshold = {"error": 0, "warning": 1, "info": 2}.get(fail_on)
    worst = order.index(result.worst) if result.worst in order else None
    return EXIT_PROBLEMS if threshold is not None and worst is not None and worst <= threshold else EXIT_OK


def _check_files(args: argparse.Namespace, settings: Settings, targets: list[str], run_checks: bool, progress,
                 history: bool = False):
    """`check` and `report` are the Python API's batch operation over the current folder; running the command
    with the checks asked for is the consent to run the files' code."""
    from .api import Workspace

    with Workspace(os.getcwd(), settings=settings, allow_run=True) as workspace:
        return workspace.check_files(args.paths, targets=targets, run_checks=run_checks, latency=run_checks,
                                     confined=False, history=history, progress=progress)


def _watch(args: argparse.Namespace, settings: Settings, targets: list[str]) -> int:
    """Check, then check again after each change under the paths (sources only, the private folder and excluded
    folders aside), until interrupted; the exit code is the last check's."""
    import threading

    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    from .engine.cuda import CUDA_SUFFIXES
    from .engine.files import PRIVATE_DIR

    changed = threading.Event()
    suffixes = (".py", *CUDA_SUFFIXES)
    excluded = {PRIVATE_DIR, ".git", "__pycache__"}

    class OnChange(FileSystemEventHandler):
        def on_any_event(self, event) -> None:
            if event.event_type in ("opened", "closed_no_write"):
                return
            for p in (event.src_path, getattr(event, "dest_path", "")):
                parts = set(os.fsdecode(p).split(os.sep))
                if os.fsdecode(p).endswith(suffixes) and not parts & excluded:
                    changed.set()

    observer = Observer()
    for given in dict.fromkeys(os.path.abspath(p) for p in args.paths):
        folder = given if os.path.isdir(given) else os.path.dirname(given)
        if os.path.isdir(folder):
            observer.schedule(OnChange(), folder, recursive=os.path.isdir(given))
    observer.start()
    code = EXIT_OK
    try:
        while True:
            changed.clear()
            code = _check_once(args, settings, targets)
            print(f"kernel-lsp: watching {', '.join(args.paths)} for changes (Ctrl-C stops)", file=sys.stderr,
                  flush=True)
            changed.wait()
            time.sleep(0.2)  # an editor's save is several events: check once after them
    except KeyboardInterrupt:
        return code
    finally:
        observer.stop()
        observer.join(timeout=5)


def _report(args: argparse.Namespace) -> int:
    prepared = _prepare(args, compile_by_default=True)
    if isinstance(prepared, int):
        return prepared
    settings, targets = prepared
    from .engine.compile import triton_installed
    from .html_report import html_page

    not_run: list[str] = []
    if not targets:
        not_run.append("nothing was compiled: triton is not installed in this Python environment")
    run_checks = args.run_checks
    if run_checks is None:
        # Running the files' code is asked for by name (--run-checks) or by trust: every path in a trusted folder.
        untrusted = _untrusted_folders(args.paths)
        run_checks = not untrusted
        if untrusted:
            not_run.append(f"no spec was checked and no kernel timed: that runs the files' code, and "
                           f"{', '.join(untrusted)} {'is' if len(untrusted) == 1 else 'are'} not trusted. Pass "
                           "--run-checks, or trust the folder (kernel-lsp trust PATH)")
        else:
            note = ("the specs are run and the kernels timed because every path is in a trusted folder "
                    "(kernel-lsp trust --list); --no-checks turns that off")
            not_run.append(note)
            print(f"kernel-lsp: {note}", file=sys.stderr)
    if run_checks and not (triton_installed() and _importable("torch")):
        run_checks = False
        not_run.append("no spec was checked and no kernel timed: that needs torch and triton in this Python "
                       "environment")
    elif args.run_checks is False:
        not_run.append("no spec was checked and no kernel timed (--no-checks)")
    with _Progress(_show_progress(args)) as progress:
        result = _check_files(args, settings, targets, run_checks, progress, history=True)
    for path in result.missing:
        print(f"kernel-lsp: {path}: no such file or directory", file=sys.stderr)
    page = html_page(result, not_run=not_run, checks_ran=run_checks)
    try:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(page)
    except OSError as exc:
        print(f"kernel-lsp: cannot write {args.output}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_USAGE if result.missing else EXIT_OK


def _untrusted_folders(paths: list[str]) -> list[str]:
    """The folders of `paths` (a file's own folder, from its real path) that no trusted folder covers."""
    from .engine import trust

    folders = dict.fromkeys(os.path.realpath(p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)))
                            for p in paths)
    return [f for f in folders if not trust.is_trusted(f)]


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _rules(args: argparse.Namespace) -> int:
    from analyzers.rules import RULES

    if args.code:
        rule = RULES.get(args.code.upper())
        if rule is None:
            print(f"kernel-lsp: no rule {args.code}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{rule.code} {rule.name} ({rule.severity.name.lower()}, {rule.language})\n\n{rule.summary}\n")
        if rule.explanation:
            print(rule.explanation + "\n")
        if rule.wrong:
            print("Wrong:\n\n" + rule.wrong + "\nRight:\n\n" + rule.right)
        return EXIT_OK
    for rule in sorted(RULES.values(), key=lambda r: r.code):
        fix = " (fix)" if rule.fixable else ""
        print(f"{rule.code}  {rule.name:32} {rule.severity.name.lower():8} {rule.summary}{fix}")
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    level = (args.log_level or "info").upper()
    logging.basicConfig(level=level, handlers=handlers, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level != "DEBUG":
        logging.getLogger("pygls").setLevel(logging.WARNING)  # it logs every message at INFO
    # Editors start the server in the workspace. Nothing relative may resolve there (a module, a file, a program):
    # the server and the compile workers it starts live in a folder no workspace is; the checks choose their own.
    os.chdir(tempfile.gettempdir())
    # The server's imports create a great many long-lived objects (the protocol's types, the rule tables) and
    # no garbage: the collector's passes over them while importing cost about 50 ms of the time to answer
    # `initialize`. Collection resumes once they are built, with them frozen out of its scans.
    gc.disable()
    try:
        from .server import build_server

        server = build_server(log_level_from_cli=args.log_level)
    finally:
        gc.freeze()
        gc.enable()
    # Analyses run in a worker thread; the default 5 ms GIL hand-off would add up to that to every edit's
    # diagnostics while the event loop waits for the result.
    sys.setswitchinterval(0.001)
    from .transport import start_io, start_tcp

    # The transport's reader survives bad frames that pygls' own would lose the stream on (transport.py).
    if args.tcp:
        host, port = args.tcp
        return _serve_tcp(server, start_tcp, host, port, token_file=args.token_file, allow_remote=args.allow_remote)
    return start_io(server)


def _tcp_token(token_file: str | None, port: int) -> tuple[str, str | None, bool] | str:
    """The session token, the file it is in (None: from the environment) and whether this process wrote that
    file; or why there is none."""
    import secrets

    from .transport import MIN_TOKEN_CHARS, TOKEN_ENV

    given = os.environ.get(TOKEN_ENV)
    if given is not None:
        given = given.strip()
        return (given, None, False) if len(given) >= MIN_TOKEN_CHARS else \
            f"{TOKEN_ENV} must hold at least {MIN_TOKEN_CHARS} characters"
    if token_file and os.path.exists(token_file):
        try:
            with open(token_file, encoding="utf-8") as fh:
                text = fh.read().strip()
        except OSError as exc:
            return f"cannot read --token-file {token_file}: {exc}"
        if len(text) < MIN_TOKEN_CHARS:
            return f"--token-file {token_file} must hold a token of at least {MIN_TOKEN_CHARS} characters"
        return text, token_file, False
    if token_file is None:
        base = os.environ.get("XDG_RUNTIME_DIR") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(base, "kernel-lsp")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        token_file = os.path.join(folder, f"tcp-{port}.token")
    token = secrets.token_urlsafe(32)
    try:
        if os.path.exists(token_file):
            os.unlink(token_file)  # a stale one of an earlier server on this port
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(token + "\n")
    except OSError as exc:
        return f"cannot write the session token to {token_file}: {exc}"
    return token, token_file, True


def _serve_tcp(server, start_tcp, host: str, port: int, token_file: str | None, allow_remote: bool) -> int:
    from .transport import is_loopback

    if not is_loopback(host) and not allow_remote:
        print(f"kernel-lsp: --tcp {host}:{port} is not a loopback address; anyone who reaches it could try the "
              "token, which crosses the network in clear text. Use an SSH tunnel to a loopback port, or pass "
              "--allow-remote", file=sys.stderr)
        return EXIT_USAGE
    made = _tcp_token(token_file, port)
    if isinstance(made, str):
        print(f"kernel-lsp: {made}", file=sys.stderr)
        return EXIT_USAGE
    token, where, written = made
    source = f"in {where}" if where else "the one in $KERNEL_LSP_TOKEN"
    print(f"kernel-lsp: listening on {host}:{port} for one client; its session token is {source} (pass it as "
          "initializationOptions.token)", file=sys.stderr, flush=True)
    try:
        return start_tcp(server, host, port, token)
    finally:
        if written and where:
            try:
                os.unlink(where)
            except OSError:
                pass


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "tune":
        from . import tune

        return tune.run(args)
    if args.command == "ir-diff":
        from . import ir_diff

        return ir_diff.run(args)
    if args.command == "check":
        return _check(args)
    if args.command == "report":
        return _report(args)
    if args.command == "rules":
        return _rules(args)
    if args.command in ("trust", "untrust"):
        return _trust(args)
    if args.command == "mcp":
        return _mcp(args)
    if args.command in ("record", "repro"):
        from . import recording

        return recording.run(args)
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
