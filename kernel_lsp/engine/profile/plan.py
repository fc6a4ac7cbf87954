"""`python -m kernel_lsp.engine.profile.plan REQUEST.json STATUS.json`: the points to profile in a file, one per
spec and bench shape (first dtype), read by importing the user's module from the buffer text. Needs no GPU."""

from __future__ import annotations

import json
import os
import sys
import traceback


def plan(request: dict) -> dict:
    from kernel_lsp.engine.verify.loading import UserModuleError, load_user_module
    from kernel_lsp.spec import specs_in

    path = os.path.abspath(request["path"])
    try:
        module = load_user_module(path, request["source"], request.get("root"))
    except UserModuleError as exc:
        return {"ok": False, "error": exc.message, "line": exc.line}
    points = [{"spec": s.name, "kernel": s.kernel_name, "shape": list(shape), "dtype": s.dtypes[0],
               "line": s.line - 1, "autotuned": hasattr(s.kernel, "configs") and hasattr(s.kernel, "fn")}
              for s in specs_in(module) for shape in s.bench_shapes]
    return {"ok": True, "points": points}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kernel_lsp.engine.profile.plan REQUEST.json STATUS.json", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as f:
            status = plan(json.load(f))
    except BaseException as exc:  # noqa: BLE001 - the status file carries whatever happened
        status = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    with open(argv[1], "w", encoding="utf-8") as f:
        json.dump(status, f)
    return 0 if status.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
