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
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from . import __version__
from .api import (
    API_VERSION,
    AnalyzeResult,
    ApiError,
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

    async def call(fn, *args, runs_code: bool = True, **kwargs):
        """`fn` in a worker thread; calls that run the project's code wait for one of the `max_parallel` slots,
        so that a few long checks do not hold up analyses and cached compiles."""
        try:
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), limiter=limiter if runs_code else None)
        except ApiError as exc:
            raise ToolError(str(exc)) from None

    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
    code_running = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)

    @server.tool(annotations=read_only)
    async def analyze(path: str | None = None, source: str | None = None) -> AnalyzeResult:
        """Static findings of a Triton or NKI file (rule code, severity, message, 1-based line and column, and a fix
        where one exists). Give `path` (inside the workspace) or `source` (the file's text). Runs no code."""
        return await call(workspace.analyze, path, source, runs_code=False)

    @server.tool(annotations=read_only)
    async def compile(source: str | None = None, path: str | None = None, kernel: str | None = None,
                      targets: list[str] = ["sm_90"], config: dict[str, Any] | None = None,  # noqa: B006
                      ir: list[str] = []) -> CompileResult:  # noqa: B006
        """Compile kernels ahead of time for GPU targets (sm_80, sm_90, sm_100, gfx942, ...) without a GPU: compile
        errors at their lines, and registers, spills, shared memory and occupancy per target and configuration.
        `config` pins parameter types or constexpr values the file does not give ({"BLOCK_SIZE": 256,
        "x_ptr": "*fp16"}); `ir` asks for stages (ttir, ttgir, llir, ptx, amdgcn). Runs none of the file's code."""
        result = await call(workspace.compile, path, source, kernel=kernel, targets=targets, config=config, ir=ir,
                            runs_code=False)
        remember("compile", {c.kernel for c in result.configs}, result)
        return result

    @server.tool(annotations=code_running)
    async def check(source: str | None = None, path: str | None = None, kernel: str | None = None) -> CheckResult:
        """The hardened correctness verdict of each @spec in the file (or of `kernel`'s): the kernel against its
        PyTorch reference on several shapes and dtypes, with checks that refuse launchers that skip the kernel,
        fall back to torch, cache, race or read out of bounds. Status "correct" only when every case matches.
        Runs the file's code (needs a trusted folder)."""
        result = await call(workspace.check, path, source, kernel=kernel)
        remember("check", {v.kernel for v in result.verdicts}, result)
        return result

    @server.tool(annotations=code_running)
    async def measure(source: str | None = None, path: str | None = None, kernel: str | None = None,
                      targets: list[str] = ["H200"]) -> MeasureResult:  # noqa: B006
        """Latency of each @spec'd kernel at its bench shapes: measured on this machine's GPU (with the reference,
        the speedup, and the achieved FLOP/s and bytes/s against the GPU's roofs for the work counted under the
        interpreter: `fraction_of_roofline`, with `work_estimated` where that count is itself an estimate), or
        without a GPU the roofline estimate for `targets` (labelled as an estimate, with the bound and the
        model's fraction of the roofline). Runs the file's code (needs a trusted folder)."""
        result = await call(workspace.measure, path, source, kernel=kernel, targets=targets)
        remember("measure", {e.kernel for e in result.entries}, result)
        return result

    @server.tool(annotations=code_running)
    async def tune(kernel: str, source: str | None = None, path: str | None = None, target: str = "H200",
                   budget: int = 48) -> TuneResult:
        """Tiling search for `kernel` on `target`: up to `budget` configurations (block sizes, num_warps,
        num_stages) ranked by the model, timed where there is a GPU; the winner is verified with the checker and
        returned with the edit that would apply it (nothing is applied). Runs the file's code."""
        result = await call(workspace.tune, path, source, kernel=kernel, target=target, budget=budget)
        remember("tune", {kernel}, result)
        return result

    @server.tool(annotations=code_running)
    async def compare(candidates: list[Candidate], kernel: str | None = None, baseline: str | None = None,
                      target: str = "H200") -> CompareResult:
        """Check each candidate file with the hardened verdict and rank those that pass by latency (measured on a
        GPU, else estimated for `target`), with the speedup against `baseline` (default: the first candidate).
        Every candidate that fails a check ranks after every passing one, with its reason. Runs their code."""
        return await call(workspace.compare, [c.model_dump(exclude_none=True) for c in candidates], kernel=kernel, baseline=baseline,
                          target=target)

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
            "2. Write the plan: how the Triton blocks map to NKI tiles (partition dimension at most 128, PSUM "
            "limits for matmuls), which loads and stores become nl.load / nl.store, which reductions change.\n"
            "3. Write the NKI kernel in a new file next to the original, keeping the same reference.\n"
            "4. Call `analyze` on the new source and fix every NK finding.\n"
            "5. Call `propose_edit` for the new file; say plainly what could not be verified here (NKI kernels "
            "run only where the Neuron tools are installed).")

    return server


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
            server.run("stdio")
            return
        import uvicorn
        from mcp.server.transport_security import TransportSecuritySettings

        host, port = http
        # The SDK's own Host check knows only loopback names; HttpGuard makes the same check for every address.
        app = server.streamable_http_app(
            host=host, transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        guarded = HttpGuard(app, allowed_hosts(host, port, list(hosts)), auth_token)
        uvicorn.Server(uvicorn.Config(guarded, host=host, port=port, log_level="warning")).run()


__all__ = ["API_VERSION", "Candidate", "build_server", "run"]
