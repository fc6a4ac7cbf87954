"""Shared helpers for the language-server benchmarks.

- `ServerSession`: spawns `python -m kernel_lsp serve` as a subprocess and drives it over stdio with a real
  LSP client (pygls' LanguageClient), using the recorded capabilities of real editors (pytest-lsp's
  profiles: VS Code 1.65.2 gets diagnostics pushed, Neovim 0.11 pulls them). It records the arrival time
  of every textDocument/publishDiagnostics notification so that latency can be measured per version.
- Synthetic workspaces built from examples/*.py: each copy has its top-level names renamed (so kernels are
  distinct, as in a real repository), and files are nested in package folders next to plain Python modules.
- `percentile`, `summarize`, `Figure` and `print_table` for reporting.

Benchmarks print figures; they never assert on them (tests do that). Every script exits 0.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import platform
import random
import re
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SERVER_CMD = [sys.executable, "-m", "kernel_lsp", "serve"]

if str(REPO) not in sys.path:  # `python bench/x.py` puts bench/ on sys.path, not the repository root
    sys.path.insert(0, str(REPO))

# pytest-lsp's recorded capability profiles of real editors.
PROFILES = {
    "push": "visual-studio-code@v1.65.2",  # textDocument/publishDiagnostics with versions
    "pull": "neovim@v0.11.0",  # textDocument/diagnostic (and workspace/diagnostic/refresh)
}


# -- statistics and reporting ------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "min": min(values) if values else float("nan"),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": max(values) if values else float("nan"),
        "mean": statistics.fmean(values) if values else float("nan"),
    }


@dataclass
class Figure:
    """One measured number with its target (pass when value < target)."""

    name: str
    value: float
    unit: str
    target: float | None = None
    detail: str = ""

    @property
    def passed(self) -> bool | None:
        if self.target is None or math.isnan(self.value):  # no target, or not measured
            return None
        return self.value < self.target

    def status(self) -> str:
        return {True: "PASS", False: "FAIL", None: "-"}[self.passed]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "target": self.target,
                "passed": self.passed, "detail": self.detail}


def fmt(value: float, unit: str) -> str:
    if math.isnan(value):
        return "n/a"
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "MB":
        return f"{value:.1f} MB"
    return f"{value:g} {unit}".strip()


def print_table(title: str, figures: Iterable[Figure], out=sys.stdout) -> None:
    figures = list(figures)
    rows = [("figure", "value", "target", "result")]
    for f in figures:
        target = f"< {fmt(f.target, f.unit)}" if f.target is not None else ""
        rows.append((f.name, fmt(f.value, f.unit), target, f.status()))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"\n{title}", file=out)
    for i, r in enumerate(rows):
        print("  " + "  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))),
              file=out)
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths), file=out)
    details = [f for f in figures if f.detail]
    for f in details:
        print(f"    {f.name}: {f.detail}", file=out)
    out.flush()


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            names = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
        if names:
            cpu = names[0]
    except OSError:
        pass
    return (f"{os.cpu_count()} CPU cores ({cpu}), Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def code_line() -> str:
    """The commit measured, and whether the server's sources differ from it (read-only git calls)."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "kernel_lsp", "analyzers"], cwd=REPO,
                               capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "commit unknown"
    return f"commit {head or 'unknown'}" + (" + uncommitted changes in kernel_lsp/analyzers" if dirty else "")


def load_line() -> str:
    """The 1/5/15-minute load averages: other processes on a 2-core machine shift every figure here."""
    try:
        one, five, fifteen = os.getloadavg()
        return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"
    except OSError:
        return "load average unknown"


