"""The adversarial suite through `kernel-lsp check --run-checks`: launchers, references and files that try to get a
"correct" for a kernel that does not compute the answer. Each spec's `# expect:` comment (test_fixtures.py's
format) names the verdict and the words that must name the trick; `line @marker` the line it must point at.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .test_fixtures import _expectations, _marker_lines

FIXTURES = Path(__file__).parent / "fixtures"
FILES = [FIXTURES / "tricks.py", *sorted((FIXTURES / "tampering").glob("[!_]*.py"))]
CASES = [(p, name, expect) for p in FILES for name, expect, _ in _expectations(p)]
# One CLI run checks every file (and estimates the latency of the few correct kernels): minutes on a busy machine.
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def report() -> dict:
    """One CLI run over every file, as a user or CI would run it."""
    done = subprocess.run(
        [sys.executable, "-m", "kernel_lsp", "check", *map(str, FILES), "--run-checks", "--check-device",
         "interpreter", "--format", "json", "--exit-zero"], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_suite_is_large_enough():
    assert len([c for c in CASES if not c[2].startswith("correct")]) >= 25


@pytest.mark.parametrize(("path", "spec_name", "expect"), CASES, ids=[f"{p.stem}-{n}" for p, n, _ in CASES])
def test_trick_is_refused(report, path, spec_name, expect):
    verdict = next((c for c in report["checks"] if c["path"] == str(path) and c["spec"] == spec_name), None)
    assert verdict is not None, f"no verdict for {spec_name}"
    status, *words = expect.split()
    assert verdict["status"] == status, verdict["message"]
    rest = " ".join(words)
    marker = re.search(r"line @(\w+)", rest)
    if marker:
        assert verdict["line"] - 1 in _marker_lines(path, marker.group(1)), verdict["message"]  # JSON: 1-based
        rest = rest.replace(marker.group(0), "").strip()
    if rest:
        assert rest in verdict["message"], verdict["message"]
    if status != "correct":
        # The editor and CI show it as a problem at that line; JSON names the check and the case it failed on.
        problems = [p for p in report["problems"] if p["path"] == str(path) and p["code"].startswith("KV")]
        assert any(verdict["message"][:60] in p["message"] for p in problems), problems
    if status in ("rejected", "not-checked"):
        assert verdict["failedCheck"], verdict
    if status == "rejected":
        failing = [c for c in verdict["cases"] if not c["ok"]]
        assert failing and failing[-1]["note"] == verdict["failedCheck"]
        assert f"seed {failing[-1]['seed']}" in verdict["message"]


def test_forged_results_are_ignored_and_reported(report):
    path = str(FIXTURES / "tampering" / "forged_event.py")
    (verdict,) = [c for c in report["checks"] if c["path"] == path]
    assert verdict["status"] == "mismatch"
    # The interpreter knows which store wrote the first wrong element: the diagnostic sits there.
    store = next(i for i, text in enumerate(Path(path).read_text().splitlines(), 1) if "tl.store(" in text)
    assert verdict["line"] == store and f"line {store} stored the first wrong element" in verdict["message"]
    failing = [c for c in verdict["cases"] if not c["ok"]]
    assert failing and failing[0]["line"] == store and f"seed {failing[0]['seed']}" in verdict["message"]
    assert any("did not come from the checker" in p["message"] for p in report["problems"] if p["path"] == path)


def test_a_file_that_reaches_into_the_checker_is_not_run(report, tmp_path):
    marker = tmp_path / "ran"
    source = (FIXTURES / "tampering" / "stolen_frame.py").read_text() + f"\nopen({str(marker)!r}, 'w').close()\n"
    path = tmp_path / "stolen.py"
    path.write_text(source)
    done = subprocess.run([sys.executable, "-m", "kernel_lsp", "check", str(path), "--run-checks", "--check-device",
                           "interpreter", "--format", "json", "--exit-zero"], capture_output=True, text=True,
                          timeout=600, check=False)
    (verdict,) = json.loads(done.stdout)["checks"]
    assert verdict["status"] == "not-checked" and not marker.exists()


@pytest.mark.parametrize("name", ["patched_randn.py", "stolen_frame.py"])
def test_a_refused_file_answers_only_for_the_kernels_asked_about(name):
    from kernel_lsp.engine.verify import CheckRequest, run_checks

    path = FIXTURES / "tampering" / name
    asked = run_checks(CheckRequest(str(path), path.read_text(), kernels=("sub_kernel",), device="interpreter"))
    assert [v.status for v in asked.verdicts] == ["not-checked"]
    other = run_checks(CheckRequest(str(path), path.read_text(), kernels=("other_kernel",), device="interpreter"))
    assert other.verdicts == ()
