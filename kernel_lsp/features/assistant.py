"""The assistant's code actions and commands: LLM proposals that arrive compiled, checked and timed.

Listing the actions is instant and free (no API call, no import of anthropic); picking one runs its command,
with work-done progress and cancellation (`$/cancelRequest` on the command, or `kernel-lsp.cancelAssistant`).
A proposal is returned through `convert.proposal` (and offered as an edit that needs confirmation, `ls.offer`) for
the editor to preview; the server never applies it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from analyzers.specs import specced_kernels

from .. import convert
from ..background import background_job
from ..commands import (ASSISTANT_OPTIMIZE, CANCEL_ASSISTANT, EXPLAIN_TIME, FIX_THIS, PORT_TO_NKI, POSITION, REFINE,
                        WRITE_SPEC, command_arguments)
from ..engine.gpu import runs_on_gpu

if TYPE_CHECKING:
    from ..server import KernelLanguageServer


ACTION_OF = {ASSISTANT_OPTIMIZE: "optimize", PORT_TO_NKI: "port", FIX_THIS: "fix", EXPLAIN_TIME: "explain",
             WRITE_SPEC: "spec"}
NO_KEY = "set ANTHROPIC_API_KEY in the editor's environment (or the assistantApiKey setting) to use the assistant"
SET_UP_TITLE = "Set up the assistant (set ANTHROPIC_API_KEY)"
# Codes the "Fix this" action is offered for: compile errors, failed checks, and the static rules.
FIXABLE_PREFIXES = ("KC001", "KV", "TR", "NK")


class AssistantState:
    def __init__(self) -> None:
        self.tasks: dict[asyncio.Task, str] = {}  # running actions -> their session id
        self.actions_run = 0


def state_of(ls: KernelLanguageServer) -> AssistantState:
    found = getattr(ls, "assistant_state", None)
    if found is None:
        found = AssistantState()
        ls.assistant_state = found  # type: ignore[attr-defined]
    return found


def has_key(ls: KernelLanguageServer) -> bool:
    from ..engine.assistant.client import resolve_key

    return bool(resolve_key(ls.state.settings.assistant_api_key))


def _kernel_at(ls: KernelLanguageServer, path: str, line: int | None):
    """The kernel at the line; without a line, the file's only kernel."""
    if line is None:
        entry = ls.state.index.get(path)
        kernels = entry.analysis.kernels if entry and entry.analysis else []
        return kernels[0] if len(kernels) == 1 else None
    return ls.kernel_at(path, line)


def _problem_at(ls: KernelLanguageServer, path: str, line: int) -> dict | None:
    """The problem the user means by "Fix this": the first fixable one on that line (errors first)."""
    found = [*ls.state.index.problems(path), *ls.compiles.problems(path), *ls.checks.problems(path)]
    on_line = [p for p in found if p.span.start_line <= line <= p.span.end_line
               and p.code.startswith(FIXABLE_PREFIXES)]
    on_line.sort(key=lambda p: p.severity)
    if not on_line:
        return None
    p = on_line[0]
    return {"code": p.code, "message": p.message, "line": p.span.start_line}


def _api_checks(ls: KernelLanguageServer, path: str, cancel: threading.Event):
    """The candidates' checks and timing through the Python API's editor calls: a candidate gets the verdict the
    editor's checks give the same text, and figures on the settings' targets and hardware table. Estimates take
    the model's assumed occupancy for the kernel and its candidates alike (a candidate has no compile to read)."""
    from ..api import ApiError
    from ..engine.assistant.verify import CheckOutcome

    confined = ls.in_workspace(path)

    async def check(where: str, text: str, kernel: str) -> tuple[CheckOutcome | None, str]:
        try:
            result = await ls.api_workspace(path).check_buffer(where, text, kernels=[kernel], cancel=cancel,
                                                               confined=confined)
        except ApiError as exc:
            return None, str(exc)
        errors = "; ".join(f"line {e.line}: {e.message}" if e.line is not None else e.message
                           for e in result.error_details)
        v = next((v for v in result.verdicts if v.kernel == kernel), None)
        if v is None:
            return None, errors
        line = v.line - 1 if v.line is not None else None  # the API's lines are 1-based
        return CheckOutcome(v.ok, v.status, v.message, line, v.cases, list(v.notes), v.on_gpu), errors

    async def latency(where: str, text: str, kernel: str, on_gpu: bool) -> tuple[list[Any], list[str]]:
        try:
            # A candidate's figure is compared with the kernel's own: no history, no roofline counting.
            result = await ls.api_workspace(path).measure_buffer(where, text, kernels=[kernel], gpu=on_gpu,
                                                                 cancel=cancel, history=False, confined=confined,
                                                                 roofline=False)
        except ApiError as exc:
            return [], [str(exc)]
        return [e for e in result.entries if e.kernel == kernel], list(result.errors)

    return check, latency


