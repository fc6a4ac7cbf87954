"""GPU timing: warm-up, an L2 flush before every repetition, CUDA events around the call, device synchronisation,
median with interquartile range, and the host's launch cost reported on its own. Plus the honesty checks on a
measured speedup and the statistics, which are pure (torch is imported only by the functions that touch a GPU).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, replace

from ...spec import unwrap_kernel

DEFAULT_REPETITIONS = 50
WARMUP = 5
BATCH = 10  # repetitions enqueued between two synchronisations
SUSPICIOUS_SPEEDUP = 10.0  # a kernel 10x faster than its PyTorch reference is more often wrong than brilliant


@dataclass(frozen=True)
class Timing:
    median_us: float
    q1_us: float
    q3_us: float
    min_us: float
    repetitions: int
    launch_us: float | None = None  # host time per call (Python, launcher, allocation): outside the GPU figures

    @property
    def iqr_us(self) -> float:
        return self.q3_us - self.q1_us

    def to_json(self) -> dict:
        return {**asdict(self), "iqr_us": self.iqr_us}

    @classmethod
    def from_json(cls, data: dict) -> Timing:
        launch = data.get("launch_us")
        return cls(float(data["median_us"]), float(data["q1_us"]), float(data["q3_us"]), float(data["min_us"]),
                   int(data["repetitions"]), float(launch) if launch is not None else None)


def summarize(samples_us: list[float]) -> Timing:
    """Median and quartiles (inclusive method) of per-repetition times."""
    xs = sorted(float(x) for x in samples_us)
    if not xs:
        raise ValueError("no timing samples")
    if len(xs) == 1:
        return Timing(xs[0], xs[0], xs[0], xs[0], 1)
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return Timing(statistics.median(xs), q1, q3, xs[0], len(xs))


def suspicious(kernel_us: float, reference_us: float | None, floor_us: float | None) -> str | None:
    """Why a measurement should not be believed, or None. `floor_us`: the fastest the bytes the kernel must move
    can cross DRAM at peak bandwidth."""
    if floor_us is not None and kernel_us < floor_us * 0.95:
        return (f"measured {kernel_us:.1f} µs, below the {floor_us:.1f} µs that moving its inputs and outputs takes "
                "at peak DRAM bandwidth: the kernel may skip work, or the data stayed in cache")
    if reference_us and kernel_us > 0 and reference_us / kernel_us > SUSPICIOUS_SPEEDUP:
        return (f"{reference_us / kernel_us:.0f}x faster than the PyTorch reference: check that the kernel does "
                "all the work and that the reference is a fair baseline")
    return None


def tensor_bytes(args) -> int:
    """Bytes of the tensor arguments (inputs the launcher reads)."""
    total = 0
    for a in args:
        if hasattr(a, "element_size") and hasattr(a, "numel"):
            total += int(a.numel()) * int(a.element_size())
    return total


def _flush_buffer():
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
    return torch.empty(max(2 * l2, 256 * 2**20) // 4, dtype=torch.int32, device="cuda")


def lead_us(host_us: float) -> float:
    """GPU work to queue ahead of a timed call that takes the host `host_us` to issue: twice that plus a margin, so
    the kernel is already queued when its start event fires, whatever the host's jitter."""
    return 2.0 * max(0.0, host_us) + 20.0


