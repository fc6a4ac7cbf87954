"""The command line uses the Python API for the operations it offers: `kernel-lsp tune` is `Workspace.tune`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_lsp import cli
from kernel_lsp.api import TuneResult, TuneRow, Workspace

from .conftest import EXAMPLES


def test_tune_command_prints_what_the_api_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture):
    (tmp_path / "vector_add.py").write_text((EXAMPLES / "vector_add.py").read_text(encoding="utf-8"),
                                            encoding="utf-8")
    calls = []

    def tune(self: Workspace, path=None, source=None, **kwargs) -> TuneResult:
        calls.append((self.root, self.allow_run, path, source is not None, kwargs))
        row = TuneRow("BLOCK_SIZE=4096, num_warps=8", {"BLOCK_SIZE": 4096, "num_warps": 8}, 40.5, None,
                      None, "estimated")
        return TuneResult("add_kernel", "H100", "estimated", "BLOCK_SIZE=1024", row.config, 45.0, 40.5, 45.0 / 40.5,
                          None, None, [row], [], [], dict(row.overrides), "estimated; not measured", 12, 0.0, [],
                          False)

    monkeypatch.setattr(Workspace, "tune", tune)
    monkeypatch.chdir(tmp_path)
    code = cli.main(["tune", "vector_add.py::add_kernel", "--device", "H100", "--estimate-only", "--no-verify",
                     "--format", "json", "-q"])
    assert code == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["winner"] == {"BLOCK_SIZE": 4096, "num_warps": 8} and answer["device"] == "H100"
    assert answer["table"][0]["estimated_us"] == 40.5 and answer["space_size"] == 12
    ((root, allow_run, path, with_source, kwargs),) = calls
    assert root == tmp_path.resolve() and allow_run  # running the command is the consent to run the file
    assert path == str(tmp_path / "vector_add.py") and with_source
    assert kwargs["kernel"] == "add_kernel" and kwargs["target"] == "H100"
    assert kwargs["measure"] is False and kwargs["verify"] is False and kwargs["cache"] is True
