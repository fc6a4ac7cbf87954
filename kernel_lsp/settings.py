"""The single definition of kernel-lsp's settings: defaults, validation and documentation.

Settings come from the client's initializationOptions and from workspace/configuration (section "kernelLsp"),
and from command-line options in `kernel-lsp check`. An invalid value is reported and replaced by its default;
the rest of the settings still apply. docs/configuration.md and the editor extensions' setting lists are
generated from SETTINGS.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

SECTION = "kernelLsp"
_CODE = re.compile(r"^[A-Z]{2}\d{0,3}$")
_SEVERITIES = ("error", "warning", "information", "hint", "off")
_LOG_LEVELS = ("debug", "info", "warning", "error")
_COMPILE_MODES = ("open", "workspace", "off")
_CHECK_MODES = ("save", "request", "off")
_CHECK_DEVICES = ("auto", "interpreter", "cuda")
_EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Setting:
    key: str  # camelCase, as clients send it
    attr: str  # snake_case attribute of Settings
    type: str  # JSON type shown in docs: "boolean", "integer", "string", "array", "object"
    default: Any
    description: str
    validate: Callable[[Any], Any]  # returns the normalised value or raises ValueError with a reason
    enum: tuple[str, ...] = ()
    # Says where code, text or a key goes: taken only from the editor's user-level configuration (the
    # initializationOptions, or a machine-scoped VS Code setting), never from workspace/configuration, which a
    # repository can supply (.vscode/settings.json, .dir-locals.el).
    user_only: bool = False


def _codes(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of rule codes such as [\"TR002\", \"NK\"]")
    codes = tuple(v.strip().upper() for v in value)
    bad = [c for c in codes if not _CODE.match(c)]
    if bad:
        raise ValueError(f"not a rule code or prefix: {', '.join(bad)}")
    return codes


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ValueError("expected a list of non-empty strings")
    return tuple(value)


def _int_range(lo: int, hi: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer between {lo} and {hi}")
        if not lo <= value <= hi:
            raise ValueError(f"{value} is outside {lo}..{hi}")
        return value

    return check


def _targets(value: Any) -> tuple[str, ...]:
    from analyzers.targets import UnknownTargetError, parse_target

    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a non-empty list of GPU target names such as [\"sm_90\", \"gfx942\"]")
    out: list[str] = []
    for v in value:
        try:
            name = parse_target(v).name
        except UnknownTargetError as exc:
            raise ValueError(str(exc)) from None
        if name not in out:
            out.append(name)
    return tuple(out)


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value.strip()


def _url(value: Any) -> str:
    value = _string(value)
    if value and not re.match(r"^https?://[^\s/]+", value):
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value.rstrip("/")


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value.lower() not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return value.lower()

    return check


def _severity_map(value: Any) -> dict[str, str]:
    if value == []:
        return {}  # an empty Lua table
    if not isinstance(value, dict):
        raise ValueError("expected an object mapping rule codes to " + "/".join(_SEVERITIES))
    out = {}
    for code, sev in value.items():
        if not isinstance(code, str) or not _CODE.match(code.upper()):
            raise ValueError(f"not a rule code or prefix: {code!r}")
        if not isinstance(sev, str) or sev.lower() not in _SEVERITIES:
            raise ValueError(f"{code}: expected one of {', '.join(_SEVERITIES)}")
        out[code.upper()] = sev.lower()
    return out


_TRITON_TYPE = re.compile(r"^\*?(?:fp8e4nv|fp8e4b15|fp8e5|fp16|bf16|fp32|fp64|i1|u1|i8|u8|i16|u16|i32|u32|i64|u64)$")


def _pins(value: Any) -> dict[str, dict[str, Any]]:
    if value == []:
        return {}  # an empty Lua table
    if not isinstance(value, dict):
        raise ValueError("expected an object mapping kernel names to {parameter: type or value}")
    out: dict[str, dict[str, Any]] = {}
    for kernel, params in value.items():
        file, sep, qualname = kernel.rpartition("::") if isinstance(kernel, str) else ("", "", "")
        if not isinstance(kernel, str) or (sep and not file) or not all(
                part.isidentifier() or part == "<locals>" for part in qualname.split(".")):
            raise ValueError(f"not a kernel: {kernel!r} (expected `path/to/file.py::kernel_name`)")
        if not isinstance(params, dict):
            raise ValueError(f"{kernel}: expected an object such as {{\"x_ptr\": \"*fp16\", \"BLOCK\": 128}}")
        for name, pin in params.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"{kernel}: not a parameter name: {name!r}")
            if name in ("num_warps", "num_stages"):
                if isinstance(pin, bool) or not isinstance(pin, int) or not 1 <= pin <= 64:
                    raise ValueError(f"{kernel}.{name}: expected an integer between 1 and 64")
            elif isinstance(pin, str) and pin.startswith("*") and not _TRITON_TYPE.match(pin):
                raise ValueError(f"{kernel}.{name}: {pin!r} is not a Triton pointer type such as \"*fp16\"")
            elif not isinstance(pin, (str, int, float, bool)):
                raise ValueError(f"{kernel}.{name}: expected a type such as \"*bf16\" or \"i64\", or a "
                                 "constexpr value")
        out[kernel] = dict(params)
    return out


def is_type_pin(value: Any) -> bool:
    """A pin naming a runtime parameter's type ("*fp16", "i64"), as opposed to a constexpr's value."""
    return isinstance(value, str) and bool(_TRITON_TYPE.match(value))


def _hardware(value: Any) -> dict[str, Any]:
    from analyzers.hardware import parse_hardware_overrides

    if value == []:
        return {}  # an empty Lua table
    _, errors = parse_hardware_overrides(value)
    if errors:
        raise ValueError("; ".join(errors))
    return dict(value)


DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", "__pycache__", "node_modules", "build", "dist",
    ".kernel-lsp", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox", "site-packages", "*.egg-info",
)

SETTINGS: tuple[Setting, ...] = (
    Setting("select", "select", "array", (), "Rule codes or prefixes to report (for example `[\"TR\", \"NK001\"]`). "
            "Empty: every rule.", _codes),
    Setting("ignore", "ignore", "array", (), "Rule codes or prefixes never to report.", _codes),
    Setting("severity", "severity", "object", {}, "Per-rule severity override: a code or prefix mapped to "
            "`error`, `warning`, `information`, `hint` or `off`.", _severity_map),
    Setting("exclude", "exclude", "array", DEFAULT_EXCLUDE, "Folder or file names (glob patterns) that are neither "
            "indexed nor watched.", _strings),
    Setting("maxFileBytes", "max_file_bytes", "integer", 2_000_000, "Files larger than this are not analysed "
            "(a KL003 note says so).", _int_range(1_000, 1_000_000_000)),
    Setting("watchFiles", "watch_files", "boolean", True, "Watch the workspace on disk so that files changed by "
            "other tools (a git checkout, a generator) are re-analysed.", _boolean),
    Setting("targets", "targets", "array", ("sm_90",), "GPU targets kernels are compiled for, ahead of time and "
            "without a GPU (`sm_80`, `sm_89`, `sm_90`, `sm_100`, `sm_120`, `gfx942`, `gfx950`, or aliases "
            "such as `hopper`, `mi300x`). Compile problems (KC codes) name the target. `kernel-lsp check` compiles "
            "only when given `--target` or a `--config` file that names targets.", _targets),
    Setting("compile", "compile", "string", "open", "What the language server compiles in the background: "
            "`open` (the open documents' kernels, after each change settles), `workspace` (also every kernel file "
            "of the workspace, at a lower priority) or `off`.", _choice(_COMPILE_MODES), _COMPILE_MODES),
    Setting("pins", "pins", "object", {}, "Parameter types and values to compile a kernel with, where the "
            "source does not tell: `FILE::KERNEL` (the file relative to the workspace, the kernel's qualified "
            "name) -> {parameter: Triton type (`\"*fp16\"`, `\"i64\"`) or constexpr value, `num_warps`, "
            "`num_stages`}, e.g. `{\"ops/add.py::add_kernel\": {\"x_ptr\": \"*bf16\", \"BLOCK\": 256}}`. A bare "
            "kernel name as key still works, for every kernel of that name (deprecated). An annotation on the "
            "parameter (`x_ptr: \"*bf16\"`) does the same in the source.", _pins),
    Setting("compileDebounceMs", "compile_debounce_ms", "integer", 600, "How long the text must stay unchanged "
            "before the server compiles it, in milliseconds.", _int_range(0, 60_000)),
    Setting("compileWorkers", "compile_workers", "integer", 0, "Worker processes that compile kernels. `0`: "
            "automatic, the number of CPU cores minus one (at least one).", _int_range(0, 256)),
    Setting("compileTimeoutS", "compile_timeout_s", "integer", 60, "Seconds one compile job (one kernel, target "
            "and configuration) may take before its worker is killed and a KC006 note says so (remembered with this "
            "timeout: a warm run does not wait again unless the setting is raised).",
            _int_range(1, 3600)),
    Setting("cacheMaxMB", "cache_max_mb", "integer", 512, "Size cap of the compile result cache in "
            "`<workspace>/.kernel-lsp/cache`, in megabytes; least recently used entries are pruned beyond it.",
            _int_range(1, 1_000_000)),
    Setting("checks", "checks", "string", "save", "When kernels are checked against the PyTorch reference of "
            "their spec (docs/specs.md): `save` (each time the file is saved, and on request), `request` (only "
            "from the code lens or the `kernel-lsp.runChecks` command) or `off`. Checks run the user's code, in a "
            "separate process.", _choice(_CHECK_MODES), _CHECK_MODES),
    Setting("checkDevice", "check_device", "string", "auto", "Where checks run: `auto` (the GPU when PyTorch sees "
            "one, else Triton's interpreter on the CPU), `interpreter` or `cuda`.", _choice(_CHECK_DEVICES),
            _CHECK_DEVICES),
    Setting("checkTimeoutS", "check_timeout_s", "integer", 60, "Seconds one spec's check may take before its "
            "process is killed and a KV004 error says so.", _int_range(1, 3600)),
    Setting("executor", "executor", "string", "local", "Where compiles, checks and the timings of "
            "\"Optimize tiling\" run: `local` (worker processes on this machine) or `ray` (tasks on an existing Ray "
            "cluster, the tiling search's candidates one per GPU, docs/scale.md; needs `pip install "
            "kernel-lsp[ray]`; the kernel's source travels to the cluster). A cluster that cannot be reached or is "
            "lost falls back to `local` with a message. User-level only: a workspace's value is ignored.",
            _choice(_EXECUTORS), _EXECUTORS, user_only=True),
    Setting("rayAddress", "ray_address", "string", "", "The Ray cluster for `executor: ray`: `HOST:PORT` of its "
            "head, or `ray://HOST:10001` for Ray Client. Empty: Ray's own resolution (the `RAY_ADDRESS` "
            "environment variable, else the cluster `ray start` began on this machine). User-level only.",
            _string, user_only=True),
    Setting("latency", "latency", "string", "save", "When kernels are timed at their spec's bench shapes: `save` "
            "(after each check on save or request) or `off`. On a GPU they are measured; without one, estimated by "
            "the roofline model for each target's device, and labelled as estimates.", _choice(("save", "off")),
            ("save", "off")),
    Setting("hardware", "hardware", "object", {}, "Devices to add or adjust in the hardware table used by "
            "estimates: a name mapped to fields over a `base` device, e.g. `{\"my-h100\": {\"base\": \"H100\", "
            "\"hbm_tbps\": 2.0}}`; a target named like a device (`\"targets\": [\"sm_90\"]` -> H200) uses it.",
            _hardware),
    Setting("searchCompileBudget", "search_compile_budget", "integer", 12, "How many candidates of the tiling "
            "search (**Optimize tiling**, `kernel-lsp tune`) are compiled for the device's target so the model "
            "reads their registers, shared memory and spills: the model's best-ranked ones on assumed resources, "
            "and the current configuration besides. The others are ranked on assumed resources and marked so. "
            "`0`: none is compiled.", _int_range(0, 1000)),
    Setting("assistantModel", "assistant_model", "string", "claude-sonnet-4-5", "The Anthropic model the "
            "assistant's code actions use.", _string),
    Setting("assistantBaseUrl", "assistant_base_url", "string", "", "Base URL of the Messages API (empty: "
            "Anthropic's). For a proxy or a gateway. User-level only: a workspace's value is ignored.", _url,
            user_only=True),
    Setting("assistantApiKey", "assistant_api_key", "string", "", "API key for the assistant. Prefer the "
            "ANTHROPIC_API_KEY environment variable of the editor; this setting is for clients that cannot set it. "
            "It is never logged. User-level only: a workspace's value is ignored.", _string, user_only=True),
    Setting("assistantMaxAttempts", "assistant_max_attempts", "integer", 3, "How many times the assistant may "
            "try again after a candidate fails to compile, to pass its checks or to be faster, per request.",
            _int_range(1, 10)),
    Setting("assistantCandidates", "assistant_candidates", "integer", 1, "Candidates asked for per request; the "
            "correct ones are ranked by measured (or estimated) latency.", _int_range(1, 8)),
    Setting("assistantTimeoutS", "assistant_timeout_s", "integer", 120, "Seconds one Messages API call may take.",
            _int_range(5, 3600)),
    Setting("assistantMaxTokens", "assistant_max_tokens", "integer", 8000, "Upper bound on the tokens of one "
            "answer of the model.", _int_range(256, 128_000)),
    Setting("logLevel", "log_level", "string", "info", "Server log verbosity (written to stderr, which editors show "
            "in their output panel).", _choice(_LOG_LEVELS), _LOG_LEVELS),
)
_BY_KEY = {s.key: s for s in SETTINGS}


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severity: dict[str, str] = field(default_factory=dict)
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    max_file_bytes: int = 2_000_000
    watch_files: bool = True
    targets: tuple[str, ...] = ("sm_90",)
    compile: str = "open"
    pins: dict[str, dict[str, Any]] = field(default_factory=dict)
    compile_debounce_ms: int = 600
    compile_workers: int = 0  # 0: CPU cores minus one
    compile_timeout_s: int = 60
    cache_max_mb: int = 512
    checks: str = "save"
    check_device: str = "auto"
    check_timeout_s: int = 60
    executor: str = "local"
    ray_address: str = ""
    latency: str = "save"
    hardware: dict[str, Any] = field(default_factory=dict)
    search_compile_budget: int = 12
    assistant_model: str = "claude-sonnet-4-5"
    assistant_base_url: str = ""
    assistant_api_key: str = field(default="", repr=False)  # never in logs or messages
    assistant_max_attempts: int = 3
    assistant_candidates: int = 1
    assistant_timeout_s: int = 120
    assistant_max_tokens: int = 8000
    log_level: str = "info"

    def severity_for(self, code: str) -> str | None:
        """The override for a code: the longest matching code or prefix wins."""
        best = None
        for key, value in self.severity.items():
            if code.startswith(key) and (best is None or len(key) > len(best[0])):
                best = (key, value)
        return best[1] if best else None


def parse_settings(raw: Any, base: Settings | None = None, user_level: bool = True) -> tuple[Settings, list[str]]:
    """Validate raw settings (a JSON object). Returns the settings and one message per rejected value.

    Accepts the object itself or one wrapped in {"kernelLsp": {...}}. Keys absent from raw keep `base`'s values.
    `user_level=False` (workspace/configuration): settings marked user_only keep `base`'s values, with a message
    when the workspace's value differs.
    """
    settings = base or Settings()
    messages: list[str] = []
    if raw is None:
        return settings, messages
    if raw == []:
        raw = {}  # Lua clients encode an empty table as an empty list
    if isinstance(raw, dict) and isinstance(raw.get(SECTION), (dict, list)) and len(raw) == 1:
        raw = raw[SECTION] or {}
    if not isinstance(raw, dict):
        return settings, [f"kernel-lsp settings must be an object, got {type(raw).__name__}; using defaults"]
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        setting = _BY_KEY.get(key)
        if setting is None:
            close = [k for k in _BY_KEY if k.lower() == str(key).lower()]
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            messages.append(f"unknown kernel-lsp setting {key!r}{hint}; ignored")
            continue
        if setting.user_only and not user_level:
            current = getattr(settings, setting.attr)
            if value not in (None, current):
                messages.append(f"{key} from the workspace's configuration was ignored: it says where code or keys "
                                "go, so it is taken only from user-level settings (initializationOptions: VS Code's "
                                "user settings, init_options in Neovim, kernel-lsp-settings in Emacs) or the "
                                "environment")
            continue
        if value is None:
            changes[setting.attr] = setting.default
            continue
        try:
            changes[setting.attr] = setting.validate(value)
            if setting.attr == "pins" and (bare := [k for k in changes["pins"] if "::" not in k]):
                messages.append(f"pins: {', '.join(repr(k) for k in bare)} {'is a bare kernel name' if len(bare) == 1 else 'are bare kernel names'}, "
                                "applied to every kernel of that name in the workspace; key pins by file and "
                                f"kernel instead (`\"path/to/file.py::{bare[0]}\"`); the bare form is deprecated")
        except ValueError as exc:
            messages.append(f"invalid kernel-lsp setting {key}: {exc}; using the default {_show(setting.default)}")
            changes[setting.attr] = setting.default
    return dataclasses.replace(settings, **changes), messages


def _show(value: Any) -> str:
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def markdown() -> str:
    """docs/configuration.md, generated from SETTINGS."""
    out = [
        "# Configuration",
        "",
        "<!-- Generated by `python -m kernel_lsp.settings`; do not edit by hand. -->",
        "",
        "kernel-lsp reads its settings from the editor: the `initializationOptions` sent when the server starts,",
        f"and the `{SECTION}` section of `workspace/configuration`, read again whenever the editor reports a",
        "configuration change. Both take the same keys, except that settings which say where code, text or a key",
        "goes (marked *user-level only*) are taken only from `initializationOptions` (the editor's user-level",
        "configuration) and never from `workspace/configuration`, which a repository can supply",
        "(`.vscode/settings.json`, `.dir-locals.el`); in VS Code they are machine-scoped. A value of the wrong type or",
        "out of range is reported in a message and replaced by its default; the other settings still apply.",
        "`kernel-lsp check` takes `--select`, `--ignore` and `--config FILE` (a JSON object with these keys).",
        "",
        "| Setting | Type | Default | Description |",
        "| --- | --- | --- | --- |",
    ]
    for s in SETTINGS:
        kind = s.type + (f" ({' / '.join(s.enum)})" if s.enum else "")
        where = " *User-level only.*" if s.user_only and "User-level only" not in s.description else ""
        out.append(f"| `{s.key}` | {kind} | `{_show(s.default)}` | {s.description}{where} |")
    out += [
        "",
        "Example (Neovim):",
        "",
        "```lua",
        "vim.lsp.config('kernel_lsp', { settings = { kernelLsp = { ignore = { 'TR009' }, severity = { NK = 'hint' } } } })",
        "```",
        "",
        "Rule codes are listed in [rules.md](rules.md). A single line is silenced with a trailing",
        "`# kernel-lsp: ignore[CODE]` comment (or `# kernel-lsp: ignore` for every code), a whole file with",
        "`# kernel-lsp: ignore-file[CODE]`.",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
