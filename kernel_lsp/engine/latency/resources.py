"""What the compiler says about each candidate of a tiling search: registers, shared memory and spills.

Each candidate configuration is planned as a compile job for the device's compile target (the candidate's values
pinned, `compile/specialize.py`), and the jobs go through the compile service: a result already in the
workspace's cache (keyed by content, shared with the editor's own compiles) is read back, the others compile in
the service's worker pool, several at once. A candidate whose compile fails does not run either: the search drops
it and says why. A candidate that could not be compiled for a reason that is no fault of its own (no compile
target for the device, a value the planner does not know, a timeout, a crashed worker) keeps the model's assumed
resources, and says so.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from analyzers.analyze import analyze_source
from analyzers.tiling import Candidate

from ..compile.extract import extract_module
from ..compile.jobs import CompileJob, CompileResult
from ..compile.specialize import plan_jobs

# Failures of the tool, not of the configuration: the candidate stays, on assumed resources.
_NOT_THE_CANDIDATES = ("timeout", "crash", "internal", "cancelled", "offline")


@dataclass(frozen=True)
class CandidateResources:
    registers: int | None = None  # per thread
    shared_bytes: int | None = None  # per program
    spill_bytes: int | None = None  # per thread
    failed: str | None = None  # the compiler rejects this configuration: why (the candidate is dropped)
    assumed: str | None = None  # why the resources could not be read (the model assumes them)

    def as_dict(self) -> dict:
        return {"registers": self.registers, "shared_bytes": self.shared_bytes, "spill_bytes": self.spill_bytes}


# (jobs, done(count_done, count_all), cancel) -> one result per job (None: not compiled, e.g. cancelled)
Compiler = Callable[[list[CompileJob], Callable[[int, int], None], "threading.Event | None"],
                    list["CompileResult | None"]]


def plan_candidates(path: str, source: str, kernel: str, target: str, candidates: Sequence[Candidate]
                    ) -> dict[Candidate, CompileJob | str]:
    """A compile job per candidate (its values pinned), or why none could be planned."""
    try:
        module = extract_module(source, kernel, path)
        sites = [(s, source, path) for s in analyze_source(source, path).launch_sites]
    except Exception as exc:  # noqa: BLE001 - a kernel the extractor cannot slice still gets a search
        return dict.fromkeys(candidates, f"the kernel could not be prepared for compiling ({exc})")
    out: dict[Candidate, CompileJob | str] = {}
    for cand in candidates:
        try:
            jobs = plan_jobs(source, kernel, [target], path=path, launch_sites=sites, pins=cand.overrides,
                             extracted=module, max_configs=1)
        except Exception as exc:  # noqa: BLE001 - a value the planner does not know: resources are assumed
            out[cand] = str(exc) or type(exc).__name__
            continue
        out[cand] = jobs[0] if jobs else "no compile job could be planned"
    return out


def service_compiler(root: str | None, settings=None) -> Compiler:
    """Compiles through a CompileService of the workspace `root` (its result cache and triton cache; a temporary
    one without a workspace) with the user's compile `settings` (workers, timeout, executor), in its worker pool,
    closed when the batch is done."""
    def run(jobs: list[CompileJob], done: Callable[[int, int], None], cancel: threading.Event | None
            ) -> list[CompileResult | None]:
        from ..compile.service import CompileService

        async def batch(private: Path | None) -> list[CompileResult | None]:
            service = CompileService(root or str(private), settings,
                                     private_dir=private if root is None else None)
            results: list[CompileResult | None] = [None] * len(jobs)
            tasks = {asyncio.create_task(service.run_job(job)): i for i, job in enumerate(jobs)}
            pending = set(tasks)
            finished = 0
            try:
                while pending:
                    if cancel is not None and cancel.is_set():
                        break
                    ready, pending = await asyncio.wait(pending, timeout=0.2,
                                                        return_when=asyncio.FIRST_COMPLETED)
                    for task in ready:
                        results[tasks[task]] = task.result()[0]
                        finished += 1
                        done(finished, len(jobs))
            finally:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                await service.close()
            return results

        if root is not None:
            return asyncio.run(batch(None))
        with tempfile.TemporaryDirectory(prefix="kernel-lsp-search-") as tmp:
            return asyncio.run(batch(Path(tmp)))

    return run


def candidate_resources(path: str, source: str, kernel: str, target: str | None, candidates: Sequence[Candidate],
                        compiler: Compiler, *, cancel: threading.Event | None = None,
                        say: Callable[[str], None] | None = None) -> dict[Candidate, CandidateResources]:
    """Registers, shared memory and spills of each candidate, compiled offline for `target` ("sm_90")."""
    if target is None:
        return dict.fromkeys(candidates, CandidateResources(assumed="the device has no compile target"))
    planned = plan_candidates(path, source, kernel, target, candidates)
    jobs = [job for job in planned.values() if isinstance(job, CompileJob)]
    unique = list({job.key or id(job): job for job in jobs}.values())  # equal jobs compile once

    def done(n: int, total: int) -> None:
        if say:
            say(f"compiling candidate {n}/{total} for {target}")

    results = compiler(unique, done, cancel) if unique else []
    by_key = {job.key or id(job): r for job, r in zip(unique, results)}
    out: dict[Candidate, CandidateResources] = {}
    for cand, job in planned.items():
        if not isinstance(job, CompileJob):
            out[cand] = CandidateResources(assumed=f"not compiled: {job}")
            continue
        result = by_key.get(job.key or id(job))
        if result is None:
            out[cand] = CandidateResources(assumed="not compiled (cancelled)")
        elif not result.ok:
            err = result.error
            message = " ".join((err.message if err else "unknown error").split())[:240]
            if err is not None and err.kind not in _NOT_THE_CANDIDATES:
                out[cand] = CandidateResources(failed=f"does not compile for {target}: {message}")
            else:
                out[cand] = CandidateResources(assumed=f"not compiled: {message}")
        else:
            res = result.resources
            missing = [n for n, v in (("registers", res.registers), ("shared memory", res.shared_bytes))
                       if v is None]
            out[cand] = CandidateResources(
                registers=res.registers, shared_bytes=res.shared_bytes,
                spill_bytes=res.spill_bytes,
                assumed=f"the compile did not report {' or '.join(missing)}" if missing else None)
    return out
