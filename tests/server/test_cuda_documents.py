"""CUDA C++ documents in the editor: nvcc's errors at their lines while the buffer is unsaved, and each kernel's
registers, spills and shared memory as an inlay hint and a hover."""

from __future__ import annotations


import pytest
from lsprotocol import types

from kernel_lsp.engine.cuda import find_nvcc

from .conftest import until


pytestmark = pytest.mark.skipif(find_nvcc() is None, reason="nvcc (CUDA toolkit) is not installed")

SOURCE = """#include "scale.h"

__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a * FACTOR;
}

__global__ void tile_sum(const float *x, float *out) {
    __shared__ float tile[256];
    tile[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) { float s = 0; for (int i = 0; i < 256; ++i) s += tile[i]; *out = s; }
}
"""
OPTIONS = {"compile": "open", "compileDebounceMs": 0, "targets": ["sm_90", "sm_80"]}


async def test_cu_buffer_errors_and_resources(start):
    # The header next to the file must be found although nvcc compiles a copy of the unsaved buffer elsewhere.
    s = await start({"scale.cu": "", "scale.h": "#define FACTOR 2.0f\n"}, options=OPTIONS)
    uri = s.open("scale.cu", SOURCE.replace("x[i] *= a", "x[i] *= b"), language="cuda")

    async def hints() -> dict[int, str]:
        found = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(0, 0), types.Position(20, 0))))
        return {h.position.line: h.label for h in found or []}

    errors = await until(lambda: s.diagnostics(uri), lambda d: any(x.code == "KC001" for x in d), timeout=60)
    [error] = [d for d in errors if d.code == "KC001"]
    assert error.range.start.line == 4 and '"b"' in error.message
    assert not any(d.code == "KL001" for d in errors)  # never parsed as Python

    s.set_text(uri, SOURCE)
    by_line = await until(hints, lambda h: h, timeout=60)  # the fixed version compiled: every kernel has its resources
    assert await s.diagnostics(uri) == []
    assert set(by_line) == {2, 7}
    assert "sm_90:" in by_line[7] and "sm_80:" in by_line[7] and "1 KiB smem" in by_line[7]
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(7, 20)))
    assert "tile_sum" in hover.contents.value and "| sm_90 |" in hover.contents.value
