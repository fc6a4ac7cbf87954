"""The assistant engine without the server: what a cancelled action leaves on disk."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from kernel_lsp.engine.assistant import Assistant, AssistantConfig, Environment, ModelConfig
from kernel_lsp.engine.assistant.session import SessionStore
from tests.server.conftest import wait_for

from .conftest import EXAMPLE, KEY
from .fake_api import stall


class SlowStore(SessionStore):
    """Saving takes a while, as on a slow or busy disk; `saving` says a save has begun."""

    def __init__(self, root):
        super().__init__(root)
        self.saving = threading.Event()

    def save(self, session) -> None:
        self.saving.set()
        time.sleep(0.3)
        super().save(session)


async def test_a_cancel_while_the_action_winds_down_still_records_the_turn(tmp_path, fake):
    fake.script += [stall(30)]
    path = tmp_path / "vector_add.py"
    path.write_text(EXAMPLE)
    store = SlowStore(tmp_path / "sessions")
    config = AssistantConfig(ModelConfig("claude-test", KEY, fake.url, timeout_s=30))
    assistant = Assistant(config, Environment(str(tmp_path), check_device="interpreter"), store=store)
    task = asyncio.ensure_future(assistant.refine(str(path), EXAMPLE, "add_kernel", "anything"))
    try:
        await wait_for(lambda: bool(fake.requests), timeout=10)
        task.cancel()
        # The editor's second cancel (cancelAssistant) lands while the turn is being saved.
        await wait_for(lambda: store.saving.is_set() or task.done(), timeout=5, interval=0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await assistant.close()
    files = list(store.dir.glob("*.json"))
    assert files, "the action ended before its cancelled turn was saved"
    saved = json.loads(files[0].read_text())
    assert [t["state"] for t in saved["turns"]] == ["cancelled"]
    assert saved["turns"][0]["outcome"] == "cancelled by the user"