def _environment(ls: KernelLanguageServer, root: str, path: str, cancel: threading.Event):
    from ..engine.assistant import Environment

    settings = ls.state.settings
    workspace = ls.compiles.workspace()
    compile_fn = None
    if workspace is not None:
        async def compile_fn(path: str, text: str) -> list:
            from analyzers import analyze_source

            from .compiling import problems_of

            result = await workspace.compile_buffer(path, text, analysis=analyze_source(text, path),
                                                    targets=list(settings.targets), priority=-5,
                                                    say=ls.compiles.say, confined=False)
            return problems_of(result)

    gpu = runs_on_gpu(settings.check_device)
    check, latency = _api_checks(ls, path, cancel)
    return Environment(root, tuple(settings.targets), settings.check_device, float(settings.check_timeout_s),
                       compile_fn, gpu, cancel, check=check, latency=latency)


def _assistant(ls: KernelLanguageServer, root: str, path: str, progress, cancel: threading.Event):
    from ..engine.assistant import Assistant, AssistantConfig, ModelConfig
    from ..engine.assistant.client import resolve_key

    s = ls.state.settings
    model = ModelConfig(s.assistant_model, resolve_key(s.assistant_api_key), s.assistant_base_url,
                        float(s.assistant_timeout_s), s.assistant_max_tokens)
    config = AssistantConfig(model, s.assistant_max_attempts, s.assistant_candidates)
    return Assistant(config, _environment(ls, root, path, cancel), progress=progress)


async def run_action(ls: KernelLanguageServer, action: str, args: tuple) -> dict[str, Any]:
    """One assistant command: validate, run the engine with progress, turn its result into the answer."""
    from ..engine.assistant import TITLES

    given = command_arguments(args, (*POSITION, "instruction"))
    uri = given.get("uri")
    if not isinstance(uri, str) or not (path := to_fs_path(uri)):
        return {"error": "the assistant needs the document's uri and the cursor's line"}
    if not has_key(ls):
        return {"error": NO_KEY}
    if ls.state.settings.checks == "off":  # even Explain times or estimates the kernel by running it
        from .verification import checks_off

        return {"error": checks_off(ls, "the assistant verifies every candidate by running the kernel's check")}
    from .lifecycle import why_file_may_not_run

    refused = why_file_may_not_run(ls, path)
    if refused is not None:  # before the model is asked: its candidates would be run
        return {"error": refused}
    instruction = given.get("instruction")
    if action == "refine" and (not isinstance(instruction, str)):
        return {"error": "refine needs an instruction: \"go\" to accept the plan, an edited plan, or a request"}
    line = given.get("line") if isinstance(given.get("line"), int) else None
    path = ls.ensure_current(uri) or path
    doc = ls.open_document(path)
    text = ls.current_text(path)
    if text is None:
        return {"error": f"cannot read {path}"}
    version = doc.version if doc is not None else None
    kernel = _kernel_at(ls, path, line)
    if kernel is None:
        return {"error": "put the cursor inside a Triton kernel for the assistant"}
    diagnostic = None
    if action == "fix":
        diagnostic = given.get("diagnostic") if isinstance(given.get("diagnostic"), dict) else None
        if diagnostic is None and line is not None:
            diagnostic = _problem_at(ls, path, line)
        if diagnostic is None:
            return {"error": "no problem reported at this line for the assistant to fix"}
    if action == "port" and not creates_files(ls):  # known before any request leaves the machine
        return {"error": f"{CANNOT_CREATE}: nothing was asked of the model"}
    title = TITLES.get(action, "Assistant")
    root = ls.state.roots[0] if ls.state.roots else os.path.dirname(path)
    state = state_of(ls)
    async with background_job(ls, f"{title}: {kernel.name}") as job:
        assistant = _assistant(ls, root, path, lambda message: job.report(message[:200]), job.cancel)
        if action == "refine":
            work = assistant.refine(path, text, kernel.name, instruction)
        else:
            work = assistant.start(action, path, text, kernel.name, diagnostic)
        # The work is a task of its own, so that kernel-lsp.cancelAssistant can cancel it and this command
        # still answers.
        task = asyncio.ensure_future(work)
        state.tasks[task] = kernel.name
        state.actions_run += 1
        ls.follow_cancel(task)
        job.end_message = "failed"  # whatever happened: the editor's spinner stops with what it was
        try:
            result = await task
            job.end_message = f"{result.kind} ({result.status})" if result.status else result.kind
        except asyncio.CancelledError:
            job.cancel.set()
            job.end_message = "cancelled"
            if not (task.cancelled() and not _current_task_cancelling()):
                raise
            result = None  # the work alone was cancelled (cancelAssistant): this command answers
        finally:
            state.tasks.pop(task, None)
            await assistant.close()
    if result is None:
        return {"cancelled": True, "message": f"{title} for {kernel.name} was cancelled; nothing was proposed"}
    return _answer(ls, uri, path, version, text, result, doc, given)


