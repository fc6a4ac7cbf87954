"""Correctness checks in the editor: on save and on request (`kernel-lsp.runChecks`), with a code lens per kernel
that has a spec (its verdict, or a button to run it). Problems found arrive as KV diagnostics."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from analyzers.model import Problem, Span
from analyzers.rules import make_problem
from analyzers.rules.verification import CORRECT_CODES, TOOL_NOTE, VERDICT_CODES
from analyzers.specs import specced_kernels

from .. import convert
from ..api import ApiError, CheckResult, VerdictInfo
from ..background import background_job, log_task_failure
from ..commands import RUN_CHECKS, position_argument
from .latency import lens_title

if TYPE_CHECKING:
    from ..engine.executor import Executor
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)

# The diagnostic code of each verdict status that is a problem (analyzers/rules/verification.py documents them).


def _verdict_span(v: VerdictInfo, lines: list[str], *, own_line: bool = True) -> Span:
    """Where a verdict's problem goes (0-based): its own line when known, else the kernel's def line."""
    line = (v.line if own_line and v.line is not None else v.kernel_line or 1) - 1
    line = min(max(line, 0), max(len(lines) - 1, 0))
    width = len(lines[line].rstrip("\r\n")) if line < len(lines) else 0
    if own_line and v.line is not None and v.column is not None:
        return Span(line, min(v.column - 1, width), line, width)
    start = width - len(lines[line].lstrip()) if line < len(lines) else 0
    return Span(line, start, line, width)


def check_problems(result: CheckResult, text: str) -> list[Problem]:
    """What a check of `text` found, as problems at its lines (KV001–KV007)."""
    lines = text.splitlines()
    out: list[Problem] = []
    for v in result.verdicts:
        code = VERDICT_CODES.get(v.status) or (CORRECT_CODES.get(v.failed_check or "") if v.ok else None)
        if code is None:
            continue
        message = v.message + (" (" + "; ".join(v.notes) + ")" if v.notes else "")
        out.append(make_problem(code, _verdict_span(v, lines), message, kernel=v.kernel))
    for v in result.verdicts:  # AWS's simulator and the NKI model disagree: information, never the kernel's fault
        for note in v.notes:
            if note.startswith(TOOL_NOTE):
                out.append(make_problem("KV007", _verdict_span(v, lines, own_line=False),
                                        note.removeprefix(TOOL_NOTE).strip(), kernel=v.kernel))
    for e in result.error_details:
        at = min(max((e.line or 1) - 1, 0), max(len(lines) - 1, 0))
        width = len(lines[at].rstrip("\r\n")) if at < len(lines) else 0
        out.append(make_problem("KV005", Span(at, 0, at, width), e.message))
    return out


def verdict_summary(v: VerdictInfo) -> str:
    """What a code lens shows for one verdict."""
    return f"{'✓' if v.ok else '✗'} {v.message}"


def spec_request(ls: "KernelLanguageServer", args: tuple, command: str, why: str
                 ) -> tuple[str, str, tuple[str, ...] | None] | dict[str, Any]:
    """(path, text, kernels) for a command that works on specs: the kernel under the given line, or every spec'd
    kernel of the file (None) without a line; or the command's {"error": ...} answer. `why`: what the spec is
    needed for, said when the kernel has none."""
    uri, line = position_argument(args)
    path = to_fs_path(uri) if uri else None
    if not path:
        return {"error": f"{command} needs the document's uri (and optionally a line)"}
    text = ls.current_text(path)
    if text is None:
        return {"error": f"cannot read {path}"}
    specced = specced_kernels(text)
    kernels: tuple[str, ...] | None = None
    if line is not None:
        path = ls.ensure_current(uri) or path
        kernel = ls.kernel_at(path, line)
        if kernel is not None:
            if kernel.name not in specced:
                return {"error": f"{kernel.name} has no correctness spec: {why} (docs/specs.md)",
                        "kernel": kernel.name}
            kernels = (kernel.name,)
    if kernels is None and not specced:
        return {"error": f"{path} has no correctness spec (docs/specs.md)"}
    return path, text, kernels


class Checks:
    """The correctness checks of one server session: each file's last result with the text it checked (shown while
    that text is current), the checks in flight (a newer check of a file supersedes the older), how many ran, and
    the Ray executor they run on with `executor: ray`."""

    def __init__(self, server: "KernelLanguageServer"):
        self.ls = server
        self.results: dict[str, tuple[str, CheckResult]] = {}  # path -> (the text that was checked, its result)
        self.running: dict[str, threading.Event] = {}  # path -> the running check's cancel
        self.count = 0  # checks that finished, for the status command
        self.executor: "Executor | None" = None  # with `executor: ray`: the checks' Ray executor, made on first use

    def report(self, path: str) -> CheckResult | None:
        """The last check result of a file, while its text is still the one that was checked."""
        return self.ls.while_current(self.results, path)

    def problems(self, path: str) -> list:
        """What the last check of the file's current text found, as problems (KV001–KV007)."""
        found = self.results.get(path)
        result = self.report(path)
        if result is None or found is None:
            return []
        return check_problems(result, found[0])

    def ray_executor(self) -> "Executor | None":
        """Where checks run with `executor: ray` (None: in a process of this machine, as `run_checks` starts it).
        A cluster that cannot be reached or is lost: the checks run here, and a window message says so."""
        settings = self.ls.state.settings
        if settings.executor != "ray":
            return None
        if self.executor is None:
            from ..engine.executor import ThreadExecutor, make_executor

            self.executor = make_executor(
                "ray", lambda: ThreadExecutor(max(1, (os.cpu_count() or 2) - 1)),
                address=settings.ray_address or None, say=lambda line: self.ls.message(f"checks: {line}"))
        return self.executor

    async def close_executor(self) -> None:
        """Let go of the checks' executor (new settings, shutdown): the next check starts where the settings say."""
        executor, self.executor = self.executor, None
        if executor is not None:
            await executor.close()

    async def run(self, path: str, kernels: tuple[str, ...] | None = None) -> CheckResult | None:
        """Check a file's specs (or those of `kernels`) against their references, in a separate process, through
        the API's `Workspace.check_buffer`. A newer request for the same file cancels this one (None is returned
        for the cancelled one). Kernels found correct are then timed (`Latency.run`), unless latency is off.
        Raises the API's ApiError for what cannot be checked (a text over the size limit, a folder gone)."""
        ls = self.ls
        text = ls.current_text(path)
        if text is None:
            return None
        settings = ls.state.settings
        workspace = ls.api_workspace(path)
        title = f"checking {', '.join(kernels) if kernels else os.path.basename(path)}"
        executor = self.ray_executor()
        async with background_job(ls, title, running=self.running, key=path,
                                  started=ls.refresh_lenses) as job:  # a newer check supersedes this one
            # With a Ray executor the check is a task, and a newer check of the file (same key) cancels it.
            result = await workspace.check_buffer(path, text, kernels=kernels, cancel=job.cancel, executor=executor,
                                                  key=path, confined=ls.in_workspace(path))
        if job.cancelled:
            return None
        self.count += 1
        before = self.results.get(path)
        if kernels and before is not None and before[0] == text:  # keep the other kernels' verdicts of this text
            verdicts = [v for v in before[1].verdicts if v.kernel not in kernels] + result.verdicts
            result = dataclasses.replace(result, verdicts=verdicts,
                                         ok=bool(verdicts) and not result.errors and all(v.ok for v in verdicts))
        self.results[path] = (text, result)
        ls.publish([path])
        ls.refresh_lenses()
        correct = tuple(dict.fromkeys(v.kernel for v in result.verdicts if v.ok))
        if correct and settings.latency != "off":  # timing a kernel that computes the wrong thing means nothing
            # Time where the check ran: a CPU build of torch on a GPU machine checks on the interpreter.
            on_gpu = any(v.ok and v.on_gpu for v in result.verdicts)
            task = asyncio.ensure_future(ls.latency.run(path, text, correct, gpu=on_gpu))
            task.add_done_callback(log_task_failure)
        return result


