"""What a compile job is and what it returns: plain, picklable data shared by the pool, workers and cache."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """A GPU to compile for: backend "cuda" (arch = SM number, e.g. 90) or "hip" (arch = "gfx942")."""

    name: str  # as users write it in settings: "sm_90", "gfx942"
    backend: str
    arch: int | str
    warp_size: int


@dataclass(frozen=True)
class CompileJob:
    """One kernel, one target, one configuration.

    `module_source` is a self-contained module holding the kernel, every @jit function it calls and the
    constants it reads, with only triton imports: the worker never runs the user's file (which may import torch).
    `line_map` maps a line of module_source (1-based) to the line of the user's file (1-based).
    """

    path: str
    kernel: str
    module_source: str
    line_map: tuple[int, ...]
    signature: tuple[tuple[str, str], ...]  # (param, "*fp16" | "i32" | ... | "constexpr")
    constexprs: tuple[tuple[str, object], ...]
    attrs: tuple[tuple[str, str], ...]  # (param, "tt.divisibility=16" | "equal_to_1")
    target: Target
    num_warps: int = 4
    num_stages: int = 3
    config_label: str = "default"  # how the user recognises this configuration ("autotune config 2", "launch site line 40")
    key: str = ""  # content hash: the cache key
    # What was assumed rather than known (pointer dtypes, divisibility, constexpr defaults): tell the user once.
    notes: tuple[str, ...] = ()
    # Global names the kernel reads that the module could not include: (name, why). A NameError for one of them
    # is explained with the reason instead of triton's bare "is not defined".
    unresolved: tuple[tuple[str, str], ...] = ()
    # Where each value came from: (parameter or option, "recorded" | "pin" | "spec" | "code" | "autotune" |
    # "default" | "assumed"); config_label names the recording (command, date) or launch site.
    values_from: tuple[tuple[str, str], ...] = ()


# Starts the `unresolved` reason of a name no kernel can use (torch in a @jit body): a compile error, not a gap.
NOT_IN_KERNELS = "a kernel cannot use this: "
# Starts a planning error that is a gap in what kernel-lsp knows (a constexpr's value), not a fault of the kernel:
# the kernel is not compiled and an information note says why (KC009).
NOT_COMPILED = "value not known: "


@dataclass(frozen=True)
class CompileError:
    message: str
    line: int | None  # 0-based line in the user's file
    col: int | None  # 0-based column
    kind: str  # "compilation", "ptxas", "timeout", "crash", "internal", "offline" (needs code kernel-lsp does not run)
    related: tuple[tuple[int, int, str], ...] = ()  # (line, col, message) e.g. the call site of a failing helper
    # The same places as 1-based lines of module_source: a cached result is re-mapped with the line_map of the job
    # that asks (the key ignores where the kernel sits in the file), see worker.relocate.
    module_line: int | None = None
    related_module_lines: tuple[int, ...] = ()


@dataclass(frozen=True)
class Resources:
    registers: int | None = None
    spill_bytes: int | None = None  # ptxas "bytes spill stores"; AMD: spilled VGPRs x 4
    stack_bytes: int | None = None  # ptxas "bytes stack frame"; AMD: ScratchSize (per lane)
    shared_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    occupancy: float | None = None  # theoretical, 0..1 of the max resident warps per multiprocessor
    matrix_instructions: tuple[str, ...] = ()  # "mma", "wgmma", "tcgen05", "mfma"; empty: no tensor cores
    load_widths: tuple[int, ...] = ()  # bits per global load instruction seen
    store_widths: tuple[int, ...] = ()
    uses_tma: bool = False
    # ptxas' "Potential Performance Loss" notes (NVIDIA), e.g. wgmma serialized for lack of registers: the
    # configuration model charges serialized wgmma, and the user sees the note on the kernel.
    ptxas_notes: tuple[str, ...] = ()
    # Global block accesses that compiled to one element per instruction although each thread handles several:
    # (module_source line 1-based, "load" | "store", bits per element, elements per thread). NVIDIA only.
    scalar_accesses: tuple[tuple[int, str, int, int], ...] = ()


@dataclass(frozen=True)
class CompileResult:
    job_key: str
    ok: bool
    error: CompileError | None = None
    warnings: tuple[CompileError, ...] = ()
    resources: Resources = field(default_factory=Resources)
    asm: dict[str, str] = field(default_factory=dict)  # "ttir", "ttgir", "llir", "ptx", "sass", "amdgcn"
    seconds: float = 0.0
    triton_version: str = ""
    # A timed-out job's result is cached with the timeout it had: a warm run does not wait for it again, and a
    # larger compileTimeoutS tries again.
    timeout_s: float | None = None
