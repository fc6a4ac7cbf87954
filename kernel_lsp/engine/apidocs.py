"""The API of the installed kernel languages (triton, NKI): names, signatures and docstrings, for completion,
signature help and hover.

Read from the installed packages themselves, in a child process (the server never imports triton), and kept in
the user's cache as one JSON file per package and version: `<cache>/kernel-lsp/api/<package>-<version>.json`.
A new version of a package is read again on first use; nothing is written by hand.

`python -P kernel_lsp/engine/apidocs.py PACKAGE` prints the dump of one package (what the child runs).
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# importlib.metadata, subprocess and tempfile are imported where used: together they cost the server's startup
# about 150 ms, and the docs are read on the first request that needs them.

log = logging.getLogger(__name__)

FORMAT = 2  # bump when the dump's shape or content changes: older cache files are read again
DUMP_TIMEOUT_S = 120.0
VERSION_CHECK_S = 30.0

# Per package: the distributions that may provide it and the modules kernels spell out.
PACKAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "triton": (("triton",), (
        "triton", "triton.language", "triton.language.math", "triton.language.random",
        "triton.language.extra.libdevice", "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice",
        "triton.language.extra.hip", "triton.language.extra.hip.libdevice",
    )),
    # The current NKI API (nki.language as nl, nki.isa as nisa) and the legacy one under neuronxcc.
    "nki": (("nki",), ("nki", "nki.language", "nki.isa")),
    "neuronxcc": (("neuronx-cc", "neuronxcc"), ("neuronxcc.nki", "neuronxcc.nki.language", "neuronxcc.nki.isa")),
}


@dataclass(frozen=True)
class ApiEntry:
    qualname: str  # e.g. triton.language.load
    kind: str  # "function", "class", "module", "value"
    signature: str | None  # "(pointer, mask=None, ...)" without the leading name; None when not callable
    params: tuple[str, ...]  # the parameters as written in the signature, in order
    doc: str

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    def label(self) -> str:
        return f"{self.name}{self.signature or ''}"


@dataclass
class ApiDocs:
    package: str
    version: str
    modules: dict[str, dict[str, ApiEntry]] = field(default_factory=dict)

    def lookup(self, qualname: str) -> ApiEntry | None:
        module, _, name = qualname.rpartition(".")
        found = self.modules.get(module, {}).get(name)
        if found is None and qualname in self.modules:
            return ApiEntry(qualname, "module", None, (), "")
        return found

    def members(self, module: str) -> dict[str, ApiEntry]:
        return self.modules.get(module, {})


# -- reading a package (in the child process) ----------------------------------------------------------------


def _signature(obj) -> tuple[str | None, tuple[str, ...]]:
    import inspect

    target = obj
    if not (inspect.isfunction(target) or inspect.isclass(target)) and callable(getattr(obj, "fn", None)):
        target = obj.fn  # triton's JITFunction / ConstexprFunction wrap the Python function as .fn
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None, ()
    # Parameters with a leading underscore are passed by triton's code generator (_semantic, _builder), never
    # by the user.
    params = [p for p in sig.parameters.values() if not p.name.startswith("_")]
    shown = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    return str(shown), tuple(str(p) for p in params)


def _entry(module: str, name: str, obj) -> dict:
    import inspect
    import types as pytypes

    if isinstance(obj, pytypes.ModuleType):
        kind = "module"
    elif inspect.isclass(obj):
        kind = "class"
    elif callable(obj):
        kind = "function"
    else:
        kind = "value"
    signature, params = _signature(obj) if kind in ("function", "class") else (None, ())
    doc = ""
    if kind != "value":
        doc = inspect.getdoc(getattr(obj, "fn", None) if kind == "function" and not inspect.isfunction(obj)
                             and getattr(obj, "fn", None) is not None else obj) or ""
    else:
        doc = f"{name}: {type(obj).__name__} = {obj!r}"[:300]
    return {"name": name, "kind": kind, "signature": signature, "params": list(params), "doc": doc}


def _own_name(module_name: str, obj) -> bool:
    """Whether a name of a module without `__all__` is its API, not what it imported for itself (`List`, a
    TypeVar `T`, `functools.wraps`, the `core` module it reads)."""
    import types as pytypes
    import typing

    if isinstance(obj, pytypes.ModuleType):
        return obj.__name__.startswith(module_name + ".")
    if isinstance(obj, typing.TypeVar):
        return False
    owner = getattr(obj, "__module__", None)
    root = module_name.split(".")[0]
    return not isinstance(owner, str) or owner == root or owner.startswith(root + ".")


def dump(package: str) -> dict:
    """Every public name of the package's modules with its signature and docstring (imports the package)."""
    import importlib
    import warnings

    warnings.simplefilter("ignore")
    modules: dict[str, list[dict]] = {}
    for module_name in PACKAGES[package][1]:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 - a module this version lacks (or cannot import here) is left out
            continue
        public = getattr(module, "__all__", None)
        names = public or [n for n in dir(module) if not n.startswith("_")]
        entries = []
        for name in sorted(set(names)):
            try:
                obj = getattr(module, name)
                if public is None and not _own_name(module_name, obj):
                    continue
                entries.append(_entry(module_name, name, obj))
            except Exception:  # noqa: BLE001 - one odd attribute must not lose the rest
                continue
        modules[module_name] = entries
    return {"format": FORMAT, "package": package, "version": installed_version(package) or "", "modules": modules}


