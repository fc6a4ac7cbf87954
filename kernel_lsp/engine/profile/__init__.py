"""Where inside a kernel the time goes: Nsight Compute's warp-stall samples per line of the user's file, and its
rule advice, from one profiling run per kernel and bench shape.

Public API (synchronous, thread-safe; every run is its own process group, killed on timeout or cancel):
- `find_ncu() -> str | None`
- `profile_file(path, text, kernels=None, root=None, *, timeout_s=..., cancel=None, progress=None,
  keep_dir=None) -> ProfileReport`

The run: a plan process lists the file's specs and bench shapes (driver.py, no GPU needed); then per point
`ncu --set full --import-source yes --profile-from-start off --clock-control base -k regex:^KERNEL$ -c 1 -o REPORT
python -m kernel_lsp.engine.profile.driver ...`, and three imports of the report (source page, raw stall metrics per
instruction, details page) parsed by ncu_csv.py. No LSP imports.

The profile runs the configuration the kernel really uses: an autotuned kernel first picks its configuration in a
run without the profiler, and the profiled run is pinned to that one (driver.py). Every profile says the SM clock
it ran at (Nsight Compute's "SM Frequency"): ncu locks the clock to the GPU's base clock, so its durations read
slower than a normal run's.
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..proc import Stopped, killed_from_outside, run_group
from ..redact import user_code_env
from . import ncu_csv
from .ncu_csv import Advice, LineStat

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NCU_PLACES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda-*/bin/ncu")
PROFILE_TIMEOUT_S = 300.0  # one kernel replays ~40 passes under `--set full`; big kernels take minutes
PLAN_TIMEOUT_S = 120.0
IMPORT_TIMEOUT_S = 120.0
NO_GPU = "no GPU here: per-line profiles need an NVIDIA GPU and Nsight Compute"
CLOCK_CONTROL = "base"  # ncu's default, said out loud: comparable profiles from run to run


class ProfileError(Exception):
    """A run that gave no profile; the message is what the user reads."""


@dataclass(frozen=True)
class KernelProfile:
    kernel: str
    shape: tuple[int, ...]
    dtype: str
    device: str
    duration_us: float | None
    registers: int | None
    achieved_occupancy: float | None  # percent
    theoretical_occupancy: float | None  # percent
    shared_bytes: float | None  # static + dynamic + driver-reserved, per block
    total_samples: float
    lines: tuple[LineStat, ...]
    other_files: tuple[tuple[str, float], ...]
    advice: tuple[Advice, ...]
    reasons_from: str  # "instructions", "source page" or "none" (totals only: see notes)
    kernel_stalls: tuple[tuple[str, float], ...]
    notes: tuple[str, ...] = ()
    sm_clock_mhz: float | None = None  # the SM clock the profiled launch ran at
    config: str | None = None  # an autotuned kernel's configuration, pinned for the profile

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "shape": list(self.shape), "dtype": self.dtype, "device": self.device,
                "durationUs": self.duration_us, "registers": self.registers,
                "achievedOccupancy": self.achieved_occupancy, "theoreticalOccupancy": self.theoretical_occupancy,
                "sharedBytes": self.shared_bytes, "samples": self.total_samples,
                "lines": [ln.to_json() for ln in self.lines],
                "otherFiles": [{"file": f, "samples": s} for f, s in self.other_files],
                "advice": [a.to_json() for a in self.advice], "reasonsFrom": self.reasons_from,
                "kernelStalls": [{"reason": r, "share": round(s, 4)} for r, s in self.kernel_stalls],
                "notes": list(self.notes), "smClockMhz": self.sm_clock_mhz, "clockControl": CLOCK_CONTROL,
                "config": self.config}


@dataclass
class ProfileReport:
    path: str
    profiles: list[KernelProfile] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def for_kernel(self, kernel: str) -> list[KernelProfile]:
        return [p for p in self.profiles if p.kernel == kernel]

    def shown(self, kernel: str) -> KernelProfile | None:
        """The profile a hint shows: the largest bench shape's."""
        found = self.for_kernel(kernel)
        return max(found, key=lambda p: math.prod(p.shape) if p.shape else 1) if found else None


