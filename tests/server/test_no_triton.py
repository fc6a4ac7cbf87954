"""Without triton installed where the server runs, compiling is switched off once, with a message."""

import importlib.util

from kernel_lsp.server import build_server


def test_compile_service_is_off_without_triton(monkeypatch, tmp_path):
    server = build_server()
    server.state.roots = [str(tmp_path)]
    shown = []
    monkeypatch.setattr(server, "message", lambda text, kind=None: shown.append(text))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else object())
    assert server.compiles.workspace() is None
    assert server.compiles.workspace() is None
    assert server.compiles.unavailable and len(shown) == 1 and "pip install triton" in shown[0]
