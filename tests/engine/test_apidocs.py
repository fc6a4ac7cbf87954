"""The API docs are read from the installed package in a child process and cached per package version."""

from __future__ import annotations

import json

import pytest

from kernel_lsp.engine import apidocs

pytest.importorskip("triton")


def test_docs_come_from_the_installed_triton_and_are_cached(tmp_path) -> None:
    import triton

    store = apidocs.ApiDocsStore(tmp_path)
    docs = store.get("triton")
    assert docs is not None and docs.version == triton.__version__
    load = docs.lookup("triton.language.load")
    assert load is not None and load.kind == "function"
    assert load.signature.startswith("(pointer, mask=None, other=None")
    assert "_semantic" not in load.signature  # the code generator's own parameters are left out
    assert docs.lookup("triton.language.sum").signature  # a @jit function of triton's library: its own signature
    assert docs.lookup("triton.jit") is not None and docs.lookup("triton.language.math.exp") is not None
    [cached] = tmp_path.glob("triton-*.json")
    assert cached.name == f"triton-{triton.__version__}.json"

    raw = json.loads(cached.read_text())
    raw["modules"]["triton.language"] = [dict(e, doc="from the cache") if e["name"] == "load" else e
                                         for e in raw["modules"]["triton.language"]]
    cached.write_text(json.dumps(raw))
    again = apidocs.ApiDocsStore(tmp_path).get("triton")  # a new server reads the cache, not the package
    assert again.lookup("triton.language.load").doc == "from the cache"

    cached.write_text("{ damaged")
    repaired = apidocs.ApiDocsStore(tmp_path).get("triton")
    assert repaired.lookup("triton.language.load").doc != "from the cache"


def test_a_package_that_is_not_installed_has_no_docs(tmp_path) -> None:
    store = apidocs.ApiDocsStore(tmp_path)
    assert store.get("neuronxcc") is None and store.for_name("nki.language.add") is None
    assert store.for_name("numpy.add") is None  # not a kernel language
    assert list(tmp_path.iterdir()) == []


def test_nki_docs_come_from_whatever_nki_is_installed(tmp_path, monkeypatch) -> None:
    """NKI's packages come from AWS's own index; a stand-in installed the same way (a distribution with its
    metadata and the nki.language / nki.isa modules) is read exactly like one."""
    site = tmp_path / "site"
    (site / "nki").mkdir(parents=True)
    (site / "nki" / "__init__.py").write_text("")
    (site / "nki" / "language.py").write_text(
        "def add(x, y, *, dtype=None, mask=None):\n    '''Add two tiles element-wise.'''\n\n\nfloat32 = 'float32'\n")
    (site / "nki" / "isa.py").write_text(
        "def nc_matmul(stationary, moving, *, is_transpose=False):\n    '''stationary.T @ moving on the Tensor Engine.'''\n")
    dist = site / "nki-0.7.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nki\nVersion: 0.7.1\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))
    docs = apidocs.ApiDocsStore(tmp_path / "cache").for_name("nki.language.add")
    assert docs is not None and docs.version == "0.7.1"
    add = docs.lookup("nki.language.add")
    assert add.signature == "(x, y, *, dtype=None, mask=None)" and add.doc == "Add two tiles element-wise."
    assert docs.lookup("nki.isa.nc_matmul").params == ("stationary", "moving", "is_transpose=False")
    assert docs.lookup("nki.language.float32").kind == "value"
    names = apidocs.imported_names("import nki.language as nl\nimport nki.isa as nisa\n")
    assert apidocs.resolve_dotted("nisa.nc_matmul", names) == "nki.isa.nc_matmul"
