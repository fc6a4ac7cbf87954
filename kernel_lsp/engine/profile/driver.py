"""The program Nsight Compute runs: `python -m kernel_lsp.engine.profile.driver REQUEST.json STATUS.json`.

It imports the user's file from the buffer text (registered under the file's real path, so triton's line info
names the user's file and ncu's source page lines are the buffer's lines), builds the spec's inputs at one bench
shape on the GPU, launches once to compile and warm up (an autotuner benchmarks its configurations here), then
launches once more between cudaProfilerStart/Stop: ncu runs with `--profile-from-start off`, so that launch is
the one it profiles, however many launches the warm-up needed. STATUS.json says what happened.

An autotuner would benchmark its configurations under the profiler, where the timings differ from a normal run's
and it may pick another one. So for an autotuned kernel the same program first runs without ncu with `"mode":
"pick"` (the autotuner picks as in a normal run, and the status names its choice), and the profiled run gets that
choice as `"pin"`: the autotuner is left with that one configuration, so it runs it without benchmarking.

Standard library at import; torch and triton only once the user's module imports them. Works on triton 3.6 and
3.9; no pygls.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def _write(path: str, status: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(status, f)


def _jit_file(kernel) -> str | None:
    from kernel_lsp.spec import unwrap_kernel

    jit = unwrap_kernel(kernel)
    name = getattr(jit, "file_name", None)
    if isinstance(name, str):
        return name
    code = getattr(getattr(jit, "fn", None), "__code__", None)
    return code.co_filename if code is not None else None


def run(request: dict) -> dict:
    from kernel_lsp.engine.verify.loading import UserModuleError, load_user_module
    from kernel_lsp.spec import specs_in

    path = os.path.abspath(request["path"])
    try:
        module = load_user_module(path, request["source"], request.get("root"))
    except UserModuleError as exc:
        return {"ok": False, "kind": "import", "error": exc.message, "line": exc.line}
    found = [s for s in specs_in(module) if s.name == request.get("spec") or (
        not request.get("spec") and s.kernel_name == request.get("kernel"))]
    if not found:
        return {"ok": False, "kind": "spec", "error": f"no spec for {request.get('kernel')} in {path}"}
    spec = found[0]
    import torch

    if not torch.cuda.is_available():
        return {"ok": False, "kind": "no-gpu", "error": "torch sees no CUDA device"}
    shape = tuple(request.get("shape") or spec.bench_shapes[0])
    dtype = getattr(torch, request.get("dtype") or spec.dtypes[0])
    torch.manual_seed(0)
    args = spec.inputs(shape, dtype, "cuda")
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    file_name = _jit_file(spec.kernel)
    pinned = pin_config(spec.kernel, request["pin"]) if request.get("pin") else None
    spec.launcher(*args)
    torch.cuda.synchronize()
    if request.get("mode") == "pick":
        return {"ok": True, "kernel": spec.kernel_name, "config": chosen_config(spec.kernel)}
    torch.cuda.profiler.start()
    try:
        spec.launcher(*args)
        torch.cuda.synchronize()
    finally:
        torch.cuda.profiler.stop()
    return {"ok": True, "kernel": spec.kernel_name, "shape": list(shape), "dtype": str(dtype).removeprefix("torch."),
            "device": torch.cuda.get_device_name(), "kernel_file": file_name,
            "file_matches": bool(file_name and os.path.abspath(file_name) == path), "pinned": pinned}


def _config_json(config) -> dict:
    return {"kwargs": {k: v for k, v in dict(config.kwargs).items()}, "num_warps": config.num_warps,
            "num_stages": config.num_stages, "label": str(config)}


def chosen_config(kernel) -> dict | None:
    """The configuration an autotuned kernel chose in this run; None for a plain kernel."""
    best = getattr(kernel, "best_config", None)
    return _config_json(best) if best is not None else None


def pin_config(kernel, pin: dict) -> str | None:
    """Leave an autotuned kernel only the configuration `pin` describes (a `chosen_config` answer), so that it
    runs that one without benchmarking; the pinned configuration's label, or None where the kernel is not
    autotuned or has no such configuration."""
    configs = getattr(kernel, "configs", None)
    if not configs:
        return None
    for config in configs:
        if (dict(config.kwargs) == pin.get("kwargs") and config.num_warps == pin.get("num_warps")
                and config.num_stages == pin.get("num_stages")):
            kernel.configs = [config]
            return str(config)
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kernel_lsp.engine.profile.driver REQUEST.json STATUS.json", file=sys.stderr)
        return 2
    request_path, status_path = argv
    try:
        with open(request_path, encoding="utf-8") as f:
            request = json.load(f)
        status = run(request)
    except BaseException as exc:  # noqa: BLE001 - the status file carries whatever happened
        status = {"ok": False, "kind": "error", "error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc()}
    _write(status_path, status)
    return 0 if status.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
