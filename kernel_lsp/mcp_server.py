"""`kernel-lsp mcp`: the engine as a Model Context Protocol server, for coding agents (docs/agents.md).

A thin adapter over `kernel_lsp.api`: every tool is one `Workspace` operation, its result type is the tool's
output schema, and bad input comes back as a tool error with the API's message (the server carries on). Tools
that run the workspace's code (check, measure, tune, compare and the verification of proposals) run only when the
folder is trusted or the server was started with `--allow-run`: the agent cannot grant that itself. At most
`--max-parallel` of them run at once (analyses and compiles do not wait for them); each checking process has the
check timeout and `--memory-mb`.

Resources: the rule catalogue, the hardware table, and each kernel's last report. Prompts: optimize a kernel,
port a kernel to NKI.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
import ast
import inspect
import io
import tokenize
from dataclasses import asdict
from typing import Any, Literal

import anyio
import pydantic
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError, ToolAnnotations
from pydantic import BaseModel, Field

from analyzers.hardware import DEVICES
from analyzers.source import parse_python
from analyzers.rules.verification import VERDICT_CODES
from analyzers.targets import TARGETS

from . import __version__, api
from .api import (
    API_VERSION,
    AnalyzeResult,
    ApiError,
    BatchStatus,
    CheckResult,
    CompareResult,
    CompileResult,
    MeasureResult,
    ProposalResult,
    TuneResult,
    Workspace,
)

INSTRUCTIONS = """\
kernel-lsp checks GPU kernels (Triton first) in the workspace {root}.
Loop: analyze (static findings, instant) -> compile (errors, registers, spills per GPU target; no GPU needed) ->
check (the hardened verdict against the PyTorch reference in the file's @spec) -> measure (GPU time, or a labelled
roofline estimate) -> compare candidates -> propose_edit (a diff for a person to accept; files are never written).
A verdict other than "correct" means the kernel is wrong or the launcher cheats; fix the kernel, not the check.
Running code: {run}."""


class Candidate(BaseModel):
    name: str = Field(description="a short name for this candidate, unique in the call")
    source: str = Field(description="the whole file: kernel, launcher, reference and @spec")
    path: str | None = Field(default=None, description="where the file would live in the workspace (for imports "
                             "of its neighbouring modules); it is not written")
    timeout_s: float | None = Field(default=None, gt=0, le=3600, description="this candidate's own time limit "
                                    "per spec for its check, in seconds (default: the server's check timeout)")


# How often a long call tells the client it is still working (MCP progress notifications).
HEARTBEAT_S = 2.0

IR_STAGES = Literal["ttir", "ttgir", "llir", "ptx", "amdgcn"]
COMPILE_TARGETS = Literal[tuple(TARGETS)]  # type: ignore[valid-type]  # the canonical names: sm_80 ... gfx950
ESTIMATE_TARGETS = Literal[tuple([*DEVICES, *TARGETS])]  # type: ignore[valid-type]  # devices, or compile targets
# Closed vocabularies of the result types, as enums in the tools' output schemas (type -> field -> values).
ENUMS: dict[str, dict[str, list[str]]] = {
    "VerdictInfo": {"status": ["correct", *VERDICT_CODES]},
    "CandidateResult": {"status": ["correct", *VERDICT_CODES], "latency_source": ["measured", "estimate"]},
    "CandidateState": {"state": ["queued", "running", "done", "cancelled"], "status": ["correct", *VERDICT_CODES]},
    "CompareResult": {"source": ["measured", "estimate"]},
    "LatencyEntry": {"source": ["measured", "estimate"]},
    "MeasureResult": {"source": ["measured", "estimate"]},
    "Finding": {"severity": ["error", "warning", "information", "hint"]},
}


def build_server(workspace: Workspace, *, max_parallel: int = 2) -> MCPServer:
    """The MCP server over `workspace`."""
    run_state = ("allowed (the folder is trusted)" if workspace.trusted else
                 "allowed (--allow-run)" if workspace.allow_run else
                 "NOT allowed: the folder is not trusted, so check, measure, tune and compare answer with an error")
    server = MCPServer("kernel-lsp", version=__version__, log_level="WARNING",
                       instructions=INSTRUCTIONS.format(root=workspace.root, run=run_state))
    limiter = anyio.CapacityLimiter(max(1, max_parallel))
    reports: dict[str, dict[str, Any]] = {}  # kernel -> {"check": ..., "measure": ..., ...}: the last of each
    reports_lock = threading.Lock()

    def remember(kind: str, kernels: set[str], result: Any) -> None:
        data = result.to_dict()
        with reports_lock:
            for k in kernels:
                reports.setdefault(k, {})[kind] = data

    async def call(fn, *args, runs_code: bool = True, ctx: Context | None = None, what: str = "working",
                   cancellable: bool = False, steps: bool = False, **kwargs):
        """`fn` in a worker thread; calls that run the project's code wait for one of the `max_parallel` slots,
        so that a few long checks do not hold up analyses and cached compiles. With `cancellable`, `fn` gets a
        `cancel` event: a cancelled request (notifications/cancelled, or the client gone) sets it, which kills the
        checking processes, and the slot is free at once. With `ctx`, the client hears progress while it runs:
        `steps` passes `fn` a `progress(done, total, message)` callback, else a heartbeat with the seconds spent."""
        cancel = threading.Event()
        reported: list[tuple[float, float | None, str]] = []  # from the worker thread, sent by the heartbeat
        if cancellable:
            kwargs["cancel"] = cancel
        if steps:
            kwargs["progress"] = lambda done, total, message: reported.append((float(done), float(total),
                                                                               str(message)))
        started = time.monotonic()

        hearing = ctx is not None and ctx.request_context.meta is not None and \
            ctx.request_context.meta.get("progress_token") is not None
        sent = [0]

        async def flush() -> None:
            while sent[0] < len(reported):
                done, total, message = reported[sent[0]]
                sent[0] += 1
                await ctx.report_progress(done, total, message)  # type: ignore[union-attr]

        async def heartbeat() -> None:
            first = not steps  # a heartbeat says at once that the work started
            while True:
                if not first:
                    await anyio.sleep(HEARTBEAT_S if not steps else 0.25)
                first = False
                try:
                    if steps:
                        await flush()
                    else:
                        seconds = time.monotonic() - started
                        await ctx.report_progress(round(seconds, 1), None,  # type: ignore[union-attr]
                                                  f"{what}: {seconds:.0f} s")
                except Exception:  # noqa: BLE001 - a client that cannot hear progress still gets the result
                    return

        async def work():
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), abandon_on_cancel=cancellable)

        failed: list[BaseException] = []  # raised outside the task group, which would wrap it in a group
        result = None
        try:
            async with anyio.create_task_group() as tg:
                if hearing:
                    tg.start_soon(heartbeat)
                try:
                    if runs_code:
                        async with limiter:
                            result = await work()
                    else:
                        result = await work()
                except Exception as exc:  # noqa: BLE001 - re-raised below, as itself
                    failed.append(exc)
                finally:
                    tg.cancel_scope.cancel()
            if failed:
                raise failed[0]
            if hearing and steps:
                try:
                    await flush()  # the last steps, before the result
                except Exception:  # noqa: BLE001 - as in heartbeat
                    pass
            return result
        except ApiError as exc:
            raise ToolError(str(exc)) from None
        except anyio.get_cancelled_exc_class():
            cancel.set()  # the thread is left behind; its checking processes die now
            raise

    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
    code_running = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)

    @server.tool(annotations=read_only)
    async def analyze(path: str | None = None, source: str | None = None) -> AnalyzeResult:
        """Static findings of a Triton or NKI file (rule code, severity, message, 1-based line and column, and a fix
        where one exists). Give `path` (inside the workspace) or `source` (the file's text). Runs no code."""
        return await call(workspace.analyze, path, source, runs_code=False)

    @server.tool(annotations=read_only)
    async def compile(source: str | None = None, path: str | None = None, kernel: str | None = None,
                      targets: list[COMPILE_TARGETS] = ["sm_90"],  # type: ignore[valid-type]  # noqa: B006
                      config: dict[str, Any] | None = None,
                      ir: list[IR_STAGES] = []) -> CompileResult:  # noqa: B006
        """Compile kernels ahead of time for GPU targets (sm_80, sm_90, sm_100, gfx942, ...) without a GPU: compile
        errors at their lines, and registers, spills, shared memory and occupancy per target and configuration.
        `config` pins parameter types or constexpr values the file does not give ({"BLOCK_SIZE": 256,
        "x_ptr": "*fp16"}); `ir` asks for stages (ttir, ttgir, llir, ptx, amdgcn). Runs none of the file's code."""
        result = await call(workspace.compile, path, source, kernel=kernel, targets=targets, config=config, ir=ir,
                            runs_code=False)
        remember("compile", {c.kernel for c in result.configs}, result)
        return result

    @server.tool(annotations=code_running)
    async def check(ctx: Context, source: str | None = None, path: str | None = None,
                    kernel: str | None = None) -> CheckResult:
        """The hardened correctness verdict of each @spec in the file (or of `kernel`'s): the kernel against its
        PyTorch reference on several shapes and dtypes, with checks that refuse launchers that skip the kernel,
        fall back to torch, cache, race or read out of bounds. Status "correct" only when every case matches.
        Runs the file's code (needs a trusted folder)."""
        result = await call(workspace.check, path, source, kernel=kernel, ctx=ctx, what="checking",
                            cancellable=True)
        remember("check", {v.kernel for v in result.verdicts}, result)
        return result

    @server.tool(annotations=code_running)
    async def measure(ctx: Context, source: str | None = None, path: str | None = None, kernel: str | None = None,
                      targets: list[ESTIMATE_TARGETS] = ["H200"]  # type: ignore[valid-type]  # noqa: B006
                      ) -> MeasureResult:
        """Latency of each @spec'd kernel at its bench shapes: measured on this machine's GPU (with the reference,
        the speedup, and the achieved FLOP/s and bytes/s against the GPU's roofs for the work counted under the
        interpreter: `fraction_of_roofline`, with `work_estimated` where that count is itself an estimate), or
        without a GPU the roofline estimate for `targets` (labelled as an estimate, with the bound and the
        model's fraction of the roofline). Runs the file's code (needs a trusted folder)."""
        result = await call(workspace.measure, path, source, kernel=kernel, targets=targets, ctx=ctx,
                            what="timing", cancellable=True)
        remember("measure", {e.kernel for e in result.entries}, result)
        return result

    @server.tool(annotations=code_running)
    async def tune(ctx: Context, kernel: str, source: str | None = None, path: str | None = None,
                   target: str = "H200", budget: int = 48) -> TuneResult:
        """Tiling search for `kernel` on `target`: up to `budget` configurations (block sizes, num_warps,
        num_stages) ranked by the model, timed where there is a GPU; the winner is verified with the checker and
        returned with the edit that would apply it (nothing is applied). Progress per step (percent done);
        cancelling stops the search and its processes. Runs the file's code."""
        def progress(message: str, fraction: float, report: Any = None) -> None:
            if report is not None:
                report(round(100 * max(0.0, min(1.0, fraction)), 1), 100.0, message)

        result = await call(_with_progress(workspace.tune, progress), path, source, kernel=kernel, target=target,
                            budget=budget, ctx=ctx, cancellable=True, steps=True)
        remember("tune", {kernel}, result)
        return result

    @server.tool(annotations=code_running)
    async def compare(ctx: Context, candidates: list[Candidate], kernel: str | None = None,
                      baseline: str | None = None, target: str = "H200") -> CompareResult:
        """Check each candidate file with the hardened verdict and rank those that pass by latency (measured on a
        GPU, else estimated for `target`), with the spread, the speedup against `baseline` (default: the first
        candidate), ties where spreads overlap, and a rank-based reward within the group (`reward`, `advantage`,
        `group`). Every candidate that fails a check, games it or has no verified latency ranks after every
        passing one at the reward floor, with its reason. Progress per candidate; cancelling kills the checks.
        Runs their code. For many candidates, `submit` and `poll`."""
        # The API runs the candidates in its own threads; the slots bound the calls, as for check.
        return await call(workspace.compare, [c.model_dump(exclude_none=True) for c in candidates], kernel=kernel,
                          baseline=baseline, target=target, ctx=ctx, cancellable=True, steps=True)

    @server.tool(annotations=code_running)
    async def submit(candidates: list[Candidate], kernel: str | None = None, baseline: str | None = None,
                     target: str = "H200") -> BatchId:
        """Start `compare` on a batch of candidates in the background and answer at once with its id. `poll`
        says how far it is (each candidate queued, running, done or cancelled) and, once every candidate is done,
        gives the same ranking and rewards as `compare`; `cancel_batch` stops it. Each candidate may carry its
        own `timeout_s`. Runs their code (needs a trusted folder)."""
        batch = await call(workspace.submit, [c.model_dump(exclude_none=True) for c in candidates], kernel=kernel,
                           baseline=baseline, target=target, runs_code=False)
        return BatchId(batch=batch)

    @server.tool(annotations=read_only)
    async def poll(batch: str) -> BatchStatus:
        """Where a batch from `submit` stands: per candidate its state and, once done, its verdict's status;
        `result` (the ranking with rewards, as `compare` gives) when `finished`."""
        return await call(workspace.poll, batch, runs_code=False)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True,
                                             openWorldHint=False))
    async def cancel_batch(batch: str) -> BatchStatus:
        """Stop a batch from `submit`: queued candidates never start and running ones have their checking
        processes killed at once. Returns the batch's status."""
        return await call(workspace.cancel, batch, runs_code=False)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
    async def propose_edit(path: str, new_source: str, ctx: Context) -> ProposalResult:
        """Propose `new_source` as the new text of `path`: verified (static analysis, and the checker when the
        folder's code may run), then written under .kernel-lsp/proposals/ (a unified diff, and what the editor
        needs to offer it) for a person to review and accept in the editor. The file itself is never changed."""
        return await call(workspace.propose_edit, path, new_source, proposer=_client_name(ctx))

    # --- resources ---------------------------------------------------------------------------------------------

    @server.resource("kernel-lsp://rules", name="rules", mime_type="application/json",
                     description="Every rule: code, name, severity, language, summary, whether a fix exists")
    def rules() -> str:
        from analyzers.rules import RULES

        return json.dumps([{"code": r.code, "name": r.name, "severity": r.severity.name.lower(),
                            "language": r.language, "summary": r.summary, "fixable": r.fixable}
                           for r in sorted(RULES.values(), key=lambda r: r.code)], indent=1)

    @server.resource("kernel-lsp://hardware", name="hardware", mime_type="application/json",
                     description="The device table the estimates use, each number with its source")
    def hardware() -> str:
        from analyzers.hardware import DEVICES

        return json.dumps({name: asdict(hw) for name, hw in DEVICES.items()}, indent=1)

    @server.resource("kernel-lsp://report/{kernel}", name="kernel-report", mime_type="application/json",
                     description="The last compile, check, measure and tune results of a kernel in this session")
    def report(kernel: str) -> str:
        with reports_lock:
            found = reports.get(kernel)
            if found is None:
                known = ", ".join(sorted(reports)) or "none yet"
                raise ResourceError(f"no report for {kernel} in this session (kernels with one: {known})")
            return json.dumps(found, indent=1)

    # --- prompts -----------------------------------------------------------------------------------------------

    @server.prompt(name="optimize_kernel", description="Plan, then make a kernel faster without breaking it")
    def optimize_kernel(path: str, kernel: str) -> str:
        return (
            f"Make the Triton kernel `{kernel}` in {path} faster without changing what it computes.\n\n"
            "Plan first, then act:\n"
            f"1. Call `analyze` on {path} and fix every error and warning that concerns `{kernel}`.\n"
            f"2. Call `compile` for the targets that matter (sm_90 by default) and note registers, spills, shared "
            "memory and occupancy per configuration.\n"
            f"3. Call `check` on {path}: if `{kernel}` has no @spec, write one (reference, ragged shapes, "
            "bench_shapes) and check again. Do not go on until the verdict is \"correct\".\n"
            f"4. Call `measure` (or `tune` with kernel=\"{kernel}\") to get the baseline latency and what bounds it.\n"
            "5. Write a plan: two or three candidate rewrites, each with the reason it should be faster.\n"
            "6. Call `compare` with the original as the baseline and each candidate as a whole file. A candidate "
            "that is not \"correct\" is out, whatever its speed.\n"
            "7. Call `propose_edit` with the best passing candidate; report its rank, verdict and speedup, and "
            "say whether the latency was measured or estimated.")

    @server.prompt(name="port_to_nki", description="Plan, then port a Triton kernel to AWS NKI")
    def port_to_nki(path: str, kernel: str) -> str:
        return (
            f"Port the Triton kernel `{kernel}` in {path} to AWS NKI.\n\n"
            "Plan first, then act:\n"
            f"1. Call `analyze` on {path} and `check` it, so the Triton version's behaviour is known to be correct.\n"
            "2. Write the plan: how the Triton blocks map to NKI tiles (partition dimension at most 128, one 2 KiB "
            "PSUM bank per matmul tile, moving free size at most 512), which loads and stores become DMA copies, "
            "which reductions change, which loops carry a value (nl.sequential_range there, not affine_range).\n"
            "3. Write the port as one whole file: the NKI kernel (current API: `import nki`, `nki.isa` instructions "
            f"that write into `dst`) and a copy of `{kernel}`'s @spec with the same reference, naming the NKI kernel "
            "as `kernel=` and its launcher as `launcher=`.\n"
            "4. Call `analyze` with that text as `source` and fix every NK finding.\n"
            "5. Call `check` with the same `source`: it runs in kernel-lsp's NKI model on the CPU (no Neuron device "
            "needed; the verdict says \"(kernel-lsp NKI model)\", or \"(nki.simulate)\" where AWS's package is "
            "installed). A \"rule-broken\" verdict names the NeuronCore rule and its line: fix it. Go on only when "
            "the verdict is \"correct\"; then `measure` gives its Trainium2 estimate.\n"
            "6. `propose_edit` only changes files that exist, so it cannot create the new file: give the person the "
            f"file's full text and a name for it (`{kernel}_nki.py` beside {path}), with the verdict and the "
            "estimate, and say what the model does not cover (docs/nki-model.md: timing on a device, the "
            "compiler's own checks, engine scheduling).")

    _describe_outputs(server)
    return server


