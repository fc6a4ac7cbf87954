"""The IR of one kernel compiled twice, to compare: two configurations, or two triton installations.

A side is a set of values (constexprs, parameter types, `num_warps`, `num_stages`, as the `pins` setting takes
them) and the Python interpreter whose triton compiles it. Each side's IR is written like Show IR's (the user's
file and lines in the text, a `.lines.json` beside it for definition on the IR), so `kernel-lsp ir-diff` and the
editors' Compare IR read the same two files.

Another interpreter runs this package's compile worker (`worker.main`, standard library and triton only) from
this installation's folder, started in an empty folder: the worker never runs the workspace's code (offline.py).
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import pickle
import re
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from analyzers.source import parse_python

from ..proc import Stopped, run_group
from .extract import ExtractionError
from .irmap import STAGES, relabel, source_lines_of_ir
from .jobs import CompileJob, CompileResult, Target
from .specialize import PinError, ValueNotKnown, plan_jobs

# The folder that holds the kernel_lsp package: another interpreter imports the worker from here.
PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])
OPTIONS = ("num_warps", "num_stages")
CACHE_DIR_ENV = "KERNEL_LSP_TRITON_CACHE_DIR"  # read by worker._prepare_env
_BOOT = ("import sys; sys.path[0] = {root!r}; "
         "from kernel_lsp.engine.compile.worker import main; main()")


class SideError(ValueError):
    """What stops one side from being compiled, worded for the user."""


@dataclass(frozen=True)
class IRSide:
    """One side of a comparison: the job compiled, what it gave, and the IR text as Show IR writes it."""

    name: str  # "a" or "b"
    values: dict[str, object]  # what the user set for this side
    python: str  # the interpreter that compiled it
    job: CompileJob
    result: CompileResult
    text: str = ""  # the stage's IR naming the user's file and lines
    sources: dict[int, list[int]] | None = None  # IR line (0-based) -> user lines (0-based)

    @property
    def description(self) -> str:
        """How the user recognises this side: its values, else the configuration used, and the triton version."""
        shown = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in self.values.items())
        return f"{shown or self.job.config_label} (triton {self.result.triton_version or '?'})"

    def summary(self) -> dict[str, object]:
        """The side as plain JSON values (camelCase keys, like the check report)."""
        return {"values": {k: v if isinstance(v, (int, float, str, bool)) else repr(v) for k, v in self.values.items()},
                "python": self.python, "tritonVersion": self.result.triton_version, "config": self.job.config_label,
                "constexprs": {k: v if isinstance(v, (int, float, str, bool)) or v is None else repr(v)
                               for k, v in self.job.constexprs},
                "numWarps": self.job.num_warps, "numStages": self.job.num_stages, "target": self.job.target.name}


def parse_values(text: str | None) -> dict[str, object]:
    """`BLOCK_M=64,num_warps=4` (Python literals: numbers, strings, booleans, tuples) as a dict."""
    if not text or not text.strip():
        return {}
    try:
        call = parse_python(f"f({text})", mode="eval").body
        assert isinstance(call, ast.Call) and not call.args
        values = {}
        for kw in call.keywords:
            if kw.arg is None:
                raise ValueError
            values[kw.arg] = ast.literal_eval(kw.value)
        return values
    except (SyntaxError, ValueError, AssertionError):
        raise SideError(f"cannot read {text!r}: expected NAME=VALUE[,NAME=VALUE...] with literal values "
                        "(BLOCK_M=64,num_warps=4)") from None


def plan_side(text: str, kernel: str, path: str, target: Target, values: Mapping[str, object],
              base_pins: Mapping[str, object] | None = None, launch_sites: Sequence = ()) -> CompileJob:
    """The compile job of one side: the kernel's first configuration (as Show IR shows it) with `values` on top
    of the `pins` setting's. Raises SideError for a name the kernel lacks or a value still unknown."""
    pins = {**(base_pins or {}), **values}
    try:
        jobs = plan_jobs(text, kernel, [target], path=path, launch_sites=launch_sites, pins=pins, max_configs=1)
    except ExtractionError as exc:
        raise SideError(str(exc)) from None
    except ValueNotKnown as exc:
        raise SideError(f"{exc} (or give it in this side's values: NAME=VALUE)") from None
    except PinError as exc:
        raise SideError(str(exc)) from None
    if not jobs:
        raise SideError(f"{kernel} has no configuration to compile for {target.name}")
    job = jobs[0]
    params = [name for name, _ in job.signature]
    unknown = [name for name in values if name not in params and name not in OPTIONS]
    if unknown:
        raise SideError(f"{kernel} has no parameter {', '.join(unknown)}: its parameters are {', '.join(params)} "
                        f"(and {', '.join(OPTIONS)})")
    return job


