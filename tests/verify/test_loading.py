"""load_user_module: the buffer, not the disk, is what runs and what triton's JIT reads."""

import inspect
import subprocess
import sys
import textwrap

import pytest

from kernel_lsp.engine.verify.loading import UserModuleError, load_user_module


def test_buffer_wins_over_disk_and_inspect_sees_it(tmp_path):
    path = tmp_path / "k.py"
    path.write_text("VALUE = 'disk'\n")
    module = load_user_module(str(path), "VALUE = 'buffer'\ndef f():\n    return 42\n", None)
    assert module.VALUE == "buffer"
    assert "return 42" in inspect.getsource(module.f)
    assert path.read_text() == "VALUE = 'disk'\n"  # nothing written to the workspace
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.py"]


def test_unsaved_file_sibling_imports_and_unique_names(tmp_path):
    (tmp_path / "helper.py").write_text("SCALE = 3\n")
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("NAME = 'pkg'\n")
    path = str(tmp_path / "never_saved.py")
    a = load_user_module(path, "from helper import SCALE\nimport pkg\nX = SCALE * 2\n", str(root))
    b = load_user_module(path, "X = 1\n", None)
    assert (a.X, b.X) == (6, 1)
    assert a.__name__ != b.__name__


@pytest.mark.parametrize(
    ("source", "line", "needle"),
    [
        ("x = 1\ndef f(:\n    pass\n", 1, "syntax error"),
        ("import os\n\nraise RuntimeError('boom')\n", 2, "RuntimeError: boom"),
        ("def g():\n    return 1 / 0\n\nY = g()\n", 1, "ZeroDivisionError"),
        ("import no_such_module_kernel_lsp\n", 0, "ModuleNotFoundError"),
        ("import sys\nsys.exit(3)\n", 1, "SystemExit"),
    ],
)
def test_import_failures_carry_the_line(tmp_path, source, line, needle):
    with pytest.raises(UserModuleError) as info:
        load_user_module(str(tmp_path / "bad.py"), source, None)
    assert info.value.line == line
    assert needle in str(info.value)


def test_triton_jit_reads_the_buffer(tmp_path):
    """In a fresh interpreter process: the JIT'd kernel runs the buffer's body, not the file's."""
    path = tmp_path / "kern.py"
    path.write_text("raise SystemExit('the disk version must not run')\n")
    source = textwrap.dedent('''
        import torch, triton, triton.language as tl

        @triton.jit
        def twice(x_ptr, n, B: tl.constexpr):
            offs = tl.arange(0, B)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
    ''')
    script = textwrap.dedent(f'''
        import os, torch
        os.environ["TRITON_INTERPRET"] = "1"
        from kernel_lsp.engine.verify.loading import load_user_module
        m = load_user_module({str(path)!r}, {source!r}, None)
        x = torch.arange(5, dtype=torch.float32)
        m.twice[(1,)](x, 5, B=8)
        print(x.tolist())
    ''')
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0.0, 2.0, 4.0, 6.0, 8.0]"