def _field_docs() -> dict[str, dict[str, str]]:
    """The result types' own documentation: per class of kernel_lsp.api, each field's comment (on its line, else
    the comment lines just above it) and the class docstring under "", so the output schemas say what the types
    say."""
    text = inspect.getsource(api)
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    docs: dict[str, dict[str, str]] = {}
    for node in parse_python(text).body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields: dict[str, str] = {}
        doc = ast.get_docstring(node)
        if doc:
            fields[""] = " ".join(doc.split())
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            said = comments.get(stmt.lineno) or comments.get(stmt.end_lineno or stmt.lineno)
            if not said:
                above: list[str] = []
                i = stmt.lineno - 1
                while i in comments:
                    above.insert(0, comments[i])
                    i -= 1
                said = " ".join(above)
            if said:
                fields[stmt.target.id] = said
        docs[node.name] = fields
    return docs


def _describe_outputs(server: MCPServer) -> None:
    """Descriptions and enums for the tools' output schemas, from the result types (pydantic leaves them bare)."""
    docs = _field_docs()

    def fill(name: str, schema: dict[str, Any]) -> None:
        fields = docs.get(name, {})
        if "" in fields and "description" not in schema:
            schema["description"] = fields[""]
        for prop, sub in schema.get("properties", {}).items():
            if prop in fields and "description" not in sub:
                sub["description"] = fields[prop]
            values = ENUMS.get(name, {}).get(prop)
            if values:
                target = next((o for o in sub.get("anyOf", []) if o.get("type") == "string"), sub)
                target["enum"] = list(dict.fromkeys(values))

    for tool in server._tool_manager.list_tools():  # noqa: SLF001 - the schemas are the SDK's own dicts
        schema = tool.output_schema
        if not schema:
            continue
        fill(schema.get("title", ""), schema)
        for name, sub in schema.get("$defs", {}).items():
            fill(name, sub)


