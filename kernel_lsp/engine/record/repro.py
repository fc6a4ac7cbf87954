"""A stand-alone script that replays one recorded launch: the kernel and every @jit function and constant it uses
(the same self-contained module the offline compile builds), inputs of the recorded dtypes, shapes and strides,
and the launch with the recorded grid, constexprs and options. For bug reports and for profiling one launch in
Nsight (`nsys profile python repro.py`, `ncu python repro.py`).

Inputs are synthesised (random values of the recorded dtype laid out with the recorded strides): the recording
keeps no tensor data.
"""

from __future__ import annotations

import json

from ..compile.extract import ExtractionError, extract_module
from .store import KernelRecord, Launch

_TORCH_DTYPES = {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
                 "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64", "float8_e4m3fnuz", "float8_e5m2fnuz"}


class ReproError(ValueError):
    """The launch cannot be written as a script (an argument kernel-lsp cannot rebuild)."""


def _input(name: str, a: dict) -> str:
    t = a.get("t")
    if t == "tensor":
        dtype = str(a.get("dtype"))
        if dtype not in _TORCH_DTYPES:
            raise ReproError(f"argument {name}: a tensor of dtype {dtype}, which the script cannot create")
        shape, strides = a.get("shape", []), a.get("strides")
        return f"tensor(torch.{dtype}, {shape!r}, {strides!r})"
    if t in ("int", "bool", "str"):
        return repr(a.get("v"))
    if t == "float":
        v = a.get("v")
        return repr(v) if isinstance(v, float) else f"float({v!r})"
    if t == "none":
        return "None"
    raise ReproError(f"argument {name}: a {a.get('type') or t} value, which the script cannot rebuild")


def script(text: str, rel: str, record: KernelRecord, launch: Launch) -> tuple[str, list[str]]:
    """(the script, notes for the user). Raises ReproError."""
    try:
        mod = extract_module(text, record.qualname.rsplit(".", 1)[-1], rel)
    except ExtractionError as exc:
        raise ReproError(f"{rel}::{record.qualname}: {exc}") from exc
    notes = []
    if mod.unresolved:
        notes.append("names the kernel reads that the script could not include: "
                     + ", ".join(n for n, _ in mod.unresolved))
    args = []
    for name, a in launch.args.items():
        args.append(f"    {name}={_input(name, a)},")
    options = {k: v for k, v in launch.options.items() if k in ("num_warps", "num_stages", "num_ctas", "maxnreg")}
    tuned = launch.autotune or {}
    for k in ("num_warps", "num_stages"):
        if k not in options and isinstance(tuned.get(k), int):
            options[k] = tuned[k]
    if not launch.grid:
        raise ReproError("the recorded launch has no grid (the grid function needed more than the arguments)")
    run = launch.run
    header = (f'"""Replays launch {launch.index} of {rel}::{record.qualname}, recorded by `{run.command}` on '
              f"{run.date} (seen {launch.count}x; triton {launch.triton or '?'}).\n\n"
              "Written by `kernel-lsp repro`. Inputs are random, of the recorded dtypes, shapes and strides.\n"
              "Runs on the GPU when there is one, else under Triton's interpreter (TRITON_INTERPRET=1).\n")
    if launch.stack:
        top = launch.stack[0]
        header += f"Launched from {top.get('file')}:{top.get('line')} ({top.get('function')}).\n"
    header += '"""\n'
    body = f'''import json
import os
import sys

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

# ---- the kernel, as the offline compile sees it (lines of {rel}) ----
{mod.source}
# ---- inputs of the recorded shapes ----
torch.manual_seed(0)


def tensor(dtype, shape, strides):
    """Random values of `dtype` laid out with `strides` (the recording keeps shapes, not data)."""
    size = 1 + sum((n - 1) * s for n, s in zip(shape, strides or [])) if all(shape) else 0
    if dtype.is_floating_point:
        base = torch.randn(max(size, 1), device=DEVICE).to(dtype)
    elif dtype == torch.bool:
        base = torch.rand(max(size, 1), device=DEVICE) > 0.5
    else:
        base = torch.randint(0, 16, (max(size, 1),), device=DEVICE, dtype=dtype)
    if strides is None:
        return base[:size].reshape(shape) if size else torch.empty(shape, dtype=dtype, device=DEVICE)
    return torch.as_strided(base, shape, strides)


args = dict(  # in parameter order: passed positionally, as launchers do (the interpreter wraps only positional scalars)
{chr(10).join(args)}
)
grid = {tuple(launch.grid)!r}



def launch():
    {mod.kernel}[grid](*args.values(){"".join(f", {k}={v!r}" for k, v in options.items())})


def check_bounds():
    """`--check-bounds` (needs kernel-lsp): the launch under the interpreter with kernel-lsp's bounds guard; prints
    one JSON line, the line of an out-of-bounds access as a line of {rel}."""
    from kernel_lsp.engine.verify.hooks import KernelHooks

    hooks = KernelHooks({mod.kernel}, os.path.abspath(__file__), interpreter=True)
    hooks.install()
    try:
        launch()
    except Exception as exc:  # noqa: BLE001 - the interpreter wraps the guard's exception
        if hooks.violation is None:
            print(json.dumps({{"bounds": "error", "message": f"{{type(exc).__name__}}: {{exc}}"[:2000]}}))
            return 4
    violation = hooks.violation
    if violation is None:
        print(json.dumps({{"bounds": "ok", "notes": hooks.notes}}))
        return 0
    line = None
    if violation.line is not None and 0 <= violation.line - KERNEL_FIRST_LINE + 1 < len(LINE_MAP):
        line = LINE_MAP[violation.line - KERNEL_FIRST_LINE + 1] or None
    message = violation.message.replace(f" at line {{violation.line + 1}}", f" at line {{line}}" if line else "")
    print(json.dumps({{"bounds": "out-of-bounds", "line": line, "message": message}}))
    return 3


if __name__ == "__main__":
    if "--check-bounds" in sys.argv:
        sys.exit(check_bounds())
    launch()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    print("launched {mod.kernel}", "grid", grid, "on", DEVICE)
'''
    notes.append(f"launch {launch.index}: {json.dumps(launch.shapes())[1:-1] or 'no tensors'}")
    text = header + body
    first = (header + body.split("# ---- the kernel, as", 1)[0]).count("\n") + 2  # 1-based line of mod.source
    constants = (f"KERNEL_FIRST_LINE = {first}  # the line of this script where the kernel module starts\n"
                 f"LINE_MAP = {tuple(mod.line_map)!r}  # kernel module line (1-based) -> line of {rel}\n\n")
    head, main = text.rsplit("\nif __name__ == \"__main__\":", 1)
    return head + constants + "\nif __name__ == \"__main__\":" + main, notes


def check_bounds(script_text: str, timeout: float = 600.0) -> dict:
    """Run a repro script's `--check-bounds` in a fresh interpreter process: {"bounds": "ok" | "out-of-bounds" |
    "error" | "crashed" | "timeout", "line": user line or None, "message": ...}. The script is the user's own kernel
    with synthesised inputs: it is run only when the user asks (`kernel-lsp repro --check-bounds`)."""
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kernel-lsp-bounds-") as tmp:
        path = os.path.join(tmp, "repro.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(script_text)
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        try:
            proc = subprocess.run([sys.executable, path, "--check-bounds"], cwd=tmp, env=env, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"bounds": "timeout", "message": f"the launch did not finish in {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith('{"bounds"'):
            return json.loads(line)
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"bounds": "crashed", "message": f"exit {proc.returncode}: {tail[0][:500]}"}
