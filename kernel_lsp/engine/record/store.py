"""The workspace's record of real launches: `.kernel-lsp/launches.json` (format in docs/recording.md, schema in
kernel_lsp/schema/launches.schema.json).

Plain JSON, no triton or torch: the server process reads it to compile with recorded values. A kernel is known by its
file (relative to the workspace), its qualified name and the hash of its source; launches recorded for another hash
are stale (the kernel was edited since) and never used as facts about the kernel as it is now.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analyzers.source import parse_python

FORMAT = "kernel-lsp-launches"
VERSION = 1
STORE_NAME = "launches.json"
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_PER_KERNEL = 32


class StoreError(ValueError):
    """The record file is not one this version can read (another format or version, broken JSON)."""


def store_path(root: str | Path) -> Path:
    return Path(root) / ".kernel-lsp" / STORE_NAME


def _function_node(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    parts = [p for p in qualname.split(".") if p != "<locals>"]
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for i, part in enumerate(parts):
        found = None
        for stmt in scope:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == part:
                found = stmt  # the last definition wins, as at run time
        if found is None:
            return None
        node, scope = found, found.body
        if i < len(parts) - 1 and not isinstance(found, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def source_hash(text: str, qualname: str) -> str | None:
    """sha256 of a function's own source, from its `def` line to its last line, dedented, trailing blanks removed:
    edits elsewhere in the file, decorators and indentation leave it alone. None when the function is not there."""
    try:
        tree = parse_python(text)
    except (SyntaxError, ValueError):
        return None
    node = _function_node(tree, qualname)
    if node is None or node.end_lineno is None:
        return None
    lines = text.splitlines()[node.lineno - 1:node.end_lineno]
    body = textwrap.dedent("\n".join(line.rstrip() for line in lines))
    return hashlib.sha256(body.encode()).hexdigest()


@functools.lru_cache(maxsize=16)
def _qualnames(text: str) -> dict[int, str]:
    """def line (1-based) -> qualified name as Python spells it (`test_x.<locals>.kernel`, `Ops.kernel`)."""
    try:
        tree = parse_python(text)
    except (SyntaxError, ValueError):
        return {}
    out: dict[int, str] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[stmt.lineno] = prefix + stmt.name
                walk(stmt.body, f"{prefix}{stmt.name}.<locals>.")
            elif isinstance(stmt, ast.ClassDef):
                walk(stmt.body, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, (ast.If, ast.With, ast.Try, ast.For, ast.While)):
                walk([s for part in ("body", "orelse", "finalbody") for s in getattr(stmt, part, [])], prefix)

    walk(tree.body, "")
    return out


def qualname_at(text: str, line: int, name: str) -> str:
    """The qualified name of the function `name` defined at 0-based `line` (its def line), else `name`."""
    found = _qualnames(text).get(line + 1)
    return found if found is not None and found.rsplit(".", 1)[-1] == name else name


# ------------------------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class Run:
    id: str
    command: str
    started: str  # ISO 8601, UTC
    exit_code: int | None = None
    wall_s: float | None = None
    triton: tuple[str, ...] = ()

    @property
    def date(self) -> str:
        return self.started[:10]


@dataclass(frozen=True)
class Launch:
    """One distinct launch as recorded: its arguments as the recorder described them (see the format)."""

    index: int  # 1-based, in the kernel's list: `kernel-lsp repro FILE::KERNEL --launch N`
    run: Run
    count: int
    args: dict[str, dict[str, Any]]
    grid: tuple[int, ...] | None
    options: dict[str, Any]
    autotune: dict[str, Any] | None
    stack: tuple[dict[str, Any], ...]
    triton: str | None
    interpreted: bool

    def shapes(self) -> str:
        """`x: fp16[128, 64], n=8192` - the tensor shapes and int scalars, for labels."""
        parts = []
        for name, a in self.args.items():
            if a.get("t") in ("tensor", "tensordesc"):
                parts.append(f"{name}: {a.get('dtype')}[{', '.join(str(s) for s in a.get('shape', []))}]")
        return ", ".join(parts[:4]) + (", ..." if len(parts) > 4 else "")


@dataclass(frozen=True)
class KernelRecord:
    file: str  # relative to the workspace, '/'-separated
    qualname: str
    name: str
    source_sha256: str | None
    launches: tuple[Launch, ...]
    seen: int  # launches seen in all (duplicates counted)
    dropped: int  # distinct launches not kept (per-kernel or size cap)

    def runs(self) -> list[Run]:
        out: dict[str, Run] = {}
        for launch in self.launches:
            out.setdefault(launch.run.id, launch.run)
        return list(out.values())

    def provenance(self) -> str:
        """`3 launches recorded by `pytest tests/` on 2026-12-02`"""
        runs = self.runs()
        n = len(self.launches)
        what = f"{n} launch{'es' if n != 1 else ''} recorded"
        return what + " " + "; ".join(f"by `{r.command}` on {r.date}" for r in runs[:2]) + (
            f" and {len(runs) - 2} more runs" if len(runs) > 2 else "")


@dataclass
class Store:
    path: Path
    runs: dict[str, Run] = field(default_factory=dict)
    kernels: dict[tuple[str, str], KernelRecord] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    def find(self, file: str, qualname: str) -> KernelRecord | None:
        return self.kernels.get((file, qualname))

    def for_kernel(self, root: str | Path, path: str | Path, qualname: str, text: str) -> tuple[
            KernelRecord | None, bool]:
        """(the record of a kernel, fresh?) where fresh means its source hash matches `text`."""
        rel = relative(root, path)
        record = self.find(rel, qualname) if rel is not None else None
        if record is None:
            return None, False
        return record, record.source_sha256 is not None and record.source_sha256 == source_hash(text, qualname)


def relative(root: str | Path, path: str | Path) -> str | None:
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return None


def _parse(data: Any, path: Path) -> Store:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StoreError(f"{path}: not a kernel-lsp launch record (no \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise StoreError(f"{path}: launch record version {data.get('version')!r}; this kernel-lsp reads version "
                         f"{VERSION}: record again with `kernel-lsp record -- CMD`")
    store = Store(path, raw=data)
    for r in data.get("runs", []):
        store.runs[r["id"]] = Run(r["id"], r.get("command", "?"), r.get("started", ""), r.get("exit_code"),
                                  r.get("wall_s"), tuple(r.get("triton") or ()))
    for k in data.get("kernels", []):
        launches = []
        for i, launch in enumerate(k.get("launches", []), 1):
            run = store.runs.get(launch.get("run"), Run(str(launch.get("run")), "?", ""))
            grid = launch.get("grid")
            launches.append(Launch(i, run, int(launch.get("count", 1)), dict(launch.get("args", {})),
                                   tuple(grid) if isinstance(grid, list) else None, dict(launch.get("options", {})),
                                   launch.get("autotune"), tuple(launch.get("stack", [])), launch.get("triton"),
                                   bool(launch.get("interpreted"))))
        store.kernels[(k["file"], k["qualname"])] = KernelRecord(
            k["file"], k["qualname"], k.get("name", k["qualname"].rsplit(".", 1)[-1]), k.get("source_sha256"),
            tuple(launches), int(k.get("seen", 0)), int(k.get("dropped", 0)))
    return store


_cache: dict[str, tuple[float, int, Store]] = {}


def load(root: str | Path) -> Store | None:
    """The workspace's record, None when there is none. Raises StoreError for one that cannot be read.
    Re-read only when the file changes."""
    path = store_path(root)
    try:
        st = path.stat()
    except OSError:
        return None
    known = _cache.get(str(path))
    if known is not None and known[:2] == (st.st_mtime, st.st_size):
        return known[2]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path}: cannot read the launch record: {exc}") from exc
    store = _parse(data, path)
    _cache[str(path)] = (st.st_mtime, st.st_size, store)
    return store


# ------------------------------------------------------------------------------------------------------------
# Writing: merging a run's shards into the record


def merge(previous: dict[str, Any] | None, run: dict[str, Any], shards: list[dict[str, Any]], root: Path, *,
          max_per_kernel: int = DEFAULT_MAX_PER_KERNEL, max_bytes: int = DEFAULT_MAX_BYTES
          ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the new record, a summary) from the previous record, this run's metadata and its processes' shards.

    Launches of kernels outside the workspace are counted, not kept. A kernel recorded again with the same source
    keeps its older launches next to the new ones (deduplicated); with a changed source its older ones are dropped.
    """
    kernels: dict[tuple[str, str], dict[str, Any]] = {}
    runs = {r["id"]: r for r in (previous or {}).get("runs", [])}
    for k in (previous or {}).get("kernels", []):
        kernels[(k["file"], k["qualname"])] = k
    outside: dict[str, int] = {}
    texts: dict[str, str | None] = {}
    recorded_now: dict[tuple[str, str], dict[str, Any]] = {}
    for shard in shards:
        for k in shard.get("kernels", []):
            rel = relative(root, k["file"])
            if rel is None or rel.startswith("../") or "/site-packages/" in f"/{rel}":
                outside[f"{k['file']}::{k['qualname']}"] = outside.get(f"{k['file']}::{k['qualname']}", 0) + k["seen"]
                continue
            if k["file"] not in texts:
                try:
                    texts[k["file"]] = Path(k["file"]).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    texts[k["file"]] = None
            text = texts[k["file"]]
            digest = source_hash(text, k["qualname"]) if text is not None else None
            key = (rel, k["qualname"])
            entry = recorded_now.get(key)
            if entry is None:
                old = kernels.get(key)
                keep = old["launches"] if old and old.get("source_sha256") == digest else []
                entry = recorded_now[key] = {
                    "file": rel, "qualname": k["qualname"], "name": k["name"], "line": k.get("line"),
                    "source_sha256": digest, "seen": (old or {}).get("seen", 0) if keep else 0,
                    "dropped": (old or {}).get("dropped", 0) if keep else 0,
                    "launches": [dict(x) for x in keep]}
            entry["seen"] += k["seen"]
            entry["dropped"] += k["dropped"]
            index = {_launch_ident(x): x for x in entry["launches"]}
            for launch in k["launches"]:
                launch = {**launch, "run": run["id"], "triton": shard.get("triton")}
                launch["stack"] = [{**f, "file": relative(root, f["file"]) or f["file"]} for f in launch.get("stack", [])]
                ident = _launch_ident(launch)
                if ident in index:
                    index[ident]["count"] = index[ident].get("count", 1) + launch.get("count", 1)
                elif len(entry["launches"]) < max_per_kernel:
                    entry["launches"].append(launch)
                    index[ident] = launch
                else:
                    entry["dropped"] += 1
    kernels.update(recorded_now)
    runs[run["id"]] = run
    used = {x["run"] for k in kernels.values() for x in k["launches"]}
    record = {"format": FORMAT, "version": VERSION,
              "runs": [r for r in runs.values() if r["id"] in used or r["id"] == run["id"]],
              "kernels": sorted(kernels.values(), key=lambda k: (k["file"], k["qualname"]))}
    trimmed = _fit(record, max_bytes)
    summary = {"kernels": len(recorded_now),
               "launches": sum(k["seen"] for s in shards for k in s.get("kernels", [])),
               "distinct": sum(len(k["launches"]) for k in recorded_now.values()),
               "outside": outside, "trimmed": trimmed,
               "processes": len(shards),
               "patched": sorted({p for s in shards for p in s.get("patched", [])}),
               "errors": {k: v for s in shards for k, v in (s.get("errors") or {}).items()},
               "triton": sorted({s["triton"] for s in shards if s.get("triton")})}
    return record, summary