def _with_progress(fn, adapt):
    """`fn` taking the `progress(done, total, message)` that `call` passes, as `adapt` turns it into `fn`'s own."""
    def wrapped(*args, progress=None, **kwargs):
        return fn(*args, progress=lambda *a: adapt(*a, report=progress), **kwargs)
    return wrapped


class BatchId(BaseModel):
    batch: str = Field(description="the batch's id, for poll and cancel_batch")


def _client_name(ctx: Context) -> str:
    """The name the agent's MCP client gave itself at initialization ("claude-code", ...), for the editor to say
    whose proposal it offers."""
    try:
        info = ctx.session.client_params.client_info
        name = " ".join(str(info.name).split())[:60]
    except AttributeError:
        return "an MCP client"
    return name or "an MCP client"


class HttpGuard:
    """ASGI middleware in front of the streamable HTTP app: a request is served only when its Host is one this
    server answers to (a DNS-rebinding page sends its own name), it carries no Origin (agents are not web pages;
    a browser sends one with every cross-site request) and, when the server has a token, it sends
    `Authorization: Bearer TOKEN`. Anything else gets 403 (or 401) and reaches no tool."""

    def __init__(self, app: Any, hosts: set[str] | None, token: str | None):
        self.app, self.hosts, self.token = app, hosts, token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        host = headers.get("host", "").lower()
        refused = None
        if self.hosts is not None and host not in self.hosts:
            refused = 403, f"Host {host or '(none)'} is not this server's"
        elif "origin" in headers:
            refused = 403, "requests from web pages (with an Origin header) are refused"
        elif self.token is not None and not _bearer_matches(headers.get("authorization"), self.token):
            refused = 401, "this server needs Authorization: Bearer <the --auth-token>"
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, text = refused
        body = f"kernel-lsp mcp: {text}\n".encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _bearer_matches(header: str | None, token: str) -> bool:
    import hmac

    return header is not None and hmac.compare_digest(header.encode(), f"Bearer {token}".encode())


