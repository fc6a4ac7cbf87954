"""A correctness spec run in the NKI model: the spec's inputs at each shape, dtype and seed, as NumPy arrays, go
to the NKI kernel (or the launcher that calls it); the result is compared with the spec's PyTorch reference at
the spec's tolerances. Runs inside a checking process (it imports torch and the user's module)."""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

from . import MODEL_LABEL, OUTCOMES, NkiRuleError, Unsupported, to_numpy


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def check_spec(spec, call, *, label: str = MODEL_LABEL, defaults: dict | None = None) -> dict:
    """{"ok", "status", "message", "line", "cases"}: `call(*arrays)` against `spec.reference` on every case."""
    import torch

    from ..verify.compare import DEFAULT_TOLERANCES

    defaults = defaults or DEFAULT_TOLERANCES
    cases: list[dict[str, Any]] = []  # JSON-like, as the simulator's verdicts are
    for shape in spec.shapes:
        for dtype in spec.dtypes:
            for _ in range(spec.seeds):
                seed = secrets.randbits(63)  # fresh and secret for every case and run; each case records its own
                torch.manual_seed(seed)
                args = _as_tuple(spec.inputs(shape, getattr(torch, dtype), "cpu"))
                kept = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
                arrays = [to_numpy(a) for a in args]
                del OUTCOMES[:]
                case = {"shape": list(shape), "dtype": dtype, "seed": seed}
                try:
                    got = call(*arrays)
                except NkiRuleError as exc:
                    status = "unsupported" if isinstance(exc, Unsupported) else "rule"
                    what = "the NKI model cannot run this" if status == "unsupported" else "breaks a NeuronCore rule"
                    return {"ok": False, "status": status, "rule": exc.rule, "code": exc.code, "line": exc.line,
                            "message": f"{what} at shape {tuple(shape)} {dtype}: {exc.message} "
                                       f"[{exc.code or exc.rule}]", "cases": cases + [{**case, "ok": False}]}
                if not OUTCOMES:
                    return {"ok": False, "status": "rejected", "line": None, "cases": cases,
                            "message": "the launcher returned without running the NKI kernel"}
                outcome = OUTCOMES[-1]
                # The reference runs once the kernel has returned, on copies made before it ran: its answer
                # exists nowhere while the kernel runs.
                want = spec.reference(*kept)
                atol, rtol = spec.tolerance(dtype, defaults)
                verdict = _compare(got, want, outcome, atol, rtol)
                cases.append({**case, **{k: v for k, v in verdict.items() if k not in ("line", "rejected")}})
                if not verdict["ok"]:
                    status = "rejected" if verdict.get("rejected") else "mismatch"
                    return {"ok": False, "status": status, "line": verdict.get("line"), "cases": cases,
                            "message": f"differs from the reference at shape {tuple(shape)} {dtype} (seed {seed}): "
                                       f"{verdict['detail']} ({label})"}
    n = len(cases)
    return {"ok": True, "status": "correct", "line": None, "cases": cases,
            "message": f"correct on {n} case{'s' if n != 1 else ''} ({label})"}


def _compare(got, want, outcome, atol, rtol) -> dict:
    import torch

    want_np = want.detach().float().cpu().numpy() if isinstance(want, torch.Tensor) else np.asarray(want, np.float32)
    got_np = np.asarray(to_numpy(got))
    values = list(outcome.value) if isinstance(outcome.value, (tuple, list)) else [outcome.value]
    writer_list = list(outcome.writers) if isinstance(outcome.writers, (tuple, list)) else [outcome.writers]
    # The launcher returns what the kernel returned, or a view of it (a reshape, a transpose).
    source = next((i for i, v in enumerate(values) if v is got), None)
    if source is None:
        source = next((i for i, v in enumerate(values) if isinstance(v, np.ndarray) and isinstance(got, np.ndarray)
                       and np.shares_memory(v, got)), None)
    if source is None:
        return {"ok": False, "rejected": True, "detail": "the result is not an output of the NKI kernel (the "
                "launcher must return what the kernel returns, or a view of it)"}
    writers = writer_list[source] if values[source] is got else None
    got_f = got_np.astype(np.float32)
    if got_f.shape != want_np.shape:
        return {"ok": False, "detail": f"the kernel returned shape {got_f.shape}, the reference {want_np.shape}"}
    with np.errstate(invalid="ignore"):
        bad = ~np.isclose(got_f, want_np, atol=atol, rtol=rtol, equal_nan=False) & ~(np.isnan(want_np)
                                                                                     & np.isnan(got_f))
    if not bad.any():
        err = float(np.max(np.abs(got_f - want_np))) if got_f.size else 0.0
        return {"ok": True, "max_abs": err, "total": int(got_f.size), "mismatched": 0}
    first = tuple(int(i[0]) for i in np.nonzero(bad))
    line = int(writers[first]) if writers is not None else -1
    unwritten = int(((writers == -1) & bad).sum()) if writers is not None else 0
    diff = np.abs(got_f - want_np)[bad]
    err = float(np.nanmax(diff)) if np.isfinite(diff).any() else float("nan")
    where = f"never written by the kernel ({unwritten} such elements)" if line < 0 else \
        f"written at line {line + 1}"
    detail = f"{int(bad.sum())}/{bad.size} elements differ, max abs {err:.3g}, first at {list(first)} " \
             f"(got {got_f[first]:.6g}, expected {want_np[first]:.6g}), {where}"
    return {"ok": False, "detail": detail, "line": line if line >= 0 else None, "mismatched": int(bad.sum()),
            "total": int(bad.size), "first_index": list(first)}


def is_nki_kernel(kernel) -> bool:
    from . import BoundKernel, Kernel

    return isinstance(kernel, (Kernel, BoundKernel))


def spec_verdict(spec, kernel_line: int):
    """The checker's Verdict for a spec whose kernel is an NKI kernel: its launcher run in the model."""
    import time

    from kernel_lsp.spec import kernel_name_of

    from ..verify.results import CaseResult, Verdict

    from .simulator import SIMULATOR, available, check_in_simulator, cross_check

    started = time.monotonic()
    found = check_spec(spec, spec.launcher)
    label = MODEL_LABEL
    notes: tuple[str, ...] = ()
    if available():  # AWS's simulator is installed: its verdict stands, the model's is compared with it
        by_simulator = check_in_simulator(spec)
        if by_simulator is None:
            notes = (f"not run in {SIMULATOR}: only a spec whose launcher is the NKI kernel itself can be handed "
                     f"to it; the {MODEL_LABEL} ran it",)
        else:
            notes = tuple(cross_check(by_simulator, found, what="kernel"))
            found, label = by_simulator, SIMULATOR
    cases = tuple(CaseResult(tuple(c["shape"]), c["dtype"], c.get("seed", 0), bool(c.get("ok")), c.get("max_abs"),
                             mismatched=c.get("mismatched", 0), total=c.get("total", 0),
                             first_index=tuple(c["first_index"]) if c.get("first_index") else None)
                  for c in found["cases"])
    status = {"correct": "correct", "mismatch": "mismatch", "rule": "rule-broken", "rejected": "rejected",
              "unsupported": "not-checked"}[found["status"]]
    return Verdict(kernel_name_of(spec.kernel), spec.name, spec.line - 1, kernel_line, status, label,
                   found["message"], found.get("line"), cases=cases, notes=notes,
                   duration_s=time.monotonic() - started)
