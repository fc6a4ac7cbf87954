"""Soak: a real server under a long stream of edits, saves and commands on 50 kernel files.

A temporary workspace holds 50 generated kernel modules (bench/common.kernel_file: renamed copies of the
examples, most with a correctness spec). One `kernel-lsp serve` (VS Code 1.65.2 capabilities, diagnostics pushed)
opens every file, then for `--minutes` receives, every `--pace` seconds, one action on a random file:

- an edit (70%): an incremental didChange that adds or removes a comment line near the top;
- a save (15%): didSave, which starts a correctness check (CPU interpreter) and, for a passing kernel, a latency
  estimate, each in its own process;
- a request (15%): the status command, code lenses, inlay hints, or kernel-lsp.runChecks on the file.

Background compiles are on (`compile: open`, sm_90, one worker), so the worker pool sees work all along.

Every 30 s it samples the RSS of the server and of all its descendants (/proc, MiB) and prints the curve. At the
end it waits for the server to go idle and prints:

- every process still alive under the server and what it is (a compile-pool worker the status command lists,
  multiprocessing's resource tracker, or a check / estimate still running) or UNACCOUNTED;
- stale results: after the last edit, the last diagnostics published for each file must carry the latest version
  sent (any older one is stale); while edits stream, publishes of a version older than one sent >= 1 s before
  their arrival are counted too (the server drops results of superseded versions, so this should stay 0);
- whether any descendant is left after shutdown.

    python bench/soak.py [--minutes 30] [--files 50] [--pace 1.0] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ServerSession, code_line, kernel_file, load_line, machine_line, rss_of, write_files  # noqa: E402
from kernel_lsp.engine.proc import cmdline, descendants  # noqa: E402

SAMPLE_S = 30.0
OPTIONS = {"compile": "open", "targets": ["sm_90"], "compileWorkers": 1, "checks": "save", "latency": "save",
           "checkDevice": "interpreter"}


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def what_is(pid: int, status: dict) -> str:
    line = cmdline(pid)
    if pid in status.get("compile", {}).get("pool", {}).get("pids", []):
        return "compile-pool worker (listed by the status command)"
    if "resource_tracker" in line:
        return "multiprocessing's resource tracker (one per server, for the pool's pipes)"
    if "kernel_lsp.engine.verify.runner" in line:
        return "a check still running" if status["checks"]["running"] else "UNACCOUNTED checking process"
    if "kernel_lsp.engine.latency.worker" in line:
        return "a latency estimate (its check passed just now)"
    return "UNACCOUNTED"


class Soak:
    def __init__(self, root: Path, files: dict[str, str], seed: int):
        self.root = root
        self.texts = {(root / rel).as_uri(): text for rel, text in files.items()}
        self.rng = random.Random(seed)
        self.sent: dict[str, list[tuple[float, int]]] = {uri: [] for uri in self.texts}
        self.added: dict[str, int] = dict.fromkeys(self.texts, 0)  # comment lines added at the top
        self.counts = dict.fromkeys(["edits", "saves", "status", "lenses", "hints", "runChecks", "errors"], 0)
        self.curve: list[tuple[float, float, float, int]] = []

    def sample(self, s: ServerSession, t0: float) -> None:
        kids = descendants(s.pid)
        server = rss_of(s.pid).get("VmRSS", float("nan"))
        child_mb = sum(rss_of(p).get("VmRSS", 0.0) for p in kids)
        self.curve.append((time.perf_counter() - t0, server, child_mb, len(kids)))
        t, srv, ch, n = self.curve[-1]
        print(f"  {t / 60:6.1f} min  server {srv:7.1f} MiB  children {ch:7.1f} MiB ({n} processes)", flush=True)

    def edit(self, s: ServerSession, uri: str) -> None:
        if self.added[uri] and self.rng.random() < 0.5:  # remove the line added last
            self.added[uri] -= 1
            s.change(uri, (1, 0), (2, 0), "")
        else:
            self.added[uri] += 1
            s.change(uri, (1, 0), (1, 0), f"# soak edit {s.versions[uri] + 1}\n")
        self.sent[uri].append((time.perf_counter(), s.versions[uri]))
        self.counts["edits"] += 1

    async def act(self, s: ServerSession, uri: str) -> None:
        from lsprotocol import types

        roll = self.rng.random()
        doc = types.TextDocumentIdentifier(uri=uri)
        if roll < 0.70:
            self.edit(s, uri)
        elif roll < 0.85:
            s.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=doc))
            self.counts["saves"] += 1
        else:
            which = self.rng.choice(["status", "lenses", "hints", "runChecks"])
            self.counts[which] += 1
            try:
                if which == "status":
                    await asyncio.wait_for(s.status(), 60)
                elif which == "lenses":
                    await asyncio.wait_for(s.client.text_document_code_lens_async(types.CodeLensParams(doc)), 60)
                elif which == "hints":
                    await asyncio.wait_for(s.client.text_document_inlay_hint_async(types.InlayHintParams(
                        doc, types.Range(types.Position(0, 0), types.Position(200, 0)))), 60)
                else:  # not awaited: a check takes seconds, and the edits go on meanwhile
                    asyncio.ensure_future(s.client.workspace_execute_command_async(
                        types.ExecuteCommandParams(command="kernel-lsp.runChecks", arguments=[{"uri": uri}])))
            except Exception as exc:  # noqa: BLE001 - a failed or hung request is a finding, not the end
                self.counts["errors"] += 1
                print(f"  request {which} on {uri.rsplit('/', 1)[-1]} failed: {exc!r}", flush=True)

    def stale_in_flight(self, s: ServerSession) -> int:
        """Publishes of a version older than one the client had sent >= 1 s before the publish arrived."""
        stale = 0
        for uri, pubs in s.published.items():
            sent = self.sent.get(uri, [])
            for p in pubs:
                newer = [v for t, v in sent if t <= p.time - 1.0]
                if p.version is not None and newer and p.version < max(newer):
                    stale += 1
        return stale


def _answer_refreshes(client) -> None:
    """Code lenses and inlay hints are asked for again when checks and estimates land: answer like an editor."""
    from lsprotocol import types

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_lens_refresh(params: None) -> None:
        return None

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def on_hint_refresh(params: None) -> None:
        return None


async def soak(minutes: float, n_files: int, pace: float, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="kl-soak-") as tmp:
        root = Path(tmp)
        files = {f"kernels/k{i:02d}.py": kernel_file(i) for i in range(n_files)}
        write_files(root, files)
        run = Soak(root, files, seed)
        s = ServerSession("push", root=root, options=OPTIONS)
        s.client = s._make_client()
        _answer_refreshes(s.client)
        await s.start()
        await s.wait_ready(timeout=120)
        for uri, text in run.texts.items():
            s.open(uri, text)
            run.sent[uri].append((time.perf_counter(), 1))
        print(f"soak: {n_files} files, {minutes:g} min, one action every {pace:g} s; {machine_line()}; "
              f"{code_line()}", flush=True)
        print("RSS (VmRSS, MiB), every 30 s:", flush=True)
        t0 = time.perf_counter()
        deadline = t0 + minutes * 60
        next_sample = t0
        uris = list(run.texts)
        while time.perf_counter() < deadline:
            if time.perf_counter() >= next_sample:
                run.sample(s, t0)
                next_sample += SAMPLE_S
            await run.act(s, run.rng.choice(uris))
            await asyncio.sleep(pace)
        run.sample(s, t0)
        print(f"actions: {run.counts}", flush=True)

        # Quiet: every analysis, compile, check and estimate still under way finishes.
        settle = time.perf_counter()
        status = await s.status()
        while time.perf_counter() - settle < 600:
            status = await s.status()
            pool = status.get("compile", {}).get("pool", {})
            if (not status.get("indexing") and status.get("queued") == 0 and status["checks"]["running"] == 0
                    and not pool.get("running") and not pool.get("queued")
                    and not any("latency.worker" in cmdline(p) for p in descendants(s.pid))):
                break
            await asyncio.sleep(1.0)
        await asyncio.sleep(2.0)
        print(f"settled {time.perf_counter() - settle:.0f} s after the last action; {load_line()}", flush=True)
        run.sample(s, t0)

        status = await s.status()
        print("processes alive under the server:", flush=True)
        kids = [p for p in descendants(s.pid) if alive(p)]
        for pid in kids:
            print(f"  {pid}: {what_is(pid, status)}  [{cmdline(pid)[:110]}]", flush=True)
        unaccounted = [p for p in kids if "UNACCOUNTED" in what_is(p, status)]
        zombies = [p for p in descendants(s.pid) if not alive(p)]
        print(f"  {len(kids)} alive, {len(unaccounted)} unaccounted, {len(zombies)} zombies", flush=True)
        print(f"compile: {({k: v for k, v in status.get('compile', {}).items() if k != 'targets'})}", flush=True)
        print(f"checks: {status['checks']}; staleResultsDropped: {status.get('staleResultsDropped')}", flush=True)

        final_stale = []
        for uri in uris:
            latest = max(v for _, v in run.sent[uri])
            pubs = s.published.get(uri, [])
            last = pubs[-1].version if pubs else None
            if last != latest:
                final_stale.append((uri.rsplit("/", 1)[-1], last, latest))
        print(f"stale results: {len(final_stale)} files whose last publish is not their latest version "
              f"{final_stale[:5]}; {run.stale_in_flight(s)} publishes of a superseded version while editing; "
              f"{sum(len(p) for p in s.published.values())} publishes in all", flush=True)

        before = kids
        await s.stop()
        await asyncio.sleep(2.0)
        left = [p for p in before if alive(p)]
        print(f"after shutdown: {len(left)} of its {len(before)} processes left {left}", flush=True)
        curve = [mb for _, mb, _, _ in run.curve]
        if len(curve) >= 4:
            half = curve[len(curve) // 2:]
            print(f"server RSS: first {curve[0]:.1f}, max {max(curve):.1f}, last {curve[-1]:.1f} MiB; second half "
                  f"range {min(half):.1f}-{max(half):.1f} MiB", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to drive the server (default 30)")
    parser.add_argument("--files", type=int, default=50, help="kernel files in the workspace (default 50)")
    parser.add_argument("--pace", type=float, default=1.0, help="seconds between actions (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    asyncio.run(soak(args.minutes, args.files, args.pace, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
