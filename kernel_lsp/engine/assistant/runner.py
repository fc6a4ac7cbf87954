"""One assistant action from request to result: plan, candidates, verification, ranking, the session on disk.

    assistant = Assistant(config, env, progress=print)
    result = await assistant.start("optimize", path, text, "add_kernel")     # -> Result(kind="plan", ...)
    result = await assistant.refine(path, text, "add_kernel", "go")          # -> Result(kind="proposal", ...)

A Result is a plan waiting for the user's word, a proposal (the candidate file text, a summary of exactly what
was verified, the table of attempts), an answer (text, no edit) or a failure (why, no edit). Nothing here
applies anything: the caller offers the proposal for the user to confirm.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from analyzers.specs import find_specs

from . import integrity, prompts
from .code import Refused, SpliceError, extract_code, extract_plan, protected_names, splice
from .client import ModelClient, ModelConfig, ModelError, Usage
from .session import NOT_SHOWN_FASTER, UNVERIFIED, CandidateRecord, Session, SessionStore, Turn, tally
from .verify import (
    Environment,
    Timing,
    Verified,
    compare,
    compile_errors,
    describe_compile_errors,
    describe_verdict,
    has_spec,
    in_thread,
    kernel_defined,
    latency_entries,
    nki_problems,
    refused,
    run_check,
    spec_untouched,
    speed_evidence,
    timing,
)

log = logging.getLogger(__name__)

ACTIONS = ("optimize", "port", "fix", "explain", "spec")
TITLES = {"optimize": "Optimize tiling", "port": "Port to NKI", "fix": "Fix this", "explain": "Explain where the "
          "time goes", "spec": "Write a correctness spec", "refine": "Refine"}
PLANNED = ("optimize", "port")  # larger changes: a plan first, code after the user's "go"
GO_WORDS = ("go", "ok", "yes", "accept", "proceed", "do it", "")
_BASELINES: dict[tuple, Timing] = {}  # latency of texts already timed in this process (plan, then code)


@dataclass
class AssistantConfig:
    model: ModelConfig
    max_attempts: int = 3
    candidates: int = 1


@dataclass
class Result:
    kind: str  # "plan" | "proposal" | "answer" | "failed" | "cancelled"
    session: str
    kernel: str
    title: str
    text: str  # the plan, the proposal's summary, the answer, or why it failed
    new_text: str | None = None  # the proposed file text
    table: list[list[str]] = field(default_factory=list)
    usage: Usage | None = None
    status: str = ""  # a proposal's label (session.status_of): "correct", "unverified", "correct, not shown faster"
    new_path: str | None = None  # a new file `new_text` is for (a port's `<name>_nki.py`); None: the user's file


TABLE_HEADER = ["#", "result", "latency", "details"]


class Assistant:
    def __init__(self, config: AssistantConfig, env: Environment, *, store: SessionStore | None = None,
                 progress: Callable[[str], None] | None = None, client: ModelClient | None = None):
        self.config = config
        self.env = env
        self.store = store or SessionStore(env.root)
        self.progress = progress or (lambda _message: None)
        self.client = client or ModelClient(config.model)
        self.usage = Usage(config.model.model)
        self._streamed: dict[int, str] = {}
        self._last_report = 0.0

    # -- entry points --------------------------------------------------------------------------------------------

    async def start(self, action: str, path: str, text: str, kernel: str, diagnostic: dict | None = None) -> Result:
        if action not in ACTIONS:
            raise ValueError(f"unknown assistant action {action!r}")
        session = self.store.load(path, kernel)
        request = prompts.ACTIONS[action].format(kernel=kernel, diagnostic=_diagnostic_text(diagnostic))
        turn = Turn(action, request, diagnostic=diagnostic)
        session.turns.append(turn)
        try:
            if action == "explain":
                return await self._explain(session, turn, path, text, kernel)
            if action in PLANNED:
                return await self._plan(session, turn, path, text, kernel)
            return await self._work(session, turn, path, text, kernel)
        finally:
            self._finish(session, turn)

    async def refine(self, path: str, text: str, kernel: str, instruction: str) -> Result:
        """Continue the kernel's session: "go" (or an edited plan) after a plan, else a new request."""
        session = self.store.load(path, kernel)
        last = session.last
        if last is not None and session.awaiting_plan:
            turn = last
            if instruction.strip().lower().rstrip(".!") not in GO_WORDS:
                turn.plan = instruction.strip()  # the user's edited plan replaces the model's
            turn.plan_accepted = True
            turn.state = "working"
            # The plan's call belongs to this action: its cost is counted with the code's.
            self.usage.input_tokens += int(turn.usage.get("inputTokens", 0))
            self.usage.output_tokens += int(turn.usage.get("outputTokens", 0))
            self.usage.calls += int(turn.usage.get("calls", 0))
        else:
            action = last.action if last is not None and last.action not in ("explain", "spec") else "refine"
            turn = Turn(action, instruction.strip())
            session.turns.append(turn)
        try:
            return await self._work(session, turn, path, text, kernel, continuation=turn is not last)
        finally:
            self._finish(session, turn)

    def _finish(self, session: Session, turn: Turn) -> None:
        if turn.state == "working":
            turn.state = "cancelled"
            turn.outcome = "cancelled by the user"
        turn.usage = self.usage.to_json()
        # Saved in place, not in a thread: a second cancel arriving while the action winds down must not end the
        # task before its turn is on disk (a few kB of JSON).
        self.store.save(session)

    async def close(self) -> None:
        await self.client.close()

    # -- the model -----------------------------------------------------------------------------------------------

    async def _ask(self, messages: list[dict], *, chain: int = 1, stream: bool = True,
                   max_tokens: int | None = None):
        self._streamed[chain] = ""

        def on_text(piece: str) -> None:
            self._streamed[chain] += piece
            now = time.monotonic()
            if now - self._last_report >= 0.25:
                self._last_report = now
                tail = " ".join(self._streamed[chain].split())[-100:]
                self.progress(f"candidate {chain}: {tail}")

        answer = await self.client.complete(prompts.SYSTEM, messages, on_text=on_text if stream else None,
                                            max_tokens=max_tokens)
        self.usage.add(answer)
        return answer

    def _context(self, session: Session, path: str, text: str, kernel: str, facts: str = "") -> str:
        history = session.history() if len(session.turns) > 1 else ""
        return prompts.context(os.path.basename(path), text, kernel, facts, history)

    # -- plan, explain -------------------------------------------------------------------------------------------

    async def _baseline(self, path: str, text: str, kernel: str) -> tuple[Timing | None, bool, str]:
        """(the kernel's latency now, whether the checks run on a GPU, why there is no figure)."""
        if not has_spec(text, kernel):
            return None, False, "no correctness spec, so no bench shape"
        on_gpu = self.env.gpu
        key = (path, kernel, on_gpu, self.env.targets, hashlib.sha256(text.encode()).hexdigest())
        if key in _BASELINES:  # the plan measured this very text a moment ago
            return _BASELINES[key], on_gpu, ""
        found, why = await timing(self.env, path, text, kernel, on_gpu)
        if found is not None:
            _BASELINES[key] = found
            while len(_BASELINES) > 32:
                _BASELINES.pop(next(iter(_BASELINES)))
        return found, on_gpu, why

    async def _plan(self, session: Session, turn: Turn, path: str, text: str, kernel: str) -> Result:
        self.progress(f"{TITLES[turn.action]}: measuring {kernel} and asking for a plan")
        base, _, why = await self._baseline(path, text, kernel) if turn.action == "optimize" else (None, False, "")
        facts = f"Latency now: {base.label} at the spec's bench shape {base.key[0]} {base.key[1]}." if base else \
            (f"Latency: not available ({why})." if why else "")
        content = self._context(session, path, text, kernel, facts) + "\n\n" + turn.request + "\n\n" + \
            prompts.PLAN.format(kernel=kernel)
        try:
            answer = await self._ask([{"role": "user", "content": content}], stream=False, max_tokens=1024)
        except ModelError as exc:
            return self._failed(session, turn, kernel, str(exc))
        plan = extract_plan(answer.text)
        if not plan:
            return self._failed(session, turn, kernel, "the model answered without a plan")
        turn.plan, turn.state, turn.outcome = plan, "awaiting-plan", "plan proposed"
        return Result("plan", session.id, kernel, TITLES[turn.action], plan, usage=self.usage)

    async def _explain(self, session: Session, turn: Turn, path: str, text: str, kernel: str) -> Result:
        if not has_spec(text, kernel):
            return self._failed(session, turn, kernel, f"{kernel} has no correctness spec: latency needs its bench "
                                "shapes (write one first)")
        self.progress(f"Explain: timing {kernel}")
        on_gpu = self.env.gpu
        entries, errors = await latency_entries(self.env, path, text, kernel, on_gpu)
        if not entries:
            return self._failed(session, turn, kernel, "no latency figure to explain: " +
                                ("; ".join(errors) or "the latency engine returned nothing"))
        facts = "Latency report (JSON lines, " + ("measured" if on_gpu else "estimated by a roofline model from "
                                                   "work counted on the interpreter") + "):\n" + \
            "\n".join(_latency_line(e) for e in entries[:8])
        content = self._context(session, path, text, kernel, facts) + "\n\n" + turn.request
        try:
            answer = await self._ask([{"role": "user", "content": content}])
        except ModelError as exc:
            return self._failed(session, turn, kernel, str(exc))
        body = extract_plan(answer.text)
        if not body:
            return self._failed(session, turn, kernel, "the model gave no explanation")
        source = "measured" if on_gpu else "estimated (no GPU)"
        figures = ", ".join(e.label for e in entries if e.us is not None and e.chosen)
        text_out = f"**{kernel}**: {figures} ({source})\n\n{body}\n\n_{self.usage.text()}_"
        turn.state, turn.outcome = "answered", body[:400]
        return Result("answer", session.id, kernel, TITLES["explain"], text_out, usage=self.usage)

    def _failed(self, session: Session, turn: Turn, kernel: str, why: str, table=None) -> Result:
        turn.state, turn.outcome = "failed", why
        title = TITLES.get(turn.action, turn.action)
        return Result("failed", session.id, kernel, title, f"{title}: {why}", table=table or [], usage=self.usage)

    # -- candidates ----------------------------------------------------------------------------------------------

    async def _work(self, session: Session, turn: Turn, path: str, text: str, kernel: str,
                    continuation: bool = False) -> Result:
        action = turn.action
        title = TITLES.get(action, "Refine")
        if action == "optimize" and not has_spec(text, kernel):
            return self._failed(session, turn, kernel, f"{kernel} has no correctness spec, so no candidate could "
                                "be verified: write one first (docs/specs.md)")
        baseline_task = None
        if action in ("optimize", "refine") and has_spec(text, kernel):
            baseline_task = asyncio.ensure_future(self._baseline(path, text, kernel))
        request = turn.request
        if turn.plan:
            request += f"\n\nThe plan the user accepted:\n{turn.plan}"
        previous = session.best_code() if continuation else None
        if previous and action != "port":
            request += f"\n\nThe last proposal of this session (already verified):\n```python\n{previous}```"
        content = self._context(session, path, text, kernel) + "\n\n" + request + \
            "\n\nWrite the code now: one ```python block."
        tasks = [asyncio.ensure_future(self._chain(i + 1, content, turn, path, text, kernel, baseline_task))
                 for i in range(self.config.candidates)]
        try:
            chains = await asyncio.gather(*tasks)
        except BaseException:
            # gather does not stop the other chains when one fails: stop them and their checks now.
            self.env.cancel.set()
            for task in tasks:
                task.cancel()
            raise
        finally:
            if baseline_task is not None and not baseline_task.done():
                baseline_task.cancel()
        base = _baseline_result(baseline_task)[0]
        table = [TABLE_HEADER] + [[f"{c.chain}.{c.attempt}", c.status, c.label or "", c.reason[:200]]
                                  for c in turn.candidates]
        winners = [(v, new_text, record) for chain in chains for v, new_text, record in chain if v.ok]
        if not winners:
            errors = [r.reason for r in turn.candidates if r.status == "API error"]
            why = errors[-1] if errors and len(errors) == len(turn.candidates) else \
                f"no candidate passed verification in {len(turn.candidates)} attempt" \
                f"{'s' if len(turn.candidates) != 1 else ''}" + \
                (f"; the last: {turn.candidates[-1].status}: {turn.candidates[-1].reason[:300]}"
                 if turn.candidates else "")
            return self._failed(session, turn, kernel, why, table)
        # Verified before unverified, shown faster before not shown, then the fastest.
        winners.sort(key=lambda w: (not w[0].ran, w[0].faster is False,
                                    w[0].timing.us if w[0].timing else float("inf")))
        best, new_text, _ = winners[0]
        summary = self._summary(action, best, base, turn.candidates)
        turn.state, turn.outcome = "proposed", summary
        suffix = {UNVERIFIED: ", unverified", NOT_SHOWN_FASTER: ", not shown faster"}.get(best.status, "")
        return Result("proposal", session.id, kernel, f"{title} ({kernel}){suffix}", summary, new_text, table,
                      self.usage, status=best.status, new_path=best.path)

    async def _chain(self, chain: int, content: str, turn: Turn, path: str, text: str, kernel: str,
                     baseline_task) -> list[tuple[Verified, str, CandidateRecord]]:
        messages: list[dict] = [{"role": "user", "content": content}]
        out = []
        for attempt in range(1, self.config.max_attempts + 1):
            self.progress(f"candidate {chain}, attempt {attempt}: asking {self.config.model.model}")
            try:
                answer = await self._ask(messages, chain=chain)
            except ModelError as exc:
                turn.candidates.append(CandidateRecord(chain, attempt, "API error", str(exc)))
                break
            code = extract_code(answer.text)
            if code is None:
                verified, new_text = Verified(False, "no code", "the answer had no ```python block"), None
                if answer.stop_reason == "max_tokens":
                    verified.reason += " (it was cut off at assistantMaxTokens)"
            else:
                self.progress(f"candidate {chain}, attempt {attempt}: verifying")
                verified, new_text = await self._verify(turn, path, text, kernel, code, baseline_task)
            record = CandidateRecord(chain, attempt, verified.status, _record_reason(verified),
                                     verified.timing.us if verified.timing else None,
                                     verified.timing.label if verified.timing else None, code or "")
            turn.candidates.append(record)
            if verified.ok and new_text is not None:  # a verified candidate always comes with its text
                out.append((verified, new_text, record))
                break
            messages += [{"role": "assistant", "content": answer.text or "(no answer)"},
                         {"role": "user", "content": f"That candidate was turned down: {verified.reason}\n\n"
                                                     "Try again: one complete ```python block."}]
        return out

    async def _verify(self, turn: Turn, path: str, text: str, kernel: str, code: str,
                      baseline_task) -> tuple[Verified, str | None]:
        action = turn.action
        specs = find_specs(text)
        first_spec = specs[0].inputs if specs else None
        try:
            new_text, names = splice(text, code, protected=protected_names(text, kernel),
                                     may_replace=action not in ("port", "spec"), insert_before=first_spec,
                                     may_add_spec=action == "spec")
        except Refused as exc:
            return refused(str(exc)), None
        except SpliceError as exc:
            return Verified(False, "not applicable", str(exc)), None
        why = self._integrity(action, text, new_text, kernel)
        if why:
            return refused(why), None
        if action == "port":
            return await self._verify_port(path, text, kernel, code, names)
        if not kernel_defined(new_text, kernel):
            return Verified(False, "kernel missing", f"the candidate no longer defines the Triton kernel {kernel}; "
                            "keep its name"), None
        errors, compiled = await compile_errors(self.env, path, new_text)
        if errors:
            return Verified(False, "does not compile", describe_compile_errors(errors, new_text)), new_text
        if action == "spec" and not has_spec(new_text, kernel):
            return Verified(False, "no spec", f"the candidate has no @spec(kernel={kernel}, ...)"), new_text
        if action == "fix" and turn.diagnostic:
            still = _still_reported(turn.diagnostic, new_text, kernel)
            if still:
                return Verified(False, "not fixed", f"the problem is still reported: {still}"), new_text
        if not has_spec(new_text, kernel):  # nothing can run it: proposed, labelled unverified
            return Verified(True, "", f"{compiled}; not checked: {kernel} has no correctness spec",
                            compiled=compiled), new_text
        verdict, errors_text = await run_check(self.env, path, new_text, kernel)
        if verdict is None:
            return Verified(False, "error", f"the check did not run: {errors_text or 'no verdict'}"), new_text
        if not verdict.ok:
            return Verified(False, verdict.status, describe_verdict(verdict, new_text), check=verdict.message), \
                new_text
        verified = Verified(True, "", verdict.message, check=verdict.message, ran=verdict.status == "correct",
                            on_gpu=verdict.on_gpu, compiled=compiled)
        if action != "spec":
            await self._time(verified, path, new_text, kernel, action, baseline_task)
        return verified, new_text

    @staticmethod
    def _integrity(action: str, text: str, new_text: str, kernel: str) -> str | None:
        """Why the candidate touches what it may not (docs/assistant.md, "What a candidate may change")."""
        reasons = integrity.refusals(text, new_text, kernel, action)
        if reasons:
            return "\n".join(reasons[:3])
        if action != "spec" and not spec_untouched(text, new_text):
            return "the candidate changes the correctness spec, its reference or what they read; it may not"
        return integrity.tautology(new_text, kernel) if action == "spec" else None

    async def _time(self, verified: Verified, path: str, new_text: str, kernel: str, action: str,
                    baseline_task) -> None:
        """Time a correct candidate; for Optimize, establish whether it is shown faster than the kernel now.
        Slower is a failure the model hears about; no evidence either way leaves it "correct, not shown faster"."""
        found, why = await timing(self.env, path, new_text, kernel, verified.on_gpu)
        verified.timing = found
        if action != "optimize":
            if why:
                verified.notes.append(f"not timed: {why}")
            return
        base, _, base_why = await _await_baseline(baseline_task)
        verified.faster, verified.speed = speed_evidence(base, base_why, found, why)
        compared = found is not None and base is not None and base.key == found.key
        if compared and not verified.faster:
            verified.ok, verified.failure = False, "not faster"
            verified.reason = f"correct, but not faster: {verified.speed}; the tiling must beat the current one"

    async def _verify_port(self, path: str, text: str, kernel: str, code: str,
                           names: list[str]) -> tuple[Verified, str | None]:
        """The port in its own file (port_file.py) with the Triton kernel's spec naming it, run there."""
        from analyzers import analyze_source

        from .port_file import port_file, port_path

        found = [k for k in analyze_source(code).nki_kernels if k.name in names]
        if not found:
            return Verified(False, "no NKI kernel", "the candidate adds no NKI kernel (a function decorated with "
                            "@nki.jit, with `import nki`)"), None
        legacy = [k.name for k in found if k.api != "current"]
        if legacy:
            return Verified(False, "legacy NKI", f"{', '.join(legacy)} uses the legacy neuronxcc.nki API; write it "
                            "in the current `nki` API"), None
        target = port_path(path)
        try:
            new_text = port_file(text, code, kernel, found[0].name, os.path.basename(path))
        except SpliceError as exc:
            return Verified(False, "not applicable", str(exc)), None
        verified = await self._verify_port_file(target, new_text, found[0].name, names)
        verified.path = target
        if verified.ok:
            verified.notes.insert(0, f"a new file, {os.path.basename(target)}: {os.path.basename(path)} is left as "
                                     "it is")
        return verified, new_text

    async def _verify_port_file(self, path: str, new_text: str, nki_kernel: str, names: list[str]) -> Verified:
        from .nki_sim import simulate

        kernels, problems = nki_problems(new_text, names)
        lines = new_text.splitlines()
        errors = [p for p in problems if p.severity.name == "ERROR"]
        if errors:
            return Verified(False, "NKI rules", "; ".join(
                f"{p.code} at line {p.span.start_line + 1} (`{lines[p.span.start_line].strip()}`): {p.message}"
                for p in errors[:5]))
        rules = f"NKI rules NK001-NK006 pass for {', '.join(k.name for k in kernels)}"
        notes = [f"{p.code}: {p.message}" for p in problems]
        if not has_spec(new_text, nki_kernel):
            return Verified(True, "", f"{rules}; not run: the Triton kernel has no spec to compare with",
                            notes=notes)
        sim = await in_thread(self.env, simulate, path, new_text, nki_kernel, nki_kernel, self.env.root,
                              self.env.check_timeout_s, self.env.cancel)
        notes += [str(n) for n in sim.get("notes") or ()]  # which runner ran it, and the cross-check
        if sim.get("status") == "unsupported":  # a limit of the model, not the port's fault: unverified
            return Verified(True, "", f"{rules}; not run: {sim.get('message')}", notes=notes)
        if not sim.get("ok"):
            failure = {"rule": "NKI rule", "rejected": "rejected"}.get(sim.get("status"), "mismatch")
            line = sim.get("line")
            where = f" at line {line + 1} (`{lines[line].strip()}`)" if isinstance(line, int) and 0 <= line < len(
                lines) else ""
            tool = [n for n in notes if n.startswith("tool problem")]  # the model saw it otherwise: say so
            return Verified(False, failure, "; ".join([f"{sim.get('message')}{where}", *tool]))
        return Verified(True, "", f"{rules}; {sim.get('message')}", check=sim.get("message"), ran=True,
                        notes=notes)

    def _summary(self, action: str, best: Verified, base: Timing | None, records: list[CandidateRecord]) -> str:
        """What exactly was verified; every label in it comes from the records' status (session.status_of)."""
        parts = [best.check if best.ran and best.check else best.reason]
        if best.status == UNVERIFIED:
            parts[0] = f"{UNVERIFIED}: {parts[0]}"
        if best.compiled and action != "port":
            parts.append(best.compiled)
        parts.append(_speed_text(action, best, base))
        parts += best.notes
        parts.append(tally(records))
        parts.append(self.usage.text())
        return "; ".join(p for p in parts if p)


