"""An NKI port run against the Triton kernel's spec, in the NKI model or AWS's simulator.

    python -m kernel_lsp.engine.assistant.nki_sim  < {"path", "source", "kernel", "nki_kernel", "root"}

Runs in its own process (the user's module is executed): the spec's inputs at each of its shapes, dtypes and
seeds, as NumPy arrays, go to the NKI kernel, run in kernel-lsp's NKI model (engine/nki) or, where AWS's package
is installed, in `nki.simulate`; its output is compared with the spec's PyTorch reference at the spec's
tolerances. The model always runs; where AWS's simulator is installed it runs too, its verdict stands, and the
model's is compared with it: a disagreement is reported as a problem of the tools, at information level, naming
both results. Prints one JSON object {"ok", "status", "message", "line", "cases", "ran", "notes"}.
`simulator_available()` tells, without importing anything heavy, whether the current `nki` package with its
simulator is installed.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from ..proc import Stopped, killed_from_outside, run_group
from ..redact import user_code_env

REPO_ROOT = str(Path(__file__).resolve().parents[3])
SIMULATOR = "nki.simulate"


def simulator_available() -> bool:
    from ..nki.simulator import available

    return available()


def simulate(path: str, source: str, kernel: str, nki_kernel: str, root: str | None, timeout: float,
             cancel: threading.Event | None = None) -> dict:
    request = json.dumps({"path": path, "source": source, "kernel": kernel, "nki_kernel": nki_kernel, "root": root})
    try:
        done = run_group([sys.executable, "-P", "-B", "-m", __name__], timeout=timeout, cancel=cancel, input=request.encode(),
                         cwd=REPO_ROOT, env=user_code_env())  # the user's code runs there: no API key
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
    from kernel_lsp.engine.nki.simulator import cross_check, not_installed_note, simulated_call
    from kernel_lsp.engine.verify.loading import load_user_module
    from kernel_lsp.spec import kernel_name_of, specs_in

    def load():
        module = load_user_module(request["path"], request["source"], request.get("root"))
        spec = next((s for s in specs_in(module) if kernel_name_of(s.kernel) == request["kernel"]), None)
        return spec, getattr(module, request["nki_kernel"], None)

    # The model always runs: `import nki` in the file resolves to it while the file is imported this time.
    with model.installed():
        spec, port = load()
    if spec is None:
        return {"ok": False, "message": f"no spec for {request['kernel']}: nothing to run the port against"}
    if port is None:
        return {"ok": False, "message": f"{request['nki_kernel']} is not defined"}
    by_model = check_spec(spec, port)
    if not simulator_available():
        return {**by_model, "ran": [model.MODEL_LABEL], "notes": [not_installed_note("port")]}
    # AWS's simulator is installed: the file imported again binds the real `nki`, and both results are compared.
    spec, port = load()
    by_simulator = check_spec(spec, simulated_call(port), label=SIMULATOR)
    return {**by_simulator, "ran": [SIMULATOR, model.MODEL_LABEL], "notes": cross_check(by_simulator, by_model)}


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        answer = _run(request)
    except Exception as exc:  # noqa: BLE001 - the user's code raised: that is the verdict
        answer = {"ok": False, "message": f"the NKI simulation raised {type(exc).__name__}: {exc}"[:800]}
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