class _Lead:
    """Keeps the GPU busy ahead of each timed call: the L2 flush, then a spin kernel (or more flushes where torch
    has no spin) for whatever the flush does not cover."""

    def __init__(self, flush, host_us: float):
        import torch

        self.torch, self.flush = torch, flush
        self.flush_us = min(self._gpu_us(flush.zero_) for _ in range(3))
        self.spin_cycles = 0
        self.extra_flushes = 0
        missing = lead_us(host_us) - self.flush_us
        if missing <= 0:
            return
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is not None:
            # The spin kernel's first launch loads its module (CUDA lazy loading) between the events; a
            # calibration that counted that would make the spin far too short.
            sleep(1000)
            torch.cuda.synchronize()
            probe = 200_000
            per_us = probe / max(min(self._gpu_us(lambda: sleep(probe)) for _ in range(3)), 1e-3)
            self.spin_cycles = int(missing * per_us)
        else:
            self.extra_flushes = math.ceil(missing / max(self.flush_us, 1.0))

    def _gpu_us(self, fn) -> float:
        """GPU time of `fn`, issued behind a flush so that its own launch cost stays outside the window."""
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        self.flush.zero_()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1000.0

    def __call__(self) -> None:
        self.flush.zero_()
        for _ in range(self.extra_flushes):
            self.flush.zero_()
        if self.spin_cycles:
            self.torch.cuda._sleep(self.spin_cycles)


_CLOCKS_UP = False
CLOCK_RAMP_S = 0.3


def _raise_clocks(flush) -> None:
    """Once per process: keep the GPU busy for a few hundred milliseconds first. An idle GPU runs at a low clock
    and takes that long to reach its working clock; a process's first measurement would otherwise be slower
    than the same measurement a moment later."""
    global _CLOCKS_UP
    if _CLOCKS_UP:
        return
    import torch

    deadline = time.perf_counter() + CLOCK_RAMP_S
    while time.perf_counter() < deadline:
        for _ in range(8):
            flush.zero_()
        torch.cuda.synchronize()
    _CLOCKS_UP = True


def time_callable(fn, repetitions: int = DEFAULT_REPETITIONS, warmup: int = WARMUP, batch: int = BATCH) -> Timing:
    """Time `fn()` on the current CUDA device, as triton's do_bench does and a little more: before each repetition
    the L2 is flushed (a write of >= 2x L2) and, without synchronising, enough GPU work is queued that the host has
    issued `fn`'s launches before the start event fires; CUDA events around the call only; one synchronisation
    per batch. So the figures are the kernel's time on the GPU, not the host's launch cost, which is reported
    apart as `launch_us` (the median host time per call; what back-to-back calls cannot go below)."""
    import torch

    flush = _flush_buffer()
    _raise_clocks(flush)
    host: list[float] = []
    for _ in range(max(1, warmup)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        host.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    # The first warm-up call may compile; the slowest of the others bounds what a launch costs the host.
    lead = _Lead(flush, max(host[1:] or host))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    launch: list[float] = []
    for i in range(repetitions):
        lead()
        starts[i].record()
        t0 = time.perf_counter()
        fn()
        launch.append((time.perf_counter() - t0) * 1e6)
        ends[i].record()
        if (i + 1) % max(1, batch) == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    timing = summarize([s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)])
    return replace(timing, launch_us=statistics.median(launch))


class NotVerified(Exception):
    """A timed repetition's output did not match the reference on its own inputs: no figure."""


def time_checked(fn, fresh, verify, repetitions: int = DEFAULT_REPETITIONS, warmup: int = WARMUP,
                 batch: int = BATCH) -> Timing:
    """`time_callable`, with every call on inputs never seen before and every timed call's output verified: `fresh()`
    returns a new argument tuple (drawn from a new secret seed) and is called outside the timed window; after each
    batch's synchronisation `verify(args, output)` returns why an output is wrong, or None, and a wrong one raises
    NotVerified. The launcher gets the same kind of inputs on every call and cannot tell a timed call from a warm-up
    one: a memo between repetitions, an answer keyed by the bench seed or a launcher that turns wrong after some
    calls gives no figure."""
    import torch

    flush = _flush_buffer()
    _raise_clocks(flush)
    host: list[float] = []
    for _ in range(max(1, warmup)):
        args = fresh()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn(*args)
        host.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        _verified(verify, args, out, "a warm-up call")
    lead = _Lead(flush, max(host[1:] or host))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    launch: list[float] = []
    pending: list[tuple[int, tuple, object]] = []
    for i in range(repetitions):
        args = fresh()
        lead()
        starts[i].record()
        t0 = time.perf_counter()
        out = fn(*args)
        launch.append((time.perf_counter() - t0) * 1e6)
        ends[i].record()
        pending.append((i, args, out))
        if (i + 1) % max(1, batch) == 0 or i + 1 == repetitions:
            torch.cuda.synchronize()
            for j, a, o in pending:
                _verified(verify, a, o, f"timed repetition {j + 1}")
            pending = []
    torch.cuda.synchronize()
    timing = summarize([s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)])
    return replace(timing, launch_us=statistics.median(launch))


