"""From an answer to a candidate file: the code block, the splice by name, the protected spec, the edits."""

from __future__ import annotations

import pytest

from analyzers.model import apply_edits
from kernel_lsp.engine.assistant.code import (
    SpliceError,
    extract_code,
    line_edits,
    protected_names,
    spec_texts,
    splice,
)
from kernel_lsp.engine.assistant.client import Usage, price_of

from .conftest import EXAMPLE, TWICE


def test_the_last_python_block_is_the_candidate():
    answer = "Before:\n```python\nold = 1\n```\nAfter:\n```python\nnew = 2\n```\nDone."
    assert extract_code(answer) == "new = 2\n"
    assert extract_code("```\nplain = 3\n```") == "plain = 3\n"
    assert extract_code("no code at all") is None


def test_definitions_replace_by_name_and_new_ones_follow_them():
    code = "import math\n\n\ndef add(x, y):\n    return x\n\n\ndef helper():\n    return 1\n"
    new, names = splice(EXAMPLE, code, protected=protected_names(EXAMPLE), insert_before="add_inputs")
    assert names == ["add", "helper"]
    assert "import triton.language as tl\nimport math\n" in new
    assert new.index("def add(x, y):") < new.index("def helper():") < new.index("def reference_add(")
    assert "BLOCK_SIZE=block_size, num_warps=4)" not in new.split("def add(x, y):")[1].split("def helper")[0]
    assert spec_texts(new) == spec_texts(EXAMPLE)
    assert apply_edits(EXAMPLE, line_edits(EXAMPLE, new)) == new


def test_the_spec_and_its_reference_are_out_of_bounds():
    for name in ("add_inputs", "reference_add"):
        with pytest.raises(SpliceError, match="part of the correctness spec"):
            splice(EXAMPLE, f"def {name}(*a):\n    return 0\n", protected=protected_names(EXAMPLE))
    with pytest.raises(SpliceError, match="must leave as it is"):
        splice(EXAMPLE, "def add(x, y):\n    return x\n", protected=set(), may_replace=False)
    with pytest.raises(SpliceError, match="not valid Python: line 1"):
        splice(EXAMPLE, "def broken(:\n", protected=set())


def test_edits_turn_one_text_into_the_other():
    edits = line_edits(TWICE, EXAMPLE)
    assert len(edits) == 1 and edits[0].new_text == ""  # exactly the duplicated launch goes
    assert apply_edits(TWICE, edits) == EXAMPLE


def test_cost_comes_from_the_price_table():
    assert price_of("claude-sonnet-4-5-20250929") == (3.0, 15.0)
    usage = Usage("claude-sonnet-4-5", input_tokens=1_000_000, output_tokens=100_000, calls=2)
    assert usage.cost_usd == pytest.approx(4.5)
    assert Usage("some-local-model", 10, 10, 1).cost_usd is None
