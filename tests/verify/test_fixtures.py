"""Data-driven correctness checks: each fixture spec states its expected verdict in a comment above it.

    # expect: STATUS [words the message must contain] [tail] [line @marker] [note WORD]

`line @marker` names the line(s) holding the comment `# @marker`. `tail`: the failing case's mismatches all lie
past the last full block. One checking process per fixture file (several for a file that crashes), files
checked two at a time.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernel_lsp.engine.verify import CheckReport, CheckRequest, from_json, run_checks, to_json
from tests.slow import scaled

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
EXAMPLES = HERE.parents[1] / "examples"
# Fixture files state each spec's verdict in `# expect:` comments; correct_styles.py holds only correct kernels (no
# false rejections). The examples each carry one spec that must be correct and fast.
FIXTURE_FILES = [FIXTURES / name for name in ("buggy.py", "adversarial.py", "crashes.py", "correct_styles.py")]
EXAMPLE_NAMES = ("vector_add", "fused_softmax", "layernorm", "matmul_autotune")
FILES = [*FIXTURE_FILES, *(EXAMPLES / f"{name}.py" for name in EXAMPLE_NAMES)]


def _request(path: Path) -> CheckRequest:
    text = path.read_text()
    options = dict(re.findall(r"^# request:.*?(\w+)=(\S+)", text, re.MULTILINE))
    options.update(re.findall(r"(\w+)=(\S+)", (re.search(r"^# request: (.*)$", text, re.MULTILINE) or [None, ""])[1]))
    # The file's timeout (6 s for the hang in crashes.py) covers importing torch and triton too: scaled, so that a
    # busy machine's slow import is not taken for the hang.
    return CheckRequest(str(path), text, timeout_s=scaled(float(options.get("timeout_s", 60))),
                        memory_mb=int(options.get("memory_mb", 4096)), device="interpreter")


@pytest.fixture(scope="module")
def reports() -> dict[str, CheckReport]:
    with ThreadPoolExecutor(2) as pool:
        return dict(zip((p.name for p in FILES), pool.map(lambda p: run_checks(_request(p)), FILES)))


def _expectations(path: Path) -> list[tuple[str, str, int]]:
    """(inputs function name, expectation text, 1-based line of the comment)."""
    lines = path.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"# expect: (.*)$", line)
        if not m:
            continue
        for later in lines[i + 1:]:
            d = re.match(r"def (\w+)\(", later)
            if d:
                out.append((d.group(1), m.group(1).strip(), i + 1))
                break
    return out


def _marker_lines(path: Path, marker: str) -> list[int]:
    """0-based lines carrying `# @marker` (a hang may be caught on any line of its loop)."""
    found = [i for i, line in enumerate(path.read_text().splitlines()) if re.search(rf"# @{re.escape(marker)}\b", line)]
    assert found, f"no marker # @{marker} in {path.name}"
    return found


CASES = [(p, name, expect) for p in FIXTURE_FILES for name, expect, _ in _expectations(p)]


@pytest.mark.parametrize(("path", "spec_name", "expect"), CASES, ids=[f"{p.stem}-{n}" for p, n, _ in CASES])
def test_fixture_verdict(reports, path, spec_name, expect):
    report = reports[path.name]
    assert report.errors == (), report.errors
    verdict = next((v for v in report.verdicts if v.spec == spec_name), None)
    assert verdict is not None, f"no verdict for {spec_name}: {[v.spec for v in report.verdicts]}"
    words = expect.split()
    status = words[0]
    assert verdict.status == status, f"{spec_name}: {verdict.status}: {verdict.message}"
    rest = " ".join(words[1:])
    line = re.search(r"line @(\w+)", rest)
    if line:
        assert verdict.line in _marker_lines(path, line.group(1)), verdict.message
        assert f"line {verdict.line + 1}" in verdict.message
        rest = rest.replace(line.group(0), "")
    note = re.search(r"note (\w+)", rest)
    if note:
        assert any(note.group(1) in n for n in verdict.notes), verdict.notes
        rest = rest.replace(note.group(0), "")
    if re.search(r"\btail\b", rest):
        failing = [c for c in verdict.cases if not c.ok]
        assert failing and failing[0].tail_only is True, verdict.cases
        assert "past the last full block" in verdict.message
        rest = re.sub(r"\btail\b", "", rest)
    if rest.strip():
        assert rest.strip() in verdict.message, verdict.message
    if status == "mismatch":
        bad = next(c for c in verdict.cases if not c.ok)
        assert bad.mismatched > 0 and bad.first_index is not None and f"seed {bad.seed}" in verdict.message
    assert verdict.status != "correct" or all(c.ok for c in verdict.cases)


def test_every_fixture_spec_has_a_verdict(reports):
    for path in FIXTURE_FILES:
        expected = {name for name, _, _ in _expectations(path)}
        assert {v.spec for v in reports[path.name].verdicts} == expected


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_examples_are_correct(reports, name):
    (verdict,) = reports[f"{name}.py"].verdicts
    assert verdict.status == "correct", verdict.message
    assert verdict.device == "CPU interpreter" and "(CPU interpreter)" in verdict.message
    assert len(verdict.cases) >= 8 and all(c.ok for c in verdict.cases)
    assert any(c.shape[-1] % 16 for c in verdict.cases)  # ragged shapes were checked
    if name == "matmul_autotune":
        assert len({c.config for c in verdict.cases}) == 6


def test_seeds_are_fresh_each_run_and_reported(reports):
    again = run_checks(_request(EXAMPLES / "vector_add.py"))
    first = {c.seed for c in reports["vector_add.py"].verdicts[0].cases}
    second = {c.seed for c in again.verdicts[0].cases}
    assert first.isdisjoint(second)
    assert any("random seeds" in n for n in again.verdicts[0].notes)


def test_reports_round_trip_through_json(reports):
    for report in reports.values():
        assert from_json(to_json(report)) == report


def test_import_error_and_missing_spec_are_reported(tmp_path):
    bad = tmp_path / "bad.py"
    report = run_checks(CheckRequest(str(bad), "import torch\n\nx = 1 +\n", device="interpreter"))
    assert report.verdicts == () and report.errors[0][0] == 2 and "syntax error" in report.errors[0][1]
    source = (FIXTURES / "buggy.py").read_text()
    report = run_checks(CheckRequest(str(FIXTURES / "buggy.py"), source, kernels=("mul_kernel", "nope"),
                                     device="interpreter"))
    assert [v.spec for v in report.verdicts] == ["bf16_mul"]
    assert report.errors == ((None, "nope has no correctness spec in this file"),)


def test_cancel_stops_the_check():
    import threading

    cancel = threading.Event()
    cancel.set()
    path = FIXTURES / "crashes.py"
    report = run_checks(CheckRequest(str(path), path.read_text(), device="interpreter"), cancel)
    assert report.errors[-1] == (None, "check cancelled")


@pytest.mark.gpu
def test_int32_offset_overflow_on_gpu():
    path = FIXTURES / "gpu_only.py"
    # guard=False: the interpreter's guard pass over 2**31 elements would only run into its timeout first.
    report = run_checks(CheckRequest(str(path), path.read_text(), device="cuda", timeout_s=300, memory_mb=65536,
                                     guard=False))
    (verdict,) = report.verdicts
    assert verdict.status != "correct", verdict.message
    assert verdict.device != "CPU interpreter"


def test_a_failing_device_assert_is_named_for_the_gpu_guard(reports):
    # process._guarded lets the interpreter's verdict stand for it: GPU kernels compile the assertion out.
    verdict = next(v for v in reports["buggy.py"].verdicts if v.spec == "device_assert")
    assert verdict.status == "error" and verdict.failed_check == "device-assert"
