"""The latency worker process: `python -m kernel_lsp.engine.latency.worker` reads one JSON request on stdin and
writes one JSON answer on stdout (whatever the user's code prints goes to stderr).

Modes:
- "count": work counting under Triton's interpreter (the parent sets TRITON_INTERPRET=1 in this process's
  environment, so it is set before triton is imported), CPU inputs, no GPU.
- "measure": GPU timing of the kernel's launcher and the spec's reference (timing.py).

A spec whose kernel is an NKI kernel is counted in the NKI model instead (the model is installed before the file
is imported): the point's `nki` holds the model's counters at the full bench shape (analyzers/nki_estimate.py).

A request names the user's file (path, buffer text, workspace root) and points: which spec (by its inputs
function's name) or factory (a function of the file returning (kernel, launcher, args) for (shape, dtype,
device)), the shape and dtype, and optional overrides of the launch (constexprs, num_warps, num_stages). Without
points, every spec of the file (filtered by kernel names) at each of its bench shapes, first dtype.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import sys
import time
import traceback


def _load(path: str, source: str | None, root: str | None):
    if source is None:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    from kernel_lsp.engine.verify.loading import load_user_module

    return load_user_module(path, source, root)


def _specs(module) -> list:
    from kernel_lsp.spec import specs_in

    return specs_in(module)


def _torch_dtype(name: str):
    import torch

    return getattr(torch, str(name).removeprefix("torch."))


def _points(module, request: dict) -> list[dict]:
    points = request.get("points")
    if points:
        return points
    kernels = set(request.get("kernels") or ())
    out = []
    for s in _specs(module):
        if kernels and s.kernel_name not in kernels:
            continue
        for shape in s.bench_shapes:
            out.append({"spec": s.name, "kernel": s.kernel_name, "shape": list(shape), "dtype": s.dtypes[0]})
    return out


def _resolve(module, point: dict, device: str):
    """(kernel, launcher, reference or None, inputs) for one point."""
    dtype = _torch_dtype(point.get("dtype") or "float32")
    shape = tuple(point.get("shape") or ())
    if point.get("factory"):
        factory = getattr(module, point["factory"])
        made = factory(shape, dtype, device)
        kernel, launcher, args = made[:3]
        reference = made[3] if len(made) > 3 else None
        return kernel, launcher, reference, tuple(args)
    for s in _specs(module):
        if s.name == point.get("spec") or (not point.get("spec") and s.kernel_name == point.get("kernel")):
            args = s.inputs(shape or s.bench_shapes[0], dtype, device)
            return s.kernel, s.launcher, s.reference, tuple(args) if isinstance(args, (tuple, list)) else (args,)
    raise LookupError(f"no spec named {point.get('spec') or point.get('kernel')!r} in {module.__name__}")


def _jsonable(value):
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return repr(value)


def _captured(module, point: dict, shape) -> list:
    from . import counting

    kernel, launcher, _, args = _resolve(module, {**point, "shape": list(shape)}, "cpu")
    launches = counting.capture(kernel, launcher, args, point.get("overrides"))
    if not launches:
        raise RuntimeError("the launcher did not launch the kernel")
    return launches


def _count_scaled(module, point: dict, shape: tuple, full: list, samples: int) -> tuple[list[dict], list] | None:
    """Work of the full shape's launches counted at reduced shapes and scaled (counting.py); None where the
    shape cannot be reduced or the counts do not scale. Launches with different largest block sizes (an
    autotuner's configs) are each counted at the shape their own tiles allow."""
    from . import counting

    outlines = [counting.outline(lc) for lc in full]
    groups: dict[tuple, list[int]] = {}
    plans = {}
    for j, o in enumerate(outlines):
        plan = counting.reduced_shape(shape, counting.largest_block([o]))
        if not plan:
            return None
        key = tuple(sorted((i, p.size) for i, p in plan.items()))
        groups.setdefault(key, []).append(j)
        plans[key] = plan
    works: dict[int, dict] = {}  # position of the launch -> its scaled work
    counted_at: list | None = None
    for key, members in groups.items():
        scaled = _scale_group(module, point, shape, outlines, members, plans[key], samples)
        if scaled is None:
            return None
        works.update(zip(members, scaled[0]))
        counted_at = scaled[1] if counted_at is None else [min(a, b) for a, b in zip(counted_at, scaled[1])]
    if counted_at is None:  # no launch to count
        return None
    return [works[j] for j in range(len(outlines))], counted_at


def _scale_group(module, point, shape, outlines, members, plan, samples) -> tuple[list[dict], list] | None:
    from . import counting

    def at(sizes: dict[int, int]) -> tuple:
        return tuple(sizes.get(i, s) for i, s in enumerate(shape))

    def keeps(r) -> bool:
        try:
            return counting.same_configuration(outlines, [counting.outline(lc) for lc in _captured(module, point, r)])
        except Exception:  # noqa: BLE001 - a launcher that refuses the reduced shape: count the full one
            return False

    if not keeps(at({i: p.size for i, p in plan.items()})):
        plan = {i: p for i, p in plan.items() if keeps(at({i: p.size}))}
    if not plan:
        return None
    reduced = {i: p.size for i, p in plan.items()}
    # Every program of a reduced grid with a ragged size runs (its edges are interleaved with whole tiles in a
    # 1-D grid, where sampling would miss them); whole tiles are all alike and sampled as at full size.
    ragged = any(not p.power for p in plan.values())
    per_launch = max(samples, counting.REDUCED_SAMPLES) if ragged else samples

    def counted(r) -> list[dict]:
        launches = _captured(module, point, r)
        if len(launches) != len(outlines):
            raise LookupError("the launches differ at the reduced shape")
        return [counting.count(launches[j], per_launch) for j in members]

    try:
        base = counted(at(reduced))
        grown = [(i, counted(at({**reduced, i: p.grown}))) for i, p in plan.items()]
    except LookupError:
        return None
    mine = [outlines[j] for j in members]
    if not counting.same_configuration(mine, base) or not all(counting.same_configuration(base, w) for _, w in grown):
        return None
    out = []
    for k, full_launch in enumerate(mine):
        scaled = counting.scale_work(full_launch, base[k], [(i, w[k]) for i, w in grown], plan)
        if scaled is None:
            return None
        out.append(scaled)
    return out, list(at(reduced))


def uses_nki(source: str) -> bool:
    """Whether a file imports NKI (either API generation): its kernels then run in the NKI model here."""
    return re.search(r"^[ \t]*(?:import|from)[ \t]+(?:nki|neuronxcc)\b", source, re.MULTILINE) is not None


NKI_COUNT_ELEMENTS = 1 << 20  # larger bench shapes are counted at reduced shapes and the counts scaled


def _nki_counts(module, point: dict, shape: tuple) -> tuple[dict, tuple | None] | None:
    """(the NKI model's counters, the shape counted where it was reduced) for a point whose spec names an NKI
    kernel; None for other kernels. A shape of more than NKI_COUNT_ELEMENTS elements is counted at a reduced
    shape and at that shape with each reduced size doubled once; each counter is carried to the full shape as a
    power law per size (exact for counts linear in a size, as streaming and tiled kernels' are)."""
    if point.get("factory") or "kernel_lsp.engine.nki" not in sys.modules:
        return None  # a file without NKI imports (handle() installs the model for one that has them)
    from kernel_lsp.engine.nki.check import is_nki_kernel

    spec = next((s for s in _specs(module) if s.name == point.get("spec") or
                 (not point.get("spec") and s.kernel_name == point.get("kernel"))), None)
    if spec is None or not is_nki_kernel(spec.kernel):
        return None
    reduced = list(shape)
    while reduced and math.prod(reduced) > NKI_COUNT_ELEMENTS and max(reduced) >= 1024:
        i = reduced.index(max(reduced))
        reduced[i] = (reduced[i] + 1) // 2
    if tuple(reduced) == tuple(shape):
        return _nki_run(module, point, tuple(shape)), None
    base = _nki_run(module, point, tuple(reduced))
    scaled = {k: dict(v) if isinstance(v, dict) else float(v) for k, v in base.items()}
    for i, (full, small) in enumerate(zip(shape, reduced)):
        if full == small:
            continue
        grown = _nki_run(module, point, tuple(small * 2 if j == i else r for j, r in enumerate(reduced)))
        steps = math.log2(full / small)  # doublings from the reduced size to the full one
        for k, v in scaled.items():
            if isinstance(v, dict):
                scaled[k] = {c: _carry(base[k].get(c, 0), grown[k].get(c, 0), n, steps) for c, n in v.items()}
            else:
                scaled[k] = _carry(base[k], grown[k], v, steps)
    return scaled, tuple(reduced)


def _carry(base: float, grown: float, now: float, steps: float) -> float:
    """A count carried `steps` doublings of one size further, at the rate it grew over one doubling."""
    return now * (grown / base) ** steps if base > 0 and grown > 0 else now


def _nki_run(module, point: dict, shape: tuple) -> dict:
    from kernel_lsp.engine import nki as model

    _, launcher, _, args = _resolve(module, {**point, "shape": list(shape)}, "cpu")
    del model.OUTCOMES[:]
    launcher(*[model.to_numpy(a) for a in args])
    if not model.OUTCOMES:
        raise RuntimeError("the launcher did not run the NKI kernel")
    total = model.Counters()
    for outcome in model.OUTCOMES:
        total.add(outcome.counters)
    return total.to_json()


def _count(module, request: dict) -> list[dict]:
    import torch

    from . import counting

    torch.manual_seed(0)
    results = []
    scale = request.get("scale", True)
    for point in _points(module, request):
        entry = {**point, "launches": [], "error": None}
        started = time.perf_counter()
        try:
            shape = tuple(int(s) for s in point.get("shape") or ())
            nki = _nki_counts(module, point, shape)
            if nki is not None:
                entry["nki"], counted = nki
                if counted is not None:
                    entry["counted_shape"] = list(counted)
                entry["seconds"] = time.perf_counter() - started
                results.append(entry)
                continue
            launches = _captured(module, point, shape)
            samples = int(request.get("samples") or counting.DEFAULT_SAMPLES)
            scaled = _count_scaled(module, point, shape, launches, samples) if scale and shape else None
            if scaled is not None:
                works, entry["counted_shape"] = scaled
            else:
                works = [counting.count(launch, samples) for launch in launches]
            for work in works:
                work["constexprs"] = [[k, _jsonable(v)] for k, v in work["constexprs"]]
                entry["launches"].append(work)
        except Exception as exc:  # noqa: BLE001 - one point's failure is that point's answer
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc()
        entry["seconds"] = time.perf_counter() - started
        results.append(entry)
    return results


def _measure(module, request: dict) -> list[dict]:
    import torch

    from . import timing

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: measured timing needs a GPU (estimates need none)")
    results = []
    reps = int(request.get("repetitions") or timing.DEFAULT_REPETITIONS)
    for point in _points(module, request):
        entry = {**point, "error": None}
        try:
            # An NKI kernel does not run on a CUDA device: its figure is the NKI model's Trainium estimate.
            nki = _nki_counts(module, point, tuple(int(s) for s in point.get("shape") or ()))
            if nki is not None:
                entry["nki"], counted = nki
                if counted is not None:
                    entry["counted_shape"] = list(counted)
                results.append(entry)
                continue
            torch.manual_seed(secrets.randbits(63))
            kernel, launcher, reference, args = _resolve(module, point, "cuda")
            overrides = point.get("overrides")
            run = timing.with_overrides(kernel, launcher, overrides) if overrides else launcher
            checked = _checked_timing(module, point, run, reps)
            if checked is None:  # a factory point: no spec to draw inputs from or verify against
                entry["kernel_timing"] = timing.time_callable(lambda f=run, a=args: f(*a), repetitions=reps).to_json()
            else:
                entry["kernel_timing"], entry["audit"] = checked
            if reference is not None and not request.get("skip_reference"):
                entry["reference_timing"] = timing.time_callable(lambda f=reference, a=args: f(*a),
                                                                 repetitions=reps).to_json()
            entry["device_name"] = torch.cuda.get_device_name()
            entry["bytes"] = timing.tensor_bytes(args)
        except Exception as exc:  # noqa: BLE001
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc()
        results.append(entry)
    return results


def _checked_timing(module, point: dict, run, reps: int) -> tuple[dict, str | None] | None:
    """The launcher timed on fresh inputs per call, each timed call's output verified against the spec's reference
    at the timed shape (timing.time_checked), and one more call audited by the CUDA profiler. None for a point
    without a spec."""
    import torch

    from kernel_lsp.spec import unwrap_kernel

    from ..verify.compare import DEFAULT_TOLERANCES, compare
    from . import timing

    if point.get("factory"):
        return None
    found = [s for s in _specs(module)
             if s.name == point.get("spec") or (not point.get("spec") and s.kernel_name == point.get("kernel"))]
    if not found:
        return None
    s = found[0]
    dtype_name = str(point.get("dtype") or s.dtypes[0]).removeprefix("torch.")
    dtype = _torch_dtype(dtype_name)
    shape = tuple(point.get("shape") or s.bench_shapes[0])
    atol, rtol = s.tolerance(dtype_name, DEFAULT_TOLERANCES)

    def fresh() -> tuple:
        torch.manual_seed(secrets.randbits(63))
        made = s.inputs(shape, dtype, "cuda")
        return tuple(made) if isinstance(made, (tuple, list)) else (made,)

    def verify(args: tuple, out) -> str | None:
        expected = s.reference(*args)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        refs = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        if len(outs) != len(refs):
            return f"{len(outs)} outputs, the reference has {len(refs)}"
        for o, r in zip(outs, refs):
            if isinstance(r, torch.Tensor):
                result = compare(o, r, atol, rtol, [])
                if result.message or not result.ok:
                    return result.message or f"{result.mismatched} of {result.total} elements differ at shape {shape}"
        return None

    kernel_names = {getattr(getattr(unwrap_kernel(v), "fn", None), "__name__", "") for v in vars(module).values()
                    if hasattr(unwrap_kernel(v), "arg_names")}
    kernel_names.discard("")
    audit = timing.audit_launches(run, fresh(), kernel_names)
    return timing.time_checked(run, fresh, verify, repetitions=reps).to_json(), audit


def _untrusted(source: str, snapshot, when: str) -> dict | None:
    """The answer when the file reaches into this process or replaced what timing relies on (torch.cuda's
    events, triton.testing, time): its figures would be whatever it wanted (verify/integrity.py)."""
    from kernel_lsp.engine.verify.integrity import describe_replaced, patch_line

    changed = snapshot.changed()
    if not changed:
        return None
    line = patch_line(source, changed[0])
    return {"ok": False, "error": f"not timed: {describe_replaced(changed)} replaced {when}", "line": line,
            "results": []}


def handle(request: dict) -> dict:
    mode = request.get("mode")
    source = request.get("source")
    if source is None:
        with open(request["path"], encoding="utf-8") as f:
            source = f.read()
    from kernel_lsp.engine.verify.integrity import Snapshot, describe_findings, scan

    findings = scan(source)
    if findings:
        return {"ok": False, "error": f"not timed: {describe_findings(findings)}; a file that reaches into the "
                "checker is not run", "line": findings[0].line, "results": []}
    import torch  # noqa: F401 - imported before the snapshot, as the user's module would import it
    import triton  # noqa: F401

    if mode in ("count", "measure") and uses_nki(source):
        from kernel_lsp.engine import nki as model

        model.install()  # `import nki` in the file resolves to the NKI model, which counts the kernel's work
    snapshot = Snapshot()
    try:
        module = _load(request["path"], source, request.get("root"))
    except Exception as exc:  # noqa: BLE001
        line = getattr(exc, "line", None)
        return {"ok": False, "error": f"cannot import {request.get('path')}: {getattr(exc, 'message', exc)}",
                "line": line, "results": []}
    refused = _untrusted(source, snapshot, "when the file was imported")
    if refused:
        return refused
    try:
        if mode == "count":
            results = _count(module, request)
        elif mode == "measure":
            results = _measure(module, request)
        else:
            return {"ok": False, "error": f"unknown mode {mode!r}", "results": []}
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
                "results": []}
    return _untrusted(source, snapshot, "while the kernel was timed") or {"ok": True, "error": None,
                                                                          "results": results}


def main() -> None:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the user's prints must not corrupt the answer
    request = json.loads(sys.stdin.read() or "{}")
    answer = handle(request)
    out.write(json.dumps(answer, default=_jsonable))
    out.flush()


if __name__ == "__main__":
    main()
