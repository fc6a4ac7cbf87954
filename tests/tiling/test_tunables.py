"""Which block sizes a tiling search may change, read from launchers written as people write them: each fixture
under tunables/ says, in `# expect:` lines, what the search must decide for each block size and why."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from analyzers.tiling import Candidate
from analyzers.tunables import tunables
from kernel_lsp.engine.latency.search import apply, edit_for

FIXTURES = Path(__file__).parent / "tunables"
EXPECT = re.compile(r'# expect: (\w+) (free|tied|frozen) "([^"]+)"(?: site (\d+))?')


def _kernel(source: str) -> str:
    return re.search(r"def (\w+_kernel)\(", source).group(1)


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.py")), ids=lambda p: p.stem)
def test_each_block_size_is_followed_to_where_it_is_written_and_what_uses_it(fixture: Path) -> None:
    source = fixture.read_text()
    expected = EXPECT.findall(source)
    assert expected, f"{fixture.name} has no # expect: line"
    found = tunables(source, _kernel(source))
    assert found is not None
    assert set(found) == {name for name, *_ in expected}
    for name, status, reason, line in expected:
        got = found[name]
        assert (got.status, reason in got.reason) == (status, True), got
        if line:
            assert got.site is not None and got.site[0] + 1 == int(line), got
        elif status == "free":
            assert got.site is None, got  # the launch keyword itself is edited


def test_a_local_tile_is_edited_where_it_is_assigned_so_the_grid_follows() -> None:
    source = (FIXTURES / "transpose_local_tile.py").read_text()
    found = tunables(source, "transpose_kernel")
    sites = {n: t.site for n, t in found.items() if t.site is not None}
    current = Candidate((("TILE", 16),), 4, 3)
    edited = apply(source, edit_for(source, "transpose_kernel", Candidate((("TILE", 64),), 8, 3), current, False,
                                    sites))
    assert "    tile = 64\n" in edited
    assert "TILE=tile, num_warps=8)" in edited  # the launch and the grid still read the local


def test_values_the_search_cannot_write_safely_are_frozen_and_say_why() -> None:
    source = textwrap.dedent('''
        def repeated(x, n):
            k[(triton.cdiv(n, 512),)](x, n, BLOCK=512)

        def twice(x, n, big):
            block = 128
            if big:
                block = 1024
            k[(n,)](x, n, OTHER=block)

        def unknown(x, n, block):
            k[(triton.cdiv(n, block),)](x, n, THIRD=block)
    ''')
    found = tunables(source, "k")
    assert found["BLOCK"].status == "frozen" and "repeats its value 512" in found["BLOCK"].reason
    assert found["OTHER"].status == "frozen" and "more than one place" in found["OTHER"].reason
    assert found["THIRD"].status == "frozen" and "not called in this file" in found["THIRD"].reason
    elsewhere = tunables("from kernels import k\ndef f(x, n):\n    k[(n,)](x, n, BLOCK=triton.next_power_of_2(n))\n",
                         "k")
    assert elsewhere["BLOCK"].status == "frozen" and "defined in another file" in elsewhere["BLOCK"].reason
    assert tunables(source, "not_launched_here") is None
    assert tunables("def broken(:\n", "k") is None


def test_a_function_grid_follows_any_block_size_even_one_computed_at_run_time() -> None:
    source = textwrap.dedent('''
        def launch(x, n):
            block = triton.next_power_of_2(n)
            k[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n, BLOCK=block)
    ''')
    assert tunables(source, "k")["BLOCK"].status == "free"


def test_a_config_object_and_a_launcher_default_are_followed_to_their_constants() -> None:
    source = textwrap.dedent('''
        @triton.jit
        def k(x, n, BLOCK: tl.constexpr, ROWS: tl.constexpr):
            for i in range(0, n, BLOCK):
                pass

        def launch(x, n, rows=4):
            cfg = Config(block=256)
            k[(triton.cdiv(n, rows),)](x, n, BLOCK=cfg.block, ROWS=rows)
    ''')
    found = tunables(source, "k")
    assert found["BLOCK"].status == "free" and found["BLOCK"].site[0] == 7, found
    assert found["ROWS"].status == "free" and found["ROWS"].site[0] == 6, found
