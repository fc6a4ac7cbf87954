"""Honest labels and speed evidence, through the engine and the fake Messages API.

The check and the timing are stubbed here (the checker and the latency engine have their own tests; the
end-to-end tests in test_actions.py run them for real): what is tested is what the assistant claims from their
results. A proposal is labelled from one function over what was established, and an Optimize proposal is
offered as faster only with evidence of it.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kernel_lsp.engine.assistant import Assistant, AssistantConfig, Environment, ModelConfig, runner
from kernel_lsp.engine.assistant.session import NOT_SHOWN_FASTER, UNVERIFIED
from kernel_lsp.engine.assistant.verify import Timing

from . import candidates as c
from .conftest import EXAMPLE, KEY, TWICE
from .fake_api import answer

SHAPE = ((1 << 24,), "float32", "NVIDIA H200")
CHECKED = "correct on 13 cases (CPU interpreter)"


def measured(us: float) -> Timing:
    return Timing(us, f"{us:.1f} µs on NVIDIA H200", True, "NVIDIA H200", SHAPE)


@pytest.fixture
def stubs(monkeypatch):
    """The check passes every candidate; `timings[text]` is what timing that text gives: a Timing or a reason."""
    timings: dict[str, Timing | str] = {}
    checked: list[str] = []

    async def run_check(env, path, text, kernel):
        checked.append(text)
        return SimpleNamespace(ok=True, status="correct", message=CHECKED, device="CPU interpreter",
                               on_gpu=False), ""

    async def timing(env, path, text, kernel, on_gpu):
        found = timings.get(text, "no figure for this text")
        return (found, "") if isinstance(found, Timing) else (None, found)

    monkeypatch.setattr(runner, "run_check", run_check)
    monkeypatch.setattr(runner, "timing", timing)
    monkeypatch.setattr(runner, "_BASELINES", {})
    return SimpleNamespace(timings=timings, checked=checked)


async def optimize(tmp_path, fake, text: str = TWICE, attempts: int = 1):
    """Optimize on `text`: the plan, then "go"; the model's code is candidates.GOOD (one launch instead of two)."""
    fake.script += [answer(c.PLAN), answer(c.GOOD)]
    path = tmp_path / "vector_add.py"
    path.write_text(text)
    config = AssistantConfig(ModelConfig("claude-test", KEY, fake.url, timeout_s=30), max_attempts=attempts)
    assistant = Assistant(config, Environment(str(tmp_path), check_device="interpreter"))
    try:
        plan = await assistant.start("optimize", str(path), text, "add_kernel")
        assert plan.kind == "plan", plan
        return await assistant.refine(str(path), text, "add_kernel", "go")
    finally:
        await assistant.close()


def saved(tmp_path) -> dict:
    [file] = (tmp_path / ".kernel-lsp" / "assistant").glob("*.json")
    return json.loads(file.read_text())


async def test_a_correct_candidate_whose_timing_failed_is_not_offered_as_faster(tmp_path, fake, stubs):
    stubs.timings[TWICE] = measured(41.2)
    stubs.timings[EXAMPLE] = "the latency worker crashed (signal 11)"
    result = await optimize(tmp_path, fake)
    assert result.kind == "proposal" and result.status == NOT_SHOWN_FASTER
    assert result.text.startswith(CHECKED)
    assert "correct but not shown faster (timing failed: the latency worker crashed (signal 11))" in result.text
    assert "1 attempt, 1 verified" in result.text and "%)" not in result.text  # no speed-up claimed anywhere
    assert result.title == "Optimize tiling (add_kernel), not shown faster"
    assert result.table[1][1] == NOT_SHOWN_FASTER and "not shown faster (timing failed" in result.table[1][3]
    assert saved(tmp_path)["turns"][0]["candidates"][0]["status"] == NOT_SHOWN_FASTER


async def test_without_a_figure_for_the_current_kernel_nothing_is_shown_faster(tmp_path, fake, stubs):
    stubs.timings[TWICE] = "work counting failed: the launcher raised"
    stubs.timings[EXAMPLE] = measured(20.6)
    result = await optimize(tmp_path, fake)
    assert result.status == NOT_SHOWN_FASTER
    assert "not shown faster (the current kernel could not be timed: work counting failed: the launcher raised)" \
        in result.text


async def test_a_faster_proposal_carries_its_evidence(tmp_path, fake, stubs):
    stubs.timings[TWICE] = measured(41.2)
    stubs.timings[EXAMPLE] = measured(20.6)
    result = await optimize(tmp_path, fake)
    assert result.status == "correct" and result.title == "Optimize tiling (add_kernel)"
    assert "41 µs -> 21 µs on NVIDIA H200 (-50%)" in result.text and "est." not in result.text
    assert result.table[1][1:3] == ["correct", "20.6 µs on NVIDIA H200"]


async def test_a_slower_candidate_is_turned_down_with_the_numbers(tmp_path, fake, stubs):
    stubs.timings[TWICE] = measured(41.2)
    stubs.timings[EXAMPLE] = measured(50.0)
    result = await optimize(tmp_path, fake)
    assert result.kind == "failed" and result.table[1][1] == "not faster"
    assert "correct, but not faster: 41 µs -> 50 µs on NVIDIA H200 (+21%)" in result.text


async def test_a_fix_nothing_could_run_is_labelled_unverified_everywhere(tmp_path, fake, stubs):
    typo = c.WITHOUT_SPEC.replace("tl.arange(0, BLOCK_SIZE)", "tl.arrange(0, BLOCK_SIZE)")
    fake.script += [answer("Typo.\n\n```python\n" + c.KERNEL + "```\n")]
    path = tmp_path / "vector_add.py"
    path.write_text(typo)
    config = AssistantConfig(ModelConfig("claude-test", KEY, fake.url, timeout_s=30))
    assistant = Assistant(config, Environment(str(tmp_path), check_device="interpreter"))
    try:
        result = await assistant.start("fix", str(path), typo, "add_kernel",
                                       {"code": "TR007", "message": "tl.arrange does not exist", "line": 24})
    finally:
        await assistant.close()
    assert result.kind == "proposal" and result.status == UNVERIFIED and not stubs.checked
    assert result.text.startswith("unverified: not compiled"), result.text
    assert "not checked: add_kernel has no correctness spec" in result.text
    assert "1 attempt, 0 verified, 1 unverified" in result.text and "1 verified" not in result.text
    assert result.title.endswith(", unverified") and result.table[1][1] == UNVERIFIED
    assert saved(tmp_path)["turns"][0]["candidates"][0]["status"] == UNVERIFIED