def find_ncu() -> str | None:
    """ncu on PATH, else where CUDA toolkits and Nsight Compute installers put it (the newest)."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in NCU_PLACES:
        hits = sorted(p for p in glob.glob(pattern) if os.access(p, os.X_OK))
        if hits:
            return hits[-1]
    return None


def gpu_present() -> bool:
    from ..gpu import gpu_present as present

    return present()


# --- processes ----------------------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = user_code_env()  # the user's code runs here: no API key, no token (engine/redact.py)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p)
    env.pop("TRITON_INTERPRET", None)  # a real launch is the point
    env.pop("TRITON_DISABLE_LINE_INFO", None)  # without line info ncu cannot name the user's lines
    env["TRITON_DEFAULT_FP_FUSION"] = env.get("TRITON_DEFAULT_FP_FUSION", "1")
    return env


def run_process(cmd: list[str], timeout: float, cancel: threading.Event | None, cwd: str | None = None
                ) -> tuple[int, str]:
    """(exit code, stdout+stderr) of `cmd` in its own process group; timeout and cancel kill the whole group."""
    try:
        done = run_group(cmd, timeout=timeout, cancel=cancel, env=_env(), cwd=cwd, merge_stderr=True)
    except Stopped as exc:
        raise ProfileError("cancelled" if exc.reason == "cancelled" else f"no result within {timeout:g} s") from None
    return done.returncode, done.stdout.decode(errors="replace")


def _driver_cmd(request_path: str, status_path: str) -> list[str]:
    return [sys.executable, "-P", "-B", "-m", "kernel_lsp.engine.profile.driver", request_path, status_path]


def _read_status(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def ncu_failure(output: str, timeout_s: float | None = None) -> str | None:
    """What went wrong, in words, from ncu's own output; None when nothing recognisable did."""
    if "ERR_NVGPUCTRPERM" in output:
        return ("Nsight Compute may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run as root or "
                "let all users profile (NVreg_RestrictProfilingToAdminUsers=0; "
                "https://developer.nvidia.com/ERR_NVGPUCTRPERM)")
    if "LibraryNotLoaded" in output:
        return ("Nsight Compute could not inject its library into the Python process (LibraryNotLoaded): check "
                "that ncu matches the installed driver and that the process is not sandboxed")
    if "No kernels were profiled" in output:
        return None  # the caller knows which kernel: see never_launched
    errors = [ln.strip() for ln in output.splitlines() if ln.startswith("==ERROR==")]
    if errors:
        return "Nsight Compute failed: " + errors[0].removeprefix("==ERROR==").strip()
    return None


def _plan(path: str, text: str, root: str | None, workdir: str, cancel) -> list[dict]:
    request = os.path.join(workdir, "plan.json")
    status_path = os.path.join(workdir, "plan-status.json")
    with open(request, "w", encoding="utf-8") as f:
        json.dump({"mode": "plan", "path": path, "source": text, "root": root}, f)
    code, output = run_process([sys.executable, "-P", "-B", "-m", "kernel_lsp.engine.profile.plan", request, status_path],
                               PLAN_TIMEOUT_S, cancel, cwd=root)
    status = _read_status(status_path)
    outside = killed_from_outside(code, "the process reading the file's specs", "profile again")
    if outside:
        raise ProfileError(outside)
    if status is None:
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise ProfileError(f"cannot read the file's specs (exit code {code}): {tail or 'no output'}")
    if not status.get("ok"):
        raise ProfileError(status.get("error") or "cannot read the file's specs")
    return list(status.get("points") or [])


# --- one profile --------------------------------------------------------------------------------------------------


def _import(ncu: str, report: str, args: list[str], cancel, name: str, keep: str) -> str | None:
    code, output = run_process([ncu, "-i", report, *args], IMPORT_TIMEOUT_S, cancel)
    if code != 0 or not output.strip():
        return None
    with open(os.path.join(keep, name), "w", encoding="utf-8") as f:
        f.write(output)
    return output