def _launch_ident(launch: dict[str, Any]) -> str:
    return json.dumps({k: launch.get(k) for k in ("args", "grid", "options", "autotune", "interpreted")},
                      sort_keys=True, default=str)


def _fit(record: dict[str, Any], max_bytes: int) -> int:
    """Drop launches (the least-seen launch of the kernel with the most) until the record is under max_bytes;
    stacks go first. Returns how many launches were dropped."""
    size = len(json.dumps(record))
    if size <= max_bytes:
        return 0
    for k in record["kernels"]:
        for launch in k["launches"]:
            if len(launch.get("stack", [])) > 2:
                launch["stack"] = launch["stack"][:2]
    dropped = 0
    size = len(json.dumps(record))
    while size > max_bytes:
        biggest = max(record["kernels"], key=lambda k: len(k["launches"]), default=None)
        if biggest is None or len(biggest["launches"]) <= 1:
            break
        victim = min(range(len(biggest["launches"])), key=lambda i: biggest["launches"][i].get("count", 1))
        size -= len(json.dumps(biggest["launches"].pop(victim))) + 2
        biggest["dropped"] = biggest.get("dropped", 0) + 1
        dropped += 1
    return dropped


def recorded_for(root: str | Path, path: str | Path, qualname: str, text: str) -> tuple[tuple[Launch, ...], str]:
    """(the recorded launches of a kernel whose source is unchanged since, a note when there are launches of an
    older version of it). Never raises: an unreadable record is told in the note."""
    try:
        current = load(root)
    except StoreError as exc:
        return (), f"the launch record was not used: {exc}"
    if current is None:
        return (), ""
    record, fresh = current.for_kernel(root, path, qualname, text)
    if record is None or not record.launches:
        return (), ""
    if fresh:
        return record.launches, ""
    return (), (f"{record.provenance()} are stale: the kernel changed since (its source hash differs); "
                "record again (`kernel-lsp record -- CMD`)")


def pins_for(pins: dict[str, dict[str, Any]], root: str | Path, path: str | Path, qualname: str
             ) -> dict[str, Any] | None:
    """The `pins` setting's values for one kernel: those keyed by `FILE::QUALNAME` (the file relative to the
    workspace, or a trailing part of its path) over those keyed by the bare name (deprecated: every kernel of
    that name)."""
    rel = relative(root, path) or Path(path).as_posix()
    out: dict[str, Any] = dict(pins.get(qualname.rsplit(".", 1)[-1]) or {})
    for key, values in pins.items():
        file, sep, name = key.rpartition("::")
        if sep and name == qualname and (rel == file or rel.endswith("/" + file.lstrip("./"))):
            out.update(values)
    return out or None