# -- the server's side ---------------------------------------------------------------------------------------


def installed_version(package: str) -> str | None:
    """The installed version of a package, from its distribution metadata (nothing is imported)."""
    from importlib import metadata

    for dist in PACKAGES[package][0]:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernel-lsp" / "api"


def _parse(raw: dict) -> ApiDocs:
    docs = ApiDocs(raw["package"], raw["version"])
    for module, entries in raw["modules"].items():
        docs.modules[module] = {
            e["name"]: ApiEntry(f"{module}.{e['name']}", e["kind"], e["signature"], tuple(e["params"]), e["doc"])
            for e in entries
        }
    return docs


def _run_dump(package: str) -> dict:
    """Run the dump in a child process started outside any workspace (so no user module shadows the package)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kernel-lsp-api-") as cwd:
        # The file itself (standard library only) runs: the child needs no kernel_lsp on its path.
        done = subprocess.run([sys.executable, "-P", __file__, package], cwd=cwd, capture_output=True,
                              text=True, timeout=DUMP_TIMEOUT_S, env={**os.environ, "TRITON_INTERPRET": "0"})
    if done.returncode != 0:
        tail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise RuntimeError(f"reading the {package} API failed: {tail[0]}")
    return json.loads(done.stdout)


class ApiDocsStore:
    """The API docs of each installed package, read once per package version (from the cache when there)."""

    def __init__(self, folder: Path | None = None):
        self.folder = folder or cache_dir()
        self._docs: dict[str, ApiDocs | None] = {}
        self._lock = threading.Lock()
        self.errors: dict[str, str] = {}  # package -> why its docs could not be read
        self._failed: dict[str, str] = {}  # package -> the version whose docs could not be read
        self._versions: dict[str, tuple[float, str | None]] = {}  # package -> (when checked, installed version)

    def _version(self, package: str) -> str | None:
        """The installed version, looked up again at most every VERSION_CHECK_S (an upgrade shows within that
        time; a lookup scans the environment's distributions)."""
        now = time.monotonic()
        checked = self._versions.get(package)
        if checked is None or now - checked[0] > VERSION_CHECK_S:
            checked = self._versions[package] = (now, installed_version(package))
        return checked[1]

    def get(self, package: str) -> ApiDocs | None:
        """The docs of an installed package (None when it is not installed or cannot be read). May take seconds
        the first time a version is seen: call it off the event loop."""
        version = self._version(package)
        if version is None:
            return None
        with self._lock:
            found = self._docs.get(package)
            if found is not None and found.version == version:
                return found
            if self._failed.get(package) == version:
                return None  # tried once for this version: not again in every request
            docs = self._load(package, version)
            self._docs[package] = docs
            return docs

    def _load(self, package: str, version: str) -> ApiDocs | None:
        path = self.folder / f"{package}-{re.sub(r'[^A-Za-z0-9_.+-]', '_', version)}.json"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("format") == FORMAT and raw.get("version") == version:
                return _parse(raw)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # missing or damaged: read the package again
        try:
            raw = _run_dump(package)
            docs = _parse(raw)
        except Exception as exc:  # noqa: BLE001 - no docs is better than no server
            log.warning("API docs of %s %s: %s", package, version, exc)
            self.errors[package] = str(exc)
            self._failed[package] = version
            return None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(raw), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            log.info("cannot cache API docs under %s: %s", self.folder, exc)
        return docs

    def for_name(self, qualname: str) -> ApiDocs | None:
        """The docs of the package a dotted name belongs to."""
        top = qualname.split(".", 1)[0]
        return self.get(top) if top in PACKAGES else None


# -- reading the user's text ---------------------------------------------------------------------------------

_IMPORT_LINE = re.compile(r"^\s*(?:import|from)\s+[\w.]")


def imported_names(text: str) -> dict[str, str]:
    """Local name -> dotted name for the file's import statements, read line by line so that a file being typed
    (and not parseable as a whole) still resolves `tl` to triton.language."""
    names: dict[str, str] = {}
    for line in text.splitlines():
        if not _IMPORT_LINE.match(line):
            continue
        from analyzers.source import parse_python  # here: the script run on its own needs only the standard library

        try:
            tree = parse_python(line.strip())
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        names[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        names.setdefault(top, top)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name != "*":
                        names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def resolve_dotted(expr: str, names: dict[str, str]) -> str:
    """`tl.math.exp` -> `triton.language.math.exp` through the file's imports (unknown heads stay as written)."""
    head, dot, rest = expr.partition(".")
    full = names.get(head, head)
    return f"{full}{dot}{rest}"


if __name__ == "__main__":
    json.dump(dump(sys.argv[1]), sys.stdout)
