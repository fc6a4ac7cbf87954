"""What a pyright user expects, through a real client: keyword completion inside `tl.*` calls, launches and helper
calls; `tl.math.` listing triton's public names only; hover and signature help for the workspace's own @jit
functions."""

from __future__ import annotations

import pytest
from lsprotocol import types

from .test_language import FILES, KERNELS, at, doc

pytest.importorskip("triton")

HELPER_DOC = KERNELS.replace("def helper(x, BLOCK: tl.constexpr):\n",
                             'def helper(x, BLOCK: tl.constexpr):\n    """Scale x by the block size."""\n')


async def complete(s, name: str, text: str, needle: str, offset: int):
    s.open(name, text)
    got = await s.client.text_document_completion_async(types.CompletionParams(
        text_document=doc(s, name), position=at(text.splitlines(), needle, offset=offset)))
    return {i.label: i for i in got.items} if got else {}


async def test_keyword_completion_inside_a_tl_call_offers_what_is_not_given(start):
    s = await start(FILES)
    text = KERNELS.replace("x = tl.load(x_ptr + offs, mask=offs < n)", "x = tl.load(x_ptr + offs, ma")
    items = await complete(s, "pkg/kernels.py", text, "x_ptr + offs, ma", len("x_ptr + offs, ma"))
    assert {"mask=", "other=", "cache_modifier=", "eviction_policy="} <= set(items)
    assert "pointer=" not in items  # given positionally
    assert items["mask="].insert_text == "mask=" and items["mask="].detail == "mask=None"
    text = KERNELS.replace("x = tl.load(x_ptr + offs, mask=offs < n)", "x = tl.load(x_ptr + offs, mask=offs < n, ")
    items = await complete(s, "pkg/kernels.py", text, "mask=offs < n, ", len("mask=offs < n, "))
    assert "other=" in items and "mask=" not in items
    # In the middle of an expression nothing is offered: a keyword cannot go there.
    text = KERNELS.replace("x = tl.load(x_ptr + offs, mask=offs < n)", "x = tl.load(x_ptr + of")
    assert await complete(s, "pkg/kernels.py", text, "x_ptr + of", len("x_ptr + of")) == {}


async def test_keyword_completion_at_a_launch_and_a_helper_call(start):
    s = await start(FILES)
    launcher = FILES["launch.py"].replace("    return out", "    scale_kernel[(1,)](out, out.numel(), SCALE=2, ")
    items = await complete(s, "launch.py", launcher, "SCALE=2, ", len("SCALE=2, "))
    assert {"BLOCK=", "num_warps=", "num_stages="} <= set(items) and "SCALE=" not in items
    autotuned = FILES["launch.py"].replace("    return out", "    add_kernel[(1,)](x, out, x.numel(), ")
    items = await complete(s, "launch.py", autotuned, "x.numel(), ", len("x.numel(), "))
    assert "BLOCK=" not in items and "num_warps=" in items  # the autotune configs set BLOCK
    text = KERNELS.replace("helper(x, BLOCK=BLOCK)", "helper(x, ")
    items = await complete(s, "pkg/kernels.py", text, "helper(x, ", len("helper(x, "))
    assert set(items) == {"BLOCK="}


async def test_tl_math_completion_lists_only_triton_names(start):
    s = await start(FILES)
    text = KERNELS.replace("    x = tl.load(", "    y = tl.math.\n    x = tl.load(")
    items = await complete(s, "pkg/kernels.py", text, "y = tl.math.", len("y = tl.math."))
    assert {"exp", "sqrt", "fma"} <= set(items)
    assert not {"List", "T", "core", "wraps"} & set(items)


async def test_hover_and_signature_help_for_the_workspaces_own_jit_function(start):
    s = await start({**FILES, "pkg/kernels.py": HELPER_DOC})
    s.open("pkg/kernels.py")
    lines = HELPER_DOC.splitlines()
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(lines, "helper(x, BLOCK=BLOCK)", offset=2)))
    assert hover is not None
    assert "def helper(x, BLOCK: tl.constexpr)" in hover.contents.value
    assert "Scale x by the block size." in hover.contents.value
    assert "pkg/kernels.py:6" in hover.contents.value

    help_ = await s.client.text_document_signature_help_async(types.SignatureHelpParams(
        text_document=doc(s, "pkg/kernels.py"), position=at(lines, "helper(x, BLOCK=BLOCK)", offset=len("helper(x, "))))
    sig = help_.signatures[0]
    assert sig.label == "helper(x, BLOCK: tl.constexpr)"
    assert "Scale x by the block size." in sig.documentation.value
    a, b = sig.parameters[help_.active_parameter].label
    assert sig.label[a:b] == "BLOCK: tl.constexpr"
