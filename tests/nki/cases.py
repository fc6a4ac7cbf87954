"""Inputs and tolerances for the NKI fixtures: each fixture declares CASES as (shapes, dtype) and a NumPy
reference; one shape means every argument has it."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np

TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 3e-2, "int8": 0}
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int8": np.int8}


def inputs(module, case, seed=0):
    shapes, dtype = case
    arity = len(inspect.signature(module.reference).parameters)
    if shapes and isinstance(shapes[0], int):
        shapes = (shapes,) * arity
    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes:
        if dtype == "int8":
            out.append(rng.integers(-100, 100, size=shape).astype(np.int8))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32).astype(DTYPES[dtype]))
    return out


def close(got, want, dtype) -> tuple[bool, float]:
    got = np.asarray(got).astype(np.float32)
    want = np.asarray(want).astype(np.float32)
    if got.shape != want.shape:
        return False, float("inf")
    tol = TOLERANCE[dtype]
    err = float(np.nanmax(np.abs(got - want))) if got.size else 0.0
    ok = bool(np.allclose(got, want, atol=tol, rtol=tol)) and not np.isnan(got).any()
    return ok, err