def checks_off(ls: "KernelLanguageServer", doing: str = "checking runs the kernel's launcher") -> str:
    """Why the file's code may not run, and what turns it on: the folder's trust where the settings ask for checks
    but the folder is not trusted, else the `checks` setting."""
    state = ls.state
    if state.requested.checks != "off":  # asked for, turned off by the trust gate
        if not state.roots:
            return (f"{doing}, and code runs only in a trusted workspace folder: this file was opened without one. "
                    "Open its project folder as the workspace, then trust it (the command \"Trust this "
                    "workspace\", or `kernel-lsp trust FOLDER` in a terminal)")
        return (f"{doing}, and this workspace's folder is not trusted ({', '.join(state.roots)}): trust it with the "
                "command \"Trust this workspace\" (or `kernel-lsp trust FOLDER` in a terminal; in VS Code, its "
                "workspace trust)")
    return f"{doing}, and checks are off (set the `checks` setting to \"save\" or \"request\")"


async def run_checks_command(ls: "KernelLanguageServer", *args: Any) -> dict[str, Any]:
    if ls.state.settings.checks == "off":
        return {"error": checks_off(ls)}
    found = spec_request(ls, args, "runChecks", "use the code action \"Write a correctness spec\"")
    if isinstance(found, dict):
        return found
    path, _, kernels = found
    try:
        result = await ls.checks.run(path, kernels)
    except ApiError as exc:
        return {"error": str(exc)}
    if result is None:
        return {"error": "the check was superseded by a newer one"}
    # Lines are 0-based here, as everywhere in the protocol.
    return {"verdicts": [{"kernel": v.kernel, "status": v.status, "message": v.message, "device": v.device,
                          "line": _zero_based(v.line), "durationS": v.seconds} for v in result.verdicts],
            "errors": [{"line": _zero_based(e.line), "message": e.message} for e in result.error_details]}


