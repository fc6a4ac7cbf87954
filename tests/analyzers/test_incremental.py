"""Re-analysis with a ParseCache must give exactly what a fresh analysis gives, whatever the edit."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from analyzers import analyze_source
from analyzers.source import ParseCache, SourceText, _top_level_chunks

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _snapshot(analysis):
    return (
        sorted((p.code, p.span, p.message) for p in analysis.problems),
        [(k.name, k.span, k.name_span, [p.name for p in k.params]) for k in analysis.kernels],
        [(s.target, s.span) for s in analysis.launch_sites],
        [(k.name, k.span) for k in analysis.nki_kernels],
        analysis.launch_values, analysis.spec_values, analysis.tensor_sizes,
    )


def _edits(text: str, rng: random.Random, n: int):
    """Typing-like edits: insert or delete characters and whole lines, including ones that break the syntax."""
    for _ in range(n):
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        kind = rng.random()
        if kind < 0.35:
            col = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:col] + rng.choice(["(", ")", "x", " ", ":", "tl.", "1", '"""']) + lines[i][col:]
        elif kind < 0.6 and lines[i]:
            col = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:col] + lines[i][col + 1:]
        elif kind < 0.8:
            lines.insert(i, rng.choice(["", "    pass", "# note", "x = 1", "@triton.jit"]))
        elif len(lines) > 1:
            del lines[i]
        text = "\n".join(lines)
        yield text


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_cached_reanalysis_matches_a_fresh_one(name):
    rng = random.Random(name)
    text = (EXAMPLES / name).read_text()
    cache = ParseCache()
    analyze_source(text, name, cache)
    for edited in _edits(text, rng, 60):
        assert _snapshot(analyze_source(edited, name, cache)) == _snapshot(analyze_source(edited, name))
    assert cache.reused > cache.parsed  # the point of the cache


def test_a_broken_statement_keeps_the_rest_of_the_file():
    text = (EXAMPLES / "buggy_kernels.py").read_text()
    broken = text.replace("def row_max_kernel(", "def row_max_kernel((", 1)
    cache = ParseCache()
    result = analyze_source(broken, "b.py", cache)
    codes = sorted(p.code for p in result.problems)
    assert "KL001" in codes and "TR007" in codes  # the typo in another kernel is still reported
    assert "row_max_kernel" not in {k.name for k in result.kernels}


def test_unindented_docstring_lines_do_not_split_statements():
    text = '"""Module docstring\nsecond line at column 0\n\n@decorated\n"""\nimport triton\n'
    assert _top_level_chunks(SourceText(text).lines) == [(0, 5), (5, 6)]
    result = analyze_source(text, "d.py", ParseCache())
    assert [p.code for p in result.problems] == []


def test_a_decorator_whose_arguments_span_lines_stays_with_its_def():
    text = "import x\n\n@spec(\n    kernel=k,\n)\ndef inputs(shape):\n    return ()\n\n\ny = 1\n"
    assert _top_level_chunks(SourceText(text).lines) == [(0, 2), (2, 9), (9, 10)]
    edited = text.replace("y = 1", "y = 2")
    cache = ParseCache()
    analyze_source(text, "s.py", cache)
    assert _snapshot(analyze_source(edited, "s.py", cache)) == _snapshot(analyze_source(edited, "s.py"))
