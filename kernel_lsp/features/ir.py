"""Show IR: the compiled IR of the kernel under the cursor, opened next to the source like a compiler explorer.

Command `kernel-lsp.showIR` with arguments `(uri, line, character, stage=None, target=None)` (the position in the
client's encoding). It writes the IR of the kernel's first successful configuration on the target to
`<workspace>/.kernel-lsp/ir/<kernel>.<target>.<config>.<stage>`, asks the client to open it with the IR lines of
the cursor's source line selected (`window/showDocument`, when supported), and returns
`{"uri", "path", "stage", "target", "config", "lines", "availableStages"}` so any editor can open it itself.
When there is nothing to show it returns `{"error": ...}` and shows the reason; it never raises.

Command `kernel-lsp.compareIR` with `{uri, line, character, a, b[, stage, target, aPython, bPython]}`: the kernel
compiled twice (engine/compile/irdiff.py, as `kernel-lsp ir-diff` does), both IR files written beside Show IR's
with the same line mapping, returned for the client to open side by side (VS Code's diff editor, Neovim's diff
mode).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from .. import convert
from ..engine.record.store import pins_for
from pygls.uris import from_fs_path, to_fs_path

from analyzers.model import Span

from analyzers.targets import UnknownTargetError

from ..api import ApiError
from ..commands import COMPARE_IR, POSITION, SHOW_IR, command_arguments
from ..engine.compile import triton_installed
from ..engine.compile.irdiff import IRSide, SideError, compare, lines_file, parse_values, side_stem, write_ir
from ..engine.compile.specialize import make_target
from ..engine.compile.irmap import STAGES
from ..engine.files import ensure_ignored_dir

if TYPE_CHECKING:
    from ..server import KernelLanguageServer

log = logging.getLogger(__name__)

DEFAULT_STAGE = "ttgir"
SHOW_DOCUMENT_TIMEOUT = 5.0
IR_WAIT_S = 180.0  # how long Show IR waits for a compile on its way (a cold compile of many configurations)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "-", text).strip("-").lower() or "default"


def _first_run(lines: list[int]) -> tuple[int, int]:
    """The first block of consecutive line numbers."""
    end = lines[0]
    for n in lines[1:]:
        if n != end + 1:
            break
        end = n
    return lines[0], end


def _fail(ls: "KernelLanguageServer", text: str, **extra: Any) -> dict[str, Any]:
    ls.message(f"Show IR: {text}", types.MessageType.Info)
    return {"error": text, **extra}


def _supports_show_document(ls: "KernelLanguageServer") -> bool:
    try:
        caps = ls.client_capabilities
    except Exception:  # noqa: BLE001 - not initialized
        return False
    window = caps.window if caps else None
    return bool(window and window.show_document and window.show_document.support)


def _kernel_at(ls: "KernelLanguageServer", uri: str, line: int, character: int) -> tuple[str, Any, int] | str:
    """(path, the innermost kernel at the position, its 0-based line), or why there is none."""
    path = ls.ensure_current(uri)
    entry = ls.state.index.get(path) if path else None
    if path is None or entry is None or entry.analysis is None:
        return f"{uri} is not an analysed Python file"
    pos = ls.positions(path)
    at = pos.span(types.Range(types.Position(line, character), types.Position(line, character)))
    user_line = at.start_line
    kernels = [k for k in entry.analysis.kernels if k.span.contains_line(user_line)]
    if not kernels:
        return f"no Triton kernel at line {user_line + 1}"
    return path, min(kernels, key=lambda k: k.span.end_line - k.span.start_line), user_line


async def show_ir(ls: "KernelLanguageServer", uri: Any, line: Any, character: Any, stage: Any = None,
                  target: Any = None) -> dict[str, Any]:
    if not isinstance(uri, str) or not isinstance(line, int) or not isinstance(character, int):
        return _fail(ls, "expected arguments (uri: string, line: integer, character: integer[, stage, target])")
    stage = (stage or DEFAULT_STAGE).lower() if isinstance(stage, str) or stage is None else None
    if stage is None or stage not in STAGES:
        return _fail(ls, f"unknown stage {stage!r}: expected one of {', '.join(STAGES)}",
                     availableStages=list(STAGES))
    found = _kernel_at(ls, uri, line, character)
    if isinstance(found, str):
        return _fail(ls, found)
    path, kernel, user_line = found

    settings = ls.state.settings
    configured = list(settings.targets)
    target = target or (configured[0] if configured else None)
    if settings.compile == "off":
        return _fail(ls, f"{kernel.name} has not been compiled: compiling is off (set the `compile` setting to "
                         "\"open\" or \"workspace\")", kernel=kernel.name)
    workspace = ls.compiles.workspace()
    if workspace is None:
        why = ("triton is not installed where kernel-lsp runs" if ls.compiles.unavailable
               else "there is no workspace folder")
        return _fail(ls, f"{kernel.name} has not been compiled: {why}", kernel=kernel.name)
    if target not in configured:
        return _fail(ls, f"target {target!r} is not configured: the `targets` setting has {', '.join(configured)}",
                     kernel=kernel.name)
    def compiled() -> tuple[list, Any]:
        shown = ls.compiles.shown(path)
        if shown is None:
            return [], None
        return ([c for c in shown.result.configs if c.kernel == kernel.name and c.target == target],
                next((u for u in shown.result.uncompiled if u.kernel == kernel.name and u.target == target), None))

    configs, uncompiled = compiled()
    if not configs and uncompiled is None:
        if ls.open_document(path) is None and settings.compile != "workspace":
            return _fail(ls, f"{kernel.name} has not been compiled for {target} yet: the file is not open (the "
                             "`compile` setting is \"open\")", kernel=kernel.name)
        # Asked right after typing: the compile of this text is on its way; open the IR when it is done.
        ls.compiles.say(f"Show IR: waiting for the compile of {kernel.name} for {target}")
        await ls.compiles.settled(path, lambda: any(compiled()), IR_WAIT_S)
        configs, uncompiled = compiled()
        if not configs and uncompiled is None:
            return _fail(ls, f"{kernel.name} has not been compiled for {target} after {IR_WAIT_S:.0f} s: its "
                             "compile is still queued or running (the status command shows the queue)",
                         kernel=kernel.name)
    if uncompiled is not None:
        return _fail(ls, f"{kernel.name} could not be compiled for {target}: {uncompiled.reason}", kernel=kernel.name)
    ok = [c for c in configs if c.ok]
    if not ok:
        failed = next((c for c in configs if c.error), None)
        reason = failed.error.splitlines()[0] if failed and failed.error else "no configuration to compile"
        return _fail(ls, f"{kernel.name} failed to compile for {target}: {reason}", kernel=kernel.name)
    chosen = ok[0]
    source = ls.current_text(path)
    if source is None:
        return _fail(ls, f"{kernel.name}: the file cannot be read", kernel=kernel.name)
    try:
        ir = await workspace.ir_buffer(path, source, chosen, stage, launches=_launches_of(ls, path),
                                       say=ls.compiles.say, confined=False)
    except ApiError as exc:
        return _fail(ls, f"{kernel.name} on {target}: {exc}", kernel=kernel.name)
    available = ir.available
    if ir.text is None:
        return _fail(ls, f"stage {stage!r} is not available for {kernel.name} on {target}: available stages are "
                         f"{', '.join(available)}", availableStages=available, kernel=kernel.name, target=target)
    text = ir.text
    sources = {n - 1: [u - 1 for u in users] for n, users in ir.lines.items()}
    lines = [i for i, users in sorted(sources.items()) if user_line in users]

    folder = ls.private_dir() / "ir"
    try:
        ensure_ignored_dir(folder.parent)
        out = write_ir(folder, f"{_slug(kernel.name)}.{_slug(target)}.{_slug(chosen.config)}", stage, text,
                       sources, path)
    except OSError as exc:
        return _fail(ls, f"cannot write the IR under {folder}: {exc}", kernel=kernel.name)
    out_uri = from_fs_path(str(out)) or out.as_uri()

    if _supports_show_document(ls):
        selection = None
        if lines:
            first, last = _first_run(lines)
            ir = text.splitlines()
            selection = types.Range(types.Position(first, 0), types.Position(last, len(ir[last]) if last < len(ir) else 0))
        try:
            await asyncio.wait_for(ls.window_show_document_async(types.ShowDocumentParams(
                uri=out_uri, take_focus=True, selection=selection)), SHOW_DOCUMENT_TIMEOUT)
        except Exception:  # noqa: BLE001 - the file is written and returned: the client can still open it
            log.debug("window/showDocument failed", exc_info=True)

    return {"uri": out_uri, "path": str(out), "stage": stage, "target": target, "config": chosen.config,
            "kernel": kernel.name, "lines": lines, "availableStages": available}


def source_of_ir_line(ls: "KernelLanguageServer", uri: str, line: int) -> list[types.Location] | None:
    """Definition on a line of a Show IR document: the source lines it was compiled from (an empty list for an IR
    line that comes from nowhere in the file); None when the document is not one Show IR wrote."""
    path = to_fs_path(uri)
    if not path or Path(path).parent.name != "ir" or Path(path).suffix.lstrip(".") not in STAGES:
        return None
    try:
        found = json.loads(lines_file(Path(path)).read_text())
        source, users = found["source"], found["lines"].get(str(line), [])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    pos = ls.positions(source)
    source_uri = from_fs_path(source) or source
    return [convert.location(source_uri, pos, Span(u, 0, u, len(pos.lines[u].rstrip("\r\n"))
                                                   if u < len(pos.lines) else 0))
            for u in users if isinstance(u, int)]


def _launches_of(ls: "KernelLanguageServer", path: str) -> list[tuple]:
    """(launch site, its file's text, its path) for every workspace launch of a kernel defined in `path`."""
    launches = ls.state.index.launches_by_kernel_file().get(path, [])
    texts = {where: ls.current_text(where) for _, where in launches}
    return [(site, texts[where], where) for site, where in launches if texts[where] is not None]


def _values(given: Any, side: str) -> dict[str, object]:
    """A side's values: an object {NAME: VALUE} or the command line's text `NAME=VALUE,...`."""
    if given is None:
        return {}
    if isinstance(given, dict) and all(isinstance(k, str) for k in given):
        return dict(given)
    if isinstance(given, str):
        return parse_values(given)
    raise SideError(f"{side}: expected an object {{NAME: VALUE}} or text NAME=VALUE,..., got {given!r}")


async def compare_ir(ls: "KernelLanguageServer", given: dict[str, Any]) -> dict[str, Any]:
    """The kernel under the cursor compiled two ways (`a` and `b`: values as `kernel-lsp ir-diff` takes them,
    `aPython`/`bPython`: another interpreter's triton), both IR files written as Show IR writes them. Returns
    `{"kernel", "stage", "target", "identical", "a": {"uri", "path", "lines", "description", ...}, "b": {...}}`:
    the clients open the two side by side."""
    uri, line, character = (given.get(k) for k in POSITION)
    if not isinstance(uri, str) or not isinstance(line, int) or not isinstance(character, int):
        return _fail(ls, "Compare IR expects {uri, line, character, a, b[, stage, target, aPython, bPython]}")
    stage = given.get("stage") or DEFAULT_STAGE
    pythons = {k: given.get(k) for k in ("aPython", "bPython")}
    if not isinstance(stage, str) or any(p is not None and not isinstance(p, str) for p in pythons.values()):
        return _fail(ls, "Compare IR: stage, aPython and bPython are text")
    found = _kernel_at(ls, uri, line, character)
    if isinstance(found, str):
        return _fail(ls, found)
    path, kernel, user_line = found
    settings = ls.state.settings
    target_name = given.get("target") or (list(settings.targets) or ["sm_90"])[0]
    if not (pythons["aPython"] and pythons["bPython"]) and not triton_installed():
        return _fail(ls, "Compare IR needs triton where kernel-lsp runs, or aPython and bPython naming "
                         "interpreters that have it", kernel=kernel.name)
    text = ls.current_text(path)
    root = ls.compile_root()
    if text is None or root is None:
        return _fail(ls, f"{kernel.name}: the file cannot be read", kernel=kernel.name)
    cancel = threading.Event()
    try:
        a, b = _values(given.get("a"), "A"), _values(given.get("b"), "B")
        target = make_target(str(target_name))
        folder = ls.private_dir() / "ir"
        ensure_ignored_dir(folder.parent)
        work = asyncio.to_thread(
            compare, text, kernel.name, path, target, stage.lower(), a, b, a_python=pythons["aPython"],
            b_python=pythons["bPython"], base_pins=pins_for(settings.pins, root, path, kernel.name),
            launch_sites=_launches_of(ls, path), cache_dir=str(folder.parent / "triton-cache"),
            timeout=max(60.0, float(settings.compile_timeout_s)), cancel=cancel)
        try:
            side_a, side_b = await work
        except asyncio.CancelledError:
            cancel.set()  # kills both compiles
            raise
        files = [write_ir(folder, side_stem(side), stage.lower(), side.text,
                          side.sources or {}, path) for side in (side_a, side_b)]
    except (SideError, UnknownTargetError) as exc:
        return _fail(ls, f"Compare IR: {exc}", kernel=kernel.name)
    except OSError as exc:
        return _fail(ls, f"cannot write the IR under {ls.private_dir() / 'ir'}: {exc}", kernel=kernel.name)

    def side(ir: IRSide, out: Path) -> dict[str, Any]:
        lines = [i for i, users in sorted((ir.sources or {}).items()) if user_line in users]
        return {"uri": from_fs_path(str(out)) or out.as_uri(), "path": str(out), "lines": lines,
                "description": ir.description, **ir.summary()}

    return {"kernel": kernel.name, "stage": stage.lower(), "target": target.name,
            "identical": side_a.text == side_b.text, "a": side(side_a, files[0]), "b": side(side_b, files[1])}


def register(server: "KernelLanguageServer") -> None:
    async def compare_command(ls, *args):
        return await compare_ir(ls, command_arguments(args, (*POSITION, "a", "b", "stage", "target")))

    server.answering_command(COMPARE_IR, compare_command)

    @server.command(SHOW_IR)
    async def show_ir_command(ls, *args):  # unannotated: pygls resolves annotations of command handlers
        try:
            given = command_arguments(args, (*POSITION, "stage", "target"))
            return await show_ir(ls, *(given.get(k) for k in (*POSITION, "stage", "target")))
        except Exception as exc:  # noqa: BLE001 - a command answers, whatever happened
            log.exception("showIR failed")
            return _fail(ls, f"internal error: {exc}")
