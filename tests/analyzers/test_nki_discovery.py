"""NKI kernel discovery through analyze_source: both API generations, however the names are spelled."""

from __future__ import annotations

import textwrap

import pytest

from analyzers import analyze_source


def kernels(text: str) -> dict[str, tuple[str, list[str], list[str]]]:
    result = analyze_source(textwrap.dedent(text))
    return {k.name: (k.api, k.decorators, k.params) for k in result.nki_kernels}


BODY = """
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    return out
"""


@pytest.mark.parametrize(
    "imports, decorator, api",
    [
        ("import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl", "@nki.jit", "legacy"),
        ("from neuronxcc import nki\nfrom neuronxcc.nki import language as nl", "@nki.jit", "legacy"),
        ("import neuronxcc\nimport neuronxcc.nki.language as nl", "@neuronxcc.nki.jit", "legacy"),
        ("import neuronxcc.nki as knl\nimport neuronxcc.nki.language as nl", "@knl.baremetal", "legacy"),
        ("from neuronxcc.nki import jit as kernel_jit\nimport neuronxcc.nki.language as nl", "@kernel_jit", "legacy"),
        ("from torch_neuronx import nki_jit\nimport neuronxcc.nki.language as nl", "@nki_jit()", "legacy"),
        ("import nki\nimport nki.language as nl", "@nki.jit", "current"),
        ("import nki as n\nimport nki.language as nl", "@n.jit(debug=True)", "current"),
        ("from nki import jit\nfrom nki import language as nl", "@jit", "current"),
        ("import nki.language as nl\nimport nki", "@nki.benchmark(warmup=2, iters=5)", "current"),
    ],
)
def test_decorated_kernels_of_both_generations(imports: str, decorator: str, api: str) -> None:
    found = kernels(f"{imports}\n\n{decorator}{BODY}")
    assert found["kernel"][0] == api
    assert found["kernel"][2] == ["a", "b"]
    assert len(found["kernel"][1]) == 1


def test_decorator_kinds_are_listed() -> None:
    found = kernels(
        """
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl

        @nki.trace
        def traced(a):
            return a

        @nki.profile(working_directory="/tmp")
        def profiled(a):
            return a

        @nki.baremetal(save_neff_name="k.neff")
        def bare(a, out):
            nl.store(out, value=nl.load(a))
        """
    )
    assert found == {
        "traced": ("legacy", ["trace"], ["a"]),
        "profiled": ("legacy", ["profile"], ["a"]),
        "bare": ("legacy", ["baremetal"], ["a", "out"]),
    }


def test_wrapped_and_simulated_functions_are_kernels() -> None:
    found = kernels(
        """
        import numpy as np
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl

        def plain(a):
            return a

        def wrapped(a):
            return a

        def helper(a):
            return a

        jitted = nki.jit(wrapped)
        result = nki.simulate_kernel(plain, np.zeros((128, 512)))
        helper(1)
        """
    )
    assert found == {"plain": ("legacy", ["simulate_kernel"], ["a"]), "wrapped": ("legacy", ["jit"], ["a"])}


def test_current_simulate_names_the_kernel_not_its_arrays() -> None:
    found = kernels(
        """
        import numpy as np
        import nki
        import nki.language as nl

        @nki.jit
        def add(a, b):
            return a

        def x():
            return np.ones((128, 512))

        def run():
            out = nki.simulate(add)(x, x)
            grid = nki.simulate(add[2])(x, x)
            return out, grid
        """
    )
    assert found == {"add": ("current", ["jit", "simulate"], ["a", "b"])}


def test_kernels_nested_in_functions_and_classes() -> None:
    found = kernels(
        """
        import nki
        import nki.language as nl

        class Kernels:
            @staticmethod
            @nki.jit
            def method_kernel(a):
                return a

        def test_inline():
            @nki.jit
            def inline_kernel(a, *, scale=1.0):
                return a
            return inline_kernel
        """
    )
    assert found == {
        "method_kernel": ("current", ["jit"], ["a"]),
        "inline_kernel": ("current", ["jit"], ["a", "scale"]),
    }


def test_no_kernels_without_an_nki_import() -> None:
    # `nki` here is an unrelated local object: without an import it is not the NKI API.
    assert kernels("nki = object()\n\n@nki.jit\ndef f(a):\n    return a\n") == {}
    assert kernels("import triton\n\n@triton.jit\ndef f(a):\n    pass\n") == {}
    assert kernels("import nki\n\ndef f(a):\n    return a\n") == {}


def test_mixed_file_lists_each_kernel_with_its_own_generation() -> None:
    result = analyze_source(
        textwrap.dedent(
            """
            import neuronxcc.nki as old
            import nki as new

            @old.jit
            def legacy_kernel(a):
                return a

            @new.jit
            def current_kernel(a):
                return a
            """
        )
    )
    assert [(k.name, k.api) for k in result.nki_kernels] == [("legacy_kernel", "legacy"), ("current_kernel", "current")]
    assert {p.code for p in result.problems} == {"NK005"}


def test_framework_wrapper_takes_the_generation_of_the_body() -> None:
    text = """
        from torch_neuronx import nki_jit
        import neuronxcc.nki.typing as nt
        import nki.language as nl

        @nki_jit
        def k(a: nt.tensor):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            return out
        """
    assert kernels(text) == {"k": ("current", ["jit"], ["a"])}
    assert not analyze_source(textwrap.dedent(text)).problems  # the typing import is not a second generation


def test_spans_cover_decorators_and_name() -> None:
    text = "import nki\n\n\n@nki.jit\ndef my_kernel(a):\n    return a\n"
    (k,) = analyze_source(text).nki_kernels
    assert (k.span.start_line, k.span.end_line) == (3, 5)
    assert (k.name_span.start_line, k.name_span.start_col, k.name_span.end_col) == (4, 4, 13)


@pytest.mark.parametrize(
    "text",
    [
        "import nki\n@nki.jit\ndef k(a:\n    return a\n",
        "import neuronxcc.nki as nki\n@nki.jit\n",
        "import nki\nimport nki.language as nl\n@nki.jit\ndef k(a):\n    t = nl.ndarray((nl.par_dim(), ), )\n"
        "    x = nl.load(a[::0, 1:])\n    y = nl.arange()[:, None]\n    nl.mgrid[0:]\n",
        "import nki\nimport nki.language as nl\n@nki.jit\ndef k(a):\n    t = nl.ndarray((2 ** 999, 10 // 0), nl.float32,"
        " buffer=nl.psum)\n    nisa.nc_matmul()\n",
    ],
)
def test_broken_code_never_raises(text: str) -> None:
    result = analyze_source(text)
    assert not [p for p in result.problems if p.code == "KL900"], result.problems
