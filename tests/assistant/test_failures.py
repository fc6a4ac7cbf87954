"""API failures end in a clear message and no edit; the key never shows; without a key nothing is sent.

The server runs with `--log-level debug` here, so that everything it (and pygls, and the SDK) could log is in
its stderr, which the test then searches for the key.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.server.conftest import make_client

from .conftest import EXAMPLE, KERNEL_LINE, KEY, REPO, options
from .fake_api import answer, error, stall
from .test_actions import code_actions

pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("anthropic")

DEBUG_SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "kernel_lsp", "serve", "--log-level", "debug"],
                                  client_factory=make_client)


@pytest_lsp.fixture(config=DEBUG_SERVER)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def at(uri: str, **extra) -> dict:
    return {"uri": uri, "line": KERNEL_LINE + 3, "character": 4, **extra}


async def test_api_failures_end_in_a_clear_message_and_the_key_never_shows(start, fake, capfd):
    fake.script += [error(500, "api_error", "boom")] * 3 + [error(529, "overloaded_error", "busy")] * 3 + \
        [error(429, "rate_limit_error", "slow down")] * 3 + [stall(30), answer("I would rather not.")] + \
        [error(401, "authentication_error", f"invalid x-api-key {KEY}")]
    s = await start({"vector_add.py": EXAMPLE}, options=options(fake, assistantMaxAttempts=1, assistantTimeoutS=5))
    uri = s.open("vector_add.py")

    async def refine() -> dict:
        result = await s.command("kernel-lsp.refine", at(uri, instruction="faster"))
        assert "proposal" not in result and "edit" not in json.dumps(result)
        return result

    assert "the API failed after 2 retries (HTTP 500): boom" in (await refine())["error"]
    assert "the API is overloaded after 2 retries (HTTP 529): busy; try again later" in (await refine())["error"]
    assert "rate limited by the API after 2 retries (HTTP 429): slow down" in (await refine())["error"]
    assert "the model did not answer within 5 s (assistantTimeoutS)" in (await refine())["error"]
    no_code = (await refine())["error"]
    assert "no candidate passed verification in 1 attempt; the last: no code: the answer had no ```python" in no_code
    refused = (await refine())["error"]
    assert "the API refused the key (HTTP 401)" in refused and KEY not in refused and "[key]" in refused
    assert len(fake.requests) == 3 + 3 + 3 + 1 + 1 + 1
    assert all(KEY in r.headers.get("x-api-key", "") + r.headers.get("authorization", "") for r in fake.requests)
    assert s.client.applied_edits == [] and (s.root / "vector_add.py").read_text() == EXAMPLE

    await asyncio.sleep(0.5)  # let the server's last log lines reach the forwarded stderr
    shown = [m.message for m in s.client.messages] + [m.message for m in s.client.log_messages]
    assert len([m for m in shown if "Refine" in m or "API" in m]) >= 6  # every failure was told to the user
    assert not [m for m in shown if KEY in m]
    session = (s.root / ".kernel-lsp" / "assistant" / "vector_add.add_kernel.json").read_text()
    assert KEY not in session
    err = capfd.readouterr().err
    assert "Retrying request to /v1/messages" in err  # the debug log is really there ...
    assert KEY not in err  # ... and the key is not in it, though initializationOptions carried it


async def test_without_a_key_the_actions_are_listed_disabled_and_nothing_is_sent(start, fake):
    s = await start({"vector_add.py": EXAMPLE}, options={**options(fake), "assistantApiKey": ""})
    uri = s.open("vector_add.py")
    actions = await code_actions(s, uri, KERNEL_LINE + 3)
    assert fake.requests == []  # listing the actions calls no model
    # One entry that says how to set the assistant up, instead of every action it would offer.
    assert not [a for a in actions if "(assistant)" in a.title]
    (setup,) = [a for a in actions if "assistant" in a.title.lower()]
    assert setup.title == "Set up the assistant (set ANTHROPIC_API_KEY)"
    assert setup.disabled.reason.startswith("set ANTHROPIC_API_KEY")
    assert list(setup.command.arguments) == [{"uri": uri, "line": KERNEL_LINE + 3, "character": 4}]
    answer_ = await s.command("kernel-lsp.assistantOptimize", at(uri))
    assert answer_["error"].startswith("set ANTHROPIC_API_KEY")
    assert fake.requests == []
    # Everything else keeps working: the checks run as before.
    checked = await s.command("kernel-lsp.runChecks", at(uri))
    assert checked["verdicts"][0]["status"] == "correct"


def test_the_server_starts_without_importing_anthropic():
    probe = (
        "import sys\n"
        "from lsprotocol import types\n"
        "from kernel_lsp.server import build_server\n"
        "from kernel_lsp.features.assistant import assistant_actions, has_key\n"
        "server = build_server()\n"
        "assert has_key(server) in (True, False)\n"
        "print(json.dumps(sorted(m for m in ('anthropic', 'torch', 'triton', 'httpx2') if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", "import json\n" + probe], capture_output=True, text=True,
                          check=False, timeout=60, env={**os.environ, "ANTHROPIC_API_KEY": KEY}, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
