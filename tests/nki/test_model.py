"""The NKI model against NumPy references (fixtures/correct) and against kernels that break a NeuronCore rule or
compute the wrong thing (fixtures/broken, each with `# expect: <rule>` on the line where it must be caught)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kernel_lsp.engine import nki as model

from .cases import close, inputs

FIXTURES = Path(__file__).parent / "fixtures"
CORRECT = sorted((FIXTURES / "correct").glob("*.py"))
BROKEN = sorted((FIXTURES / "broken").glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*([a-z-]+)")


def _expectation(path: Path) -> tuple[str, int]:
    for i, line in enumerate(path.read_text().splitlines()):
        m = EXPECT.search(line)
        if m:
            return m.group(1), i
    raise AssertionError(f"{path.name} has no '# expect:' line")


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: p.stem)
def test_fixture_matches_reference(path):
    module = model.load_file(str(path))
    assert module.CASES
    for case in module.CASES:
        args = inputs(module, case)
        with model.installed():
            got = module.launch(*args)
        want = module.reference(*args)
        ok, err = close(got, want, case[1])
        assert ok, f"{path.stem} {case}: max abs error {err}"


def test_every_rule_of_the_model_has_a_kernel_that_must_break_it():
    """docs/nki-model.md's table of rules is the list of error classes: each needs a broken fixture."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "nki-model.md").read_text()
    table = doc[doc.index("| Rule | Code | What |"):]
    table = table[:table.index("\n\n")]
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.M))
    covered = {_expectation(p)[0] for p in BROKEN}
    assert len(documented) >= 14
    assert documented - covered == set(), "rules without a broken fixture"


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_broken_fixture_caught_at_its_line(path):
    rule, line = _expectation(path)
    module = model.load_file(str(path))
    args = inputs(module, module.CASES[0])
    if rule in ("mismatch", "unwritten"):
        outcome = model.run(module.kernel, *args)
        want = np.asarray(module.reference(*args), np.float32)
        got = np.asarray(outcome.value).astype(np.float32)
        bad = ~np.isclose(got, want, atol=1e-3, rtol=1e-3)
        assert bad.any(), f"{path.stem}: the wrong kernel matched its reference"
        first = tuple(int(i[0]) for i in np.nonzero(bad))
        if rule == "mismatch":
            assert outcome.writers[first] == line, f"{path.stem}: the wrong value was written at line " \
                f"{outcome.writers[first] + 1}, expected {line + 1}"
        else:
            assert outcome.unwritten > 0 and outcome.writers[first] == -1
        return
    with pytest.raises(model.NkiRuleError) as caught:
        model.run(module.kernel, *args)
    assert caught.value.rule == rule, str(caught.value)
    assert caught.value.line == line, f"{path.stem}: caught at line {caught.value.line + 1}, expected {line + 1}"
    assert caught.value.file == str(path)


def test_inputs_are_not_modified_and_outputs_are_fresh():
    module = model.load_file(str(FIXTURES / "correct" / "add_current.py"))
    x, y = inputs(module, ((130, 8), "float32"))
    x0 = x.copy()
    outcome = model.run(module.kernel, x, y)
    assert np.array_equal(x, x0)
    assert outcome.unwritten == 0 and outcome.counters.dma_bytes == 3 * x.nbytes


def test_bfloat16_rounds_like_the_format():
    module = model.load_file(str(FIXTURES / "correct" / "add_current.py"))
    import ml_dtypes

    x = np.full((1, 1), 1.0, ml_dtypes.bfloat16)
    y = np.full((1, 1), 2.0 ** -9, ml_dtypes.bfloat16)  # below bf16's half-ulp at 1.0: rounds away
    assert float(model.run(module.kernel, x, y).value[0, 0]) == 1.0


def test_an_instruction_writes_its_float32_result_in_the_destination_dtype():
    module = model.load_file(str(FIXTURES / "correct" / "row_sum_current.py"))
    import ml_dtypes

    x = np.full((1, 3), 1.0, ml_dtypes.bfloat16)
    x[0, 1] = 2.0 ** -8  # 1 + 2^-8 + 1 needs more than bf16's 8 bits; the fp32 destination keeps it
    x[0, 2] = 1.0
    assert float(model.run(module.kernel, x).value[0, 0]) == 2.0 + 2.0 ** -8
