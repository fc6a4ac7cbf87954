"""`kernel-lsp ir-diff FILE::KERNEL`: the IR of one kernel under two configurations, or two triton versions.

Each side is a set of values (`--a 'BLOCK_M=64,num_warps=4'`: constexprs, parameter types such as `x_ptr='*bf16'`,
`num_warps`, `num_stages`) on top of the kernel's first configuration, compiled by this Python's triton or by
another interpreter's (`--b-python /path/to/python`). Both IR files are written as Show IR writes them (the user's
file and lines, with the line mapping beside them) under `.kernel-lsp/ir/`, and a unified diff of the two is
printed; `--format json` prints both files and what each side was instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .engine.compile.irmap import STAGES
from .tune import split_target, workspace_root

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parser(sub) -> None:
    p = sub.add_parser("ir-diff", help="compile one kernel two ways (two configurations, or two triton versions "
                       "through another Python) and compare their IR side by side")
    p.add_argument("target", metavar="FILE::KERNEL", help="the file and the name of a Triton kernel")
    p.add_argument("--stage", choices=STAGES, default="ttgir", help="the IR to compare (default: ttgir)")
    p.add_argument("--target", dest="gpu", default="sm_90", metavar="TARGET",
                   help="the GPU target to compile for, without a GPU (default: sm_90)")
    for side in ("a", "b"):
        p.add_argument(f"--{side}", default="", metavar="VALUES",
                       help=f"side {side.upper()}'s values, NAME=VALUE[,NAME=VALUE...]: constexprs, parameter types "
                       "('x_ptr=\"*bf16\"'), num_warps, num_stages; the rest from the kernel's first configuration")
        p.add_argument(f"--{side}-python", default=None, metavar="PYTHON",
                       help=f"compile side {side.upper()} with this Python interpreter's triton (default: this one's)")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text: a unified diff; json: both IR files and what each side was")
    p.add_argument("--context", "-U", type=int, default=3, metavar="N", help="lines of context in the diff")
    p.add_argument("--output-dir", default=None, metavar="DIR",
                   help="where the two IR files go (default: .kernel-lsp/ir/ of the current folder, or of the "
                   "file's folder when the file is outside it)")
    p.add_argument("--timeout", type=float, default=180.0, metavar="S", help="seconds each compile may take")


def _fail(text: str, code: int = EXIT_USAGE) -> int:
    print(f"kernel-lsp ir-diff: {text}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    from analyzers.analyze import analyze_source
    from analyzers.targets import UnknownTargetError

    from .engine.compile import triton_installed
    from .engine.compile.irdiff import SideError, compare, parse_values, side_stem, unified, write_ir
    from .engine.compile.specialize import make_target
    from .engine.files import PRIVATE_DIR, ensure_ignored_dir

    split = split_target(args.target)
    if split is None:
        return _fail(f"expected FILE::KERNEL, got {args.target!r}")
    path, kernel = os.path.abspath(split[0]), split[1]
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"cannot read {split[0]}: {exc}")
    try:
        target = make_target(args.gpu)
        a, b = parse_values(args.a), parse_values(args.b)
    except (UnknownTargetError, SideError) as exc:
        return _fail(str(exc))
    if (args.a_python is None or args.b_python is None) and not triton_installed():
        from .install import add_command

        return _fail(f"compiling needs triton in this Python environment ({add_command('triton>=3.6')}), or "
                     "--a-python and --b-python naming interpreters that have it")
    analysis = analyze_source(text, path)
    if analysis.kernel(kernel) is None:
        found = ", ".join(k.name for k in analysis.kernels) or "none"
        return _fail(f"no Triton kernel {kernel} in {split[0]} (its kernels: {found})")
    root = workspace_root(path)
    try:
        private = ensure_ignored_dir(Path(root, PRIVATE_DIR))
    except OSError as exc:
        return _fail(f"cannot write under {root}: {exc}")
    folder = Path(args.output_dir) if args.output_dir else private / "ir"
    try:
        side_a, side_b = compare(text, kernel, path, target, args.stage, a, b, a_python=args.a_python,
                                 b_python=args.b_python, launch_sites=[(s, text, path) for s in analysis.launch_sites],
                                 cache_dir=str(private / "triton-cache"), timeout=args.timeout)
    except SideError as exc:
        return _fail(str(exc), EXIT_FAILED)
    try:
        files = [write_ir(folder, side_stem(s), args.stage, s.text, s.sources or {}, path) for s in (side_a, side_b)]
    except OSError as exc:
        return _fail(f"cannot write the IR files: {exc}")
    diff = unified(side_a, str(files[0]), side_b, str(files[1]), context=max(0, args.context))
    if args.format == "json":
        print(json.dumps({"kernel": kernel, "stage": args.stage, "target": target.name, "identical": not diff,
                          "a": {"path": str(files[0]), **side_a.summary()},
                          "b": {"path": str(files[1]), **side_b.summary()}}, indent=2))
    else:
        sys.stdout.write(diff or f"the {args.stage} of {kernel} is the same on both sides\n")
    return EXIT_OK
