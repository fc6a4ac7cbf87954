"""Shutdown cancels every request in flight, also those whose cancellation calls back at once."""

from __future__ import annotations

from concurrent.futures import Future

from kernel_lsp.server import KernelLanguageServer


def test_shutdown_cancels_requests_that_finish_while_it_cancels():
    protocol = KernelLanguageServer().protocol
    futures: list[Future] = []
    for msg_id in range(3):
        future: Future = Future()  # a request run in a thread: its done-callbacks run inside cancel()
        future.add_done_callback(lambda f, msg_id=msg_id: protocol._request_futures.pop(msg_id, None))
        protocol._request_futures[msg_id] = future
        futures.append(future)
    for _ in protocol.lsp_shutdown():  # the handlers it yields (the features' shutdown) are not run here
        pass
    assert all(f.cancelled() for f in futures)
    assert protocol._request_futures == {}