def profile_point(ncu: str, path: str, text: str, root: str | None, point: dict, workdir: str, *,
                  timeout_s: float = PROFILE_TIMEOUT_S, cancel: threading.Event | None = None) -> KernelProfile:
    """Profile one spec at one shape; ProfileError says why not. The CSVs ncu printed stay in `workdir`."""
    kernel = point["kernel"]
    tag = f"{kernel}-{'x'.join(str(d) for d in point.get('shape') or ()) or 'default'}"
    request = os.path.join(workdir, f"{tag}.request.json")
    status_path = os.path.join(workdir, f"{tag}.status.json")
    report_base = os.path.join(workdir, tag)
    with open(request, "w", encoding="utf-8") as f:
        json.dump({"path": path, "source": text, "root": root, **point}, f)
    pin = _pick(path, text, root, point, workdir, tag, cancel) if point.get("autotuned") else None
    if pin:
        with open(request, "w", encoding="utf-8") as f:
            json.dump({"path": path, "source": text, "root": root, **point, "pin": pin}, f)
    cmd = [ncu, "--set", "full", "--import-source", "yes", "--profile-from-start", "off",
           "--clock-control", CLOCK_CONTROL, "-k", f"regex:^{_regex_escape(kernel)}$", "-c", "1", "-f", "-o", report_base,
           *_driver_cmd(request, status_path)]
    try:
        code, output = run_process(cmd, timeout_s, cancel, cwd=root)
    except ProfileError as exc:
        if str(exc) == "cancelled":
            raise
        raise ProfileError(f"Nsight Compute did not finish profiling {kernel} within {timeout_s:g} s (it replays "
                           "the kernel ~40 times); a smaller bench shape profiles faster") from None
    with open(os.path.join(workdir, f"{tag}.ncu.log"), "w", encoding="utf-8") as f:
        f.write(output)
    outside = killed_from_outside(code, "Nsight Compute", "profile again")
    if outside:
        raise ProfileError(outside)
    status = _read_status(status_path) or {}
    if status.get("kind") == "no-gpu":
        raise ProfileError(NO_GPU)
    failure = ncu_failure(output)
    if failure:
        raise ProfileError(failure)
    if status and not status.get("ok"):
        where = f" (line {status['line'] + 1})" if isinstance(status.get("line"), int) else ""
        raise ProfileError(f"the profiled program failed{where}: {status.get('error')}")
    report = report_base + ".ncu-rep"
    if not os.path.exists(report):
        if "No kernels were profiled" in output or status.get("ok"):
            raise ProfileError(f"{kernel} never launched under Nsight Compute: the spec's launcher must launch it "
                               f"(ncu looked for a kernel named {kernel})")
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise ProfileError(f"Nsight Compute wrote no report (exit code {code}): {tail or 'no output'}")
    source = _import(ncu, report, ["--page", "source", "--csv", "--print-source", "cuda,sass"], cancel,
                     f"{tag}.source.csv", workdir)
    details = _import(ncu, report, ["--page", "details", "--csv"], cancel, f"{tag}.details.csv", workdir)
    raw = _import(ncu, report, ["--page", "raw", "--csv", "--print-metric-instances", "details", "--metrics",
                                f"regex:^{ncu_csv.STALL_METRIC}"], cancel, f"{tag}.raw.csv", workdir)
    if source is None:
        raise ProfileError("Nsight Compute printed no source page for the report (was the kernel compiled "
                           "without line info? TRITON_DISABLE_LINE_INFO must be unset)")
    return build_profile(path, point, status, source, details, raw)


def _pick(path, text, root, point, workdir, tag, cancel) -> dict | None:
    """The configuration an autotuned kernel picks in a run without the profiler (driver.py, "pick")."""
    request = os.path.join(workdir, f"{tag}.pick.json")
    status_path = os.path.join(workdir, f"{tag}.pick-status.json")
    with open(request, "w", encoding="utf-8") as f:
        json.dump({"path": path, "source": text, "root": root, **point, "mode": "pick"}, f)
    code, output = run_process(_driver_cmd(request, status_path), PROFILE_TIMEOUT_S, cancel, cwd=root)
    outside = killed_from_outside(code, "the run that picks the autotuned configuration", "profile again")
    if outside:
        raise ProfileError(outside)
    status = _read_status(status_path) or {}
    if status.get("kind") == "no-gpu":
        raise ProfileError(NO_GPU)
    if not status.get("ok"):
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise ProfileError(f"the run that picks the autotuner's configuration failed: "
                           f"{status.get('error') or tail or 'no output'}")
    return status.get("config")


def _regex_escape(name: str) -> str:
    return "".join("\\" + c if not (c.isalnum() or c == "_") else c for c in name)


