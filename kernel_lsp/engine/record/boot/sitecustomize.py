"""Put first on PYTHONPATH by `kernel-lsp record`: starts the launch recorder, then runs the sitecustomize this one
hides (the environment's own), so the user's processes start as they would without recording."""

import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
try:
    import kernel_lsp_launch_recorder  # type: ignore[import-not-found]  # beside this file on PYTHONPATH

    kernel_lsp_launch_recorder.install()
except Exception as exc:  # noqa: BLE001 - never stop the user's command
    sys.stderr.write(f"kernel-lsp record: the launch recorder did not start: {exc}\n")

_others = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _others)
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["sitecustomize"] = _module
    _spec.loader.exec_module(_module)
