"""What an agent's loop relies on, through the MCP server: a scripted session of candidates ranked right, the
adversarial launchers of the verdict suite rejected by `check` and ranked last by `compare`, and a batch of twenty
candidates rewarded by rank."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from .conftest import EXAMPLES, mcp_session, structured

pytest.importorskip("torch")
pytest.importorskip("triton")
pytestmark = pytest.mark.timeout(600)

FIXTURES = Path(__file__).resolve().parents[1] / "verify" / "fixtures"
ORIGINAL = (EXAMPLES / "vector_add.py").read_text(encoding="utf-8")


def variant(block: int, warps: int, *, wrong: bool = False) -> str:
    text = ORIGINAL.replace("block_size: int = 1024", f"block_size: int = {block}").replace(
        "num_warps=4", f"num_warps={warps}")
    if wrong:
        text = text.replace("tl.store(out_ptr + offsets, x + y, mask=in_bounds)",
                            "tl.store(out_ptr + offsets, x - y, mask=in_bounds)")
    assert text != ORIGINAL or (block, warps) == (1024, 4)
    return text


async def test_scripted_session_baseline_worse_wrong_better_is_ranked_right(workspace: Path):
    """A fixed sequence of candidates, as a best-of-n agent would send them: small blocks with one warp cannot keep
    HBM busy (worse), a wrong kernel is fast but wrong, full blocks with four warps approach the roofline."""
    candidates = [
        {"name": "baseline", "source": variant(32, 1)},
        {"name": "worse", "source": variant(16, 1)},
        {"name": "wrong", "source": variant(1024, 4, wrong=True)},
        {"name": "better", "source": variant(1024, 4)},
    ]
    async with mcp_session(workspace, "--allow-run") as session:
        result = structured(await session.call_tool("compare", {"candidates": candidates}))
    ranking = {c["name"]: c for c in result["ranking"]}
    assert [c["name"] for c in result["ranking"]] == ["better", "baseline", "worse", "wrong"]
    assert result["baseline"] == "baseline"
    assert [c["rank"] for c in result["ranking"]] == [1, 2, 3, 4]
    for name in ("better", "baseline", "worse"):
        assert ranking[name]["passed"] and ranking[name]["status"] == "correct"
        assert ranking[name]["latency_us"] > 0
        assert 0 < ranking[name]["fraction_of_roofline"] <= 1  # how close each came to the roofline
    # No GPU here: the latencies are the model's and say so; on a GPU they are measured.
    assert result["source"] in ("estimate", "measured")
    assert all(ranking[n]["latency_source"] == result["source"] for n in ("better", "baseline", "worse"))
    if result["source"] == "estimate":
        assert "est." in ranking["better"]["latency_label"]
    assert ranking["baseline"]["speedup_vs_baseline"] == pytest.approx(1.0)
    assert ranking["better"]["speedup_vs_baseline"] > 1.0 > ranking["worse"]["speedup_vs_baseline"]
    wrong = ranking["wrong"]
    assert not wrong["passed"] and wrong["status"] == "mismatch" and wrong["latency_us"] is None
    assert wrong["fraction_of_roofline"] is None
    assert wrong["reason"].startswith("mismatch")


async def test_adversarial_launchers_are_rejected_by_check_and_ranked_last_by_compare(workspace: Path):
    shutil.copy(FIXTURES / "tricks.py", workspace / "tricks.py")
    shutil.copytree(FIXTURES / "tampering", workspace / "tampering")
    tampering = sorted(p.name for p in (workspace / "tampering").glob("[!_]*.py"))
    async with mcp_session(workspace, "--allow-run", "--max-parallel", "2") as session:
        checked = structured(await session.call_tool("check", {"path": "tricks.py"}))
        tricks = [v for v in checked["verdicts"] if v["spec"].startswith("trick_")]
        assert len(tricks) >= 15
        for v in tricks:
            assert v["status"] == "rejected" and not v["ok"], v["spec"]
            assert v["failed_check"], v["spec"]
        assert not checked["ok"]

        candidates = [{"name": "honest", "source": ORIGINAL}]
        candidates.append({"name": "tricks", "path": "tricks.py",
                           "source": (workspace / "tricks.py").read_text(encoding="utf-8")})
        for name in tampering:
            candidates.append({"name": name, "path": f"tampering/{name}",
                               "source": (workspace / "tampering" / name).read_text(encoding="utf-8")})
        result = structured(await session.call_tool("compare", {"candidates": candidates}))
    first, *rest = result["ranking"]
    assert first["name"] == "honest" and first["passed"] and first["rank"] == 1
    assert {c["name"] for c in rest} == {c["name"] for c in candidates[1:]}
    for c in rest:
        assert not c["passed"] and c["latency_us"] is None and c["reason"], c["name"]
        assert c["status"] != "correct", c["name"]


async def test_a_batch_of_twenty_candidates_gets_rank_based_rewards(workspace: Path):
    """An RL step: twenty candidates submitted as one batch and polled; every honest one rewarded by its rank
    (faster above slower, equal estimates tied), every gamed or failing one at the floor with its reason."""
    shutil.copytree(FIXTURES / "tampering", workspace / "tampering")
    honest = {f"b{block}w{warps}": variant(block, warps)
              for block, warps in [(16, 1), (32, 1), (64, 1), (128, 2), (256, 4), (512, 4), (1024, 4), (1024, 8),
                                   (2048, 4), (2048, 8), (4096, 8)]}
    honest["b1024w4_again"] = honest["b1024w4"]  # the same kernel twice: its figures must tie
    failing = {f"wrong{block}": variant(block, 4, wrong=True) for block in (256, 1024, 2048)}
    candidates = [{"name": n, "source": s} for n, s in {**honest, **failing}.items()]
    tampering = sorted(p.name for p in (workspace / "tampering").glob("[!_]*.py"))[:5]
    for name in tampering:
        candidates.append({"name": name, "path": f"tampering/{name}",
                           "source": (workspace / "tampering" / name).read_text(encoding="utf-8")})
    assert len(candidates) == 20
    async with mcp_session(workspace, "--allow-run", "--max-parallel", "2") as session:
        batch = structured(await session.call_tool("submit", {"candidates": candidates}))["batch"]
        while not (status := structured(await session.call_tool("poll", {"batch": batch})))["finished"]:
            assert status["total"] == 20 and not status["cancelled"]
            await anyio.sleep(1)
    result = status["result"]
    assert status["done"] == 20 and {c["state"] for c in status["candidates"]} == {"done"}
    ranking = {c["name"]: c for c in result["ranking"]}
    group = result["group"]
    assert group["size"] == 20 and group["passed"] == len(honest) and group["floor"] == 0.0
    for name in honest:
        c = ranking[name]
        assert c["passed"] and c["reward"] > group["floor"], c
        assert c["latency_low_us"] <= c["latency_us"] <= c["latency_high_us"]
    for name in [*failing, *tampering]:
        c = ranking[name]
        assert not c["passed"] and c["reward"] == group["floor"] and c["reason"], c
        assert c["rank"] > len(honest)
    for a in honest:
        for b in honest:
            ca, cb = ranking[a], ranking[b]
            if ca["latency_high_us"] < cb["latency_low_us"]:
                assert ca["reward"] > cb["reward"] and ca["rank"] < cb["rank"], (a, b)
            elif a != b and ca["latency_us"] == cb["latency_us"]:
                assert b in ca["tied_with"] and ca["reward"] == cb["reward"] and ca["rank"] == cb["rank"], (a, b)
    if result["source"] == "estimate":  # one kernel, one estimate: a tie, not an order by input position
        assert "b1024w4_again" in ranking["b1024w4"]["tied_with"]
    rewards = [c["reward"] for c in result["ranking"]]
    assert group["mean"] == pytest.approx(sum(rewards) / 20)
    assert sum(c["advantage"] for c in result["ranking"]) == pytest.approx(0.0, abs=1e-9)
