"""The fake `ncu` (fake_ncu/ncu) first on PATH, with sampled CSVs derived from the real fixture; and the server
harness of tests/server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.profile.synth import DETAILS, raw_page, source_with_samples
try:
    from tests.server.conftest import client, start  # noqa: F401 - pytest fixtures
except ImportError:  # no LSP test stack (the GPU machine): the server tests skip themselves
    pass

FAKE_NCU = Path(__file__).parent / "fake_ncu"


class FakeNcu:
    def __init__(self, folder: Path, monkeypatch):
        self.log = folder / "ncu-calls.jsonl"
        self.monkeypatch = monkeypatch
        for name, text in (("source.csv", source_with_samples()), ("details.csv", DETAILS), ("raw.csv", raw_page())):
            (folder / name).write_text(text)
        monkeypatch.setenv("PATH", f"{FAKE_NCU}:/usr/bin:/bin")
        monkeypatch.setenv("FAKE_NCU_LOG", str(self.log))
        monkeypatch.setenv("FAKE_NCU_SOURCE", str(folder / "source.csv"))
        monkeypatch.setenv("FAKE_NCU_DETAILS", str(folder / "details.csv"))
        monkeypatch.setenv("FAKE_NCU_RAW", str(folder / "raw.csv"))
        self.mode_file = folder / "mode"
        monkeypatch.setenv("FAKE_NCU_MODE_FILE", str(self.mode_file))

    def mode(self, mode: str) -> None:
        self.mode_file.write_text(mode)

    def calls(self) -> list[list[str]]:
        return [json.loads(ln) for ln in self.log.read_text().splitlines()] if self.log.exists() else []


@pytest.fixture
def fake_ncu(tmp_path_factory, monkeypatch) -> FakeNcu:
    return FakeNcu(tmp_path_factory.mktemp("ncu"), monkeypatch)
