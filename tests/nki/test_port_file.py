"""The file a port to NKI lands in: the candidate's NKI code plus the Triton kernel's spec (and what it reads),
renamed to the port; never an existing file."""

from __future__ import annotations

import pytest

from kernel_lsp.engine.assistant.code import SpliceError
from kernel_lsp.engine.assistant.port_file import port_file, port_path

TRITON = '''import math

import torch
import triton
import triton.language as tl

from kernel_lsp.spec import spec

SCALE = 3.0
SHAPES = [(5, 7), (130, 64)]


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass


def scale(x):
    return x


def _expected(x):
    return x * SCALE + math.pi * 0


@spec(kernel=scale_kernel, launcher=scale, reference=_expected, shapes=SHAPES, atol=1e-3)
def scale_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device),)


def unrelated():
    return triton.cdiv(3, 2)
'''

CODE = '''import nki
import nki.language as nl


@nki.jit
def scale_nki(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    return out


if __name__ == "__main__":
    scale_nki(None)
'''


def test_the_port_file_holds_the_nki_code_and_the_spec_with_what_it_reads_and_nothing_of_triton():
    text = port_file(TRITON, CODE, "scale_kernel", "scale_nki", "scale.py")
    compile(text, "scale_nki.py", "exec")
    code = text[text.index("\n"):]  # after the docstring, which names the Triton kernel
    assert "import triton" not in code and "scale_kernel" not in code and "def unrelated" not in code
    assert "__main__" not in text
    # The spec reads SCALE, SHAPES, math and torch (through the reference and the inputs): all of them come along.
    for needed in ("import math\n", "import torch\n", "from kernel_lsp.spec import spec\n", "SCALE = 3.0\n",
                   "SHAPES = [(5, 7), (130, 64)]\n", "def _expected(x):"):
        assert needed in text, needed
    assert "@spec(kernel=scale_nki, launcher=scale_nki, reference=_expected, shapes=SHAPES, atol=1e-3)" in text
    assert text.index("def scale_nki(") < text.index("@spec(")


def test_a_port_that_defines_a_name_the_spec_reads_is_not_applicable():
    clash = CODE + "\n\nSCALE = 2.0\n"
    with pytest.raises(SpliceError, match="defines SCALE, which the correctness spec of scale_kernel reads"):
        port_file(TRITON, clash, "scale_kernel", "scale_nki", "scale.py")


def test_a_kernel_without_spec_gets_a_file_with_only_its_port():
    text = port_file(TRITON, CODE, "other_kernel", "scale_nki", "scale.py")
    assert "@spec" not in text and "def scale_nki(" in text


def test_the_port_path_is_the_next_free_name(tmp_path):
    triton = tmp_path / "scale.py"
    assert port_path(str(triton)) == str(tmp_path / "scale_nki.py")
    (tmp_path / "scale_nki.py").write_text("# mine\n")
    (tmp_path / "scale_nki_2.py").write_text("# mine too\n")
    assert port_path(str(triton)) == str(tmp_path / "scale_nki_3.py")