def write_json(path: str | None, figures: Iterable[Figure], extra: dict | None = None) -> None:
    if not path:
        return
    data = {"machine": machine_line(), "code": code_line(), "load": load_line(),
            "figures": [f.as_dict() for f in figures], **(extra or {})}
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def rss_of(pid: int) -> dict[str, float]:
    """VmRSS / VmHWM (peak) of a process from /proc/PID/status, in MiB (the unit the server's memoryMB uses)."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    out[key] = int(rest.split()[0]) / 1024  # kB -> MiB
    except OSError:
        pass
    return out


# -- synthetic sources built from the example kernels --------------------------------------------------------

TRITON_EXAMPLES = ("vector_add.py", "fused_softmax.py", "layernorm.py", "matmul_autotune.py")
ALL_EXAMPLES = TRITON_EXAMPLES + ("buggy_kernels.py", "nki_matmul.py")
_TOP_NAME = re.compile(r"^(?:def|class)\s+([A-Za-z_]\w*)|^([A-Z_][A-Z0-9_]*)\s*=", re.MULTILINE)


def example_text(name: str) -> str:
    return (EXAMPLES / name).read_text(encoding="utf-8")


def top_level_names(text: str) -> list[str]:
    return [m.group(1) or m.group(2) for m in _TOP_NAME.finditer(text)]


def rename(text: str, suffix: str) -> str:
    """Rename every top-level function, class and constant (and their uses) by appending `_suffix`."""
    names = top_level_names(text)
    if not names:
        return text
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b")
    return pattern.sub(lambda m: f"{m.group(1)}_{suffix}", text)


def _split_example(text: str) -> tuple[str, str]:
    """(imports, body) of an example: the module docstring and the __main__ block are dropped."""
    lines = text.splitlines(keepends=True)
    i = 0
    if lines and lines[0].lstrip().startswith(('"""', "'''")):  # skip the module docstring
        quote = lines[0].lstrip()[:3]
        if lines[0].count(quote) < 2:
            i = 1
            while i < len(lines) and quote not in lines[i]:
                i += 1
        i += 1
    imports, body = [], []
    for line in lines[i:]:
        if line.startswith("if __name__ =="):
            break
        (imports if not body and (line.startswith(("import ", "from ")) or not line.strip()) else body).append(line)
    return "".join(imports), "".join(body).rstrip() + "\n"


def kernel_file(i: int, examples: Sequence[str] = ALL_EXAMPLES) -> str:
    """A complete kernel module: example number i mod len(examples), renamed with a per-copy suffix, with a
    small per-copy variation (a header comment and a different default block size) so no two are identical."""
    name = examples[i % len(examples)]
    text = rename(example_text(name), f"v{i}")
    text = text.replace("block_size: int = 1024", f"block_size: int = {256 << (i % 4)}")
    return f"# Generated by bench/common.py from examples/{name} (copy {i}).\n{text}"


def plain_module(i: int, rng: random.Random) -> str:
    """A plain (kernel-free) Python module of 60-250 lines: dataclasses, helpers, a small class hierarchy."""
    parts = [(f'"""Utility module {i}: configuration, data handling and small helpers (no kernels)."""\n\n'
              "from __future__ import annotations\n\nimport dataclasses\nimport json\nimport math\n"
              "import os\nfrom typing import Any, Iterable\n\n")]
    for j in range(rng.randint(3, 12)):
        kind = rng.choice(("dataclass", "function", "class", "table"))
        if kind == "dataclass":
            fields = "\n".join(f"    field_{k}: {rng.choice(['int', 'float', 'str', 'bool'])} = "
                               f"{rng.choice(['0', '1.5', repr('x'), 'False'])}" for k in range(rng.randint(2, 7)))
            parts.append(f"\n@dataclasses.dataclass\nclass Record{i}_{j}:\n{fields}\n\n"
                         f"    def to_json(self) -> str:\n        return json.dumps(dataclasses.asdict(self))\n\n")
        elif kind == "function":
            parts.append(textwrap.dedent(f'''
                def summarise_{i}_{j}(values: Iterable[float], scale: float = {rng.randint(1, 9)}.0) -> dict[str, Any]:
                    """Mean, spread and extremes of values, scaled."""
                    xs = [v * scale for v in values]
                    if not xs:
                        return {{"n": 0}}
                    mean = sum(xs) / len(xs)
                    var = sum((x - mean) ** 2 for x in xs) / max(len(xs) - 1, 1)
                    return {{"n": len(xs), "mean": mean, "std": math.sqrt(var), "min": min(xs), "max": max(xs)}}

            '''))
        elif kind == "class":
            parts.append(textwrap.dedent(f'''
                class Loader{i}_{j}:
                    """Reads records from a folder of JSON files."""

                    def __init__(self, root: str, limit: int = {rng.randint(10, 1000)}):
                        self.root = root
                        self.limit = limit
                        self._cache: dict[str, Any] = {{}}

                    def paths(self) -> list[str]:
                        found = []
                        for dirpath, _, names in os.walk(self.root):
                            found.extend(os.path.join(dirpath, n) for n in names if n.endswith(".json"))
                        return sorted(found)[: self.limit]

                    def load(self, path: str) -> Any:
                        if path not in self._cache:
                            with open(path, encoding="utf-8") as fh:
                                self._cache[path] = json.load(fh)
                        return self._cache[path]

            '''))
        else:
            rows = ",\n".join(f'    "key_{k}": ({rng.randint(0, 99)}, {rng.random():.4f})'
                              for k in range(rng.randint(5, 25)))
            parts.append(f"\nTABLE_{i}_{j} = {{\n{rows},\n}}\n\n")
    return "".join(parts)


