"""Signature help inside a call: a kernel launch `kernel[grid](` shows the kernel's parameters (constexpr ones and
those its autotune configs or heuristics set are marked); an API call (`tl.load(`) shows the installed package's
own signature and docstring; a call of the workspace's own @jit helper (`helper(`) shows its parameters and
docstring."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from .. import convert

from analyzers.model import TritonKernel

from .api_docs import markdown

if TYPE_CHECKING:
    from ..engine.code_at import CallAt
    from ..server import KernelLanguageServer


def _param_name(label: str) -> str:
    return label.split(":", 1)[0].split("=", 1)[0].strip().lstrip("*")


def _active(names: list[str], call: "CallAt") -> int | None:
    """The parameter under the cursor: the keyword being typed, else the positional argument's place."""
    if call.keyword is not None:
        return names.index(call.keyword) if call.keyword in names else None
    if call.keywords:  # positional arguments after keywords are not valid Python: nothing to point at
        return None
    return call.index if call.index < len(names) else None


def _signature(label: str, params: list[tuple[str, str | None]], doc: str | None, active: int | None
               ) -> types.SignatureHelp:
    infos, offset = [], label.find("(") + 1
    for text, note in params:
        start = label.find(text, offset)
        infos.append(types.ParameterInformation(
            # Offsets into the label where the text is found there (it always is for signatures built here);
            # the text itself otherwise, which clients look up in the label.
            label=(start, start + len(text)) if start >= 0 else text,
            documentation=convert.markdown(note) if note else None))
        offset = start + len(text) if start >= 0 else offset
    sig = types.SignatureInformation(
        label=label, parameters=infos, active_parameter=active,
        documentation=convert.markdown(doc) if doc else None)
    return types.SignatureHelp(signatures=[sig], active_signature=0, active_parameter=active)


def call_help(kernel: TritonKernel, doc: str | None, call: "CallAt") -> types.SignatureHelp:
    """A direct call of a @jit helper: its parameters as written, and its docstring."""
    params = [(p.name + (f": {p.annotation}" if p.annotation else "") + (f" = {p.default}" if p.default else ""),
               "compile-time constant" if p.is_constexpr else None) for p in kernel.params]
    label = f"{kernel.name}(" + ", ".join(t for t, _ in params) + ")"
    return _signature(label, params, doc or "@triton.jit function", _active([p.name for p in kernel.params], call))


def launch_help(kernel: TritonKernel, call: "CallAt") -> types.SignatureHelp:
    provided = kernel.provided_by_decorators
    params, names = [], []
    for p in kernel.params:
        text = p.name + (f": {p.annotation}" if p.annotation else "") + (f" = {p.default}" if p.default else "")
        notes = []
        if p.is_constexpr:
            notes.append("compile-time constant: each new value compiles a new variant of the kernel")
        if p.name in set(kernel.heuristics):
            notes.append("set by `@triton.heuristics`: do not pass it")
        elif p.name in provided:
            notes.append("set by the `@triton.autotune` configs: do not pass it")
        params.append((text, "; ".join(notes) or None))
        names.append(p.name)
    label = f"{kernel.name}[grid](" + ", ".join(t for t, _ in params) + ")"
    kinds = [d for d in kernel.decorators if d != "jit"]
    doc = "Triton kernel" + (f" ({', '.join(kinds)})" if kinds else "")
    return _signature(label, params, doc, _active(names, call))


def register(server: "KernelLanguageServer") -> None:
    @server.feature(types.TEXT_DOCUMENT_SIGNATURE_HELP,
                    types.SignatureHelpOptions(trigger_characters=["(", ","], retrigger_characters=[",", "="]))
    async def signature_help(ls: "KernelLanguageServer", params: types.SignatureHelpParams):
        from ..engine import navigation
        from ..engine.apidocs import imported_names, resolve_dotted
        from ..engine.code_at import call_at

        path = ls.ensure_current(params.text_document.uri)
        text = ls.current_text(path) if path else None
        if text is None:
            return None
        at = ls.positions(path).span(types.Range(params.position, params.position))
        call = call_at(text, at.start_line, at.start_col)
        if call is None:
            return None
        if call.launch:
            found = navigation.kernel_named(ls.state.index, path, text, call.callee)
            return launch_help(found[1], call) if found is not None else None
        found_entry = await ls.api_docs.entry_for(resolve_dotted(call.callee, imported_names(text)))
        if found_entry is None:  # a @jit helper (or kernel) of the workspace called directly
            named = navigation.kernel_named(ls.state.index, path, text, call.callee)
            if named is None:
                return None
            return call_help(named[1], navigation.docstring(named[1], ls.current_text(named[0]) or ""), call)
        entry, version = found_entry
        if entry.signature is None:
            return None
        label = entry.label()
        params_ = [(p, None) for p in entry.params]
        return _signature(label, params_, markdown(entry, version),
                          _active([_param_name(p) for p in entry.params], call))
