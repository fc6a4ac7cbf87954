"""The assistant: LLM-proposed kernel changes that arrive compiled, checked against the kernel's spec and timed.

    from kernel_lsp.engine.assistant import Assistant, AssistantConfig, Environment, ModelConfig

    assistant = Assistant(AssistantConfig(ModelConfig(model, api_key)), Environment(root, targets, ...))
    result = await assistant.start("optimize" | "port" | "fix" | "explain" | "spec", path, text, kernel)
    result = await assistant.refine(path, text, kernel, "go" | an edited plan | a new instruction)

`runner.py` (the flow: plan, candidates, verification, ranking), `model.py` (the Messages API through the
`anthropic` SDK, imported on first use; token use and cost), `code.py` (code blocks spliced into the file by
definition name; the spec may not change), `integrity.py` (what a candidate may change, and references that would
certify their own kernel), `verify.py` (compile, check, time, speed evidence), `session.py` (the per-kernel
session under `.kernel-lsp/assistant/`, and the one function candidates' labels come from), `prompts.py` (what the model is told), `nki_sim.py` (NKI ports run
against the spec in the NKI model, or AWS's simulator where it is installed). No LSP imports; docs/assistant.md describes what leaves the machine.
"""

from __future__ import annotations

from .code import SpliceError, extract_code, line_edits, splice
from .client import KEY_ENV, ModelClient, ModelConfig, ModelError, Usage, price_of, resolve_key
from .runner import ACTIONS, TITLES, Assistant, AssistantConfig, Result
from .session import Session, SessionStore, session_id
from .verify import Environment

__all__ = ["ACTIONS", "KEY_ENV", "TITLES", "Assistant", "AssistantConfig", "Environment", "ModelClient",
           "ModelConfig", "ModelError", "Result", "Session", "SessionStore", "SpliceError", "Usage", "extract_code",
           "line_edits", "price_of", "resolve_key", "session_id", "splice"]