def _current_task_cancelling() -> bool:
    current = asyncio.current_task()
    return bool(current is not None and current.cancelling())


def _answer(ls: KernelLanguageServer, uri: str, path: str, version: int | None, text: str, result, doc,
            given: dict) -> dict:
    from ..engine.assistant import line_edits
    from ..engine.assistant.session import is_verified

    usage = result.usage.to_json() if result.usage is not None else None
    if result.kind == "plan":
        ls.message(f"{result.title} plan for {result.kernel} (accept with Refine… \"go\", or edit it):\n"
                   f"{result.text}", types.MessageType.Info)
        return {"plan": result.text, "session": result.session, "kernel": result.kernel, "usage": usage}
    if result.kind == "answer":
        ls.message(result.text, types.MessageType.Info)
        return {"markdown": result.text, "session": result.session, "kernel": result.kernel, "usage": usage}
    if result.kind != "proposal" or result.new_text is None:
        ls.message(result.text)
        return {"error": result.text, "table": result.table, "session": result.session, "usage": usage}
    if result.new_path is not None:  # a port: a file of its own beside the user's, which stays as it is
        name = os.path.basename(result.new_path)
        if not creates_files(ls):
            ls.message(f"{result.title}: {CANNOT_CREATE} ({name}); {os.path.basename(path)} was left as it is")
            return {"error": f"{CANNOT_CREATE}: {name} was not offered", "file": result.new_path,
                    "text": result.new_text, "summary": result.text, "table": result.table,
                    "session": result.session, "usage": usage}
        answer = convert.new_file_proposal(
            from_fs_path(result.new_path) or result.new_path, result.new_text, title=result.title,
            summary=result.text, table=result.table, session=result.session, kernel=result.kernel, usage=usage,
            status=result.status, verified=is_verified(result.status))
        return ls.offer(answer, given)
    codec = doc.position_codec if doc is not None else ls.workspace.position_codec
    pos = convert.Positions(text.splitlines(keepends=True), codec)
    # The label is the engine's (session.status_of), as in the summary, the table and the count.
    answer = convert.proposal(uri, version, pos, line_edits(text, result.new_text), title=result.title,
                              summary=result.text, table=result.table, session=result.session, kernel=result.kernel,
                              usage=usage, status=result.status, verified=is_verified(result.status))
    return ls.offer(answer, given)  # a code action's command answers nobody: the edit also goes out for preview


CANNOT_CREATE = ("this editor cannot create files through the language server (its workspaceEdit."
                 "resourceOperations lacks \"create\"), and a port to NKI goes into a new file")


def creates_files(ls: KernelLanguageServer) -> bool:
    """Whether the client applies a CreateFile in a workspace edit."""
    caps = ls.client_capabilities.workspace
    edit = caps.workspace_edit if caps is not None else None
    return bool(edit and edit.resource_operations and types.ResourceOperationKind.Create in edit.resource_operations)


def cancel_all(ls: KernelLanguageServer) -> int:
    tasks = [t for t in state_of(ls).tasks if not t.done()]
    for task in tasks:
        if not task.cancelling():  # already winding down: cancelling again would cut its clean-up short
            task.cancel()
    return len(tasks)


# -- code actions ------------------------------------------------------------------------------------------------


