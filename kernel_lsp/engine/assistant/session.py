"""The assistant's memory of one kernel: `<workspace>/.kernel-lsp/assistant/<file-stem>.<kernel>.json`.

Each turn keeps what the user asked, the plan, every candidate with its verdict, numbers and why it was turned
down, and how the turn ended, so that `kernel-lsp.refine` can continue where the last action stopped. Written
atomically; a damaged file starts a new session instead of failing the action.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..files import PRIVATE_DIR, ensure_private_dir

log = logging.getLogger(__name__)

SESSION_DIR = Path(PRIVATE_DIR) / "assistant"

# A candidate's label, from what verification established. `status_of` is the only place one is made: the table
# of attempts, the summary, the count and the session file all read it, so they cannot disagree.
CORRECT = "correct"  # a correctness check (or the NKI simulator) ran it and it matched the reference
NOT_SHOWN_FASTER = "correct, not shown faster"  # as above, but an Optimize candidate without speed evidence
UNVERIFIED = "unverified"  # passed every static gate (splice, integrity, compile, rules), but nothing ran it


def status_of(ok: bool, failure: str, ran: bool, faster: bool | None = None) -> str:
    """The label of a candidate: why it was turned down, or how far it was verified."""
    if not ok:
        return failure
    if not ran:
        return UNVERIFIED
    return NOT_SHOWN_FASTER if faster is False else CORRECT


def is_verified(status: str) -> bool:
    """Whether a label says that the candidate was run and found correct."""
    return status in (CORRECT, NOT_SHOWN_FASTER)


def tally(records: list[CandidateRecord]) -> str:
    """"2 attempts, 1 verified" or "1 attempt, 0 verified, 1 unverified"."""
    n = len(records)
    verified = sum(is_verified(r.status) for r in records)
    unverified = sum(r.status == UNVERIFIED for r in records)
    return f"{n} attempt{'s' if n != 1 else ''}, {verified} verified" + \
        (f", {unverified} unverified" if unverified else "")


@dataclass
class CandidateRecord:
    chain: int  # which independent candidate (1..assistantCandidates)
    attempt: int  # which try within that chain
    status: str  # status_of(...): "correct", "unverified", "mismatch", "refused", "not faster", ...
    reason: str  # what was verified or why it was turned down (what the model was told)
    us: float | None = None
    label: str | None = None
    code: str = ""


@dataclass
class Turn:
    action: str  # "optimize", "port", "fix", "explain", "spec"
    request: str  # what the user asked (the action's instruction, or their refine text)
    plan: str | None = None
    plan_accepted: bool = False
    state: str = "working"  # "awaiting-plan" (a plan waits for "go"), "proposed", "answered", "failed", "cancelled"
    outcome: str = ""
    candidates: list[CandidateRecord] = field(default_factory=list)
    diagnostic: dict | None = None
    usage: dict = field(default_factory=dict)
    started: float = field(default_factory=time.time)


@dataclass
class Session:
    id: str
    path: str
    kernel: str
    turns: list[Turn] = field(default_factory=list)

    @property
    def last(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    @property
    def awaiting_plan(self) -> bool:
        return self.last is not None and self.last.state == "awaiting-plan"

    def best_code(self) -> str | None:
        """The code of the last proposal made in this session, to continue from."""
        for turn in reversed(self.turns):
            for c in turn.candidates:
                if is_verified(c.status) and c.code and turn.state == "proposed":
                    return c.code
        return None

    def history(self, limit: int = 6) -> str:
        """The earlier turns in a few lines each, for the model."""
        out = []
        for turn in self.turns[-limit:]:
            out.append(f"- {turn.action}: {turn.request.strip()[:400]}")
            if turn.plan:
                out.append(f"  plan{' (accepted)' if turn.plan_accepted else ''}: {turn.plan.strip()[:800]}")
            for c in turn.candidates:
                out.append(f"  candidate {c.chain}.{c.attempt}: {c.status}: {c.reason[:300]}")
            if turn.outcome:
                out.append(f"  outcome ({turn.state}): {turn.outcome[:300]}")
        return "\n".join(out)


def session_id(path: str, kernel: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(path).stem)
    return f"{stem}.{re.sub(r'[^A-Za-z0-9_]', '_', kernel)}"


class SessionStore:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.dir = self.root / SESSION_DIR

    def file(self, sid: str) -> Path:
        return self.dir / f"{sid}.json"

    def load(self, path: str, kernel: str) -> Session:
        sid = session_id(path, kernel)
        try:
            data = json.loads(self.file(sid).read_text())
            turns = [Turn(**{**t, "candidates": [CandidateRecord(**c) for c in t.get("candidates", [])]})
                     for t in data.get("turns", [])]
            return Session(sid, data.get("path", path), data.get("kernel", kernel), turns)
        except FileNotFoundError:
            return Session(sid, path, kernel)
        except (OSError, ValueError, TypeError, AttributeError):
            log.warning("assistant session %s is unreadable; starting a new one", sid)
            return Session(sid, path, kernel)

    def save(self, session: Session) -> None:
        try:
            ensure_private_dir(self.root)  # never committed
            self.dir.mkdir(parents=True, exist_ok=True)
            data = {"id": session.id, "path": session.path, "kernel": session.kernel,
                    "turns": [asdict(t) for t in session.turns]}
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, self.file(session.id))
        except OSError:
            log.warning("cannot save assistant session %s", session.id, exc_info=True)
