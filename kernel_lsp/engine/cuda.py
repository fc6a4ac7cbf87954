"""CUDA C++ (.cu) files, where nvcc is installed: compile errors at their lines and each kernel's resources.

nvcc compiles the file for each CUDA target (`-c -o /dev/null`), with ptxas' verbose report; nothing runs.
Problems use the compile codes (KC001 errors, KC002 warnings, KC003 spills) so that `check` treats them alike.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from analyzers.model import Problem, Span
from analyzers.rules import make_problem
from analyzers.targets import parse_target

from .compile.worker import parse_ptxas_log
from .files import open_regular

CUDA_SUFFIXES = (".cu",)
_DIAGNOSTIC = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<kind>error|warning)(?: #[\w-]+)?: (?P<msg>.*)$")
_KERNEL = re.compile(r"__global__\s+(?:[\w:<>,\s\*&]+?\s+)?(?P<name>\w+)\s*\(")


@dataclass
class CudaKernel:
    name: str  # the source name (demangled from ptxas' report)
    line: int  # 0-based line of its definition, -1 when not found in the source
    target: str
    registers: int | None = None
    stack_bytes: int | None = None
    spill_bytes: int | None = None
    shared_bytes: int = 0
    path: str = ""


@dataclass
class CudaReport:
    path: str
    problems: list[Problem] = field(default_factory=list)
    kernels: list[CudaKernel] = field(default_factory=list)


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    candidate = os.path.join(home, "bin", "nvcc")
    return candidate if os.access(candidate, os.X_OK) else None


def _source_name(mangled: str) -> str:
    """`_Z5scalePffi` -> `scale`, `_ZN2ns6kernelEPf` -> `kernel` (Itanium mangling); other names unchanged."""
    if not mangled.startswith("_Z"):
        return mangled
    rest, nested = mangled[2:], mangled.startswith("_ZN")
    if nested:
        rest = rest[1:]
    last = None
    while rest and rest[0].isdigit():
        digits = rest[:len(rest) - len(rest.lstrip("0123456789"))]
        n = int(digits)
        last, rest = rest[len(digits):len(digits) + n], rest[len(digits) + n:]
        if not nested:
            break
    return last or mangled


def check_cuda(path: str, targets: list[str], nvcc: str, timeout: float = 120.0, text: str | None = None
               ) -> CudaReport:
    """Compile a .cu file for each CUDA target. `text`: an editor's unsaved buffer, compiled in its place (a
    temporary copy under the same name, with the file's folder on the include path); else the file on disk."""
    report = CudaReport(path)
    if text is None:
        try:
            with open_regular(path) as fh:  # a FIFO under a .cu name would block the open
                text = fh.read().decode("utf-8", errors="replace")
        except OSError as exc:
            report.problems.append(make_problem("KC006", Span.point(0), f"cannot read {path}: {exc}"))
            return report
        with tempfile.TemporaryDirectory(prefix="kernel-lsp-cu-") as scratch:
            return _check(report, path, text, targets, nvcc, timeout, scratch, copy=False)
    with tempfile.TemporaryDirectory(prefix="kernel-lsp-cu-") as scratch:
        return _check(report, path, text, targets, nvcc, timeout, scratch, copy=True)


def _check(report: CudaReport, path: str, text: str, targets: list[str], nvcc: str, timeout: float, scratch: str,
           copy: bool) -> CudaReport:
    lines = text.splitlines()
    compiled_file = path
    include = []
    if copy:
        compiled_file = os.path.join(scratch, os.path.basename(path))
        with open(compiled_file, "w", encoding="utf-8") as fh:
            fh.write(text)
        include = ["-I", os.path.dirname(os.path.abspath(path))]
    defined: dict[str, int] = {}
    for i, line_text in enumerate(lines):
        for kernel in _KERNEL.finditer(line_text):
            defined.setdefault(kernel.group("name"), i)
    seen: set[tuple[int, str]] = set()
    for name in targets:
        spec = parse_target(name)
        if spec.backend != "cuda":
            continue  # nvcc builds NVIDIA code only
        try:
            proc = subprocess.run([nvcc, f"-arch=sm_{spec.arch}", *include, "-c", compiled_file, "-o",
                                   os.path.join(scratch, "out.o"), "-Xptxas", "-v"],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            report.problems.append(make_problem(
                "KC006", Span.point(0), f"nvcc took longer than {timeout:.0f} s for {spec.name}: stopped"))
            continue
        except OSError as exc:
            report.problems.append(make_problem("KC006", Span.point(0), f"cannot run nvcc: {exc}"))
            return report
        output = (proc.stderr or "") + (proc.stdout or "")
        for raw in output.splitlines():
            m = _DIAGNOSTIC.match(raw.strip())
            if m and os.path.basename(m.group("file")) == os.path.basename(path):
                line = int(m.group("line")) - 1
                key = (line, m.group("msg"))
                if key in seen:
                    continue  # the front end reports the same error for every target
                seen.add(key)
                code = "KC001" if m.group("kind") == "error" else "KC002"
                width = len(lines[line]) if 0 <= line < len(lines) else 0
                report.problems.append(make_problem(code, Span(line, 0, line, width), f"nvcc: {m.group('msg')}"))
        for mangled, numbers in parse_ptxas_log(output).items():
            source = _source_name(mangled)
            report.kernels.append(CudaKernel(
                source, defined.get(source, -1), spec.name, registers=numbers.get("registers"),
                stack_bytes=numbers.get("stack"), spill_bytes=numbers.get("spill_stores"),
                shared_bytes=numbers.get("smem", 0), path=path))
        for k in report.kernels:
            if k.target == spec.name and k.spill_bytes:
                line = max(k.line, 0)
                report.problems.append(make_problem(
                    "KC003", Span(line, 0, line, len(lines[line]) if line < len(lines) else 0),
                    f"{k.name} spills {k.spill_bytes} bytes to local memory on {spec.name} ({k.registers} registers):"
                    " reduce live values per thread, or raise the register budget with __launch_bounds__"))
    return report
