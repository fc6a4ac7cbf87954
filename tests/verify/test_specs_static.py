"""analyzers.specs: finding @spec decorations in text, and starter specs that fail until completed."""

from pathlib import Path

from analyzers.analyze import analyze_source
from analyzers.specs import REFERENCE_TODO, find_specs, starter_spec
from kernel_lsp.engine.verify import CheckRequest, run_checks

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_find_specs_through_aliases():
    text = (
        "import kernel_lsp.spec as ks\n"
        "from kernel_lsp.spec import spec as S\n"
        "from other import spec\n"
        "\n"
        "@ks.spec(kernel=mod.k1, launcher=run, reference=lambda x: x, shapes=[(1,)])\n"
        "def a_inputs(shape, dtype, device):\n"
        "    return ()\n"
        "\n"
        "@S(kernel=k2, launcher=go, reference=torch.add, shapes=[(1,)])\n"
        "@functools.cache\n"
        "def b_inputs(shape, dtype, device):\n"
        "    return ()\n"
        "\n"
        "@spec(kernel=k3, launcher=x, reference=y, shapes=[(1,)])\n"
        "def not_ours(shape, dtype, device):\n"
        "    return ()\n"
    )
    sites = find_specs(text)
    assert [(s.inputs, s.kernel, s.launcher, s.reference, s.def_line, s.span.start_line, s.span.end_line)
            for s in sites] == [
        ("a_inputs", "mod.k1", "run", None, 5, 4, 6),
        ("b_inputs", "k2", "go", "torch.add", 10, 8, 11),
    ]


def test_find_specs_in_examples_and_broken_text():
    for name, kernel in [("vector_add", "add_kernel"), ("matmul_autotune", "matmul_kernel")]:
        (site,) = find_specs((EXAMPLES / f"{name}.py").read_text())
        assert site.kernel == kernel
    assert find_specs("def f(:\n") == []
    assert find_specs("\x00\xff") == []


def test_starter_spec_uses_the_launcher_and_fails_until_completed(tmp_path):
    text = (EXAMPLES / "vector_add.py").read_text()
    text = text[: text.index("# Correctness spec")]  # the example without its spec
    fa = analyze_source(text, str(tmp_path / "f.py"))
    kernel = fa.kernel("add_kernel")
    starter = starter_spec(kernel, fa.launch_sites, text)
    assert "launcher=add," in starter and "def add_kernel_inputs(shape, dtype, device)" in starter
    assert starter.count("torch.randn(shape") == 2  # add(x, y): block_size has a default
    assert "(4097,)" in starter
    path = tmp_path / "vector_add.py"
    completed = text + "\n" + starter
    report = run_checks(CheckRequest(str(path), completed, device="interpreter"))
    (verdict,) = report.verdicts
    assert verdict.status == "error" and REFERENCE_TODO in verdict.message
    fixed = completed.replace(
        'raise NotImplementedError("kernel-lsp starter spec: write the PyTorch reference for add_kernel")',
        "return x + y")
    (verdict,) = run_checks(CheckRequest(str(path), fixed, device="interpreter")).verdicts
    assert verdict.status == "correct", verdict.message


def test_starter_spec_without_launch_site_never_raises():
    text = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, out_ptr, n):\n    pass\n"
    fa = analyze_source(text, "k.py")
    starter = starter_spec(fa.kernel("k"), [], text)
    assert "def k_launcher(x, out)" in starter and "write the launcher of k" in starter
    compile(starter, "starter", "exec")
    assert "def k_inputs" in starter_spec(fa.kernel("k"), [], "garbage (((")
    assert "def kernel_inputs" in starter_spec(None, [], "")  # nonsense in, a starter out
