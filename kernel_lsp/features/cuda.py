"""CUDA C++ documents (`.cu`): compiled with nvcc for the configured CUDA targets while open, once typing settles.
nvcc's errors and warnings become diagnostics (features/diagnostics.py), each `__global__` kernel's registers,
spills and shared memory inlay hints and hovers (features/resources.py). Nothing of a .cu file is analysed
statically, indexed or kept once it is closed."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import to_fs_path

if TYPE_CHECKING:
    from ..engine.cuda import CudaReport
    from ..server import KernelLanguageServer


class CudaDocuments:
    """nvcc's reports of the open .cu documents (each with the document version it was made from, shown while that
    version is current), and where nvcc is."""

    def __init__(self, server: "KernelLanguageServer"):
        self.ls = server
        self.reports: dict[str, tuple[int | None, "CudaReport"]] = {}  # path -> (document version, nvcc's report)
        self.nvcc: str | None = None
        self.nvcc_missing_told = False  # the user has heard once that nvcc is not installed

    def schedule(self, uri: str) -> None:
        """Compile the open document's current version with nvcc after the compile debounce (a newer version
        supersedes it); the report is kept and shown while that version is current."""
        ls = self.ls
        settings = ls.state.settings
        path = to_fs_path(uri)
        if path is None or settings.compile == "off":
            return
        doc = ls.workspace.get_text_document(uri)
        version, text = doc.version, doc.source
        if self.nvcc is None:
            from ..engine.cuda import find_nvcc

            self.nvcc = find_nvcc()
            if self.nvcc is None:
                if not self.nvcc_missing_told:
                    self.nvcc_missing_told = True
                    ls.message("CUDA C++ files are compiled with nvcc, which is not installed here (or not on "
                               "PATH / under CUDA_HOME); only Triton and NKI kernels are checked",
                               types.MessageType.Info)
                return
        nvcc, targets, timeout = self.nvcc, list(settings.targets), settings.compile_timeout_s

        async def work():
            from ..engine.cuda import check_cuda

            return await asyncio.to_thread(check_cuda, path, targets, nvcc, timeout, text)

        def done(report) -> None:
            doc = ls.workspace.text_documents.get(uri)
            if doc is None or doc.version != version:
                ls.state.stale_dropped += 1  # edited or closed while nvcc ran: a newer compile follows
                return
            self.reports[path] = (version, report)
            ls.publish([path], hints=True)

        ls.state.scheduler.submit_async(("cuda", path), work, done, delay=settings.compile_debounce_ms / 1000)

    def report(self, path: str) -> "CudaReport | None":
        """nvcc's report of an open .cu document's current version."""
        found = self.reports.get(path)
        doc = self.ls.open_document(path)
        if found is None or doc is None or doc.version != found[0]:
            return None
        return found[1]

    def forget(self, path: str) -> bool:
        """The document was closed: drop its report. True when it had one."""
        return self.reports.pop(path, None) is not None
