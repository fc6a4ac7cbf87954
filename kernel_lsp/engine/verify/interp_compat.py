"""Compatibility of triton's interpreter with the numpy it runs on (imported only where TRITON_INTERPRET=1 is set).

triton 3.6's interpreter turns a scalar tensor into a Python int with `int(handle.data)`, and scalar kernel
arguments are 1-element, 1-dimensional arrays there. numpy 2.4 refuses that conversion ("only 0-dimensional arrays
can be converted to Python scalars"), so `range(0, K, BLOCK_K)` over a runtime `K` fails inside every kernel that
loops to an argument. triton 3.9 squeezes the array first; `patch_interpreter` gives older versions the same
`__index__`. Both the correctness checker and the work counter call it before running a kernel.
"""

from __future__ import annotations

_applied = False


def _index(self) -> int:
    return int(self.handle.data.squeeze())


class _IndexScope:
    """Forwards to the interpreter's patch scope, replacing the `__index__` it installs on triton tensors."""

    def __init__(self, scope):
        self._scope = scope

    def set_attr(self, obj, name, value):
        self._scope.set_attr(obj, name, _index if name == "__index__" else value)

    def __getattr__(self, name):
        return getattr(self._scope, name)


def patch_interpreter() -> bool:
    """Install the fix once per process; True when the interpreter has the hook point it patches."""
    global _applied
    if _applied:
        return True
    try:
        from triton.runtime import interpreter
    except Exception:  # noqa: BLE001 - no triton, or one whose interpreter fails to import: nothing to patch
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:
        return False

    def patch_lang_tensor(tensor, scope):
        return original(tensor, _IndexScope(scope))

    interpreter._patch_lang_tensor = patch_lang_tensor
    _applied = True
    return True


__all__ = ["patch_interpreter"]
