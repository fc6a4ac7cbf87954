"""Scripted model answers about examples/vector_add.py: what a model might write, good and bad."""

from __future__ import annotations

from .conftest import EXAMPLE

PLAN = "1. Launch add_kernel once per call instead of twice.\n2. Keep BLOCK_SIZE=1024 and num_warps=4."


def _definition(name: str) -> str:
    lines = EXAMPLE.splitlines(keepends=True)
    def_line = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    start = def_line - 1 if lines[def_line - 1].startswith("@") else def_line
    end = next(i for i in range(def_line + 1, len(lines)) if lines[i].strip() and not lines[i][0].isspace()
               and not lines[i].startswith(")"))
    return "".join(lines[start:end]).rstrip() + "\n"


ONE_LAUNCH_ADD = _definition("add")
KERNEL = _definition("add_kernel")

GOOD = f"The launcher launched the kernel twice; once is enough.\n\n```python\n{ONE_LAUNCH_ADD}```\n"

# tl.arange needs a power-of-two range: the compiler rejects this (the interpreter would not say why).
NOT_COMPILING = "Wider blocks.\n\n```python\n" + KERNEL.replace("tl.arange(0, BLOCK_SIZE)", "tl.arange(0, 1000)") + \
    "```\n"

WRONG_RESULT = "Simplified.\n\n```python\n" + KERNEL.replace("x + y, mask", "x - y, mask") + "```\n"

TORCH_FALLBACK = '''Safer launcher.

```python
def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    try:
        add_kernel[(triton.cdiv(n, block_size),)](x, y, out, n, BLOCK_SIZE=block_size, num_warps=4)
    except Exception:
        return x + y  # fall back to PyTorch when the kernel cannot run
    return out
```
'''

NO_CODE = "I would rather not change this kernel: it is already memory bound."

SPEC_EDIT = '''Looser spec.

```python
def add_inputs(shape, dtype, device):
    return (torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
```
'''

WITHOUT_SPEC = EXAMPLE[:EXAMPLE.index("from kernel_lsp.spec import spec")].rstrip() + "\n"

SPEC = '''A reference and ragged shapes.

```python
from kernel_lsp.spec import spec


def add_reference(x, y):
    return x + y


@spec(kernel=add_kernel, launcher=add, reference=add_reference, shapes=[(5,), (1000,), (3000,)],
      dtypes=["float32"])
def add_spec_inputs(shape, dtype, device):
    return (torch.randn(shape, dtype=dtype, device=device), torch.randn(shape, dtype=dtype, device=device))
```
'''

NKI_PLAN = "Write add_kernel_nki: load both tiles to SBUF, nl.add, store to a shared HBM output."

NKI_TOO_WIDE = '''```python
import nki
import nki.language as nl


@nki.jit
def add_kernel_nki(a_tensor, b_tensor):
    out = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((nl.par_dim(256), 512), dtype=a_tensor.dtype, buffer=nl.sbuf)
    a = nl.load(a_tensor)
    b = nl.load(b_tensor)
    nl.store(out, value=nl.add(a, b))
    return out
```
'''

NKI_PORT = NKI_TOO_WIDE.replace(
    "    tile = nl.ndarray((nl.par_dim(256), 512), dtype=a_tensor.dtype, buffer=nl.sbuf)\n", "")

EXPLANATION = "**Memory bound.** Each element moves 12 bytes and costs one add: HBM bandwidth sets the time."

# Module-level patches: the inputs become zeros (x + y and x - y agree on them), the comparison passes anyway.
PATCHED_MODULE = "Deterministic inputs help.\n\n```python\ntorch.randn = lambda *shape, **kw: torch.zeros(*shape, " \
    f"**kw)\n\n\n{ONE_LAUNCH_ADD}```\n"
PATCHED_LAUNCHER = "Quieter launcher.\n\n```python\n" + ONE_LAUNCH_ADD.replace(
    "    out = torch.empty_like(x)\n",
    "    out = torch.empty_like(x)\n    torch.testing.assert_close = lambda *a, **k: None\n") + "```\n"

# Specs whose reference runs the kernel: a wrong kernel would certify itself.
TAUTOLOGY = SPEC.replace("def add_reference(x, y):\n    return x + y", "def add_reference(x, y):\n    return add(x, y)")
TAUTOLOGY_LAMBDA = SPEC.replace("reference=add_reference", "reference=lambda x, y: add(x, y)")
assert TAUTOLOGY != SPEC and TAUTOLOGY_LAMBDA != SPEC

# The kernel computes x - y; the launcher returns PyTorch's answer in a form that still depends on the kernel's
# buffer, so a check that only skips the launches would see NaN and pass it.
GATED_FALLBACK = "Faster kernel, same answer.\n\n```python\n" + KERNEL.replace("x + y, mask", "x - y, mask") + \
    "\n\n" + ONE_LAUNCH_ADD.replace("    return out\n", "    return (x + y) + 0 * out\n") + "```\n"

# A port that is right for every length: one row of 512-element tiles, the last one masked.
NKI_RIGHT = '''```python
import nki
import nki.language as nl


@nki.jit
def add_kernel_nki(a_tensor, b_tensor):
    n = a_tensor.shape[0]
    out = nl.ndarray((n,), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    a_row, b_row, out_row = a_tensor.reshape((1, n)), b_tensor.reshape((1, n)), out.reshape((1, n))
    i_p = nl.arange(1)[:, None]
    for t in nl.affine_range((n + 511) // 512):
        i_f = t * 512 + nl.arange(512)[None, :]
        a = nl.load(a_row[i_p, i_f], mask=(i_f < n))
        b = nl.load(b_row[i_p, i_f], mask=(i_f < n))
        nl.store(out_row[i_p, i_f], value=nl.add(a, b), mask=(i_f < n))
    return out
```
'''
NKI_SUBTRACTS = NKI_RIGHT.replace("nl.add(a, b)", "nl.subtract(a, b)")
NKI_NO_TAIL = NKI_RIGHT.replace("(n + 511) // 512", "n // 512")