def big_kernel_file(n_kernels: int = 30, min_lines: int = 2000) -> tuple[str, list[str]]:
    """One module with n_kernels Triton kernels (plus their launchers and references) and at least min_lines
    lines. Returns (text, kernel names). Most kernels are the correct examples; one block of buggy_kernels.py
    (4 kernels, 2 bad launches) is included so the file has a realistic handful of diagnostics."""
    header = ('"""Synthetic benchmark module built from examples/*.py by bench/common.py."""\n\n'
              "import os\n\nimport torch\nimport triton\nimport triton.language as tl\n\n")
    bodies, kernels = [], []
    buggy_body = rename(_split_example(example_text("buggy_kernels.py"))[1], "b0")
    buggy_kernels = 4
    i = 0
    while len(kernels) < n_kernels - buggy_kernels:
        name = TRITON_EXAMPLES[i % len(TRITON_EXAMPLES)]
        body = rename(_split_example(example_text(name))[1], f"k{i}")
        bodies.append(body)
        kernels += [n for n in top_level_names(body) if n.endswith(f"_kernel_k{i}")]
        i += 1
    bodies.insert(len(bodies) // 2, buggy_body)
    kernels += [n for n in top_level_names(buggy_body) if "_kernel" in n]
    text = header + "\n\n".join(bodies)
    j = 0
    rng = random.Random(1)
    while text.count("\n") < min_lines:  # pad with plain host-side helpers
        text += "\n\n" + plain_module(1000 + j, rng).split("from typing import Any, Iterable\n\n", 1)[1]
        j += 1
    if "from typing import Any, Iterable" not in text:
        text = text.replace("import os\n", "import dataclasses\nimport json\nimport math\nimport os\n"
                            "from typing import Any, Iterable\n", 1)
    return text, kernels


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")


def workspace_files(n_files: int = 500, kernel_share: float = 0.4, seed: int = 0) -> dict[str, str]:
    """n_files source files in nested package folders: about kernel_share of them kernel modules (renamed
    copies of the examples), the rest plain Python modules, plus __init__.py files."""
    rng = random.Random(seed)
    files: dict[str, str] = {}
    tops = ["models", "ops", "kernels", "utils", "data", "training", "serving"]
    folders = []
    for t in tops:
        folders.append(f"src/proj/{t}")
        for s in range(rng.randint(1, 4)):
            sub = f"src/proj/{t}/sub{s}"
            folders.append(sub)
            if rng.random() < 0.5:
                folders.append(f"{sub}/deep{s}/deeper")
    folders += ["tests", "tests/unit", "scripts", "benchmarks"]
    k = 0
    while len(files) < n_files:
        folder = folders[len(files) % len(folders)]
        init = f"{folder}/__init__.py"
        if folder.startswith("src/") and init not in files:
            files[init] = f'"""Package {folder.replace("/", ".")}."""\n'
            continue
        if rng.random() < kernel_share:
            files[f"{folder}/kernel_{k}.py"] = kernel_file(k)
        else:
            files[f"{folder}/module_{k}.py"] = plain_module(k, rng)
        k += 1
    return files


def noise_files(n_git: int = 1500, n_venv: int = 1500, seed: int = 0) -> dict[str, str | bytes]:
    """Files a workspace walk must skip: a .git folder (objects, refs, hooks) and a .venv with a site-packages
    full of .py files (copies of the kernel and plain modules, so indexing them would be costly and visible)."""
    rng = random.Random(seed)
    files: dict[str, str | bytes] = {
        ".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n\trepositoryformatversion = 0\n",
        ".git/hooks/pre-commit.sample": "#!/bin/sh\nexit 0\n",
    }
    for _ in range(n_git):
        h = f"{rng.getrandbits(160):040x}"
        files[f".git/objects/{h[:2]}/{h[2:]}"] = rng.randbytes(rng.randint(100, 4000))
    files[".venv/pyvenv.cfg"] = "home = /usr/bin\n"
    for i in range(n_venv):
        pkg = f"pkg{i % 40}"
        content = kernel_file(i + 10_000) if i % 3 == 0 else plain_module(i + 10_000, rng)
        files[f".venv/lib/python3.12/site-packages/{pkg}/mod_{i}.py"] = content
    return files


# -- a real client driving the server ------------------------------------------------------------------------


@dataclass
class Published:
    time: float  # time.perf_counter() when the client received it
    version: int | None
    codes: tuple[str, ...]  # the diagnostics' codes, in order


class ServerSession:
    """One `kernel-lsp serve` subprocess and a pygls client talking to it over stdio.

    `profile` is "push" (VS Code 1.65.2 capabilities) or "pull" (Neovim 0.11 capabilities). The client
    answers workspace/configuration with an empty settings object, workspace/diagnostic/refresh with null,
    and records every publishDiagnostics with its arrival time.
    """

    def __init__(self, profile: str = "push", root: Path | None = None, options: Any = None,
                 extra_args: Sequence[str] = (), env: dict[str, str] | None = None):
        self.profile = profile
        self.env = env
        self.root = root
        self.options = options
        self.cmd = [*SERVER_CMD, *extra_args]
        self.client = None
        self.published: dict[str, list[Published]] = {}
        self.refreshes = 0
        self._waiters: dict[tuple[str, int | None], asyncio.Future] = {}
        self._stderr_tail: list[bytes] = []
        self.versions: dict[str, int] = {}
        self.pid: int | None = None
        self.t_spawn = self.t_initialized = float("nan")

    def _make_client(self):
        from lsprotocol import types
        from pygls.lsp.client import LanguageClient

        client = LanguageClient("kernel-lsp-bench", "1")

        @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_publish(params: types.PublishDiagnosticsParams) -> None:
            now = time.perf_counter()
            self.published.setdefault(params.uri, []).append(
                Published(now, params.version, tuple(str(d.code) for d in params.diagnostics)))
            fut = self._waiters.pop((params.uri, params.version), None)
            if fut is not None and not fut.done():
                fut.set_result(now)

        @client.feature(types.WORKSPACE_CONFIGURATION)
        def on_configuration(params: types.ConfigurationParams):
            return [{} for _ in params.items]

        @client.feature(types.WORKSPACE_DIAGNOSTIC_REFRESH)
        def on_refresh(params: None) -> None:
            self.refreshes += 1

        @client.feature(types.WINDOW_SHOW_MESSAGE)
        def on_message(params: types.ShowMessageParams) -> None:
            pass

        @client.feature(types.WINDOW_LOG_MESSAGE)
        def on_log(params: types.LogMessageParams) -> None:
            pass

        @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def on_progress_create(params: types.WorkDoneProgressCreateParams) -> None:
            pass

        @client.feature(types.PROGRESS)
        def on_progress(params: types.ProgressParams) -> None:
            pass

        return client

    async def _drain_stderr(self, stream) -> None:
        while line := await stream.readline():  # keep the pipe from filling; remember the tail for errors
            self._stderr_tail.append(line)
            del self._stderr_tail[:-50]

    def stderr_tail(self) -> str:
        return b"".join(self._stderr_tail).decode("utf-8", "replace")

    def warm_client(self) -> None:
        """Create the client and let its (per-client) cattrs converter build the encoders for initialize now,
        so that a startup measurement does not include this Python client's own one-time setup (~20 ms here;
        an editor pays nothing comparable). The server is not involved."""
        from lsprotocol import types

        if self.client is None:
            self.client = self._make_client()
        conv = self.client.protocol._converter
        conv.unstructure(self.init_params())
        conv.structure({"capabilities": {"textDocumentSync": 2}, "serverInfo": {"name": "x"}}, types.InitializeResult)

    async def spawn(self) -> None:
        if self.client is None:
            self.client = self._make_client()
        self.t_spawn = time.perf_counter()
        await self.client.start_io(*self.cmd, cwd=str(REPO), env=self.env)
        proc = self.client._server
        self.pid = proc.pid
        self._stderr_task = asyncio.create_task(self._drain_stderr(proc.stderr))

    def init_params(self):
        from lsprotocol import types
        from pytest_lsp import client_capabilities

        folders = [types.WorkspaceFolder(uri=self.root.as_uri(), name=self.root.name)] if self.root else None
        return types.InitializeParams(
            capabilities=client_capabilities(PROFILES[self.profile]),
            process_id=os.getpid(),
            root_uri=self.root.as_uri() if self.root else None,
            workspace_folders=folders,
            # The benchmarks' workspaces are their own: the editor vouches for them, as VS Code does for a
            # trusted workspace, so compiles and checks run as the options say.
            initialization_options={"workspaceTrusted": True, **(self.options or {})},
        )

    async def initialize(self, params=None, send_initialized: bool = True):
        """Send initialize (returns its result; self.t_initialized is when it arrived), then initialized."""
        from lsprotocol import types

        result = await self.client.initialize_async(params or self.init_params())
        self.t_initialized = time.perf_counter()
        self.position_encoding = str(result.capabilities.position_encoding or "utf-16")
        if send_initialized:
            self.client.initialized(types.InitializedParams())
        return result

    async def start(self):
        await self.spawn()
        return await self.initialize()

    async def status(self) -> dict:
        from lsprotocol import types

        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="kernel-lsp.status", arguments=[]))

    async def wait_ready(self, timeout: float = 60.0, interval: float = 0.01) -> tuple[float, dict]:
        """Poll the status command until the first index is complete; returns (time ready seen, status)."""
        deadline = time.perf_counter() + timeout
        while True:
            st = await self.status()
            now = time.perf_counter()
            if st.get("ready") and not st.get("indexing"):
                return now, st
            if now > deadline:
                raise TimeoutError(f"server not ready after {timeout} s: {st}")
            await asyncio.sleep(interval)

    async def wait_idle(self, timeout: float = 60.0, interval: float = 0.01) -> dict:
        deadline = time.perf_counter() + timeout
        while True:
            st = await self.status()
            if not st.get("indexing") and st.get("queued") == 0:
                return st
            if time.perf_counter() > deadline:
                raise TimeoutError(f"server still busy after {timeout} s: {st}")
            await asyncio.sleep(interval)

    # documents

    def expect_publish(self, uri: str, version: int | None) -> asyncio.Future:
        """A future resolved with the arrival time of the publishDiagnostics for (uri, version)."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters[(uri, version)] = fut
        return fut

    def open(self, uri: str, text: str, version: int = 1) -> None:
        from lsprotocol import types

        self.versions[uri] = version
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))

    def change(self, uri: str, start: tuple[int, int], end: tuple[int, int], text: str) -> int:
        """An incremental didChange (one range replaced), as editors send while typing; returns the version."""
        from lsprotocol import types

        self.versions[uri] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(*start), types.Position(*end)), text=text)],
        ))
        return self.versions[uri]

    async def pull(self, uri: str, previous_result_id: str | None = None):
        from lsprotocol import types

        return await self.client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri), previous_result_id=previous_result_id))

    async def stop(self, timeout: float = 10.0) -> None:
        if self.client is None:
            return
        proc = self.client._server
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), timeout)
            self.client.exit(None)
            await asyncio.wait_for(proc.wait(), timeout)
        except Exception:  # noqa: BLE001 - a server that does not shut down cleanly is killed
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        try:
            await asyncio.wait_for(self.client.stop(), timeout)
        except Exception:  # noqa: BLE001
            pass
        task = getattr(self, "_stderr_task", None)
        if task is not None:
            task.cancel()

    async def __aenter__(self) -> ServerSession:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()


def run_async(coro_fn: Callable[[], Any]) -> Any:
    return asyncio.run(coro_fn())


def common_args(parser) -> None:
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
