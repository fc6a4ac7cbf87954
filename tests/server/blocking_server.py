"""`kernel-lsp serve` with one request more, `test/block`, whose handler waits in a worker thread that nothing
interrupts, as a library call that ignores cancellation would. Usage: python blocking_server.py MARKER; the marker
file is written once the thread is waiting."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

from kernel_lsp.server import build_server
from kernel_lsp.transport import start_io

server = build_server()


@server.feature("test/block")
async def block(ls, params) -> None:
    def wait_forever() -> None:
        Path(sys.argv[1]).write_text("waiting")
        threading.Event().wait()

    await asyncio.to_thread(wait_forever)


sys.exit(start_io(server))