def allowed_hosts(host: str, port: int, extra: Sequence[str] = ()) -> set[str] | None:
    """The Host header values a server bound to `host`:`port` answers to: the loopback names for a loopback
    address, the address itself otherwise, and `extra` (names clients use for a wildcard address). None: any
    (a wildcard address without `extra`, where the token is what keeps others out)."""
    from .transport import is_loopback

    # NAME or NAME:PORT (a client behind a proxy may use another port).
    names = {h.lower() if h.rpartition(":")[2].isdigit() and not h.endswith("]") else f"{h.lower()}:{port}"
             for h in extra}
    if is_loopback(host):
        return names | {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
    if host in ("0.0.0.0", "::", ""):
        return names or None
    return names | {f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"}


def run(root: str, *, http: tuple[str, int] | None = None, allow_run: bool = False, max_parallel: int = 2,
        memory_mb: int = 4096, auth_token: str | None = None, hosts: Sequence[str] = ()) -> None:
    """Serve over stdio, or streamable HTTP at `http` (host, port), until the client goes away. Over HTTP every
    request passes `HttpGuard` (Host, Origin, and the bearer token when `auth_token` is given)."""
    with Workspace(root, allow_run=allow_run, max_parallel=max_parallel, memory_mb=memory_mb) as workspace:
        server = build_server(workspace, max_parallel=max_parallel)
        if not http:
            anyio.run(_serve_stdio, server)
            return
        import uvicorn
        from mcp.server.transport_security import TransportSecuritySettings

        host, port = http
        # The SDK's own Host check knows only loopback names; HttpGuard makes the same check for every address.
        app = server.streamable_http_app(
            host=host, transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        guarded = HttpGuard(app, allowed_hosts(host, port, list(hosts)), auth_token)
        uvicorn.Server(uvicorn.Config(guarded, host=host, port=port, log_level="warning")).run()


# --- stdio that answers every message ---------------------------------------------------------------------------

def _error_reply(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line the SDK could not take as a message: a parse error (-32700) when it is not
    JSON, else an invalid request (-32600) answered with the request's id where it has one, so that the client's
    call ends instead of waiting forever."""
    raw: Any = None
    kind = ""
    errors = exc.errors() if isinstance(exc, pydantic.ValidationError) else []
    if errors:
        kind, raw = errors[0].get("type", ""), errors[0].get("input")
    message: Any = None
    if kind == "json_invalid" and isinstance(raw, str):
        try:
            message = json.loads(raw)  # Python's parser takes what the SDK's strict one refuses
        except ValueError:
            return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(
                code=-32700, message="Parse error: the line is not JSON", data=str(errors[0].get("msg"))))
        detail = "the message holds a lone UTF-16 surrogate (such as \\ud800), which is not a Unicode character"
        if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in json.dumps(message, ensure_ascii=False)):
            detail = str(errors[0].get("msg"))
    else:  # each failed field names its own input; the message is the one that is an object
        message = next((e.get("input") for e in errors if isinstance(e.get("input"), dict)
                        and ("id" in e["input"] or "method" in e["input"])), raw)
        detail = "not a JSON-RPC 2.0 request, notification or response" + (
            f" ({errors[0].get('msg')})" if errors else "")
    ident = message.get("id") if isinstance(message, dict) else None
    if not isinstance(ident, (str, int)) or isinstance(ident, bool):
        ident = None
    return JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=-32600, message=f"Invalid request: {detail}"))


async def _serve_stdio(server: MCPServer) -> None:
    """The SDK's stdio transport, with a reply to every line it cannot read (the SDK drops them silently, and a
    client whose request had an id would wait for ever)."""
    lowlevel = server._lowlevel_server  # noqa: SLF001 - the SDK's own run_stdio_async does exactly this
    async with stdio_server() as (read_stream, write_stream):
        forward, inner = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            async with forward:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(SessionMessage(_error_reply(item)))
                    else:
                        await forward.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            await lowlevel.run(inner, write_stream, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()


__all__ = ["API_VERSION", "BatchId", "Candidate", "build_server", "run"]
