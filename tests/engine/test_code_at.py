"""Reading the code at a cursor while it is being typed: the member being completed, the call around the cursor,
names that are (or are not) the same name."""

from __future__ import annotations

from kernel_lsp.engine.apidocs import imported_names, resolve_dotted
from kernel_lsp.engine.code_at import call_at, dotted_at, member_prefix, name_tokens, string_tokens


def test_member_being_typed() -> None:
    assert member_prefix("    x = tl.lo", 13) == ("tl", "lo")
    assert member_prefix("x = tl.math.", 12) == ("tl.math", "")
    assert member_prefix('x = f("a") + tl.', 16) == ("tl", "")
    assert member_prefix("    # see tl.lo", 15) is None  # a comment
    assert member_prefix('    s = "tl.lo', 14) is None  # a string
    assert member_prefix("    x = load", 12) is None


def test_dotted_name_under_the_cursor() -> None:
    assert dotted_at("    x = tl.load(p)", 12) == ("tl.load", 11, 15)
    assert dotted_at("    x = tl.load(p)", 9) == ("tl", 8, 10)  # on the module: cut after it
    assert dotted_at("    x = tl.load(p)", 3) is None


def test_call_around_the_cursor() -> None:
    text = "def f():\n    x = tl.load(p + offs, mask=m, \n"
    assert call_at(text, 1, 34) == call_at(text, 1, 34)
    call = call_at(text, 1, 34)
    assert call is not None and call.callee == "tl.load" and not call.launch and call.index == 2
    assert call.keywords == ("mask",) and call.keyword is None
    launch = call_at("k[(n,)](x, y,\n   BLOCK=3", 1, 10)
    assert launch is not None and launch.launch and launch.callee == "k" and launch.keyword == "BLOCK"
    nested = call_at("add_kernel[grid](a, foo(1, 2), [1, 2], ", 0, 39)
    assert nested is not None and nested.callee == "add_kernel" and nested.index == 3
    inner = call_at("add_kernel[grid](a, foo(1, ", 0, 27)
    assert inner is not None and inner.callee == "foo" and inner.index == 1
    assert call_at("x = (1, 2", 0, 9) is None  # a tuple, not a call
    assert call_at("s = 'tl.load(' + x", 0, 14) is None  # inside a string


def test_same_name_tokens() -> None:
    text = "def k(x, BLOCK: tl.constexpr = 4):\n    y = f(BLOCK=BLOCK) + o.BLOCK\n    BLOCK = 3\n"
    # The keyword of a call names the callee's parameter; `o.BLOCK` is an attribute: neither is this name.
    assert name_tokens(text, "BLOCK") == [(0, 9, False), (1, 10, True), (1, 16, False), (2, 4, False)]
    assert string_tokens("triton.Config({'BLOCK': 4, \"N\": 3, 'BLOCKS': 1})", "BLOCK") == [(0, 16)]


def test_imports_resolve_while_the_file_does_not_parse() -> None:
    text = "import triton\nimport triton.language as tl\nfrom triton.language import math as m\nx = tl.\n"
    names = imported_names(text)
    assert resolve_dotted("tl.load", names) == "triton.language.load"
    assert resolve_dotted("m.exp", names) == "triton.language.math.exp"
    assert resolve_dotted("triton.jit", names) == "triton.jit"
