"""Jobs as Ray tasks on an existing cluster, with a local executor to fall back on (docs/scale.md).

The Ray driver lives in a process of its own (the bridge), never in the server or the CLI: a driver whose cluster
goes away is ended by Ray itself (about a minute after it loses the cluster's control store), and that must not
take the front end with it. The bridge submits each job as a task with the job's resource request, at most as
many of one resource shape at once as the cluster can run (so a submitted task starts at once and its deadline can
count from submission), kills a task that overruns its timeout (`ray.cancel(force=True)` ends the worker process
on its node), and lets Ray retry a task whose worker or node died (`max_retries`). It watches the cluster's
address; when that stops answering, or the bridge itself dies, every unfinished job and every later one runs on the
local executor, and the user is told once.

Ray is imported only in the bridge and on the nodes (`pip install kernel-lsp[ray]`); nothing else needs it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import multiprocessing
import os
import pickle
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import ModuleType
from typing import Any, NoReturn

from .executor import CPU, Executor, Resources
from .pool import Outcome, Status, _call

log = logging.getLogger(__name__)

_CTX = multiprocessing.get_context("spawn")
START_TIMEOUT_S = 60.0  # connecting to the cluster
START_ALLOWANCE_S = 30.0  # a task's deadline: its timeout plus this, for a Ray worker to start and import
HEARTBEAT_S = 1.0
LOST_AFTER = 3  # heartbeats in a row without an answer from the cluster's address
MAX_RETRIES = 2  # a task whose worker or node died is run again at most this many times
_FALLBACK = object()  # a job's future: run it locally instead


# --- on the node -------------------------------------------------------------------------------------------------


def run_on_node(fn_path: str, payload: bytes) -> tuple:
    """One job in a Ray worker: the same call a local pool worker makes, plus where it ran."""
    import ray

    started = time.monotonic()
    _, status, data = _call({}, 0, fn_path, payload)
    context = ray.get_runtime_context()
    where = f"{ray.util.get_node_ip_address()} ({context.get_node_id()[:8]})"
    return status, data, where, time.monotonic() - started


# --- the bridge process ------------------------------------------------------------------------------------------


@dataclass
class _Task:
    id: int
    fn_path: str
    payload: bytes
    timeout: float
    resources: Resources
    priority: int
    deadline: float = 0.0
    timed_out: bool = False
    ref: Any = None


def _capacity(nodes: list[dict]) -> dict[tuple, float]:
    """How many jobs of each resource shape the live nodes can run at once (CPU counted per whole CPU)."""
    out: dict[tuple, float] = {("cpu",): 0.0, ("gpu", None): 0.0}
    for node in nodes:
        if not node.get("Alive"):
            continue
        res = node.get("Resources") or {}
        out[("cpu",)] += res.get("CPU", 0.0)
        gpus = res.get("GPU", 0.0)
        out[("gpu", None)] += gpus
        for name in res:
            if name.startswith("accelerator_type:"):
                shape = ("gpu", name.split(":", 1)[1])
                out[shape] = out.get(shape, 0.0) + gpus
    return out


def _host_port(address: str) -> tuple[str, int] | None:
    rest = address.split("://", 1)[-1]
    host, _, port = rest.rpartition(":")
    try:
        return (host or "127.0.0.1"), int(port)
    except ValueError:
        return None


def _answers(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=HEARTBEAT_S):
            return True
    except OSError:
        return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _exit_with(parent: BaseProcess) -> None:
    parent.join()
    os._exit(1)


def _bridge_main(conn: Connection, address: str | None, max_retries: int, log_path: str,
                 start_allowance: float) -> None:
    # Ray and its C++ core write to stdout and stderr: into the bridge's log, not the CLI's report or the LSP stream.
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    parent = multiprocessing.parent_process()
    if parent is not None:  # the front end died without closing us: do not keep a cluster's tasks running
        threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    explicit = _host_port(target) if target != "auto" else None
    if explicit is not None and not _answers(explicit):  # Ray itself would keep trying for a minute or more
        conn.send(("init_error", f"nothing answers at {explicit[0]}:{explicit[1]}"))
        return
    try:
        import ray

        ray.init(address=target, log_to_driver=False, logging_level=logging.ERROR)
        remote = ray.remote(run_on_node)
        watched = explicit or _host_port(ray.get_runtime_context().gcs_address)
        capacity = _capacity(ray.nodes())
    except BaseException as exc:  # noqa: BLE001 - told to the front end, which runs locally instead
        conn.send(("init_error", f"{type(exc).__name__}: {_first_line(exc)}"))
        return
    conn.send(("ready", {"address": "%s:%d" % watched if watched else target,
                         "nodes": sum(1 for n in ray.nodes() if n.get("Alive")), "capacity": capacity}))
    _Bridge(conn, ray, remote, capacity, watched, max_retries, start_allowance).loop()


class _Bridge:
    def __init__(self, conn: Connection, ray: ModuleType, remote: Any, capacity: dict[tuple, float],
                 watched: tuple[str, int] | None, max_retries: int, start_allowance: float):
        self.conn, self.ray, self.remote = conn, ray, remote
        self.start_allowance = start_allowance
        self.capacity, self.watched, self.max_retries = capacity, watched, max_retries
        self.queue: list[tuple[int, int, _Task]] = []
        self.tasks: dict[int, _Task] = {}
        self.running: dict[Any, _Task] = {}  # ref -> task
        self.misses = 0
        self.next_beat = self.next_census = time.monotonic()

    def loop(self) -> None:
        while True:
            try:
                while self.conn.poll(0 if self.running else 0.05):
                    message = self.conn.recv()
                    if message is None:
                        return self._stop()
                    self._receive(message)
            except (EOFError, OSError):
                return self._stop()
            now = time.monotonic()
            if now >= self.next_beat:
                self.next_beat = now + HEARTBEAT_S
                self.misses = 0 if self.watched is None or _answers(self.watched) else self.misses + 1
                if self.misses >= LOST_AFTER and self.watched is not None:
                    self._lose(self._stopped_answering(self.watched))
            # ray.nodes() blocks for a minute once the control store is gone: only ask while its address answers.
            if now >= self.next_census and (self.watched is None or _answers(self.watched)):
                self.next_census = now + 5.0
                try:
                    self.capacity = _capacity(self.ray.nodes())
                except Exception:  # noqa: BLE001 - the heartbeat decides whether the cluster is gone
                    pass
            self._admit()
            if self.running:
                try:
                    ready, _ = self.ray.wait(list(self.running), num_returns=len(self.running), timeout=0.05)
                except Exception as exc:  # noqa: BLE001 - a client connection that broke
                    self._lose(f"the Ray cluster connection broke: {type(exc).__name__}: {_first_line(exc)}")
                for ref in ready:
                    self._finish(self.running.pop(ref))
                now = time.monotonic()
                for task in list(self.running.values()):
                    if not task.timed_out and now > task.deadline:
                        task.timed_out = True
                        self.ray.cancel(task.ref, force=True)

    def _receive(self, message: tuple) -> None:
        if message[0] == "job":
            task = _Task(*message[1:])
            self.tasks[task.id] = task
            heapq.heappush(self.queue, (task.priority, task.id, task))
        elif message[0] == "cancel":
            cancelled = self.tasks.pop(message[1], None)
            if cancelled is not None and cancelled.ref is not None:
                self.ray.cancel(cancelled.ref, force=True)

    def _admit(self) -> None:
        busy: dict[tuple, float] = {}
        for task in self.running.values():
            busy[task.resources.shape] = busy.get(task.resources.shape, 0) + self._units(task.resources)
        waiting = []
        while self.queue:
            item = heapq.heappop(self.queue)
            task = item[2]
            if task.id not in self.tasks:  # cancelled while queued
                continue
            shape, units = task.resources.shape, self._units(task.resources)
            room = self.capacity.get(shape, 0.0)
            if room < units:
                self.tasks.pop(task.id)
                what = (f"a GPU of type {task.resources.accelerator}" if task.resources.accelerator
                        else "a GPU") if task.resources.gpus else f"{task.resources.cpus:g} CPU(s)"
                self._send(("done", task.id, Status.ERROR.value, None,
                            f"the Ray cluster has no node with {what}: not run", "", 0.0, None))
                continue
            if busy.get(shape, 0) + units > room:
                waiting.append(item)
                continue
            busy[shape] = busy.get(shape, 0) + units
            r = task.resources
            task.ref = self.remote.options(
                num_cpus=r.cpus, num_gpus=r.gpus, accelerator_type=r.accelerator if r.gpus else None,
                max_retries=self.max_retries, retry_exceptions=False, name=task.fn_path.rpartition(":")[2],
            ).remote(task.fn_path, task.payload)
            task.deadline = time.monotonic() + task.timeout + self.start_allowance
            self.running[task.ref] = task
        for item in waiting:
            heapq.heappush(self.queue, item)

    @staticmethod
    def _units(r: Resources) -> float:
        return float(r.gpus) if r.gpus else r.cpus

    def _finish(self, task: _Task) -> None:
        ray = self.ray
        if self.tasks.pop(task.id, None) is None:  # cancelled: its caller has moved on
            return
        try:
            status, data, where, seconds = ray.get(task.ref)
            if status == "ok":
                reply = ("done", task.id, Status.OK.value, data, "", "", seconds, where)
            else:
                reply = ("done", task.id, Status.ERROR.value, None, "the job failed", data, seconds, where)
        except Exception as exc:  # noqa: BLE001 - every way a task ends becomes an outcome
            if task.timed_out:
                reply = ("done", task.id, Status.TIMEOUT.value, None,
                         f"no answer within {task.timeout:g} s (+{self.start_allowance:g} s to start a Ray worker); "
                         "its Ray worker was killed", "", task.timeout, None)
            elif isinstance(exc, ray.exceptions.TaskCancelledError):
                reply = ("done", task.id, Status.CANCELLED.value, None, "cancelled", "", 0.0, None)
            elif isinstance(exc, ray.exceptions.RayTaskError):
                reply = ("done", task.id, Status.ERROR.value, None, "the job failed", str(exc), 0.0, None)
            elif isinstance(exc, ray.exceptions.LocalRayletDiedError):
                # The node this driver goes through is gone (the cluster stopping, as a rule): every task in
                # flight fails the same way, though nothing went wrong with the job. The job runs locally.
                watched = self.watched
                self._lose(self._stopped_answering(watched) if watched and self._falls_silent(watched)
                           else "the Ray node on this machine that the driver goes through ended")
            elif isinstance(exc, (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError)):
                reply = ("done", task.id, Status.CRASHED.value, None,
                         f"its Ray worker died {self.max_retries + 1} times ({type(exc).__name__}); not retried again",
                         "", 0.0, None)
            else:
                reply = ("done", task.id, Status.CRASHED.value, None,
                         f"Ray did not run it: {type(exc).__name__}: {_first_line(exc)}", "", 0.0, None)
        self._send(reply)

    @staticmethod
    def _falls_silent(address: tuple[str, int]) -> bool:
        """Whether the cluster's address stops answering within the time the heartbeat gives it."""
        deadline = time.monotonic() + LOST_AFTER * HEARTBEAT_S
        while _answers(address):
            if time.monotonic() >= deadline:
                return False
            time.sleep(HEARTBEAT_S / 4)
        return True

    @staticmethod
    def _stopped_answering(address: tuple[str, int]) -> str:
        return f"the Ray cluster at {address[0]}:{address[1]} stopped answering"

    def _lose(self, why: str) -> NoReturn:
        """The front end runs every unfinished job and every later one locally, after telling the user why."""
        self._send(("lost", why))
        os._exit(0)  # ray.shutdown() could wait on the lost cluster

    def _send(self, message: tuple) -> None:
        try:
            self.conn.send(message)
        except OSError:
            os._exit(1)

    def _stop(self) -> None:
        for ref in list(self.running):
            self.ray.cancel(ref, force=True)
        os._exit(0)  # the tasks are cancelled; ray.shutdown() adds nothing but waiting


