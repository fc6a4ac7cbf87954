"""Proposals: a whole new text for one file, written by an agent (`kernel_lsp.api.Workspace.propose_edit`) for a
person to accept in the editor, never applied by the agent.

Each proposal is two files under `<root>/.kernel-lsp/proposals/`: `<name>.<stamp>.diff`, the unified diff a person
can read or `git apply`, and `<name>.<stamp>.json` beside it, what the editor needs: the file it is for, the
SHA-256 of the text it was made from (a proposal for a text that has changed since is stale and is never
applied), the new text, who proposed it and its verdict.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .files import PRIVATE_DIR

log = logging.getLogger(__name__)

FOLDER = "proposals"
FORMAT = 1


def folder(root: str | os.PathLike) -> Path:
    return Path(root) / PRIVATE_DIR / FOLDER


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Proposal:
    id: str  # the file name's stem, unique in the folder
    path: str  # the file the proposal is for (absolute)
    proposer: str  # who made it: the agent's or tool's name
    base_sha256: str  # of the text it was made from
    new_source: str
    verified: bool
    verdict: str  # one line: "verified: every spec correct" / "NOT verified: mismatch in ..."
    added: int
    removed: int
    diff_path: str
    json_path: str

    def is_stale(self, current_text: str) -> bool:
        """Whether the file has changed since the proposal was made (then it is not applied)."""
        return digest(current_text) != self.base_sha256

    @property
    def summary(self) -> str:
        return f"+{self.added} \u2212{self.removed} lines, {self.verdict}"


def unified_diff(old: str, new: str, rel: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{rel}", f"b/{rel}"))


def write(root: str | os.PathLike, path: str, old: str, new: str, *, proposer: str, verified: bool, verdict: str,
          header: str = "", scrub: Callable[[str], str] | None = None) -> Proposal:
    """Write a proposal for `path` (now `old`) to become `new`; `header`: comment lines put before the diff.
    `scrub` blanks secrets out of the new source and the diff (engine/redact.py); the base's digest is the
    file's own."""
    rel = os.path.relpath(path, root)
    if scrub is not None:
        new = scrub(new)
    diff = unified_diff(old, new, rel)
    if scrub is not None:
        diff = scrub(diff)
    added = sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
    where = folder(root)
    where.mkdir(parents=True, exist_ok=True)
    stem = f"{Path(rel).name}.{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    diff_path, json_path = where / f"{stem}.diff", where / f"{stem}.json"
    diff_path.write_text(header + diff, encoding="utf-8")
    data = {"format": FORMAT, "path": str(path), "proposer": proposer, "base_sha256": digest(old),
            "new_source": new, "verified": verified, "verdict": verdict, "added": added, "removed": removed,
            "diff": diff_path.name}
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, json_path)  # a reader never sees half a proposal
    return _from_json(json_path, data)


def _from_json(json_path: Path, data: dict) -> Proposal:
    return Proposal(json_path.stem, str(data["path"]), str(data.get("proposer") or "an agent"),
                    str(data["base_sha256"]), str(data["new_source"]), bool(data.get("verified")),
                    str(data.get("verdict") or ""), int(data.get("added") or 0), int(data.get("removed") or 0),
                    str(json_path.with_name(str(data.get("diff") or json_path.stem + ".diff"))), str(json_path))


def load(json_path: str | os.PathLike) -> Proposal | None:
    """The proposal in `json_path`; None when it is gone or unreadable (logged: a damaged file is skipped)."""
    json_path = Path(json_path)
    try:
        data = json.loads(json_path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a proposal of this format")
        return _from_json(json_path, data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("skipping the proposal %s: %s", json_path, exc)
        return None


def for_file(roots: list[str], path: str) -> list[Proposal]:
    """The proposals for `path` in the proposal folders of `roots`, oldest first."""
    found = []
    for root in dict.fromkeys(roots):
        try:
            names = sorted(os.listdir(folder(root)))
        except OSError:
            continue
        for name in names:
            if name.endswith(".json"):
                p = load(folder(root) / name)
                if p is not None and os.path.realpath(p.path) == os.path.realpath(path):
                    found.append(p)
    return found


def find(roots: list[str], proposal_id: str) -> Proposal | None:
    if not proposal_id or "/" in proposal_id or os.sep in proposal_id or proposal_id.startswith("."):
        return None
    for root in dict.fromkeys(roots):
        p = load(folder(root) / f"{proposal_id}.json")
        if p is not None:
            return p
    return None


def remove(proposal: Proposal) -> None:
    for name in (proposal.json_path, proposal.diff_path):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass
