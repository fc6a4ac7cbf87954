"""A stand-in for AWS's `nki` package, which only AWS's package index serves: the tests put this folder on the
import path to exercise the code that runs `nki.simulate` beside the kernel-lsp NKI model. Its language modules
are the model's; `simulate` runs the kernel in them and, with STANDIN_NKI_OFFSET set, adds that offset to the
result, as a simulator that disagrees with the model would."""

import os
import sys

from kernel_lsp.engine import nki as _model

_modules = _model.modules()
for _name in ("language", "isa", "typing", "compiler"):
    sys.modules[f"{__name__}.{_name}"] = _modules[f"nki.{_name}"]
language, isa = _modules["nki.language"], _modules["nki.isa"]
jit = _modules["nki"].jit
OFFSET = float(os.environ.get("STANDIN_NKI_OFFSET", "0"))


def simulate(kernel):
    def run(*arrays):
        out = kernel(*arrays)
        return out + OFFSET if OFFSET else out
    return run
