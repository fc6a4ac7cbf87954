"""What a correctness check returns: plain frozen dataclasses that pickle and round-trip through JSON."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("correct", "mismatch", "rejected", "out-of-bounds", "crashed", "timeout", "out-of-memory", "error",
            "not-checked", "rule-broken")

# Which check decided a verdict ("rejected", "not-checked", "out-of-bounds", a failing device assertion): a
# stable name for JSON,
# the assistant's feedback and tests, next to the message written for people.
FAILED_CHECKS = (
    "no-launch",  # the launcher returned without launching the kernel
    "fallback",  # a failing launch was swallowed and an answer returned anyway
    "not-from-kernel",  # with the launches skipped the launcher still returns the answer
    "provenance",  # returned values do not follow what the kernel's launches wrote
    "input-modified",  # an input changed
    "cached",  # the same output memory again, or no launch on the second call
    "nondeterministic",  # two runs on the same inputs differ
    "race",  # two programs stored different values to one address
    "bounds",  # an access outside every tensor argument
    "device-assert",  # a tl.device_assert failed (status "error": only the interpreter runs them)
    "self-reference",  # the reference launches the kernel: it certifies itself
    "patched",  # the file replaced functions the checker relies on (torch, triton, numpy, the checker)
    "introspection",  # the file reaches into the checker (frames, gc, the checker's modules, its pipe)
    "work",  # the kernel relays or starts what PyTorch (or an earlier call) computed in the launcher
    "spec",  # the spec cannot tell right from wrong: no tensor, NaN, zeros pass, inputs ignore the seed
    "loose-tolerance",  # status "correct", at a tolerance looser than the dtype warrants (a warning, KV009)
)


@dataclass(frozen=True)
class CheckRequest:
    path: str
    source: str
    kernels: tuple[str, ...] | None = None  # check only the specs of these kernels (None: every spec)
    device: str = "auto"  # "auto" (CUDA when torch sees one, else the interpreter), "cuda", "interpreter"
    timeout_s: float = 60.0  # per spec, from the moment the spec starts (the import has its own, equal limit)
    memory_mb: int = 4096  # resident memory of the checking process
    root: str | None = None  # workspace root, put on sys.path
    # On a GPU, first check on the CPU interpreter for out-of-bounds accesses and write races (which the GPU run
    # cannot see) and run on the GPU only the specs that pass did not decide. False: the GPU pass alone.
    guard: bool = True


@dataclass(frozen=True)
class CaseResult:
    shape: tuple[int, ...]
    dtype: str
    seed: int
    ok: bool
    max_abs: float | None = None
    max_rel: float | None = None
    mismatched: int = 0
    total: int = 0
    first_index: tuple[int, ...] | None = None
    tail_only: bool | None = None  # all mismatches past the last full block (None: no block size applies)
    config: str | None = None  # the autotune config, "BLOCK_SIZE_M=64, ..., num_warps=4"
    note: str | None = None
    line: int | None = None  # 0-based line of the store that wrote the first wrong element (interpreter)


@dataclass(frozen=True)
class Verdict:
    kernel: str
    spec: str
    spec_line: int  # 0-based def line of the inputs function
    kernel_line: int  # 0-based def line of the kernel
    status: str
    device: str
    message: str
    line: int | None = None  # 0-based line the problem belongs to
    column: int | None = None
    cases: tuple[CaseResult, ...] = ()
    notes: tuple[str, ...] = ()
    duration_s: float = 0.0
    failed_check: str | None = None  # one of FAILED_CHECKS when an honesty check decided the verdict

    @property
    def ok(self) -> bool:
        return self.status == "correct"

    @property
    def on_gpu(self) -> bool:
        """Whether the kernel ran on a GPU: not on Triton's interpreter, nor in the NKI model (whose kernels are
        timed by its Trainium2 estimate, never measured here)."""
        device = self.device.lower()
        return "interpreter" not in device and "nki model" not in device


@dataclass(frozen=True)
class CheckReport:
    path: str
    verdicts: tuple[Verdict, ...] = ()
    errors: tuple[tuple[int | None, str], ...] = field(default_factory=tuple)  # (0-based line, message)

    @property
    def ok(self) -> bool:
        return not self.errors and all(v.ok for v in self.verdicts)


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def case_to_dict(c: CaseResult) -> dict:
    d = asdict(c)
    d["max_abs"], d["max_rel"] = _finite(c.max_abs), _finite(c.max_rel)
    return d


def _float(x: Any) -> float | None:
    if x is None:
        return None
    return float(x)


def case_from_dict(d: dict) -> CaseResult:
    return CaseResult(
        shape=tuple(d["shape"]), dtype=d["dtype"], seed=int(d["seed"]), ok=bool(d["ok"]),
        max_abs=_float(d.get("max_abs")), max_rel=_float(d.get("max_rel")), mismatched=int(d.get("mismatched", 0)),
        total=int(d.get("total", 0)),
        first_index=tuple(d["first_index"]) if d.get("first_index") is not None else None,
        tail_only=d.get("tail_only"), config=d.get("config"), note=d.get("note"), line=d.get("line"))


def verdict_to_dict(v: Verdict) -> dict:
    d = asdict(v)
    d["cases"] = [case_to_dict(c) for c in v.cases]
    d["notes"] = list(v.notes)
    return d


def verdict_from_dict(d: dict) -> Verdict:
    return Verdict(
        kernel=d["kernel"], spec=d["spec"], spec_line=int(d["spec_line"]), kernel_line=int(d["kernel_line"]),
        status=d["status"], device=d["device"], message=d["message"], line=d.get("line"), column=d.get("column"),
        cases=tuple(case_from_dict(c) for c in d.get("cases", ())), notes=tuple(d.get("notes", ())),
        duration_s=float(d.get("duration_s", 0.0)), failed_check=d.get("failed_check"))


def to_json(obj: CheckReport | Verdict | CaseResult | CheckRequest) -> str:
    """One JSON object for a report, verdict, case or request (non-finite floats as "inf"/"-inf"/null)."""
    if isinstance(obj, CheckReport):
        d = {"kind": "report", "path": obj.path, "verdicts": [verdict_to_dict(v) for v in obj.verdicts],
             "errors": [list(e) for e in obj.errors]}
    elif isinstance(obj, Verdict):
        d = {"kind": "verdict", **verdict_to_dict(obj)}
    elif isinstance(obj, CaseResult):
        d = {"kind": "case", **case_to_dict(obj)}
    elif isinstance(obj, CheckRequest):
        d = {"kind": "request", **asdict(obj)}
    else:
        raise TypeError(f"to_json: cannot encode {type(obj).__name__}")
    return json.dumps(d, allow_nan=False)


def from_json(text: str) -> CheckReport | Verdict | CaseResult | CheckRequest:
    d = json.loads(text)
    kind = d.pop("kind", None)
    if kind == "report":
        return CheckReport(d["path"], tuple(verdict_from_dict(v) for v in d["verdicts"]),
                           tuple((e[0], e[1]) for e in d["errors"]))
    if kind == "verdict":
        return verdict_from_dict(d)
    if kind == "case":
        return case_from_dict(d)
    if kind == "request":
        kernels = d.get("kernels")
        return CheckRequest(d["path"], d["source"], tuple(kernels) if kernels is not None else None,
                            d.get("device", "auto"), float(d.get("timeout_s", 60.0)), int(d.get("memory_mb", 4096)),
                            d.get("root"), bool(d.get("guard", True)))
    raise ValueError(f"from_json: unknown kind {kind!r}")
