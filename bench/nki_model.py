"""The NKI model on its fixtures and on public NKI kernels.

    python bench/fetch_nki_corpus.py && python bench/nki_model.py [--json out.json] [--only NAME]

1. Run time per fixture: each kernel of tests/nki/fixtures/correct at each of its cases, median of 3 runs, in
   this process (the model's own time: no process start, no torch), with the Trainium2 latency estimate from
   the run's counters (analyzers/nki_estimate.py).
2. Public kernels (bench/nki_corpus_manifest.json): each kernel is loaded with its NKI imports resolved to the
   model, called with the manifest's arguments and compared with the manifest's NumPy reference. A kernel is
   "reproduced" when it matches; otherwise the reason is listed: a NeuronCore rule the model raised, an NKI call
   the model does not implement, a file that does not load, or a mismatch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
import traceback
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from analyzers.nki_estimate import estimate as nki_estimate
from kernel_lsp.engine import nki as model
from tests.nki.cases import close, inputs

CORPUS = HERE / ".nki-corpus"
MANIFEST = HERE / "nki_corpus_manifest.json"


def time_fixtures() -> list[dict]:
    rows = []
    for path in sorted((REPO / "tests" / "nki" / "fixtures" / "correct").glob("*.py")):
        module = model.load_file(str(path))
        for case in module.CASES:
            args = inputs(module, case)
            times = []
            for _ in range(3):
                del model.OUTCOMES[:]
                start = time.perf_counter()
                with model.installed():
                    got = module.launch(*args)
                times.append(time.perf_counter() - start)
            ok, err = close(got, module.reference(*args), case[1])
            counts = model.Counters()
            for outcome in model.OUTCOMES:  # the last run's kernel launches
                counts.add(outcome.counters)
            est = nki_estimate(counts.to_json())
            rows.append({"fixture": path.stem, "case": repr(case), "ms": round(statistics.median(times) * 1e3, 2),
                         "ok": ok, "max_abs": err, "estimate_us": est.us, "bound": est.bound,
                         "engine_us": est.engine_us, "counts": counts.to_json()})
    return rows


# -- public kernels --------------------------------------------------------------------------------------------

def _array(spec: dict, rng) -> np.ndarray:
    shape, dtype, fill = spec["shape"], spec.get("dtype", "float32"), spec.get("fill", "randn")
    if fill == "arange":
        return np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    if fill == "rand":
        return rng.random(shape).astype(dtype)
    if fill == "-rand":
        return -rng.random(shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _mamba(delta, u, a, b, c):
    """The selective scan of the Mamba tutorial: h_t = exp(delta A) h_{t-1} + delta B u; y = C . h."""
    batch, channels, seq = delta.shape
    out = np.zeros_like(delta, dtype=np.float64)
    for i in range(batch):
        h = np.zeros((channels, a.shape[1]))
        for t in range(seq):
            h = np.exp(delta[i, :, t, None] * a) * h + delta[i, :, t, None] * b[i, None, :, t] * u[i, :, t, None]
            out[i, :, t] = h @ c[i, :, t]
    return out


def _softmax(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _bilinear2x(x):
    import torch

    return torch.nn.functional.interpolate(torch.from_numpy(x), scale_factor=2, mode="bilinear").numpy()


REFERENCES = {
    "bilinear2x": _bilinear2x,
    "mamba": _mamba,
    # q, k, v as [seq, d]: softmax(q k^T / 8) v (the tutorial's fixed scale for its head size of 64)
    "attention_rows": lambda q, k, v: _softmax(q.astype(np.float64) * 0.125 @ k.T) @ v,
    # q, k, v as [d, seq]: softmax(q^T k) v^T
    "attention_cols": lambda q, k, v: _softmax(q.T.astype(np.float64) @ k) @ v.T,
}


class _Stub(types.ModuleType):
    """A module a file imports only to run on a device: any name in it is a further stub."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__name__}.{name}")


def _stub(names):
    for name in names or ():
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            stub = sys.modules.setdefault(".".join(parts[:i]), _Stub(".".join(parts[:i])))
            stub.__path__ = []


