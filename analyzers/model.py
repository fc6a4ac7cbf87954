"""Plain data exchanged by the analyzers: positions, problems, fixes, kernels, launch sites.

Positions are zero-based lines and zero-based columns counted in Unicode code points, the way Python
indexes a str. Converting to a client's position encoding happens in the protocol layer only.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field


class Severity(enum.IntEnum):
    # Same ordering as LSP: lower is more severe.
    ERROR = 1
    WARNING = 2
    INFO = 3
    HINT = 4

    @classmethod
    def parse(cls, text: str) -> "Severity":
        return cls[text.strip().upper()]


@dataclass(frozen=True, order=True)
class Span:
    start_line: int
    start_col: int
    end_line: int
    end_col: int

    @classmethod
    def point(cls, line: int, col: int = 0) -> "Span":
        return cls(line, col, line, col)

    def contains_line(self, line: int) -> bool:
        return self.start_line <= line <= self.end_line

    def shifted(self, lines: int) -> "Span":
        return Span(self.start_line + lines, self.start_col, self.end_line + lines, self.end_col)


@dataclass(frozen=True)
class TextEdit:
    span: Span
    new_text: str


@dataclass(frozen=True)
class Fix:
    """A mechanical correction, applied as plain text edits to the same file."""

    title: str
    edits: tuple[TextEdit, ...]


@dataclass(frozen=True)
class Related:
    """Another place that explains a problem, possibly in another file (path None: same file)."""

    span: Span
    message: str
    path: str | None = None


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    severity: Severity
    span: Span
    fix: Fix | None = None
    related: tuple[Related, ...] = ()
    kernel: str | None = None


@dataclass(frozen=True)
class Param:
    name: str
    annotation: str | None
    is_constexpr: bool
    default: str | None
    span: Span
    # Position of the end of the name: where a ": tl.constexpr" annotation would go.
    name_end: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class AutotuneConfig:
    kwargs: dict[str, object]
    num_warps: object | None
    num_stages: object | None
    span: Span


@dataclass
class TritonKernel:
    name: str
    span: Span  # the whole function, decorators included
    name_span: Span  # the name in the def line
    params: list[Param]
    decorators: list[str]  # "jit", "autotune", "heuristics"
    autotune_configs: list[AutotuneConfig] = field(default_factory=list)
    autotune_keys: list[str] = field(default_factory=list)
    heuristics: list[str] = field(default_factory=list)  # parameter names computed by @triton.heuristics
    # False when @triton.autotune's configs are built by code the analyzers cannot evaluate.
    autotune_configs_known: bool = True
    qualname: str = ""
    # The name is reassigned at module level (e.g. `k = triton.autotune(...)(k)`): a launch of that name may not
    # reach this definition as written, so launch checks leave it alone.
    rebound: bool = False
    # False when @triton.heuristics' values are built by code: any parameter may be set by it.
    heuristics_known: bool = True
    # Decorated by something other than triton's jit/autotune/heuristics (a project's own autotuner or cache
    # wrapper): what it passes to the kernel is not known, so a launch may leave parameters out.
    unknown_wrappers: bool = False
    # Constexpr parameters the body uses as a block dimension (tl.arange bounds, tl.zeros/tl.full shapes):
    # a value passed for one at a launch must be a power of 2.
    shape_params: frozenset[str] = frozenset()
    # Constexpr parameters the body needs as compile-time constants for any reason (shapes, tl.static_range bounds,
    # axes): advice must never suggest turning them into runtime values.
    needed_constexprs: frozenset[str] = frozenset()

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    @property
    def launch_signature(self) -> tuple:
        """Everything launch checks read from a kernel: when it is unchanged, launches of it need no re-check."""
        return (tuple((p.name, p.is_constexpr, p.default is not None) for p in self.params),
                tuple(sorted(self.provided_by_decorators)), self.autotune_configs_known, self.heuristics_known,
                self.unknown_wrappers,
                tuple(sorted(self.shape_params)), tuple(sorted(self.needed_constexprs)), self.rebound,
                tuple(self.decorators))

    @property
    def provided_by_decorators(self) -> set[str]:
        names = set(self.heuristics)
        for cfg in self.autotune_configs:
            names.update(cfg.kwargs)
        return names


@dataclass(frozen=True)
class LaunchArg:
    text: str  # source text of the argument expression
    span: Span
    keyword: str | None = None
    # A coarse classification of the value: "literal", "shape" (a runtime size like x.shape[0]),
    # "tensor", "name", "expr".
    kind: str = "expr"
    value_span: Span | None = None  # for keywords: the value alone (span covers `name=value`)


@dataclass(frozen=True)
class LaunchSite:
    """A `kernel[grid](...)` call."""

    callee: str  # the name as written at the call (possibly an alias)
    target: str  # the kernel name it refers to after resolving imports
    module: str | None  # module the name was imported from, None when defined or unknown locally
    span: Span  # the whole call
    callee_span: Span
    args: tuple[LaunchArg, ...]
    kwargs: tuple[LaunchArg, ...]
    has_star_args: bool = False


@dataclass
class NkiKernel:
    name: str
    span: Span
    name_span: Span
    api: str  # "legacy" (neuronxcc.nki) or "current" (nki)
    decorators: list[str]
    params: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ShownSizes:
    """Sizes a spec of the file shows: the values it runs one launch argument with, or the element counts of the
    tensors it makes for a kernel. Risks that depend on sizes are raised to warnings only with such evidence."""

    values: tuple[int, ...]  # distinct values, ascending
    # What shows them, for messages: "the spec `rows_inputs`" (launch values), "the spec `rows_inputs` makes
    # tensors of" or "the launch at line 12 passes a tensor of" (tensor sizes).
    source: str
    span: Span  # where (the spec's shapes)


@dataclass
class FileAnalysis:
    """Everything the analyzers know about one file, from its text alone."""

    path: str
    kernels: list[TritonKernel] = field(default_factory=list)
    nki_kernels: list[NkiKernel] = field(default_factory=list)
    launch_sites: list[LaunchSite] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # Suppression comments: line -> codes ignored on that line (empty: all codes); line -1 holds file-wide ones.
    suppressions: dict[int, frozenset[str]] = field(default_factory=dict)
    # Whether the file was parsed completely; False when parts were skipped because of syntax errors.
    complete: bool = True
    # Launch arguments (by span) whose value the launcher's code shows although they are not literals:
    # `BLOCK_M, BLOCK_N = 16, 100`, `cfg["BLOCK"]`, `min(256, 100)`, `triton.next_power_of_2(100)`.
    launch_values: dict[Span, object] = field(default_factory=dict)
    # Launch arguments (by span) that the file's specs run with several values (one per shape).
    spec_values: dict[Span, ShownSizes] = field(default_factory=dict)
    # Kernel name -> element counts of the tensors the file's specs make for it, or the largest tensor of a
    # constant shape that a launch of the file passes to it (whichever is larger).
    tensor_sizes: dict[str, ShownSizes] = field(default_factory=dict)

    def kernel(self, name: str) -> TritonKernel | None:
        for k in self.kernels:
            if k.name == name:
                return k
        return None


def apply_edits(text: str, edits: "list[TextEdit] | tuple[TextEdit, ...]") -> str:
    """Apply non-overlapping edits (spans in code points) to text; identical edits apply once.

    Two problems may offer the same edit (say, annotating one parameter `tl.constexpr`): fixing all at once must
    not write it twice.
    """
    edits = list(dict.fromkeys(edits))
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        if line >= len(lines):
            return len(text)
        content = lines[line].rstrip("\r\n")
        return starts[line] + min(col, len(content))

    out = text
    for edit in sorted(edits, key=lambda e: (e.span.start_line, e.span.start_col), reverse=True):
        a = offset(edit.span.start_line, edit.span.start_col)
        b = offset(edit.span.end_line, edit.span.end_col)
        out = out[:a] + edit.new_text + out[b:]
    return out


_LINE_REF = re.compile(r"\bline (\d+)")


def shift_problem(problem: Problem, lines: int, first: int, last: int) -> Problem:
    """The same problem after the statement it belongs to (0-based lines first..last) moved by `lines`.

    Same-file positions move with it, and so do "line N" references in the message that point inside the
    statement; references outside it are left alone (callers only shift when those did not move).
    """
    if lines == 0:
        return problem

    def ref(m: re.Match) -> str:
        n = int(m.group(1))
        return f"line {n + lines}" if first + 1 <= n <= last + 1 else m.group(0)

    fix = problem.fix and Fix(problem.fix.title, tuple(TextEdit(e.span.shifted(lines), e.new_text)
                                                       for e in problem.fix.edits))
    related = tuple(Related(r.span.shifted(lines) if r.path is None else r.span, r.message, r.path)
                    for r in problem.related)
    return Problem(problem.code, _LINE_REF.sub(ref, problem.message), problem.severity, problem.span.shifted(lines),
                   fix, related, problem.kernel)


def shift_launch_site(site: "LaunchSite", lines: int) -> "LaunchSite":
    if lines == 0:
        return site

    def arg(a: LaunchArg) -> LaunchArg:
        return LaunchArg(a.text, a.span.shifted(lines), a.keyword, a.kind,
                         a.value_span.shifted(lines) if a.value_span else None)

    return LaunchSite(site.callee, site.target, site.module, site.span.shifted(lines), site.callee_span.shifted(lines),
                      tuple(map(arg, site.args)), tuple(map(arg, site.kwargs)), site.has_star_args)


def shift_kernel(kernel: TritonKernel, lines: int) -> TritonKernel:
    """A copy of a kernel moved by `lines` (a fresh object even when it did not move: callers may set fields)."""
    def param(p: Param) -> Param:
        return Param(p.name, p.annotation, p.is_constexpr, p.default, p.span.shifted(lines),
                     (p.name_end[0] + lines, p.name_end[1]))

    return TritonKernel(
        name=kernel.name, span=kernel.span.shifted(lines), name_span=kernel.name_span.shifted(lines),
        params=[param(p) for p in kernel.params], decorators=list(kernel.decorators),
        autotune_configs=[AutotuneConfig(c.kwargs, c.num_warps, c.num_stages, c.span.shifted(lines))
                          for c in kernel.autotune_configs],
        autotune_keys=list(kernel.autotune_keys), heuristics=list(kernel.heuristics),
        autotune_configs_known=kernel.autotune_configs_known, qualname=kernel.qualname, rebound=kernel.rebound,
        heuristics_known=kernel.heuristics_known, unknown_wrappers=kernel.unknown_wrappers,
        shape_params=kernel.shape_params,
        needed_constexprs=kernel.needed_constexprs,
    )
