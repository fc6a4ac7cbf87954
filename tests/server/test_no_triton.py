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
    assert server.compiles.unavailable and len(shown) == 1
    assert "-m pip install 'triton>=3.6'" in shown[0]  # this interpreter's pip: a venv or a system Python


def test_the_install_command_fits_how_kernel_lsp_was_installed(monkeypatch):
    from kernel_lsp.install import add_command

    assert add_command("triton>=3.6", "/home/u/.local/share/pipx/venvs/kernel-lsp") == \
        "pipx inject kernel-lsp 'triton>=3.6'"
    monkeypatch.setattr("kernel_lsp.install._source", lambda: "/home/u/src/kernel-lsp")
    assert add_command("triton>=3.6", "/home/u/.local/share/uv/tools/kernel-lsp") == \
        "uv tool install --reinstall --with 'triton>=3.6' /home/u/src/kernel-lsp"
    assert add_command("triton", "/home/u/project/.venv").endswith(" -m pip install triton")
