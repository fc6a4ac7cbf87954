"""The assistant's good path in a real, headless Neovim 0.11: the command through vim.lsp, the proposal back,
and the edit applied with vim.lsp.util.apply_workspace_edit only after a (simulated) confirmation."""

from __future__ import annotations

import re

import pytest

from tests.neovim.test_neovim import find_nvim, run_scenario, workspace
from tests.slow import scaled

from . import candidates as c
from .conftest import EXAMPLE, KERNEL_LINE, KEY, TWICE
from .fake_api import answer

# Neovim, the server, two model turns and a check of the candidate on the interpreter (torch and triton imported in
# a fresh process): a minute or two on a busy 2-core machine.
pytestmark = [pytest.mark.neovim, pytest.mark.timeout(600)]
pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("anthropic")


def test_optimize_in_neovim(tmp_path, fake):
    nvim, why = find_nvim()
    if nvim is None:
        pytest.skip(why)
    fake.script += [answer(c.PLAN), answer(c.GOOD)]
    root = workspace(tmp_path, {"vector_add.py": TWICE})
    setup = {"settings": {"checks": "request", "checkDevice": "interpreter", "assistantBaseUrl": fake.url}}
    r = run_scenario(nvim, "assistant", root / "vector_add.py", setup,
                     env={"KERNEL_LSP_TEST_LINE": str(KERNEL_LINE + 3), "ANTHROPIC_API_KEY": KEY}, timeout_s=scaled(60))
    lines = TWICE.splitlines()
    assert r["plan"] == c.PLAN
    assert r["lines_after_plan"] == r["lines_before_confirmation"] == lines  # nothing changed before "yes"
    assert r["modified_before_confirmation"] is False
    assert re.match(r"correct on \d+ cases \(CPU interpreter\)", r["summary"])
    assert "≈118 µs -> ≈59 µs H200 est. (-50%)" in r["summary"]
    assert r["lines_after"] == EXAMPLE.splitlines() and r["modified_after"] is True
    assert (root / "vector_add.py").read_text() == TWICE  # applied to the buffer, not written to disk
    assert len(fake.requests) == 2


def test_port_to_nki_in_neovim_creates_its_own_file(tmp_path, fake):
    nvim, why = find_nvim()
    if nvim is None:
        pytest.skip(why)
    fake.script += [answer(c.NKI_PLAN), answer(c.NKI_RIGHT)]
    root = workspace(tmp_path, {"vector_add.py": EXAMPLE})
    setup = {"settings": {"checks": "request", "checkDevice": "interpreter", "assistantBaseUrl": fake.url}}
    r = run_scenario(nvim, "port", root / "vector_add.py", setup,
                     env={"KERNEL_LSP_TEST_LINE": str(KERNEL_LINE + 3), "ANTHROPIC_API_KEY": KEY}, timeout_s=scaled(60))
    assert r["summary"].startswith("correct on 12 cases (kernel-lsp NKI model)"), r["summary"]
    assert r["creates"] == (root / "vector_add_nki.py").as_uri() and r["existed_before_confirmation"] is False
    # Neovim applied the CreateFile and the new file's text; the Triton buffer is as it was.
    assert "def add_kernel_nki(a_tensor, b_tensor):" in r["created_lines"]
    assert "    kernel=add_kernel_nki," in r["created_lines"]
    assert r["lines_after"] == r["lines_before"] == EXAMPLE.splitlines()
    assert (root / "vector_add.py").read_text() == EXAMPLE