def _zero_based(line: int | None) -> int | None:
    return None if line is None else line - 1


def code_lenses(ls: "KernelLanguageServer", path: str) -> list[types.CodeLens]:
    entry = ls.state.index.get(path)
    text = ls.current_text(path)
    if entry is None or entry.analysis is None or text is None:
        return []
    specced = specced_kernels(text)
    report = ls.checks.report(path)
    pos = ls.positions(path)
    running = path in ls.checks.running
    timings = ls.latency.report(path)
    lenses = []
    for kernel in [*entry.analysis.kernels, *entry.analysis.nki_kernels]:  # an NKI spec runs in the NKI model
        if kernel.name not in specced:
            continue
        line = kernel.name_span.start_line  # the def line, below any decorators
        where = {"uri": from_fs_path(path) or path, "line": line, "character": 0}
        verdicts = [v for v in (report.verdicts if report else ()) if v.kernel == kernel.name]
        if running:
            lenses.append(convert.code_lens(pos, line, "checking…"))
        elif verdicts:
            for v in verdicts:
                lenses.append(convert.code_lens(pos, line, verdict_summary(v), RUN_CHECKS, [where]))
        else:
            lenses.append(convert.code_lens(pos, line, "▶ check against the reference", RUN_CHECKS, [where]))
        timing = lens_title(timings, kernel.name)
        if timing:  # clicking it checks and times again
            lenses.append(convert.code_lens(pos, line, timing, RUN_CHECKS, [where]))
    return lenses


async def _check_on_save(ls: "KernelLanguageServer", path: str) -> None:
    try:
        await ls.checks.run(path)
    except ApiError as exc:  # nobody awaits this check: the user hears why it did not run
        ls.message(f"checks of {os.path.basename(path)}: {exc}")


def register(server: "KernelLanguageServer") -> None:
    server.answering_command(RUN_CHECKS, run_checks_command)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: "KernelLanguageServer", params: types.DidSaveTextDocumentParams) -> None:
        path = to_fs_path(params.text_document.uri)
        if not path or ls.state.settings.checks != "save" or not path.endswith(".py"):
            return
        text = ls.current_text(path)
        if text is None or not specced_kernels(text):
            return
        asyncio.ensure_future(_check_on_save(ls, path)).add_done_callback(log_task_failure)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    def code_lens(ls: "KernelLanguageServer", params: types.CodeLensParams):
        path = ls.ensure_current(params.text_document.uri)
        if not path or ls.state.settings.checks == "off":
            return []
        return code_lenses(ls, path)
