"""The `kernel-lsp` command: `serve` runs the language server, `check` runs the same analysis in batch."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import tempfile

from . import __version__
from .settings import Settings, parse_settings

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernel-lsp", description="Language server and checker for GPU kernels.")
    parser.add_argument("--version", action="version", version=f"kernel-lsp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the language server (stdio by default)")
    mode = serve.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    mode.add_argument("--tcp", type=_host_port, metavar="HOST:PORT", help="listen on a TCP address instead")
    serve.add_argument("--log-file", help="also write the server log to this file")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default=None)

    check = sub.add_parser("check", help="analyse files and folders; exit 1 when a problem at --fail-on is found")
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.add_argument("--format", choices=["text", "json", "sarif"], default="text")
    check.add_argument("--select", type=_codes, default=None, metavar="CODES",
                       help="comma-separated rule codes or prefixes to report (e.g. TR,NK001)")
    check.add_argument("--ignore", type=_codes, default=None, metavar="CODES",
                       help="comma-separated rule codes or prefixes not to report")
    check.add_argument("--config", metavar="FILE", help="a JSON file of settings (the keys of docs/configuration.md)")
    check.add_argument("--fail-on", choices=["error", "warning", "info", "never"], default="error",
                       help="lowest severity that makes the exit code 1 (default: error)")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when problems are found (same as --fail-on never)")
    check.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    check.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    check.add_argument("--target", action="append", type=_codes, default=None, metavar="TARGET",
                       help="also compile every kernel for this GPU target, without a GPU (sm_90, gfx942, hopper, ...;"
                       " repeatable or comma-separated): compile errors, spills, shared memory and resources are "
                       "reported. Without it (or `targets` in --config) nothing is compiled")

    check.add_argument("--run-checks", action="store_true",
                       help="also run every correctness spec (docs/specs.md): each kernel against its PyTorch "
                       "reference, on the GPU when there is one, else through Triton's interpreter. This runs the "
                       "files' code (in separate processes) and needs torch and triton")
    check.add_argument("--executor", choices=["local", "ray"], default=None,
                       help="where compiles and checks run: worker processes here (local, the default) or tasks on "
                       "an existing Ray cluster (ray; docs/scale.md). A cluster that cannot be reached or is lost "
                       "falls back to local with a message")
    check.add_argument("--ray-address", metavar="HOST:PORT", default=None,
                       help="the Ray cluster for --executor ray (default: RAY_ADDRESS, else the cluster `ray start` "
                       "began on this machine); ray://HOST:PORT for Ray Client")
    check.add_argument("--check-device", choices=["auto", "interpreter", "cuda"], default=None,
                       help="where --run-checks runs kernels (default: the checkDevice setting, \"auto\")")

    rules = sub.add_parser("rules", help="list the rules, or explain one")
    rules.add_argument("code", nargs="?")

    trusting = sub.add_parser("trust", help="let the language server run a folder's code (compile, check and time "
                              "its kernels); remembered in your user configuration")
    trusting.add_argument("path", nargs="?", default=".", help="the folder (default: the current one)")
    trusting.add_argument("--list", action="store_true", help="list the trusted folders instead")
    untrusting = sub.add_parser("untrust", help="take a folder's trust back")
    untrusting.add_argument("path", nargs="?", default=".", help="the folder (default: the current one)")
    return parser


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


def _check(args: argparse.Namespace) -> int:
    from analyzers.model import Severity

    from .engine.check import check_paths
    from .report import json_report, sarif_report, text_report

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
        print("kernel-lsp: compiling for a target needs triton in this Python environment (pip install triton)",
              file=sys.stderr)
        return EXIT_USAGE
    if args.run_checks and not (triton_installed() and _importable("torch")):
        print("kernel-lsp: --run-checks needs torch and triton in this Python environment", file=sys.stderr)
        return EXIT_USAGE
    result = check_paths(args.paths, settings, targets or config_targets, run_specs=args.run_checks)
    for line in result.messages:  # where the jobs ran, when not where asked (a Ray cluster lost, ...)
        print(f"kernel-lsp: {line}", file=sys.stderr)
    if args.format == "json":
        out = json_report(result)
    elif args.format == "sarif":
        out = sarif_report(result)
    else:
        color = args.color == "always" or (args.color == "auto" and not args.output and sys.stdout.isatty())
        out = text_report(result, color=color)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(out)
    else:
        sys.stdout.write(out)
    if result.missing:
        return EXIT_USAGE
    fail_on = "never" if args.exit_zero else args.fail_on
    worst = result.worst()
    threshold = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}.get(fail_on)
    return EXIT_PROBLEMS if threshold is not None and worst is not None and worst <= threshold else EXIT_OK


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
        start_tcp(server, host, port)
    else:
        start_io(server)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check":
        return _check(args)
    if args.command == "rules":
        return _rules(args)
    if args.command in ("trust", "untrust"):
        return _trust(args)
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
