"""The static list of triton.language names must cover the installed triton (a union over versions)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from analyzers import triton_names
from analyzers.gen_triton_names import MODULES, public_names, render
from analyzers.triton_names import MISSING, NAMES, VERSIONS


def test_static_list_is_plain_data() -> None:
    assert "triton.language" in NAMES and "arange" in NAMES["triton.language"]
    assert {"3.6.0", "3.9.0"} <= set(VERSIONS)
    # Both generations stay accepted: 3.6-only names (advance) and 3.9-only names (squeeze); MISSING tells them apart.
    assert {"advance", "squeeze", "make_tensor_descriptor"} <= NAMES["triton.language"]
    # The committed file is exactly what the generator writes for its own data (nobody edited it by hand).
    missing = {v: {k: set(n) for k, n in m.items()} for v, m in MISSING.items()}
    text = render(list(VERSIONS), {k: set(v) for k, v in NAMES.items()}, missing)
    assert text == Path(triton_names.__file__).read_text()


def test_static_list_covers_installed_triton() -> None:
    pytest.importorskip("triton")
    missing = {}
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        extra = public_names(module) - NAMES.get(name, frozenset())
        if extra:
            missing[name] = sorted(extra)
    assert not missing, f"run `python -m analyzers.gen_triton_names`; missing: {missing}"
    extra_pkg = importlib.import_module("triton.language.extra")
    backends = {f"triton.language.extra.{n}" for n in NAMES["triton.language.extra"]}
    assert set(getattr(extra_pkg, "__all__", ())) <= backends


def test_missing_names_are_version_specific() -> None:
    assert "squeeze" in MISSING["3.6.0"]["triton.language"]
    assert "advance" in MISSING["3.9.0"]["triton.language"]
    for version, modules in MISSING.items():
        for module, names in modules.items():
            assert names <= NAMES[module], (version, module)
