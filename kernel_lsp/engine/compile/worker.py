"""Runs one CompileJob: the function a worker process executes (triton is imported here, lazily, never torch).

`run_job` writes the job's self-contained module to a temporary file, imports it (triton reads the source and
line numbers of @jit functions from the file), compiles through `triton.compile(ASTSource(...))` for the job's
GPUTarget, and returns plain data: the asm of every stage, resources, and errors mapped to the user's file.

Resources come from the compilers' own reports: registers/spills from ptxas' `-v` log of the very run that produced
the cubin (`knobs.nvidia.dump_ptxas_log`; kept beside triton's cache entry so a cache hit reports the same), AMD
numbers from the metadata in the amdgcn text, shared memory from triton's metadata.

Also runs standalone: `python -m kernel_lsp.engine.compile.worker < job.pickle` prints the pickled result.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import itertools
import json
import linecache
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from . import offline
from .jobs import NOT_IN_KERNELS, CompileError, CompileJob, CompileResult, Resources

CACHE_DIR_ENV = "KERNEL_LSP_TRITON_CACHE_DIR"
_SIDECAR = "kernel-lsp-report.json"
_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGS = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
# ptxas' own performance warnings, e.g. "(C7511) Potential Performance Loss: wgmma.mma_async instructions are
# serialized due to insufficient register resources ...": info lines, not errors, so they survive a good compile.
_PTXAS_PERF = re.compile(r"^ptxas\S*\s+info\s*:\s*(\(C\d+\)\s*Potential Performance Loss:.*?)(?: in the function '[^']*')?"
                         r"(?: in line \d+)?\s*$", re.MULTILINE)
_PTXAS_DIAG = re.compile(r"^ptxas\S*\s+(?:\S+,\s*line\s+(\d+);\s*)?(error|warning|fatal)\s*:\s*(.*)$", re.MULTILINE)
_PTXAS_FILE_LINE = re.compile(r"^ptxas\S*\s+(\S+\.ptx),\s*line\s+(\d+);\s*(error|warning)\s*:\s*(.*)$", re.MULTILINE)
_MLIR_DIAG = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|remark): (?P<msg>.*)$", re.MULTILINE)
_CP_ASYNC = re.compile(r"cp\.async\.c[ag]\.shared\.global\S*\s+\[[^\]]*\],\s*\[[^\]]*\],\s*(0x[0-9a-fA-F]+|\d+)")
_REPR_MESSAGE = re.compile(r"^(\w+)\((.*)\)$", re.DOTALL)
_OPTION_WORDS = re.compile(r"\b(num_warps|num_stages|num_ctas|maxnreg|waves_per_eu|matrix_instr_nonkdim|kpack)\b")
# What a triton release that no longer has a construct says about it, and what replaced it.
_MISSING_ATTR = re.compile(r"module '(triton\.language[\w.]*)' has no attribute '(\w+)'")
_REMOVED = re.compile(r"(have|has) been removed|no longer supported|is deprecated and removed", re.IGNORECASE)
_REPLACEMENTS = {
    "max": "tl.maximum", "min": "tl.minimum", "advance": "tensor descriptors (tl.make_tensor_descriptor)",
    "make_block_ptr": "tensor descriptors (tl.make_tensor_descriptor)",
    "_experimental_descriptor_load": "tl.make_tensor_descriptor(...).load",
    "_experimental_descriptor_store": "tl.make_tensor_descriptor(...).store",
    "_experimental_make_tensor_descriptor": "tl.make_tensor_descriptor",
    "libdevice": "triton.language.extra.libdevice (or extra.cuda.libdevice)",
}


# ----------------------------------------------------------------------------------------------------------------
# Positions


def _user_pos(job: CompileJob, module_line: int | None, col: int | None) -> tuple[int | None, int | None]:
    """1-based module line -> (0-based user line, column); None when the line is one the extractor wrote."""
    if module_line is None or not 1 <= module_line <= len(job.line_map):
        return None, None
    user = job.line_map[module_line - 1]
    return (user - 1, col) if user > 0 else (None, None)


def relocate(result: CompileResult, job: CompileJob) -> CompileResult:
    """Re-map a (possibly cached) result's positions through `job.line_map`.

    Jobs with the same key share one result although their kernels may sit at different lines of the file.
    """

    def move(err: CompileError) -> CompileError:
        line = _user_pos(job, err.module_line, err.col)[0] if err.module_line is not None else err.line
        related = []
        for (ln, c, msg), ml in zip(err.related, err.related_module_lines or (0,) * len(err.related)):
            moved = _user_pos(job, ml, c)[0] if ml else ln
            if moved is not None:
                related.append((moved, c, msg))
        return replace(err, line=line, related=tuple(related))

    return replace(
        result,
        error=move(result.error) if result.error else None,
        warnings=tuple(move(w) for w in result.warnings),
    )


def _char_col(job: CompileJob, module_line: int | None, col: int | None) -> int | None:
    """Columns from ast / MLIR / PTX locations count UTF-8 bytes; CompileError columns count code points (the
    analyzers' convention). None: the first non-blank column of the line."""
    lines = job.module_source.splitlines()
    if module_line is None or not 1 <= module_line <= len(lines):
        return col
    text = lines[module_line - 1]
    if col is None:
        return len(text) - len(text.lstrip())
    return col if text.isascii() else len(text.encode()[:col].decode("utf-8", "replace"))


def _error(job: CompileJob, message: str, kind: str, module_line: int | None = None, col: int | None = None,
           related: Sequence[tuple[int, int | None, str]] = ()) -> CompileError:
    """An error at a module position (1-based line, UTF-8 byte column), mapped to the user's file. `related`:
    (module line, column or None for the line's first non-blank one, message); those on lines the extractor
    wrote are left out."""
    line, _ = _user_pos(job, module_line, col)
    col = _char_col(job, module_line, col)
    kept: list[tuple[int, int, str]] = []
    kept_lines: list[int] = []
    for ml, c, m in related:
        user_line, user_col = _user_pos(job, ml, c)[0], _char_col(job, ml, c)
        if user_line is not None and user_col is not None:  # a column is known on every line of the module
            kept.append((user_line, user_col, m))
            kept_lines.append(ml)
    return CompileError(
        message=message,
        line=line,
        col=col if line is not None else None,
        kind=kind,
        related=tuple(kept),
        module_line=module_line,
        related_module_lines=tuple(kept_lines),
    )


def _clean_message(msg: str) -> str:
    """triton wraps non-triton exceptions as repr(e): "TypeError('...')" -> "TypeError: ..."."""
    m = _REPR_MESSAGE.match(msg.strip())
    if m:
        try:
            args = ast.literal_eval(f"({m.group(2)},)")
            if len(args) == 1 and isinstance(args[0], str):
                return f"{m.group(1)}: {args[0]}"
        except (ValueError, SyntaxError):
            pass
    return msg.strip()


# ----------------------------------------------------------------------------------------------------------------
# Environment and module import


# Errors of a cache folder that cannot be written; a compile that fails with one is tried again in a folder of
# this process's own (caching is an optimisation: it must not make compiling fail).
_CACHE_ERRORS = ("No space left on device", "Read-only file system", "Permission denied", "Disk quota exceeded",
                 "Not a directory")
_fallback_cache: str | None = None


def _prepare_env(cache_dir: str | None) -> None:
    cache = _fallback_cache or cache_dir or os.environ.get(CACHE_DIR_ENV)
    if cache:
        os.environ["TRITON_CACHE_DIR"] = cache  # triton's knobs read the environment at each access
    # A process that interprets cannot compile; the interpreter flag may leak in from the user's environment.
    os.environ.pop("TRITON_INTERPRET", None)
    # The JIT's behaviour in 3.6 (fusion on) and 3.9 (on, with a warning unless this is set).
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def _module_name(job: CompileJob) -> str:
    stem = re.sub(r"\W", "_", Path(job.path).stem) or "kernel"
    return f"{stem}_{(job.key or str(os.getpid()))[:12]}"


def _import_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # not for a path ending in .py
        raise ImportError(f"cannot import {path}", name=name, path=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _not_offline(job: CompileJob, unsafe: list[tuple[int, str]]) -> CompileError:
    """The kernel needs code of the workspace's to compile: not compiled, which says nothing of the kernel."""
    line, why = unsafe[0]
    more = f" (and {len(unsafe) - 1} more place{'s' * (len(unsafe) > 2)})" if len(unsafe) > 1 else ""
    return _error(job, f"{why}{more}", "offline", line)


def _unresolved(why: str) -> tuple[str, str]:
    """(message, kind) for a name the slice left out: a gap of the offline compile, unless no kernel can use it."""
    if why.startswith(NOT_IN_KERNELS):
        return why[len(NOT_IN_KERNELS):], "compilation"
    return why, "offline"


def _import_error(job: CompileJob, exc: BaseException, mod_path: Path) -> CompileError:
    if isinstance(exc, SyntaxError) and exc.filename == str(mod_path):
        return _error(job, f"SyntaxError: {exc.msg}", "compilation", exc.lineno, (exc.offset or 1) - 1)
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(mod_path):
            line = tb.tb_lineno
        tb = tb.tb_next
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ImportError) and (exc.name or "").startswith("triton") or (
            isinstance(exc, (ImportError, AttributeError)) and "triton" in str(exc)):
        text = job.module_source.splitlines()[line - 1].strip() if line else "an import"
        return _error(job, f"`{text}` fails with the installed triton {_triton_version()} (removed or renamed "
                      f"there): {message}", "version", line)
    if isinstance(exc, NameError) and exc.name in dict(job.unresolved):
        return _error(job, *_unresolved(dict(job.unresolved)[exc.name]), line)
    return _error(job, message, "compilation", line)


# ----------------------------------------------------------------------------------------------------------------
# triton version differences


def _ast_source(fn, job: CompileJob):
    """ASTSource for the job: 3.x takes signature (constexprs included as "constexpr"), constexprs by name and
    attrs keyed by argument path tuples; that form is the same in 3.6 and 3.9. Older releases named it
    `constants`."""
    import inspect

    from triton.compiler import ASTSource

    order = list(fn.arg_names)
    signature = dict(job.signature)
    constexprs = dict(job.constexprs)
    attrs: dict[tuple[int], list[list]] = {}
    for name, attr in job.attrs:
        if attr == "equal_to_1":  # the JIT turns ints equal to 1 into constexprs (native_specialize_impl)
            signature[name] = "constexpr"
            constexprs[name] = 1
            continue
        key, _, value = attr.partition("=")
        attrs.setdefault((order.index(name),), []).append([key, int(value) if value.lstrip("-").isdigit() else value])
    signature = {n: signature[n] for n in order}
    params = inspect.signature(ASTSource.__init__).parameters
    if "constexprs" in params:
        return ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return ASTSource(fn=fn, signature=signature, constants=constexprs, attrs=attrs)  # before 3.3


def _def_line(fn, module_lines: list[str]) -> tuple[int, int]:
    """(1-based module line of the `def`, its indentation) of a JITFunction; 3.9 has def_file_line_number,
    3.6 only the first decorator line, so scan from there."""
    start = getattr(fn, "def_file_line_number", None) or fn.fn.__code__.co_firstlineno
    for i in range(start - 1, len(module_lines)):
        stripped = module_lines[i].lstrip()
        if stripped.startswith(("def ", "async def ")):
            return i + 1, len(module_lines[i]) - len(stripped)
    return start, 0


def _ptxas_tool(arch: int):
    """The ptxas triton itself uses for this arch (3.6: ptxas-blackwell from sm_100; 3.9: from sm_90)."""
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(arch).path


def _ptxas_flags(enable_fp_fusion: bool) -> list[str]:
    # Same options as the backend's make_cubin for a default build (-lineinfo, -v, fmad); 3.9 added
    # --regAllocOptLevel=2 (a ptxas 13 workaround), which changes register allocation, so mirror it.
    import inspect

    from triton.backends.nvidia.compiler import CUDABackend

    flags = ["-lineinfo", "-v"] + ([] if enable_fp_fusion else ["--fmad=false"])
    if "regAllocOptLevel" in inspect.getsource(CUDABackend.make_cubin):
        flags.append("--regAllocOptLevel=2")
    return flags


# ----------------------------------------------------------------------------------------------------------------
# Reports


def parse_ptxas_log(log: str) -> dict[str, dict[str, int]]:
    """ptxas -v output -> {entry function: {registers, stack, spill_stores, spill_loads, smem (where reported)}}."""
    out: dict[str, dict[str, int]] = {}
    props: dict[str, dict[str, int]] = {}
    current = None
    pending_props = None
    for line in log.splitlines():
        if m := _PTXAS_ENTRY.search(line):
            current = m.group(1)
            out.setdefault(current, {})
        elif "Function properties for" in line:
            pending_props = line.rsplit("for", 1)[1].strip()
        elif (m := _PTXAS_PROPS.search(line)) and pending_props:
            props[pending_props] = {"stack": int(m.group(1)), "spill_stores": int(m.group(2)),
                                    "spill_loads": int(m.group(3))}
            pending_props = None
        elif (m := _PTXAS_REGS.search(line)) and current:
            out[current]["registers"] = int(m.group(1))
            if m.group(2):
                out[current]["smem"] = int(m.group(2))
    for name, values in out.items():
        values.update(props.get(name, {}))
    return out


def parse_ptxas_notes(log: str) -> tuple[str, ...]:
    """ptxas' "Potential Performance Loss" notes of a -v log, each once, without the function name and PTX line."""
    return tuple(dict.fromkeys(m.group(1).strip() for m in _PTXAS_PERF.finditer(log)))


def _ptx_locations(ptx: str) -> tuple[list[int | None], list[int | None], set[str]]:
    """Per PTX line (0-based index): the Python line/column of the last `.loc` before it, ignoring `.loc` inside
    inline asm blocks (LLVM numbers their lines by counting from the enclosing location)."""
    lines = ptx.splitlines()
    files: dict[str, str] = {}
    cur_line = cur_col = None
    in_asm = False
    out_line: list[int | None] = []
    out_col: list[int | None] = []
    for text in lines:
        s = text.strip()
        if s.startswith("// begin inline asm"):
            in_asm = True
        elif s.startswith("// end inline asm"):
            in_asm = False
        elif s.startswith(".file"):
            m = re.match(r'\.file\s+(\d+)\s+"([^"]*)"', s)
            if m:
                files[m.group(1)] = m.group(2)
        elif s.startswith(".loc") and not in_asm:
            parts = s.split()
            if len(parts) >= 4 and parts[2].isdigit():
                cur_line, cur_col = int(parts[2]), int(parts[3]) if parts[3].isdigit() else 0
        out_line.append(cur_line)
        out_col.append(cur_col)
    return out_line, out_col, set(files.values())


_PTX_ACCESS = re.compile(r"\b(ld|st)\.global((?:\.[\w:]+)+)")


def _ptx_accesses(ptx: str) -> list[tuple[str, int]]:
    """("load" | "store", bits moved by one thread) for each global memory access instruction in `ptx`."""
    # cp.async copies global memory straight to shared memory (pipelined loads): its size is in bytes.
    found = [("load", int(n, 0) * 8) for n in _CP_ASYNC.findall(ptx)]
    for m in _PTX_ACCESS.finditer(ptx):
        vec = re.search(r"\.v(\d+)", m.group(2))
        sizes = re.findall(r"\.[bsuf](\d+)\b", m.group(2))
        if sizes:
            found.append(("load" if m.group(1) == "ld" else "store",
                          int(sizes[-1]) * (int(vec.group(1)) if vec else 1)))
    return found


def _widths(text: str, nvidia: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    loads: set[int] = set()
    stores: set[int] = set()
    if nvidia:
        for kind, bits in _ptx_accesses(text):
            (loads if kind == "load" else stores).add(bits)
    else:
        sizes = {"dword": 32, "ubyte": 8, "sbyte": 8, "ushort": 16, "sshort": 16, "byte": 8, "short": 16}
        for kind, what in re.findall(r"\b(?:global|buffer)_(load|store)(?:_lds)?_(\w+)", text):
            if m := re.match(r"dwordx(\d)", what):
                bits = 32 * int(m.group(1))
            elif m := re.match(r"b(\d+)$", what):
                bits = int(m.group(1))
            else:
                bits = sizes.get(what.split("_")[0], 0)
            if bits:
                (loads if kind == "load" else stores).add(bits)
    return tuple(sorted(loads)), tuple(sorted(stores))


_TT_ACCESS = re.compile(r"\btt\.(load|store)\b.*:\s*tensor<((?:\d+x)+)!tt\.ptr<([a-z]+)(\d+)>")


def _scalar_accesses(job: CompileJob, ttgir: str, ptx: str, num_warps: int) -> tuple[tuple[int, str, int, int], ...]:
    """Block loads/stores whose PTX moves one element per instruction though each thread holds several of them:
    the compiler could not prove the offsets contiguous and aligned, so the access is not vectorized."""
    from dataclasses import replace

    from .irmap import source_lines_of_ir

    # Lines of the extracted module itself (not the user's file): the result is cached by content, and the
    # service maps these lines with the line map of whichever job asks.
    own = replace(job, line_map=tuple(range(1, job.module_source.count("\n") + 2)))
    threads = num_warps * job.target.warp_size
    blocks: dict[tuple[int, str], tuple[int, int]] = {}
    ttgir_lines = ttgir.splitlines()
    for i, users in source_lines_of_ir("ttgir", ttgir, own).items():
        m = _TT_ACCESS.search(ttgir_lines[i])
        if not m:
            continue
        numel = 1
        for dim in m.group(2).rstrip("x").split("x"):
            numel *= int(dim)
        bits = int(m.group(4))
        if numel < 2 * threads or bits >= 128:
            continue
        for user in users:  # a helper's access maps to its own line and the call site
            key = (user + 1, m.group(1))
            blocks[key] = (bits, max(numel // threads, blocks.get(key, (0, 0))[1]))
    if not blocks:
        return ()
    widest: dict[tuple[int, str], int] = {}
    ptx_lines = ptx.splitlines()
    for i, users in source_lines_of_ir("ptx", ptx, own).items():
        for kind, bits in _ptx_accesses(ptx_lines[i]):
            for user in users:
                key = (user + 1, kind)
                widest[key] = max(widest.get(key, 0), bits)
    return tuple(sorted((line, kind, bits, per_thread) for (line, kind), (bits, per_thread) in blocks.items()
                        if (line, kind) in widest and widest[(line, kind)] <= bits))


def _matrix_instructions(text: str, nvidia: bool) -> tuple[str, ...]:
    found = []
    if nvidia:
        for name, pattern in (("mma", r"\bmma\.sync\b"), ("wgmma", r"\bwgmma\.mma_async\b"),
                              ("tcgen05", r"\btcgen05\.mma\b")):
            if re.search(pattern, text):
                found.append(name)
    else:
        for name, pattern in (("mfma", r"\bv_s?mfmac?_"), ("wmma", r"\bv_swmmac?_|\bv_wmma_")):
            if re.search(pattern, text):
                found.append(name)
    return tuple(found)


def _amd_numbers(amdgcn: str) -> dict[str, int]:
    out = {}
    for key in ("vgpr_count", "sgpr_count", "agpr_count", "vgpr_spill_count", "sgpr_spill_count",
                "private_segment_fixed_size", "group_segment_fixed_size"):
        m = re.search(rf"^\s*\.{key}:\s+(\d+)", amdgcn, re.MULTILINE)
        if m:
            out[key] = int(m.group(1))
    m = re.search(r"^; TotalNumVgprs: (\d+)", amdgcn, re.MULTILINE)
    if m:
        out["total_vgprs"] = int(m.group(1))
    m = re.search(r"^; ScratchSize: (\d+)", amdgcn, re.MULTILINE)
    if m:
        out["scratch"] = int(m.group(1))
    return out


# ----------------------------------------------------------------------------------------------------------------
# Capture of what triton prints while compiling


class _Capture:
    """stdout (Python prints: ptxas logs, PTX dumps on failure), the stderr file descriptor (MLIR and LLVM
    diagnostics are printed by C++) and Python warnings, for the duration of a compile."""

    def __enter__(self):
        self.stdout = io.StringIO()
        self._redirect = contextlib.redirect_stdout(self.stdout)
        self._redirect.__enter__()
        self._warn = warnings.catch_warnings(record=True)
        self.warnings = self._warn.__enter__()
        warnings.simplefilter("always")
        sys.stderr.flush()
        self._err_file = tempfile.TemporaryFile(mode="w+b")
        self._saved_fd = os.dup(2)
        os.dup2(self._err_file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(self._saved_fd, 2)
        os.close(self._saved_fd)
        self._err_file.seek(0)
        self.stderr = self._err_file.read().decode("utf-8", "replace")
        self._err_file.close()
        self._warn.__exit__(*exc)
        self._redirect.__exit__(*exc)
        return False


# ----------------------------------------------------------------------------------------------------------------
# Errors


def _compilation_error(job: CompileJob, exc, jit_fns: list, module_lines: list[str]) -> CompileError:
    """CompilationError chain (call site -> ... -> failing node in a helper) -> error at the innermost node with
    the call sites as related locations. Node positions are relative to each function's `def` line."""
    from triton.compiler.errors import CompilationError

    chain = [exc]
    while isinstance(chain[-1].__cause__, CompilationError):
        chain.append(chain[-1].__cause__)

    def position(err) -> tuple[int | None, int | None, str | None]:
        node = getattr(err, "node", None)
        fn = next((f for f in jit_fns if f.src == err.src), None)
        if fn is None or node is None or not hasattr(node, "lineno"):
            return None, None, None
        def_line, indent = _def_line(fn, module_lines)
        return def_line + node.lineno - 1, node.col_offset + indent, fn.__name__

    inner = chain[-1]
    message = inner.error_message or ""
    if not message and inner.__cause__ is not None:
        message = f"{type(inner.__cause__).__name__}: {inner.__cause__}"
    message = _clean_message(message) or type(inner).__name__
    m = re.match(r"NameError: (\w+) is not defined", message)
    kind = "compilation"
    if m and m.group(1) in dict(job.unresolved):
        message, kind = _unresolved(dict(job.unresolved)[m.group(1)])
    if type(inner).__name__ == "CompileTimeAssertionFailure" and not message.lower().startswith("static"):
        message = f"static_assert failed: {message}"
    line, col, _ = position(inner)
    if kind == "compilation" and (removed := _version_gap(message, module_lines, line, col)):
        message, kind = removed, "version"
    related = []
    for outer, callee in itertools.pairwise(chain):
        ol, oc, _ = position(outer)
        _, _, callee_name = position(callee)
        if ol is not None:
            related.append((ol, oc, f"in the call to `{callee_name or 'a @jit function'}` here"))
    return _error(job, message, kind, line, col, related)


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except ImportError:
        return "?"


def _version_gap(message: str, module_lines: list[str], line: int | None, col: int | None) -> str | None:
    """A message saying the installed triton lacks a construct (removed or renamed in this release): the construct
    and the version, and what replaced it; None for any other error."""
    m = _MISSING_ATTR.search(message)
    if m:
        construct = m.group(1).replace("triton.language", "tl") + "." + m.group(2)
        leaf = m.group(2)
    elif _REMOVED.search(message) and line is not None and 1 <= line <= len(module_lines):
        text = module_lines[line - 1]
        call = re.match(r"[\w.]+", text[col or 0:]) or re.search(r"[\w.]+(?=\s*\()", text)
        construct = call.group(0) if call else "this construct"
        leaf = construct.split(".")[-1]
    else:
        return None
    instead = _REPLACEMENTS.get(leaf)
    return (f"`{construct}` is not in the installed triton {_triton_version()} (removed or renamed): {message}"
            + (f"; use {instead}" if instead else ""))


def _ptxas_error(job: CompileJob, exc, captured_stdout: str, module_path: Path) -> CompileError:
    text = getattr(exc, "error_message", None) or str(exc)
    ptx = None
    m = re.search(r"Repro command: .*?(\S+\.ptx)\b", text)
    if m and os.path.exists(m.group(1)):  # make_cubin leaves the PTX behind on failure
        ptx = Path(m.group(1)).read_text()
        with contextlib.suppress(OSError):
            os.remove(m.group(1))
    if ptx is None:
        start = captured_stdout.find("//\n// Generated by LLVM NVPTX Back-End")
        if start >= 0:
            end = captured_stdout.find("\n=====", start)
            ptx = captured_stdout[start:end if end > 0 else None]
    diag = _PTXAS_FILE_LINE.search(text)
    if diag is None:
        first = next((d for d in _PTXAS_DIAG.finditer(text) if d.group(2) in ("error", "fatal")), None)
        message = f"ptxas: {first.group(3).strip()}" if first else "ptxas failed: " + text.splitlines()[0]
        return _error(job, message, "ptxas")
    ptx_line, message = int(diag.group(2)), diag.group(4).strip()
    module_line = col = None
    if ptx:
        lines, cols, files = _ptx_locations(ptx)
        if 1 <= ptx_line <= len(lines) and any(Path(f).name == module_path.name for f in files):
            module_line = lines[ptx_line - 1]
            col = _snap_to_call(job.module_source, module_line, max((cols[ptx_line - 1] or 1) - 1, 0))
    return _error(job, f"ptxas: {message} (PTX line {ptx_line})", "ptxas", module_line, col)


def _snap_to_call(source: str, line: int | None, col: int) -> int:
    """The start of the innermost call on `line` around `col`. PTX `.loc` columns point at some sub-expression
    (3.6 and 3.9 pick different ones for inline asm); the call is what the user wrote and is the same in both."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return col
    best: ast.Call | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or node.lineno != line or node.col_offset > col:
            continue
        if node.end_lineno == line and col >= (node.end_col_offset or 0):
            continue  # ends before `col`
        if best is None or node.col_offset > best.col_offset:
            best = node
    return best.col_offset if best is not None else col


def _diagnostics(job: CompileJob, stderr: str, module_path: Path, severities: tuple[str, ...]) -> list[CompileError]:
    out = []
    for m in _MLIR_DIAG.finditer(stderr):
        if m.group("sev") in severities and Path(m.group("file")).name == module_path.name:
            out.append(_error(job, m.group("msg").strip(), "compilation", int(m.group("line")),
                              max(int(m.group("col")) - 1, 0)))
    return out


# ----------------------------------------------------------------------------------------------------------------
# The job


def run_job(job: CompileJob, cache_dir: str | None = None, *, sass: bool = True) -> CompileResult:
    """Compile one job; never raises. `cache_dir` (else $KERNEL_LSP_TRITON_CACHE_DIR, else triton's default) is
    triton's cache directory: give each workspace its own. `sass=False` skips nvdisasm (~0.5 s per kernel).

    Changes process-wide state while it runs (environment, the stderr file descriptor, triton knobs): run it in a
    worker process, one job at a time."""
    started = time.perf_counter()
    _prepare_env(cache_dir)
    workdir = Path(tempfile.mkdtemp(prefix="kernel-lsp-"))
    mod_name = _module_name(job)
    mod_path = workdir / f"{mod_name}.py"
    version = ""
    try:
        import triton

        version = triton.__version__
        result = _answered(triton, job, mod_path, mod_name, sass)
        if _cache_failed(result):
            global _fallback_cache
            _fallback_cache = tempfile.mkdtemp(prefix="kernel-lsp-triton-")
            _prepare_env(None)
            result = _answered(triton, job, mod_path, mod_name, sass)
    except Exception as exc:  # noqa: BLE001 - a worker must answer, whatever happened (triton not importable)
        result = _internal(job, exc)
    finally:
        sys.modules.pop(mod_name, None)
        shutil.rmtree(workdir, ignore_errors=True)
        linecache.checkcache(str(mod_path))  # drop the module's lines: a long-lived worker sees many modules
    return replace(result, seconds=time.perf_counter() - started, triton_version=version)


def _internal(job: CompileJob, exc: BaseException) -> CompileResult:
    import traceback

    tail = "".join(traceback.format_exception(exc)[-3:]).strip()
    return CompileResult(job_key=job.key, ok=False, error=CompileError(f"internal error: {tail}", None, None, "internal"))


def _answered(triton, job: CompileJob, mod_path: Path, mod_name: str, sass: bool) -> CompileResult:
    try:
        return _compile(triton, job, mod_path, mod_name, sass)
    except Exception as exc:  # noqa: BLE001 - a worker must answer, whatever happened
        return _internal(job, exc)


def _cache_failed(result: CompileResult) -> bool:
    """Whether a compile failed because triton's cache folder could not be written (with ours still in use)."""
    error = result.error
    return (not result.ok and error is not None and _fallback_cache is None
            and any(e in error.message for e in _CACHE_ERRORS))


def _compile(triton, job: CompileJob, mod_path: Path, mod_name: str, sass: bool) -> CompileResult:
    from triton.backends.compiler import GPUTarget
    from triton.compiler.errors import CompilationError

    unsafe = offline.unsafe_statements(job.module_source)
    if unsafe:
        return CompileResult(job_key=job.key, ok=False, error=_not_offline(job, unsafe))
    mod_path.write_text(job.module_source)
    try:
        module = _import_module(mod_path, mod_name)
    except Exception as exc:  # noqa: BLE001 - whatever the sliced module raises is the user's error
        return CompileResult(job_key=job.key, ok=False, error=_import_error(job, exc, mod_path))
    unsafe = offline.unsafe_reaches(job.module_source, vars(module))
    if unsafe:
        return CompileResult(job_key=job.key, ok=False, error=_not_offline(job, unsafe))
    fn = getattr(module, job.kernel.split(".")[-1], None)  # nested kernels are hoisted to module level
    jit_fns = [v for v in vars(module).values() if isinstance(v, triton.runtime.jit.JITFunction)]
    if fn not in jit_fns:
        return CompileResult(job_key=job.key, ok=False,
                             error=_error(job, f"{job.kernel} is not a @triton.jit function", "internal"))

    target = GPUTarget(job.target.backend, job.target.arch, job.target.warp_size)
    nvidia = job.target.backend == "cuda"
    with triton.knobs.nvidia.scope():  # restores the knob (and the environment variable it sets) afterwards
        triton.knobs.nvidia.dump_ptxas_log = True  # ptxas' own -v report, printed to (captured) stdout
        with _Capture() as cap:
            try:
                src = _ast_source(fn, job)
                compiled = triton.compile(src, target=target,
                                          options={"num_warps": job.num_warps, "num_stages": job.num_stages})
                failure = None
            except Exception as exc:  # noqa: BLE001
                compiled, failure = None, exc

    warns = _warnings(job, cap, mod_path)
    if failure is not None:
        if isinstance(failure, CompilationError):
            error = _compilation_error(job, failure, jit_fns, job.module_source.splitlines())
        else:
            error = _failure(job, failure, cap, mod_path)
        return CompileResult(job_key=job.key, ok=False, error=error, warnings=tuple(warns))

    asm = {k: v for k, v in compiled.asm.items() if isinstance(v, str) and k != "source"}
    report = _sidecar(compiled, cap.stdout.getvalue(), asm, nvidia, sass)
    if nvidia and sass and report.get("sass_with_lines"):
        asm["sass"] = report["sass_with_lines"]
    for d in _PTXAS_DIAG.finditer(report.get("ptxas_log", "")):
        if d.group(2) == "warning":
            warns.append(_error(job, f"ptxas: {d.group(3).strip()}", "ptxas"))
    resources = _resources(job, compiled, asm, report, nvidia)
    return CompileResult(job_key=job.key, ok=True, resources=resources, asm=asm, warnings=tuple(warns))


def _failure(job: CompileJob, exc: Exception, cap: _Capture, mod_path: Path) -> CompileError:
    """Errors past the front end: ptxas, MLIR passes (diagnostics on stderr), anything else."""
    if type(exc).__name__ == "PTXASError":
        return _ptxas_error(job, exc, cap.stdout.getvalue(), mod_path)
    mlir = _diagnostics(job, cap.stderr, mod_path, ("error",))
    if mlir:
        first = mlir[0]
        return replace(first, kind="compilation")
    msg = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, (AssertionError, ValueError)) and _OPTION_WORDS.search(str(exc)):
        # triton checks the launch options (num_warps=3): the configuration's error, not kernel-lsp's
        return _error(job, f"{exc} (num_warps={job.num_warps}, num_stages={job.num_stages})", "compilation")
    detail = cap.stderr.strip().splitlines()[-3:]
    return _error(job, msg + ("\n" + "\n".join(detail) if detail else ""), "internal")


def _warnings(job: CompileJob, cap: _Capture, mod_path: Path) -> list[CompileError]:
    """Python warnings triton attributes to the kernel's file (warn_explicit with the line), triton's own
    UserWarnings without a location (e.g. `if` on a block tensor), and MLIR warnings on stderr; once each."""
    out: dict[tuple, CompileError] = {}
    for w in cap.warnings:
        if Path(str(w.filename)).name == mod_path.name:
            err = _error(job, str(w.message), "compilation", w.lineno)
        elif issubclass(w.category, UserWarning) and f"{os.sep}triton{os.sep}" in str(w.filename):
            err = _error(job, str(w.message), "compilation")
        else:
            continue
        out.setdefault((err.message, err.module_line), err)
    for err in _diagnostics(job, cap.stderr, mod_path, ("warning",)):
        out.setdefault((err.message, err.module_line), err)
    return list(out.values())


def _sidecar(compiled, stdout: str, asm: dict, nvidia: bool, want_sass: bool) -> dict:
    """The ptxas report (and SASS) of this cubin, kept next to triton's cache entry: a cache hit does not run
    ptxas again, and its report must still be the one of the cubin that was built."""
    if not nvidia:
        return {}
    group_dir = None
    json_path = next((p for k, p in getattr(compiled, "metadata_group", {}).items() if k.endswith(".json")), None)
    if json_path:
        group_dir = Path(json_path).parent
    report: dict = {}
    if group_dir is not None and (group_dir / _SIDECAR).exists():
        with contextlib.suppress(OSError, ValueError):
            report = json.loads((group_dir / _SIDECAR).read_text())
    changed = False
    if _PTXAS_REGS.search(stdout):
        report["ptxas_log"] = stdout
        changed = True
    elif not report.get("ptxas_log"):
        report["ptxas_log"] = _rerun_ptxas(compiled, asm.get("ptx", ""))
        changed = True
    if want_sass and not report.get("sass_with_lines"):
        report["sass_with_lines"] = _sass(compiled, asm.get("ptx", ""))
        changed = changed or bool(report["sass_with_lines"])
    if changed and group_dir is not None:
        with contextlib.suppress(OSError):
            tmp = group_dir / f"{_SIDECAR}.{os.getpid()}"
            tmp.write_text(json.dumps(report))
            os.replace(tmp, group_dir / _SIDECAR)
    return report


def _sass(compiled, ptx: str) -> str:
    """SASS with the source line of each instruction (`//## File "...", line N` comments, which Show IR maps to the
    user's lines). The cubin's own line table cannot be used: LLVM gives every line of an inline asm block (where
    triton puts its loads and stores) a `.loc` of its own, bumped past the real line. So the PTX is assembled again
    without those, with the backend's flags, and disassembled. SASS is a nicety: any failure gives an empty text."""
    if not ptx:
        return ""
    kept, in_asm = [], False
    for line in ptx.splitlines():
        s = line.strip()
        if s.startswith("// begin inline asm"):
            in_asm = True
        elif s.startswith("// end inline asm"):
            in_asm = False
        elif in_asm and s.startswith(".loc"):
            continue
        kept.append(line)
    m = re.search(r"^\.target\s+(\w+)", ptx, re.MULTILINE)
    arch = m.group(1) if m else f"sm_{compiled.metadata.target.arch}"
    try:
        ptxas = _ptxas_tool(compiled.metadata.target.arch)
        try:
            from triton import knobs

            nvdisasm = knobs.nvidia.nvdisasm.path
        except Exception:  # noqa: BLE001 - older triton: the tool sits next to ptxas in the wheel
            nvdisasm = str(Path(ptxas).parent / "nvdisasm")
        with tempfile.TemporaryDirectory() as d:
            src, cubin = Path(d) / "k.ptx", Path(d) / "k.cubin"
            src.write_text("\n".join(kept) + "\n")
            flags = [f for f in _ptxas_flags(getattr(compiled.metadata, "enable_fp_fusion", True)) if f != "-v"]
            subprocess.run([ptxas, *flags, f"--gpu-name={arch}", str(src), "-o", str(cubin)], capture_output=True,
                           timeout=120, check=True)
            proc = subprocess.run([nvdisasm, "-c", "-g", str(cubin)], capture_output=True, text=True, timeout=120,
                                  check=True)
        return proc.stdout
    except (OSError, subprocess.SubprocessError, ImportError, AttributeError):
        return ""


def _rerun_ptxas(compiled, ptx: str) -> str:
    """Fallback for a cache entry made by someone else: assemble the cached PTX again with the backend's flags."""
    if not ptx:
        return ""
    m = re.search(r"^\.target\s+(\w+)", ptx, re.MULTILINE)
    arch = m.group(1) if m else f"sm_{compiled.metadata.target.arch}"
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "k.ptx").write_text(ptx)
        cmd = [_ptxas_tool(compiled.metadata.target.arch),
               *_ptxas_flags(getattr(compiled.metadata, "enable_fp_fusion", True)),
               f"--gpu-name={arch}", str(Path(d) / "k.ptx"), "-o", str(Path(d) / "k.cubin")]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        return proc.stderr + proc.stdout


def _resources(job: CompileJob, compiled, asm: dict, report: dict, nvidia: bool) -> Resources:
    from analyzers.targets import occupancy

    meta = compiled.metadata
    shared = int(getattr(meta, "shared", 0) or 0)
    num_warps = int(getattr(meta, "num_warps", job.num_warps))
    text = asm.get("ptx" if nvidia else "amdgcn", "")
    loads, stores = _widths(text, nvidia)
    regs = spills = stack = None
    notes: tuple[str, ...] = ()
    if nvidia:
        notes = parse_ptxas_notes(report.get("ptxas_log", ""))
        per_fn = parse_ptxas_log(report.get("ptxas_log", ""))
        entry = per_fn.get(meta.name) or (next(iter(per_fn.values())) if per_fn else {})
        regs, spills, stack = entry.get("registers"), entry.get("spill_stores"), entry.get("stack")
    else:
        amd = _amd_numbers(text)
        regs = amd.get("total_vgprs", amd.get("vgpr_count"))  # VGPRs + AGPRs: one unified file on gfx90a+
        spills = amd.get("vgpr_spill_count", 0) * 4 if "vgpr_spill_count" in amd else None
        stack = amd.get("scratch", amd.get("private_segment_fixed_size"))
        shared = max(shared, amd.get("group_segment_fixed_size", 0))
    occ = None
    if regs is not None:
        with contextlib.suppress(ValueError):
            occ = occupancy(job.target, regs, shared, num_warps)
    return Resources(
        registers=regs,
        spill_bytes=spills,
        stack_bytes=stack,
        shared_bytes=shared,
        num_warps=num_warps,
        num_stages=int(getattr(meta, "num_stages", job.num_stages)),
        occupancy=occ,
        matrix_instructions=_matrix_instructions(text, nvidia),
        load_widths=loads,
        store_widths=stores,
        uses_tma=nvidia and "cp.async.bulk.tensor" in text,
        ptxas_notes=notes,
        scalar_accesses=_scalar_accesses(job, asm.get("ttgir", ""), text, num_warps) if nvidia else (),
    )


def main() -> None:
    """Standalone: a pickled CompileJob (or its JSON dict) on stdin, the pickled CompileResult on stdout."""
    import pickle

    data = sys.stdin.buffer.read()
    if data.lstrip().startswith(b"{"):
        from .jobs import Target

        raw = json.loads(data)
        raw["target"] = Target(**raw["target"])
        for k in ("line_map", "notes"):
            raw[k] = tuple(raw.get(k, ()))
        for k in ("signature", "constexprs", "attrs", "unresolved"):
            raw[k] = tuple(tuple(x) for x in raw.get(k, ()))
        job = CompileJob(**raw)
    else:
        job = pickle.loads(data)
    # Anything native code prints must not corrupt the pickle: send fd 1 to stderr while compiling.
    sys.stdout.flush()
    out = os.dup(1)
    os.dup2(2, 1)
    try:
        result = run_job(job, sass="--no-sass" not in sys.argv)
    finally:
        sys.stdout.flush()
        os.dup2(out, 1)
        os.close(out)
    sys.stdout.buffer.write(pickle.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
