"""WorkspaceIndex on its own: which file defines the kernel a launch site launches, and which files depend on a
kernel. Each case is a small workspace (path -> text) and what the index must answer; no server, no disk."""

from __future__ import annotations

import pytest

from kernel_lsp.engine.index import WorkspaceIndex

KERNEL = """import triton
import triton.language as tl


@triton.jit
def {name}(X, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offs, 0.0, mask=offs < n)
"""


def launcher(import_line: str, name: str = "zero_kernel", block: int = 128) -> str:
    return f"""{import_line}


def zero(x):
    {name}[(1,)](x, x.numel(), BLOCK={block})
"""


def same_file(name: str = "zero_kernel") -> str:
    return KERNEL.format(name=name) + "\n\n" + launcher("", name)


# (case, workspace, launching file, the file expected to define the launched kernel: "same", a path, or None)
RESOLUTION = [
    ("same file", {"a.py": same_file()}, "a.py", "same"),
    ("from module import", {"kernels.py": KERNEL.format(name="zero_kernel"),
                            "main.py": launcher("from kernels import zero_kernel")}, "main.py", "kernels.py"),
    ("dotted module", {"pkg/kernels.py": KERNEL.format(name="zero_kernel"),
                       "main.py": launcher("from pkg.kernels import zero_kernel")}, "main.py", "pkg/kernels.py"),
    ("relative import", {"pkg/kernels.py": KERNEL.format(name="zero_kernel"),
                         "pkg/main.py": launcher("from .kernels import zero_kernel")}, "pkg/main.py",
     "pkg/kernels.py"),
    ("relative import two levels up", {"pkg/kernels.py": KERNEL.format(name="zero_kernel"),
                                       "pkg/sub/main.py": launcher("from ..kernels import zero_kernel")},
     "pkg/sub/main.py", "pkg/kernels.py"),
    ("package __init__", {"pkg/__init__.py": KERNEL.format(name="zero_kernel"),
                          "main.py": launcher("from pkg import zero_kernel")}, "main.py", "pkg/__init__.py"),
    ("a unique name, however it got there", {"kernels.py": KERNEL.format(name="zero_kernel"),
                                             "main.py": launcher("from somewhere_else import *")}, "main.py",
     "kernels.py"),
    ("the same file wins over another definition", {"a.py": same_file(),
                                                    "b.py": KERNEL.format(name="zero_kernel")}, "a.py", "same"),
    ("two definitions, no import: ambiguous", {"a.py": KERNEL.format(name="zero_kernel"),
                                               "b.py": KERNEL.format(name="zero_kernel"),
                                               "main.py": launcher("")}, "main.py", None),
    ("two definitions, the import decides", {"a.py": KERNEL.format(name="zero_kernel"),
                                             "b.py": KERNEL.format(name="zero_kernel"),
                                             "main.py": launcher("from b import zero_kernel")}, "main.py", "b.py"),
    ("an import of a module that defines no such kernel", {"a.py": KERNEL.format(name="zero_kernel"),
                                                           "main.py": launcher("from b import zero_kernel")},
     "main.py", None),
    ("a relative import that points elsewhere", {"other/kernels.py": KERNEL.format(name="zero_kernel"),
                                                  "pkg/main.py": launcher("from .kernels import zero_kernel")},
     "pkg/main.py", None),
    ("no kernel of that name", {"a.py": KERNEL.format(name="other_kernel"), "main.py": launcher("")}, "main.py",
     None),
]


def build(tmp_path, files: dict[str, str]) -> tuple[WorkspaceIndex, dict[str, str]]:
    index = WorkspaceIndex()
    paths = {}
    for rel, text in files.items():
        path = str(tmp_path / rel)
        paths[rel] = path
        index.set_text(path, text)
    return index, paths


@pytest.mark.parametrize("case,files,launching,expected", RESOLUTION, ids=[c[0] for c in RESOLUTION])
def test_launch_resolution(tmp_path, case, files, launching, expected):
    index, paths = build(tmp_path, files)
    [site] = index.get(paths[launching]).analysis.launch_sites
    found = index.resolve(site, paths[launching])
    if expected is None:
        assert found is None
        return
    assert found is not None
    kernel, where = found
    assert kernel.name == site.target
    assert where == (None if expected == "same" else paths[expected])


def test_launch_problems_follow_the_kernel_across_files(tmp_path):
    """A launch with a block size that is not a power of 2 is reported where the kernel is launched, with the
    kernel in another file; it goes away when that file's kernel goes, and comes back with it."""
    files = {"kernels.py": KERNEL.format(name="zero_kernel"),
             "main.py": launcher("from kernels import zero_kernel", block=100)}
    index, paths = build(tmp_path, files)
    codes = [p.code for p in index.problems(paths["main.py"])]
    assert codes.count("TR001") == 1
    index.remove(paths["kernels.py"])
    assert "TR001" not in [p.code for p in index.problems(paths["main.py"])]
    index.set_text(paths["kernels.py"], files["kernels.py"])
    assert "TR001" in [p.code for p in index.problems(paths["main.py"])]


# (case, workspace, kernel names, excluded file, the files expected to depend on them)
DEPENDENTS = [
    ("launching files", {"kernels.py": KERNEL.format(name="zero_kernel"),
                         "a.py": launcher("from kernels import zero_kernel"),
                         "b.py": launcher("from kernels import zero_kernel"), "c.py": "x = 1\n"},
     {"zero_kernel"}, None, {"a.py", "b.py"}),
    ("the file itself excluded", {"a.py": same_file(), "b.py": launcher("from a import zero_kernel")},
     {"zero_kernel"}, "a.py", {"b.py"}),
    ("only the named kernels", {"kernels.py": KERNEL.format(name="zero_kernel") + KERNEL.format(name="one_kernel"),
                                "a.py": launcher("from kernels import zero_kernel"),
                                "b.py": launcher("from kernels import one_kernel", name="one_kernel")},
     {"one_kernel"}, None, {"b.py"}),
    ("no names", {"a.py": same_file()}, set(), None, set()),
]


@pytest.mark.parametrize("case,files,names,exclude,expected", DEPENDENTS, ids=[c[0] for c in DEPENDENTS])
def test_dependents(tmp_path, case, files, names, exclude, expected):
    index, paths = build(tmp_path, files)
    found = index.dependents(names, exclude=paths.get(exclude) if exclude else None)
    assert found == {paths[rel] for rel in expected}


def test_launches_by_kernel_file(tmp_path):
    index, paths = build(tmp_path, {"kernels.py": KERNEL.format(name="zero_kernel"),
                                    "a.py": launcher("from kernels import zero_kernel"),
                                    "b.py": same_file()})
    found = index.launches_by_kernel_file()
    assert {k: sorted(p for _, p in v) for k, v in found.items()} == {
        paths["kernels.py"]: [paths["a.py"]], paths["b.py"]: [paths["b.py"]]}


def test_a_file_too_large_keeps_only_its_reason(tmp_path):
    from kernel_lsp.settings import Settings

    index = WorkspaceIndex(Settings(max_file_bytes=100))
    path = str(tmp_path / "big.py")
    index.set_text(path, same_file())
    assert [p.code for p in index.problems(path)] == ["KL003"]
    assert index.get(path).kernel_names == set()