def _speed_text(action: str, best: Verified, base: Timing | None) -> str:
    """The speed claim and its evidence: measured on a device, or an estimate labelled as one."""
    if best.faster is False:
        return f"correct but not shown faster ({best.speed})"
    if best.timing is None:
        return ""
    change = best.speed or (compare(base, best.timing) if action in ("optimize", "refine") else best.timing.label)
    return change if best.timing.measured else f"not timed: no GPU; estimate {change}"


def _record_reason(v: Verified) -> str:
    """What the table's details column and the session keep: the reason, and for Optimize the speed evidence."""
    if v.ok and v.faster is False:
        return f"{v.reason}; not shown faster ({v.speed})"
    return v.reason


def _baseline_result(task) -> tuple[Timing | None, bool, str]:
    if task is None or not task.done() or task.cancelled() or task.exception() is not None:
        return None, False, "the current kernel was not timed"
    return task.result()


async def _await_baseline(task) -> tuple[Timing | None, bool, str]:
    """The current kernel's timing (shared by the chains: shielded from one chain's cancel), or why none."""
    if task is None:
        return None, False, "the current kernel was not timed"
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a failed baseline is a missing figure, with its reason
        return None, False, f"{type(exc).__name__}: {exc}"


def _diagnostic_text(diagnostic: dict | None) -> str:
    if not diagnostic:
        return "(no diagnostic given: fix what is wrong with the kernel)"
    line = diagnostic.get("line")
    where = f" at line {line + 1}" if isinstance(line, int) else ""
    return f"{diagnostic.get('code') or ''}{where}: {diagnostic.get('message') or ''}".strip()


def _still_reported(diagnostic: dict, text: str, kernel: str) -> str | None:
    """The diagnostic's rule still firing in the candidate (static rules only; compile and check problems are
    re-established by compiling and checking)."""
    from analyzers import analyze_source

    code = str(diagnostic.get("code") or "")
    if not code or code.startswith(("KC", "KV")):
        return None
    for p in analyze_source(text).problems:
        if p.code == code and (p.kernel in (None, kernel)):
            return f"{p.code} at line {p.span.start_line + 1}: {p.message}"
    return None


def _latency_line(e) -> str:
    import json

    fields = e.to_dict() if hasattr(e, "to_dict") else e.to_json()  # the API's LatencyEntry, the engine's entry
    keep = {k: v for k, v in fields.items() if k in ("shape", "dtype", "device", "us", "label", "config",
                                                          "bound", "fraction_of_roofline", "estimate", "work",
                                                          "reference_us", "speedup", "chosen", "error")}
    return json.dumps(keep, default=str)[:2000]
