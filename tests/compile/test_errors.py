"""Data-driven compile errors: each fixture marks the expected error on its line.

    x = bad_thing()  # compile-error: <substring of the message> [col N]
    y = helper(x)    # compile-related: <substring of the related message> [col N]
    m = a and b      # compile-warning: <substring> [col N]   (in a fixture that compiles)

Optional header lines: `# compile-target: gfx942` (default sm_90), `# compile-kernel: name` (default `kernel`),
`# compile-pins: BLOCK=1024` (constexpr values: kernel-lsp never makes one up, and these fixtures have no launch).
Columns are 0-based code points. Every fixture is compiled once, in worker processes, in a fresh triton cache.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernel_lsp.engine.compile.specialize import plan_jobs

from .pool import compile_all, report

pytest.importorskip("triton")  # a dev dependency on Linux x86-64; elsewhere there is nothing to compile with

FIXTURES = Path(__file__).parent / "fixtures"
MARK = re.compile(r"#\s*compile-(error|related|warning):\s*(.*?)\s*\[col (\d+)\]\s*$")
NAMES = sorted(p.stem for p in FIXTURES.glob("*.py"))


def _marks(text: str, kind: str) -> list[tuple[int, int, str]]:
    return [(i, int(m.group(3)), m.group(2)) for i, line in enumerate(text.splitlines())
            if (m := MARK.search(line)) and m.group(1) == kind]


def _expectations(text: str) -> tuple[tuple[int, int, str] | None, set[tuple[int, int, str]]]:
    errors = _marks(text, "error")
    assert len(errors) <= 1, "one compile-error per fixture"
    return (errors[0] if errors else None), set(_marks(text, "related"))


ERRORS = [n for n in NAMES if _expectations((FIXTURES / f"{n}.py").read_text())[0] is not None]
WARNINGS = [n for n in NAMES if n not in ERRORS]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, request):
    jobs = {}
    for name in NAMES:
        path = FIXTURES / f"{name}.py"
        text = path.read_text()
        target = re.search(r"#\s*compile-target:\s*(\S+)", text)
        kernel = re.search(r"#\s*compile-kernel:\s*(\S+)", text)
        pins = re.search(r"#\s*compile-pins:\s*(.*)", text)
        pinned = {k.strip(): int(v) for k, v in (p.split("=") for p in pins.group(1).split(","))} if pins else {}
        jobs[name] = plan_jobs(text, kernel.group(1) if kernel else "kernel", [target.group(1) if target else "sm_90"],
                               path=str(path), pins=pinned)[0]
    results, wall = compile_all(jobs, str(tmp_path_factory.mktemp("triton-cache")))
    report(request, "compile-error fixtures", results, wall)
    return jobs, results


def test_fixtures_cover_at_least_eight_kinds_of_error() -> None:
    assert len(ERRORS) >= 8
    for name in WARNINGS:
        assert _marks((FIXTURES / f"{name}.py").read_text(), "warning"), f"{name} marks nothing"


@pytest.mark.parametrize("name", ERRORS)
def test_error_lands_on_the_marked_line_and_column(compiled, name: str) -> None:
    jobs, results = compiled
    text = (FIXTURES / f"{name}.py").read_text()
    (line, col, substring), related = _expectations(text)
    result = results[name]
    assert not result.ok, f"{name} compiled without error"
    err = result.error
    assert err is not None and err.kind in ("compilation", "ptxas"), err
    shown = f"{err.kind} at {err.line}:{err.col}: {err.message}"
    assert substring in err.message, shown
    assert (err.line, err.col) == (line, col), shown
    assert {(ln, c) for ln, c, _ in err.related} == {(ln, c) for ln, c, _ in related}, err.related
    for ln, c, sub in related:
        assert any(sub in msg for rl, rc, msg in err.related if (rl, rc) == (ln, c)), err.related
    assert err.module_line is not None and jobs[name].line_map[err.module_line - 1] == line + 1


@pytest.mark.parametrize("name", WARNINGS)
def test_warning_lands_on_the_marked_line(compiled, name: str) -> None:
    _, results = compiled
    result = results[name]
    assert result.ok, result.error
    got = {(w.line, w.col): w.message for w in result.warnings}
    for line, col, substring in _marks((FIXTURES / f"{name}.py").read_text(), "warning"):
        assert (line, col) in got and substring in got[(line, col)], got
    assert len(result.warnings) == len(_marks((FIXTURES / f"{name}.py").read_text(), "warning")), got