def assistant_actions(ls: KernelLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """The assistant's actions for the kernel at the cursor: cheap (no API call, no anthropic import)."""
    uri = params.text_document.uri
    path = to_fs_path(uri)
    doc = ls.workspace.text_documents.get(uri)
    if path is None or doc is None or not path.endswith(".py"):
        return []
    line = params.range.start.line
    kernel = _kernel_at(ls, path, line)
    if kernel is None:
        return []
    only = params.context.only
    def wants(kind: str) -> bool:
        return not only or any(kind.startswith(k) for k in only)

    caps = ls.client_capabilities.text_document
    disabled_support = bool(caps and caps.code_action and caps.code_action.disabled_support)
    key = has_key(ls)
    specced = kernel.name in specced_kernels(doc.source)
    where = {"uri": uri, "line": line, "character": params.range.start.character}
    actions: list[types.CodeAction] = []

    if not key:
        # One entry instead of every action greyed out: what to do to have them. Running it answers the same.
        if wants(types.CodeActionKind.RefactorRewrite):
            actions.append(convert.command_action(SET_UP_TITLE, types.CodeActionKind.RefactorRewrite,
                                                  ASSISTANT_OPTIMIZE, [where],
                                                  disabled=NO_KEY if disabled_support else None))
        return actions

    def add(title: str, kind: str, command: str, arguments: dict, why_not: str | None = None,
            diagnostics: list | None = None) -> None:
        if why_not and not disabled_support:
            return  # nothing the user could do from this client: leave it out
        actions.append(convert.command_action(title, kind, command, [arguments], diagnostics=diagnostics,
                                              disabled=why_not if disabled_support else None))

    if wants(types.CodeActionKind.QuickFix):
        for d in params.context.diagnostics[:3]:
            code = str(d.code or "")
            if code.startswith(FIXABLE_PREFIXES) and kernel.span.contains_line(d.range.start.line):
                add(f"Fix this (assistant): {code}", types.CodeActionKind.QuickFix, FIX_THIS,
                    {**where, "diagnostic": {"code": code, "message": d.message, "line": d.range.start.line}},
                    diagnostics=[d])
    if wants(types.CodeActionKind.RefactorRewrite):
        no_spec = None if specced else f"{kernel.name} has no correctness spec: write one first"
        add("Optimize tiling (assistant)", types.CodeActionKind.RefactorRewrite, ASSISTANT_OPTIMIZE, where, no_spec)
        add("Port to NKI (assistant)", types.CodeActionKind.RefactorRewrite, PORT_TO_NKI, where)
        add("Explain where the time goes (assistant)", types.CodeActionKind.RefactorRewrite, EXPLAIN_TIME, where,
            no_spec)
        if not specced:
            add("Write a correctness spec (assistant)", types.CodeActionKind.RefactorRewrite, WRITE_SPEC, where)
    return actions


_KEY_SETTING = re.compile(r"""((?:assistantApiKey|assistant_api_key|api_key)['"]?\s*[:=]\s*['"]?)[^'",}\s]+""")


class RedactKey(logging.Filter):
    """Replaces the API key in every log record a handler writes (pygls logs whole messages at debug level,
    initializationOptions and workspace/configuration answers included)."""

    def __init__(self, server: KernelLanguageServer):
        super().__init__()
        self.server = server

    def filter(self, record: logging.LogRecord) -> bool:
        from ..engine.assistant.client import resolve_key

        keys = {k for k in (resolve_key(self.server.state.settings.assistant_api_key),
                            os.environ.get("ANTHROPIC_API_KEY", "").strip()) if len(k) >= 8}
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken format string is logging's business, not ours
            return True
        if "piKey" in message or "pi_key" in message:  # the setting itself, before it is known as the key
            message = _KEY_SETTING.sub(r"\1[api key]", message)
        elif not keys:
            return True
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        for key in keys:
            message = message.replace(key, "[api key]")
            if record.exc_text:
                record.exc_text = record.exc_text.replace(key, "[api key]")
        record.msg, record.args = message, None
        return True


def register(server: KernelLanguageServer) -> None:
    redact = RedactKey(server)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact)
    for name, action in (*ACTION_OF.items(), (REFINE, "refine")):
        server.answering_command(name, lambda ls, *args, action=action: run_action(ls, action, args))

    @server.command(CANCEL_ASSISTANT)
    def cancel(ls, *args):
        n = cancel_all(ls)
        return {"cancelled": n}

    # The code action request belongs to features/code_actions.py; the assistant's actions join its answer.
    server.code_action_providers.append(assistant_actions)