# --- the front end's side ----------------------------------------------------------------------------------------


@dataclass
class _Pending:
    future: asyncio.Future
    key: Hashable | None = None
    where: list = field(default_factory=list)


class RayExecutor:
    """Runs jobs on a Ray cluster; on a cluster that cannot be reached or is lost, on `fallback()` instead.
    `say(line)` gets what the user should read about that. `where_ran` maps a job's id (see `last_node`) to
    its node, for per-node timing spreads."""

    def __init__(self, address: str | None = None, *, fallback: Callable[[], Executor],
                 say: Callable[[str], None] | None = None, max_retries: int = MAX_RETRIES,
                 start_timeout: float = START_TIMEOUT_S, start_allowance: float = START_ALLOWANCE_S):
        self.address = address
        self.start_allowance = start_allowance
        self.max_retries = max_retries
        self.start_timeout = start_timeout
        self._make_fallback = fallback
        self._fallback: Executor | None = None
        self._say = say or (lambda line: log.warning("%s", line))
        self._state = "new"  # new -> ray | local
        self._start_lock: asyncio.Lock | None = None
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None  # to the bridge; set while the state is "ray"
        self._pending: dict[int, _Pending] = {}
        self._by_key: dict[Hashable, int] = {}
        self._ids = itertools.count()
        self.info: dict[str, Any] = {}
        self.log_path = ""
        self._keep_log = False  # a message named the log: it outlives the executor
        self.nodes_used: dict[str, int] = {}  # node -> jobs it finished
        self._counts = dict.fromkeys(["onRay", "onLocal", "errors", "timedOut", "crashed", "cancelled"], 0)

    @property
    def on_ray(self) -> bool:
        return self._state == "ray"

    def _local(self) -> Executor:
        if self._fallback is None:
            self._fallback = self._make_fallback()
        return self._fallback

    async def run(self, fn_path: str, arg: Any, *, timeout: float, priority: int = 0, key: Hashable | None = None,
                  resources: Resources = CPU, where: list | None = None) -> Outcome:
        """As `WorkerPool.run`; `where`, if given, gets the node that ran the job appended ("this machine" for a
        local run)."""
        if self._state == "new":
            await self._start()
        if self._state == "ray":
            try:
                payload = pickle.dumps(arg, pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001
                return Outcome(Status.ERROR, message="the job's argument cannot be pickled",
                               traceback=traceback.format_exc())
            if key is not None and key in self._by_key:
                self._cancel(self._by_key[key], Outcome(Status.CANCELLED, message="superseded by a newer job"))
            ident = next(self._ids)
            pending = _Pending(asyncio.get_running_loop().create_future(), key)
            self._pending[ident] = pending
            if key is not None:
                self._by_key[key] = ident
            try:
                self._to_bridge(("job", ident, fn_path, payload, float(timeout), resources, priority))
            except OSError:
                self._lost("the connection to the Ray driver process broke")
            try:
                result = await pending.future
            except asyncio.CancelledError:
                self._cancel(ident, None)
                self._counts["cancelled"] += 1
                raise
            finally:
                self._pending.pop(ident, None)
                if key is not None and self._by_key.get(key) == ident:
                    del self._by_key[key]
            if result is not _FALLBACK:
                outcome, node = result
                if where is not None and node:
                    where.append(node)
                return outcome
        self._counts["onLocal"] += 1
        if where is not None:
            where.append("this machine")
        return await self._local().run(fn_path, arg, timeout=timeout, priority=priority, key=key, resources=resources)

    async def capacity(self) -> dict[tuple, float] | None:
        """How many jobs of each resource shape the cluster runs at once (None: running on this machine)."""
        if self._state == "new":
            await self._start()
        return self.info.get("capacity") if self._state == "ray" else None

    def prestart(self) -> None:
        """Nothing to warm here: the connection starts with the first job."""

    def _cancel(self, ident: int, outcome: Outcome | None) -> None:
        pending = self._pending.get(ident)
        if pending is not None and outcome is not None and not pending.future.done():
            pending.future.set_result((outcome, None))
        if self._state == "ray":
            try:
                self._to_bridge(("cancel", ident))
            except OSError:
                pass

    def _to_bridge(self, message: tuple) -> None:
        if self._conn is None:  # stopped: the caller treats it as a broken connection
            raise OSError("the connection to the Ray driver process is closed")
        self._conn.send(message)

    async def _start(self) -> None:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._state != "new":
                return
            where = self.address or os.environ.get("RAY_ADDRESS") or "started with `ray start` on this machine"
            try:
                import ray  # noqa: F401 - only to say early that it is missing
            except ImportError:
                self._state = "local"
                self._say("Ray is not installed (pip install kernel-lsp[ray]): running on this machine instead")
                return
            handle, self.log_path = tempfile.mkstemp(prefix="kernel-lsp-ray-", suffix=".log")
            os.close(handle)
            parent_conn, child_conn = _CTX.Pipe()
            self._process = process = _CTX.Process(target=_bridge_main, name="kernel-lsp-ray",
                                                   args=(child_conn, self.address, self.max_retries, self.log_path,
                                                         self.start_allowance),
                                                   daemon=True)
            process.start()
            child_conn.close()
            self._conn = parent_conn
            ready = await asyncio.to_thread(parent_conn.poll, self.start_timeout)
            info: dict[str, Any] | None = None
            why = f"no answer within {self.start_timeout:g} s"
            if ready:
                try:
                    kind, detail = parent_conn.recv()  # ("ready", info) or ("init_error", why)
                except (EOFError, OSError):
                    why = "the Ray driver process ended" + self._log_note()
                else:
                    if kind == "ready":
                        info = detail
                    else:
                        why = detail
            if info is None:
                self._state = "local"
                self._stop_bridge()
                self._say(f"the Ray cluster ({where}) cannot be reached: {why}; running on this machine instead")
                return
            self.info = info
            self._state = "ray"
            loop = asyncio.get_running_loop()
            loop.add_reader(parent_conn.fileno(), self._on_reply)

    def _on_reply(self) -> None:
        conn = self._conn
        if conn is None:  # stopped since the reader was called
            return
        try:
            while conn.poll():
                message = conn.recv()
                if message[0] == "lost":
                    self._lost(message[1])
                    return
                _, ident, status, data, text, tb, seconds, node = message
                pending = self._pending.get(ident)
                if pending is None or pending.future.done():
                    continue
                try:
                    value = pickle.loads(data) if data is not None else None
                except Exception:  # noqa: BLE001 - e.g. a class this process cannot import
                    status, text, tb = Status.ERROR.value, "the job's result cannot be unpickled", traceback.format_exc()
                    value = None
                outcome = Outcome(Status(status), value, text, tb, seconds=seconds)
                self._count(outcome, node)
                pending.future.set_result((outcome, node))
        except (EOFError, OSError):
            self._lost("the Ray driver process ended")

    def _count(self, outcome: Outcome, node: str | None) -> None:
        if node:
            self.nodes_used[node] = self.nodes_used.get(node, 0) + 1
        name = {Status.OK: "onRay", Status.ERROR: "errors", Status.TIMEOUT: "timedOut", Status.CRASHED: "crashed",
                Status.CANCELLED: "cancelled"}[outcome.status]
        self._counts[name] += 1

    def _lost(self, why: str) -> None:
        """The cluster (or the bridge) is gone: every unfinished job and every later one runs locally."""
        if self._state != "ray":
            return
        self._state = "local"
        unfinished = [p for p in self._pending.values() if not p.future.done()]
        self._stop_bridge()
        self._say(f"{why}; {len(unfinished)} unfinished job(s) and all later ones run on this machine instead"
                  + self._log_note())
        for pending in unfinished:
            pending.future.set_result(_FALLBACK)

    def _log_note(self) -> str:
        """Where the Ray driver's log is, for a message on a failure, if it says anything; it is then kept."""
        try:
            if not self.log_path or os.path.getsize(self.log_path) == 0:
                return ""
        except OSError:
            return ""
        self._keep_log = True
        return f" (the Ray driver's log: {self.log_path})"

    def _stop_bridge(self) -> None:
        if self._conn is not None:
            try:
                asyncio.get_running_loop().remove_reader(self._conn.fileno())
            except (RuntimeError, ValueError, OSError):
                pass
            try:
                self._conn.send(None)
            except OSError:
                pass
        if self._process is not None:
            self._process.join(5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(5)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def summary(self, what: str) -> str | None:
        """One line on where `what` ran, for a batch report's messages (None: nothing ran on the cluster)."""
        done = sum(self.nodes_used.values())
        if not done:
            return None
        return (f"{done} {what} job(s) ran on the Ray cluster at {self.info.get('address')} "
                f"({len(self.nodes_used)} node(s) used of {self.info.get('nodes')})")

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"executor": "ray" if self._state == "ray" else "local (Ray fallback)"
                               if self._state == "local" else "ray (not started)", **self._counts}
        if self.info:
            out["cluster"] = {"address": self.info.get("address"), "nodes": self.info.get("nodes")}
        if self.nodes_used:
            out["nodes"] = dict(self.nodes_used)
        if self._fallback is not None:
            out["local"] = self._fallback.stats()
        return out

    async def close(self) -> None:
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_result((Outcome(Status.CANCELLED, message="the executor was closed"), None))
        if self._state == "ray":
            self._state = "closed"
            if self._conn is not None:
                try:
                    asyncio.get_running_loop().remove_reader(self._conn.fileno())
                except (ValueError, OSError):
                    pass
            await asyncio.to_thread(self._stop_bridge)
        if self._fallback is not None:
            await self._fallback.close()
        if self.log_path and not self._keep_log:  # one per executor: they would pile up in the temporary directory
            try:
                os.unlink(self.log_path)
            except OSError:
                pass
