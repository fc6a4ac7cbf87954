"""A project whose folders bear the names of kernel-lsp's own packages (`analyzers/`, `kernel_lsp/`) and of its
subpackages (`engine/`, `api/`, `spec/`), and modules named like the standard library's: the checking and timing
processes put the project's folders on the import path, and must still import none of them in place of ours."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slow import scaled

ROOT = Path(__file__).resolve().parents[2]

SHADOW = '''
import os
with open(os.path.join({folder!r}, "shadowed"), "a") as f:
    f.write(__name__ + "\\n")
raise ImportError("the project's " + __name__ + " was imported in place of kernel-lsp's")
'''

PACKAGES = ("analyzers", "analyzers/hardware", "kernel_lsp", "kernel_lsp/spec", "engine", "api", "spec")
MODULES = ("json", "secrets", "signal", "linecache")


def shadowing_project(ws: Path) -> None:
    for name in PACKAGES:
        folder = ws / name
        if "/" in name:
            (folder.parent / (folder.name + ".py")).write_text(SHADOW.format(folder=str(ws)))
        else:
            folder.mkdir()
            (folder / "__init__.py").write_text(SHADOW.format(folder=str(ws)))
    for name in MODULES:
        (ws / f"{name}.py").write_text(SHADOW.format(folder=str(ws)))


def test_checks_and_timing_import_none_of_the_projects_folders_in_place_of_ours(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    ws = tmp_path / "project"
    ws.mkdir()
    shutil.copy(ROOT / "examples" / "vector_add.py", ws / "vector_add.py")
    shadowing_project(ws)
    done = subprocess.run([sys.executable, "-P", "-m", "kernel_lsp", "check", "vector_add.py", "--run-checks",
                           "--check-device", "interpreter", "--format", "json", "-q"], cwd=ws, capture_output=True,
                          text=True, timeout=scaled(300), check=False,
                          env={**os.environ, "PYTHONPATH": ""})
    shadowed = (ws / "shadowed").read_text() if (ws / "shadowed").exists() else ""
    assert shadowed == "", shadowed
    report = json.loads(done.stdout)
    verdicts = report["checks"]
    assert verdicts and all(v["status"] == "correct" for v in verdicts), done.stdout[-3000:]
    assert report.get("latency"), done.stdout[-3000:]  # the timing process ran too (it counts with analyzers.*)


def test_user_folders_never_come_before_the_standard_library_or_ours(tmp_path):
    shadowing_project(tmp_path)
    probe = (
        "import sys, json as stdlib_json\n"
        "from kernel_lsp.engine.verify.loading import add_user_folders\n"
        f"add_user_folders({str(tmp_path)!r})\n"
        "import analyzers.hardware, kernel_lsp.spec, signal, linecache\n"
        "print(analyzers.hardware.__file__, kernel_lsp.spec.__file__, signal.__file__, linecache.__file__)\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          timeout=scaled(60), check=False)
    assert done.returncode == 0, done.stderr
    assert str(tmp_path) not in done.stdout and not (tmp_path / "shadowed").exists()