def compile_with(python: str | None, job: CompileJob, *, sass: bool, cache_dir: str | None, timeout: float,
                 cancel: threading.Event | None = None) -> CompileResult:
    """Compile `job` with the triton of `python` (None: this interpreter) in a process of its own."""
    exe = python or sys.executable
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "TRITON_INTERPRET")}
    if cache_dir:
        env[CACHE_DIR_ENV] = cache_dir
    cmd = [exe, "-c", _BOOT.format(root=PACKAGE_PARENT)] + ([] if sass else ["--no-sass"])
    with tempfile.TemporaryDirectory(prefix="kernel-lsp-irdiff-") as empty:
        try:
            done = run_group(cmd, timeout=timeout, cancel=cancel, input=pickle.dumps(job, protocol=4), env=env,
                             cwd=empty)
        except FileNotFoundError:
            raise SideError(f"no Python interpreter at {exe}") from None
        except PermissionError:
            raise SideError(f"{exe} cannot be run (permission denied)") from None
        except Stopped as stop:
            raise SideError(f"the compile with {exe} was stopped ({stop}; the limit is {timeout:g} s)") from None
    try:
        result = pickle.loads(done.stdout)
    except Exception:  # noqa: BLE001 - whatever that interpreter printed, it is not a result
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise SideError(f"{exe} could not run kernel-lsp's compile worker (exit code {done.returncode}): "
                        + (" / ".join(tail) or "no output")) from None
    if not isinstance(result, CompileResult):
        raise SideError(f"{exe} answered something that is not a compile result")
    return result


def ir_of(side: IRSide, stage: str, user_path: str) -> IRSide:
    """The side with its stage's IR (naming the user's file and lines) and its line mapping; SideError when the
    compile failed or has no such stage."""
    result = side.result
    if not result.ok:
        err = result.error
        where = f"{user_path}:{err.line + 1}: " if err is not None and err.line is not None else ""
        raise SideError(f"{side.name.upper()} ({side.description}) failed to compile: {where}"
                        + (err.message.splitlines()[0] if err is not None and err.message else "no reason given"))
    text = result.asm.get(stage)
    if not text:
        available = [s for s in STAGES if result.asm.get(s)]
        raise SideError(f"stage {stage!r} is not available for {side.job.kernel} on {side.job.target.name}: "
                        f"available stages are {', '.join(available)}")
    sources = source_lines_of_ir(stage, text, side.job)
    return replace(side, text=relabel(stage, text, side.job, user_path), sources=sources)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=]+", "-", text).strip("-").lower()[:80] or "default"


def lines_file(ir_file: Path) -> Path:
    """Beside each IR file: which source lines each of its lines comes from (for definition on the IR)."""
    return ir_file.with_name(ir_file.name + ".lines.json")


def write_ir(folder: Path, stem: str, stage: str, text: str, sources: Mapping[int, list[int]],
             user_path: str) -> Path:
    """Write an IR document and its line mapping under `folder` (Show IR's `.kernel-lsp/ir/`); OSError as is."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{stem}.{stage}"
    out.write_text(text if text.endswith("\n") else text + "\n")
    lines_file(out).write_text(json.dumps({"source": user_path, "lines": {str(k): v for k, v in sources.items()}}))
    return out


def side_stem(side: IRSide) -> str:
    """The file name of a side's IR: kernel, target, side and what sets it apart."""
    values = ",".join(f"{k}={v}" for k, v in side.values.items()) or side.job.config_label
    return (f"{_slug(side.job.kernel)}.{_slug(side.job.target.name)}.{side.name}-{_slug(values)}"
            f"-triton-{_slug(side.result.triton_version or 'unknown')}")


def unified(a: IRSide, a_path: str, b: IRSide, b_path: str, context: int = 3) -> str:
    """A unified diff of the two sides' IR, headed by their files and what each side is."""
    return "".join(difflib.unified_diff(
        a.text.splitlines(keepends=True), b.text.splitlines(keepends=True),
        fromfile=f"{a_path}\t{a.description}", tofile=f"{b_path}\t{b.description}", n=context))


def compare(text: str, kernel: str, path: str, target: Target, stage: str, a: Mapping[str, object],
            b: Mapping[str, object], *, a_python: str | None = None, b_python: str | None = None,
            base_pins: Mapping[str, object] | None = None, launch_sites: Sequence = (),
            cache_dir: str | None = None, timeout: float = 180.0,
            cancel: threading.Event | None = None) -> tuple[IRSide, IRSide]:
    """Both sides planned, compiled at once (each in its own process) and read at `stage`; SideError names the
    side that could not be."""
    from concurrent.futures import ThreadPoolExecutor

    if stage not in STAGES:
        raise SideError(f"unknown stage {stage!r}: expected one of {', '.join(STAGES)}")
    jobs = {}
    for name, values in (("a", a), ("b", b)):
        try:
            jobs[name] = plan_side(text, kernel, path, target, values, base_pins, launch_sites)
        except SideError as exc:
            raise SideError(f"{name.upper()}: {exc}") from None
    pythons = {"a": a_python, "b": b_python}
    sass = stage == "sass"
    with ThreadPoolExecutor(2) as pool:
        running = {name: pool.submit(compile_with, pythons[name], job, sass=sass, cache_dir=cache_dir,
                                     timeout=timeout, cancel=cancel) for name, job in jobs.items()}
        results = {}
        for name, future in running.items():
            try:
                results[name] = future.result()
            except SideError as exc:
                raise SideError(f"{name.upper()}: {exc}") from None
    sides = [IRSide(name, dict(values), pythons[name] or sys.executable, jobs[name], results[name])
             for name, values in (("a", a), ("b", b))]
    return ir_of(sides[0], stage, path), ir_of(sides[1], stage, path)
