"""An NKI port run against the Triton kernel's spec, in the NKI model or AWS's simulator.

    python -m kernel_lsp.engine.assistant.nki_sim  < {"path", "source", "kernel", "nki_kernel", "root"}

Runs in its own process (the user's module is executed): the spec's inputs at each of its shapes, dtypes and
seeds, as NumPy arrays, go to the NKI kernel, run in kernel-lsp's NKI model (engine/nki) or, where AWS's package
is installed, in `nki.simulate`; its output is compared with the spec's PyTorch reference at the spec's
tolerances. Prints one JSON object {"ok", "status", "message", "line", "cases"}. `simulator_available()` tells,
without importing anything heavy, whether the current `nki` package with its simulator is installed.
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
    sys.path.insert(0, REPO_ROOT)
    from kernel_lsp.engine import nki as model
    from kernel_lsp.engine.nki.check import check_spec
    from kernel_lsp.engine.verify.loading import load_user_module
    from kernel_lsp.spec import kernel_name_of, specs_in

    # Without AWS's simulator, `import nki` in the user's file resolves to the model, which runs the port.
    real = simulator_available()
    if not real:
        model.install()
    module = load_user_module(request["path"], request["source"], request.get("root"))
    spec = next((s for s in specs_in(module) if kernel_name_of(s.kernel) == request["kernel"]), None)
    if spec is None:
        return {"ok": False, "message": f"no spec for {request['kernel']}: nothing to run the port against"}
    port = getattr(module, request["nki_kernel"], None)
    if port is None:
        return {"ok": False, "message": f"{request['nki_kernel']} is not defined"}
    if real:
        import nki

        simulated = nki.simulate(port)

        def call(*arrays):
            model.OUTCOMES.append(model.Outcome(None, model.tensor.Counters()))
            out = simulated(*arrays)
            model.OUTCOMES[-1].value = out
            return out
        return check_spec(spec, call, label="nki.simulate")
    return check_spec(spec, port)


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        answer = _run(request)
    except Exception as exc:  # noqa: BLE001 - the user's code raised: that is the verdict
        answer = {"ok": False, "message": f"the NKI simulation raised {type(exc).__name__}: {exc}"[:800]}
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