def _verified(verify, args, out, which: str) -> None:
    why = verify(args, out)
    if why:
        raise NotVerified(f"{which}'s output is wrong on its own inputs ({why}): a figure comes only from verified "
                          "runs")


# Device kernels that are PyTorch's or a vendor library's compute, not a Triton kernel's (by their symbol names).
LIBRARY_KERNELS = ("gemm", "cublas", "cutlass", "sm90_xmma", "at::native", "elementwise", "reduce_kernel",
                   "softmax_warp", "cudnn")
# Kernels the harness itself launches around a timed call (the L2 flush, the spin).
_HARNESS_KERNELS = ("FillFunctor", "spin_kernel", "fill_kernel")


def audit_launches(fn, args, triton_names: set[str]) -> str | None:
    """One call of `fn(*args)` seen by the CUDA profiler (CUPTI activity records, outside Python's reach): why its
    timing is not the kernel's, or None. It launches no kernel at all, launches on a stream other than the one the
    timer's events are recorded on, or spends most of its device time in PyTorch or library kernels."""
    import json
    import os
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    kernels = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    kernels = [e for e in kernels if not any(h in e.get("name", "") for h in _HARNESS_KERNELS)]
    if not kernels:
        return "the timed call launched no kernel on the GPU (CUDA profiler): there is nothing of the kernel's to time"
    timed_stream = torch.cuda.current_stream().cuda_stream
    streams = {e.get("args", {}).get("stream") for e in kernels}
    names = ", ".join(sorted({e.get("name", "?") for e in kernels})[:4])
    # The profiler numbers streams its own way (7 is the legacy default stream); a handle it reports that is neither
    # is a stream the launcher made.
    own = {timed_stream, 7, 0, None}
    if streams - own:
        return (f"the call launched kernels on a stream the timer does not cover ({names}; streams "
                f"{sorted(s for s in streams if s is not None)}): the events would not time them")
    total = sum(float(e.get("dur", 0)) for e in kernels) or 1.0
    library = sum(float(e.get("dur", 0)) for e in kernels
                  if any(k in e.get("name", "") for k in LIBRARY_KERNELS)
                  and not any(t in e.get("name", "") for t in triton_names))
    if library / total > 0.5:
        return (f"{library / total:.0%} of the call's device time is in PyTorch or library kernels ({names}), not "
                "in Triton kernels: the figure times PyTorch's work")
    return None


def with_overrides(kernel, launcher, overrides: dict):
    """The launcher with the kernel's launches given `overrides` (constexprs, num_warps, num_stages). An autotuned
    kernel is launched through its jit function with the overrides as the only configuration."""
    from triton.runtime import autotuner, jit

    target = unwrap_kernel(kernel)
    original_run = jit.JITFunction.run
    original_tune = autotuner.Autotuner.run

    def run(self, *a, grid, warmup, **kw):
        if self is target:
            kw = {**kw, **overrides}
            if callable(grid):
                grid = grid({**dict(zip(self.arg_names, a)), **kw})
        return original_run(self, *a, grid=grid, warmup=warmup, **kw)

    def tune(self, *a, **kw):
        if unwrap_kernel(self) is not target:
            return original_tune(self, *a, **kw)
        return self.fn.run(*a, **{**kw, **overrides})

    def call(*args):
        jit.JITFunction.run, autotuner.Autotuner.run = run, tune
        try:
            return launcher(*args)
        finally:
            jit.JITFunction.run, autotuner.Autotuner.run = original_run, original_tune

    return call
