"""An NKI port run on AWS's NKI simulator (`nki.simulate(kernel)(*arrays)`) against the Triton kernel's spec.

    python -m kernel_lsp.engine.assistant.nki_sim  < {"path", "source", "kernel", "nki_kernel", "root"}

Runs in its own process (the user's module is executed): the spec's inputs at each of its shapes and dtypes,
as NumPy arrays, go to the simulated NKI kernel; its output is compared with the spec's PyTorch reference at
the spec's tolerances. Prints one JSON object {"ok", "message", "cases"}. `simulator_available()` tells, without
importing anything heavy, whether the current `nki` package with its simulator is installed.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from pathlib import Path

from ..proc import Stopped, killed_from_outside, run_group

REPO_ROOT = str(Path(__file__).resolve().parents[3])


def simulator_available() -> bool:
    try:
        found = importlib.util.find_spec("nki")
    except (ImportError, ValueError):
        return False
    if found is None or found.origin is None and not found.submodule_search_locations:
        return False
    # PyPI's `nki` is an empty placeholder; the real package (AWS's index) has the simulator.
    roots = list(found.submodule_search_locations or [])
    return any((Path(r) / "simulator").exists() or "def simulate" in _read(Path(r) / "__init__.py") for r in roots)


def _read(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


def simulate(path: str, source: str, kernel: str, nki_kernel: str, root: str | None, timeout: float,
             cancel: threading.Event | None = None) -> dict:
    request = json.dumps({"path": path, "source": source, "kernel": kernel, "nki_kernel": nki_kernel, "root": root})
    try:
        done = run_group([sys.executable, "-P", "-B", "-m", __name__], timeout=timeout, cancel=cancel, input=request.encode(),
                         cwd=REPO_ROOT)
    except Stopped:  # a cancel reads the same as a timeout here
        return {"ok": False, "message": f"the NKI simulation ran longer than {timeout:g} s"}
    outside = killed_from_outside(done.returncode, "the NKI simulation", "ask again")
    if outside:
        return {"ok": False, "message": outside}
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "message": f"the NKI simulation failed: {(err.strip().splitlines() or ['?'])[-1]}"}


def _run(request: dict) -> dict:
    import nki  # the current API (NKI >= 0.4)
    import numpy as np
    import torch

    sys.path.insert(0, REPO_ROOT)
    from kernel_lsp.engine.verify.loading import load_user_module
    from kernel_lsp.spec import kernel_name_of, specs_in

    module = load_user_module(request["path"], request["source"], request.get("root"))
    spec = next((s for s in specs_in(module) if kernel_name_of(s.kernel) == request["kernel"]), None)
    if spec is None:
        return {"ok": False, "message": f"no spec for {request['kernel']}: nothing to simulate against"}
    port = getattr(module, request["nki_kernel"], None)
    if port is None:
        return {"ok": False, "message": f"{request['nki_kernel']} is not defined"}
    cases = []
    for shape in spec.shapes:
        for dtype in spec.dtypes:
            if dtype not in ("float32", "float16"):
                continue  # NumPy has no bfloat16 or fp8
            torch.manual_seed(0)
            args = spec.inputs(shape, getattr(torch, dtype), "cpu")
            args = args if isinstance(args, (tuple, list)) else (args,)
            want = spec.reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
            arrays = [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
            got = nki.simulate(port)(*arrays)
            want_np = want.float().numpy() if isinstance(want, torch.Tensor) else np.asarray(want, np.float32)
            got_np = np.asarray(got, dtype=np.float32)
            tol = 1e-5 if dtype == "float32" else 1e-3
            ok = got_np.shape == want_np.shape and bool(np.allclose(got_np, want_np, atol=tol, rtol=tol))
            err = float(np.max(np.abs(got_np - want_np))) if got_np.shape == want_np.shape else None
            cases.append({"shape": list(shape), "dtype": dtype, "ok": ok, "max_abs": err})
    bad = [c for c in cases if not c["ok"]]
    if not cases:
        return {"ok": False, "message": "no float32/float16 case in the spec to simulate"}
    if bad:
        c = bad[0]
        return {"ok": False, "cases": cases, "message": f"the simulated NKI kernel differs from the reference at "
                f"shape {tuple(c['shape'])} {c['dtype']} (max abs error {c['max_abs']})"}
    return {"ok": True, "cases": cases, "message": f"matches the reference on {len(cases)} cases (nki.simulate)"}


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        answer = _run(request)
    except Exception as exc:  # noqa: BLE001 - the user's code raised: that is the verdict
        answer = {"ok": False, "message": f"the NKI simulation raised {type(exc).__name__}: {exc}"[:800]}
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
