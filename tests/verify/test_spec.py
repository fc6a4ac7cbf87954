"""kernel_lsp.spec: validation, the Spec record, specs_in, and that importing it costs nothing."""

import subprocess
import sys
import types

import pytest

from kernel_lsp.spec import Spec, kernel_name_of, spec, specs_in


class Autotuner:  # same type name as triton's wrapper
    def __init__(self, fn):
        self.fn = fn


class JITFunction:
    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__


def add_kernel():
    pass


def _decorate(**overrides):
    fields = {"kernel": JITFunction(add_kernel), "launcher": lambda x: x, "reference": lambda x: x, "shapes": [(10,)]}
    fields.update(overrides)

    def inputs(shape, dtype, device):
        return ()

    return spec(**fields)(inputs)


def test_spec_record_and_defaults():
    fn = _decorate(dtypes=["fp16", "float32", "torch.bfloat16"], atol={"fp16": 1e-2}, shapes=[(5,), [7, 3]])
    s = fn.__kernel_lsp_spec__
    assert isinstance(s, Spec)
    assert s.dtypes == ("float16", "float32", "bfloat16")
    assert s.shapes == ((5,), (7, 3))
    assert s.bench_shapes == ((7, 3),)
    assert s.atol == {"float16": 0.01} and s.rtol is None and s.seeds == 2
    assert s.name == "inputs" and s.kernel_name == "add_kernel"
    assert s.tolerance("float16", {"float16": (1.0, 2.0)}) == (0.01, 2.0)
    with pytest.raises(AttributeError):
        s.seeds = 3  # frozen


def test_kernel_name_through_wrappers():
    assert kernel_name_of(Autotuner(Autotuner(JITFunction(add_kernel)))) == "add_kernel"


@pytest.mark.parametrize(
    ("overrides", "error", "field"),
    [
        ({"shapes": (10, 20)}, TypeError, "shapes"),
        ({"shapes": []}, ValueError, "shapes"),
        ({"shapes": [(1.5,)]}, TypeError, "shapes"),
        ({"dtypes": ["float13"]}, ValueError, "dtypes"),
        ({"seeds": 0}, ValueError, "seeds"),
        ({"atol": "tight"}, TypeError, "atol"),
        ({"rtol": -1.0}, ValueError, "rtol"),
        ({"launcher": 3}, TypeError, "launcher"),
        ({"reference": None}, TypeError, "reference"),
        ({"kernel": "add_kernel"}, TypeError, "kernel"),
        ({"bench_shapes": []}, ValueError, "bench_shapes"),
    ],
)
def test_bad_fields_name_the_field(overrides, error, field):
    with pytest.raises(error, match=field):
        _decorate(**overrides)


def test_specs_in_source_order_and_def_line(tmp_path):
    from kernel_lsp.engine.verify.loading import load_user_module

    source = (
        "from kernel_lsp.spec import spec\n"
        "def k(): pass\n"
        "\n"
        "@spec(kernel=k, launcher=k, reference=k, shapes=[(1,)])\n"
        "def second_in_dict_order(shape, dtype, device): return ()\n"
        "@spec(kernel=k, launcher=k, reference=k,\n"
        "      shapes=[(1,)])\n"
        "def later(shape, dtype, device): return ()\n"
    )
    module = load_user_module(str(tmp_path / "m.py"), source, None)
    assert [(s.name, s.line) for s in specs_in(module)] == [("second_in_dict_order", 5), ("later", 8)]
    assert specs_in(types.ModuleType("empty")) == []


def test_import_is_free():
    code = "import sys, kernel_lsp.spec; print(sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.strip() == "[]", out.stderr
