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

from analyzers.specs import specced_kernels

from .. import convert
from ..api import ApiError
from ..background import background_job, log_task_failure
from ..commands import RUN_CHECKS, position_argument
from .latency import lens_title

if TYPE_CHECKING:
    from ..engine.executor import Executor
    from ..engine.verify import CheckReport
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)


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
    """The correctness checks of one server session: each file's last report with the text it checked (shown while
    that text is current), the checks in flight (a newer check of a file supersedes the older), how many ran, and
    the Ray executor they run on with `executor: ray`."""

    def __init__(self, server: "KernelLanguageServer"):
        self.ls = server
        self.results: dict[str, tuple[str, "CheckReport"]] = {}  # path -> (the text that was checked, its report)
        self.running: dict[str, threading.Event] = {}  # path -> the running check's cancel
        self.count = 0  # checks that finished, for the status command
        self.executor: "Executor | None" = None  # with `executor: ray`: the checks' Ray executor, made on first use

    def report(self, path: str) -> "CheckReport | None":
        """The last check report of a file, while its text is still the one that was checked."""
        return self.ls.while_current(self.results, path)

    def problems(self, path: str) -> list:
        """What the last check of the file's current text found, as problems (KV001–KV007)."""
        found = self.results.get(path)
        report = self.report(path)
        if report is None or found is None:
            return []
        from ..engine.verify.findings import check_problems as problems_of

        return problems_of(report, found[0])

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

    async def run(self, path: str, kernels: tuple[str, ...] | None = None) -> "CheckReport | None":
        """Check a file's specs (or those of `kernels`) against their references, in a separate process, through
        the API's `Workspace.check_report`. A newer request for the same file cancels this one (None is returned
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
            report = await workspace.check_report(path, text, kernels=kernels, cancel=job.cancel, executor=executor,
                                                  key=path, confined=ls.in_workspace(path))
        if job.cancelled:
            return None
        self.count += 1
        before = self.results.get(path)
        if kernels and before is not None and before[0] == text:  # keep the other kernels' verdicts of this text
            kept = tuple(v for v in before[1].verdicts if v.kernel not in kernels)
            report = dataclasses.replace(report, verdicts=kept + report.verdicts)
        self.results[path] = (text, report)
        ls.publish([path])
        ls.refresh_lenses()
        correct = tuple(dict.fromkeys(v.kernel for v in report.verdicts if v.ok))
        if correct and settings.latency != "off":  # timing a kernel that computes the wrong thing means nothing
            # Time where the check ran: a CPU build of torch on a GPU machine checks on the interpreter.
            on_gpu = any(v.ok and v.on_gpu for v in report.verdicts)
            task = asyncio.ensure_future(ls.latency.run(path, text, correct, gpu=on_gpu))
            task.add_done_callback(log_task_failure)
        return report


async def run_checks_command(ls: "KernelLanguageServer", *args: Any) -> dict[str, Any]:
    if ls.state.settings.checks == "off":
        return {"error": "checks are off (set the `checks` setting to \"save\" or \"request\")"}
    found = spec_request(ls, args, "runChecks", "use the code action \"Write a correctness spec\"")
    if isinstance(found, dict):
        return found
    path, _, kernels = found
    try:
        report = await ls.checks.run(path, kernels)
    except ApiError as exc:
        return {"error": str(exc)}
    if report is None:
        return {"error": "the check was superseded by a newer one"}
    return {"verdicts": [{"kernel": v.kernel, "status": v.status, "message": v.message, "device": v.device,
                          "line": v.line, "durationS": round(v.duration_s, 3)} for v in report.verdicts],
            "errors": [{"line": line, "message": message} for line, message in report.errors]}


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
            from ..engine.verify.findings import summary

            for v in verdicts:
                lenses.append(convert.code_lens(pos, line, summary(v), RUN_CHECKS, [where]))
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