def _load(entry: dict, project: dict) -> types.ModuleType:
    root = CORPUS / project["name"]
    path = root / entry["file"]
    _stub(entry.get("stub"))
    if "module" in entry:  # a package module: parents as bare packages, so their __init__ files do not run
        base = root / project["package_root"]
        parts = entry["module"].split(".")
        for i in range(1, len(parts)):
            name = ".".join(parts[:i])
            if name not in sys.modules:
                pkg = types.ModuleType(name)
                pkg.__path__ = [str(base.joinpath(*parts[:i]))]
                sys.modules[name] = pkg
        with model.installed():
            found = importlib.util.spec_from_file_location(entry["module"], path)
            module = importlib.util.module_from_spec(found)
            sys.modules[entry["module"]] = module
            found.loader.exec_module(module)
        return module
    return model.load_file(str(path), "corpus_" + path.stem)


def run_corpus(only: str | None = None) -> list[dict]:
    manifest = json.loads(MANIFEST.read_text())
    projects = {p["name"]: p for p in manifest["projects"]}
    rows = []
    for entry in manifest["kernels"]:
        name = f"{entry['project']}:{Path(entry['file']).name}:{entry['call']}"
        if only and only not in name:
            continue
        row = {"kernel": name}
        rows.append(row)
        rng = np.random.default_rng(0)
        args = [_array(a, rng) if "shape" in a else (tuple(a["value"]) if isinstance(a["value"], list) else
                                                     a["value"]) for a in entry["args"]]
        try:
            module = _load(entry, projects[entry["project"]])
        except Exception as exc:  # noqa: BLE001 - a file that does not load is listed with why
            row.update(status="not loaded", reason=f"{type(exc).__name__}: {exc}"[:300])
            continue
        fn = getattr(module, entry["call"])
        if entry.get("jit"):  # a plain function the file's own main compiles (nki.baremetal(fn) and the like)
            fn = model.Kernel(fn, model.LEGACY)
        start = time.perf_counter()
        try:
            with model.installed():
                got = fn(*args)
        except model.NkiRuleError as exc:
            status = "unsupported" if isinstance(exc, model.Unsupported) else "rule"
            row.update(status=status, reason=str(exc)[:300])
            continue
        except Exception as exc:  # noqa: BLE001
            tb = traceback.extract_tb(exc.__traceback__)
            where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb)
                          if "kernel_lsp" not in f.filename), "?")
            row.update(status="error", reason=f"{type(exc).__name__} at {where}: {exc}"[:300])
            continue
        row["ms"] = round((time.perf_counter() - start) * 1e3, 1)
        ref = entry["reference"]
        names = {f"a{i}": a for i, a in enumerate(args)}
        want = REFERENCES[ref](*args) if ref in REFERENCES else eval(ref, {"np": np}, names)
        got = np.asarray(got).astype(np.float64)
        want = np.asarray(want, np.float64)
        tol = entry.get("tolerance", 1e-4)
        if got.shape != want.shape:
            row.update(status="mismatch", reason=f"shape {got.shape}, reference {want.shape}")
        elif np.allclose(got, want, atol=tol, rtol=tol):
            row.update(status="reproduced", max_abs=float(np.max(np.abs(got - want))))
        else:
            row.update(status="mismatch", reason=f"max abs error {np.nanmax(np.abs(got - want)):.3g} "
                                                 f"({int(np.isnan(got).sum())} NaN)")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--only")
    ap.add_argument("--skip-fixtures", action="store_true")
    args = ap.parse_args()
    out = {}
    if not args.skip_fixtures and not args.only:
        out["fixtures"] = time_fixtures()
        for r in out["fixtures"]:
            print(f"{r['fixture']:<24} {r['case']:<48} {r['ms']:>9.2f} ms  {'ok' if r['ok'] else 'WRONG'}  "
                  f"Trainium2 est. {r['estimate_us']:.3g} us ({r['bound']})")
    if not CORPUS.is_dir():
        print("no corpus: run bench/fetch_nki_corpus.py first")
    else:
        out["corpus"] = rows = run_corpus(args.only)
        for r in rows:
            print(f"{r['kernel']:<90} {r['status']:<12} {r.get('ms', '')!s:>8} {r.get('reason', '')}")
        loaded = [r for r in rows if r["status"] != "not loaded"]
        done = [r for r in rows if r["status"] == "reproduced"]
        print(f"reproduced {len(done)} of {len(loaded)} loaded public kernels ({len(rows)} in the manifest)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