def build_profile(path: str, point: dict, status: dict, source: str, details: str | None, raw: str | None
                  ) -> KernelProfile:
    """A KernelProfile from the pages ncu printed for one report."""
    page = ncu_csv.parse_source_page(source)
    stalls = ncu_csv.parse_raw_stalls(raw) if raw else ncu_csv.RawStalls({}, {})
    att = ncu_csv.attribute(page, path, stalls)
    notes = []
    files = {b.file for b in page.blocks}
    if files and not any(ncu_csv.same_file(f, path) for f in files):
        notes.append(f"ncu attributes the kernel's instructions to {', '.join(sorted(files))}, not to this file")
    if att.reasons_from == "none":
        notes.append("stall reasons per line were not available from this Nsight Compute "
                     "(no per-instruction smsp__pcsamp_warps_issue_stalled_* values): totals per line only"
                     + ("; the kernel's own breakdown is shown" if att.kernel_stalls else ""))
    if att.total_samples <= 0:
        notes.append("no warp-stall samples were collected: the kernel ran too briefly for the sampler; profile a "
                     "larger bench shape")
    if status and status.get("file_matches") is False:
        notes.append(f"triton compiled the kernel from {status.get('kernel_file')}, not {path}")
    kernel = point["kernel"]
    d = next(iter(ncu_csv.parse_details_page(details)), None) if details else None
    duration = registers = achieved = theoretical = shared = clock = None
    advice: tuple[Advice, ...] = ()
    if d is not None:
        duration = ncu_csv.microseconds(*d.value("GPU Speed Of Light Throughput", "Duration"))
        regs, _ = d.value("Launch Statistics", "Registers Per Thread")
        registers = int(regs) if regs is not None else None
        achieved, _ = d.value("Occupancy", "Achieved Occupancy")
        theoretical, _ = d.value("Occupancy", "Theoretical Occupancy")
        parts = [ncu_csv.byte_count(*d.value("Launch Statistics", m)) for m in (
            "Static Shared Memory Per Block", "Dynamic Shared Memory Per Block", "Driver Shared Memory Per Block")]
        shared = sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None
        clock = ncu_csv.megahertz(*d.value("GPU Speed Of Light Throughput", "SM Frequency"))
        rank = {"OPT": 0, "WRN": 1, "INF": 2}
        advice = tuple(sorted(d.advice, key=lambda a: (rank.get(a.kind, 3), -(a.speedup or 0.0))))
    if clock is not None:
        notes.append(f"profiled at an SM clock of {clock:.0f} MHz: Nsight Compute locks the GPU to its base clock, "
                     "so this duration reads slower than a normal run's")
    elif d is not None:
        notes.append("Nsight Compute did not report the SM clock of this profile (it locks the GPU to its base "
                     "clock: durations read slower than a normal run's)")
    pinned = status.get("pinned") if status else None
    if pinned:
        notes.append(f"profiled with the configuration the autotuner picks without the profiler: {pinned}")
    return KernelProfile(kernel, tuple(status.get("shape") or point.get("shape") or ()),
                         status.get("dtype") or point.get("dtype") or "", status.get("device") or "",
                         duration, registers, achieved, theoretical, shared, att.total_samples, att.lines,
                         att.other_files, advice, att.reasons_from, att.kernel_stalls, tuple(notes),
                         sm_clock_mhz=clock, config=pinned)


# --- a file -------------------------------------------------------------------------------------------------------


def profile_file(path: str, text: str, kernels: list[str] | tuple[str, ...] | None = None, root: str | None = None,
                 *, timeout_s: float = PROFILE_TIMEOUT_S, cancel: threading.Event | None = None,
                 progress: Callable[[str, float], None] | None = None, keep_dir: str | None = None,
                 ncu: str | None = None) -> ProfileReport:
    """Profile every spec'd kernel of the file (or those named) at each bench shape. Errors that stop everything
    (no ncu, no GPU, the file does not import) are the report's errors; a failing point adds its own error."""
    started = time.monotonic()
    path = os.path.abspath(path)
    report = ProfileReport(path)
    ncu = ncu or find_ncu()
    if ncu is None:
        report.errors.append(NO_GPU if not gpu_present() else
                             "Nsight Compute (ncu) was not found on PATH, in /usr/local/cuda/bin or "
                             "/opt/nvidia/nsight-compute: install it (it ships with the CUDA toolkit)")
        return report
    workdir = keep_dir or tempfile.mkdtemp(prefix="kernel-lsp-profile-")
    os.makedirs(workdir, exist_ok=True)
    try:
        try:
            points = _plan(path, text, root, workdir, cancel)
        except ProfileError as exc:
            report.errors.append(str(exc))
            return report
        if kernels:
            points = [p for p in points if p.get("kernel") in kernels]
        if not points:
            report.errors.append(f"no spec'd kernel to profile in {path}" + (f" among {', '.join(kernels)}"
                                                                            if kernels else ""))
            return report
        for i, point in enumerate(points):
            if progress:
                progress(f"profiling {point['kernel']} {tuple(point.get('shape') or ())}", i / len(points))
            try:
                report.profiles.append(profile_point(ncu, path, text, root, point, workdir, timeout_s=timeout_s,
                                                     cancel=cancel))
            except ProfileError as exc:
                if str(exc) == "cancelled":
                    report.errors.append("cancelled")
                    break
                # A kill from outside (the out-of-memory killer?) would likely meet the next point too: stop.
                fatal = str(exc) == NO_GPU or "ERR_NVGPUCTRPERM" in str(exc) or "LibraryNotLoaded" in str(exc) \
                    or "from outside kernel-lsp" in str(exc)
                report.errors.append(str(exc) if fatal else f"{point['kernel']} {tuple(point.get('shape') or ())}: "
                                     f"{exc}")
                if fatal:
                    break  # the same for every point
    finally:
        if keep_dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        report.seconds = time.monotonic() - started
    return report


__all__ = [
    "NO_GPU",
    "Advice",
    "KernelProfile",
    "LineStat",
    "ProfileError",
    "ProfileReport",
    "build_profile",
    "find_ncu",
    "ncu_failure",
    "profile_file",
    "profile_point",
]
