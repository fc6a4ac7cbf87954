"""Which lines of the user's file each line of a compiled kernel's IR comes from ("Show IR").

Pure text processing over `CompileResult.asm`, no LSP and no triton:

- TTIR / TTGIR (MLIR): an op's `loc(...)` at the end of its line, either inline (`loc("path":L:C)`) or a
  reference (`loc(#loc7)`) to a `#loc7 = loc(...)` definition; definitions nest (`"name"(#loc3)`,
  `callsite(#a at #b)`, `fused[#a, #b]`) and are resolved recursively.
- LLIR (LLVM IR): `!dbg !N` with `!N = !DILocation(line: L, ..., scope: !S, inlinedAt: !M)`; a function's own
  `!dbg` names its `!DISubprogram(line: L)`.
- PTX / AMDGCN: `.loc FILE LINE COL` directives: the lines after one belong to it until the next; `.file` maps
  file ids to names; `.loc` inside `// begin inline asm` ... `// end inline asm` is ignored (LLVM numbers those
  by counting lines from the enclosing location), so an inline asm block belongs to the location before it.

Locations name the extracted module file (see extract.py); only those are kept, converted through
`CompileJob.line_map` (module line 1-based -> user line 1-based). Results are 0-based on both sides.
"""

from __future__ import annotations

import re

from .jobs import CompileJob

STAGES = ("ttir", "ttgir", "llir", "ptx", "sass", "amdgcn")
_SASS_LINE = re.compile(r'^\s*//## File "((?:[^"\\]|\\.)*)", line (\d+)')

_MLIR_DEF = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_MLIR_FILE = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_MLIR_REF = re.compile(r"#loc\d*\b")
_LL_DBG = re.compile(r"!dbg\s+(!\d+)")
_LL_META = re.compile(r"^(!\d+)\s*=\s*(?:distinct\s+)?(!\w+)\((.*)\)\s*$")
_LL_FIELD = re.compile(r"\b(line|scope|inlinedAt|file|filename|directory):\s*(\"(?:[^\"\\]|\\.)*\"|![\d]+|\d+)")
_ASM_FILE = re.compile(r'^\.file\s+(\d+)\s+"([^"]*)"(?:\s+"([^"]*)")?')
_ASM_LOC = re.compile(r"^\.loc\s+(\d+)\s+(\d+)(?:\s+(\d+))?")


def _module_file_check(job: CompileJob):
    """A predicate: does this file name denote the job's extracted module (not triton's own library files)?"""
    suffix = f"_{job.key[:12]}.py" if job.key else None

    def ok(name: str) -> bool:
        if not name:
            return False
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        if suffix and base.endswith(suffix):
            return True
        return "/kernel-lsp-" in name.replace("\\", "/") or (not suffix and base.endswith(".py"))

    return ok


def user_line(job: CompileJob, module_line: int) -> int | None:
    """The user's file line (0-based) of a line (1-based) of the job's extracted module."""
    if not 1 <= module_line <= len(job.line_map):
        return None
    user = job.line_map[module_line - 1]
    return user - 1 if user > 0 else None


def _mlir(text: str, job: CompileJob) -> dict[int, list[int]]:
    ok = _module_file_check(job)
    lines = text.splitlines()
    defs: dict[str, str] = {}
    for line in lines:
        m = _MLIR_DEF.match(line.strip())
        if m:
            defs[m.group(1)] = m.group(2)
    memo: dict[str, frozenset[int]] = {}

    def resolve_body(body: str, seen: frozenset[str]) -> set[int]:
        found: set[int] = set()
        for fm in _MLIR_FILE.finditer(body):
            if ok(fm.group(1)):
                user = user_line(job, int(fm.group(2)))
                if user is not None:
                    found.add(user)
        for ref in _MLIR_REF.findall(body):
            found |= resolve_ref(ref, seen)
        return found

    def resolve_ref(ref: str, seen: frozenset[str] = frozenset()) -> frozenset[int]:
        if ref in memo:
            return memo[ref]
        if ref in seen or ref not in defs:
            return frozenset()
        out = frozenset(resolve_body(defs[ref], seen | {ref}))
        memo[ref] = out
        return out

    result: dict[int, list[int]] = {}
    for i, line in enumerate(lines):
        s = line.strip()
        if "loc(" not in s or _MLIR_DEF.match(s):
            continue
        users: set[int] = set()
        for m in re.finditer(r"\bloc\(", s):
            users |= resolve_body(_balanced(s, m.end()), frozenset())
        if users:
            result[i] = sorted(users)
    return result


def _balanced(s: str, start: int) -> str:
    """The text from `start` up to the parenthesis that closes the one just before it (quotes respected)."""
    depth, i, quoted = 1, start, False
    while i < len(s):
        c = s[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return s[start:i]
        i += 1
    return s[start:]


def _llvm(text: str, job: CompileJob) -> dict[int, list[int]]:
    ok = _module_file_check(job)
    lines = text.splitlines()
    meta: dict[str, tuple[str, dict[str, str]]] = {}
    for line in lines:
        m = _LL_META.match(line.strip())
        if m:
            meta[m.group(1)] = (m.group(2), dict(_LL_FIELD.findall(m.group(3))))

    def file_ok(ref: str | None, depth: int = 0) -> bool:
        """Whether a scope (subprogram, lexical block, file) lies in the module; unknown scopes count as in it."""
        if ref is None or ref not in meta or depth > 32:
            return True
        kind, fields = meta[ref]
        if kind == "!DIFile":
            name = fields.get("filename", "").strip('"')
            directory = fields.get("directory", "").strip('"')
            return ok(f"{directory}/{name}" if directory and not name.startswith("/") else name)
        if "file" in fields:
            return file_ok(fields["file"], depth + 1)
        return file_ok(fields.get("scope"), depth + 1)

    memo: dict[str, frozenset[int]] = {}

    def resolve(ref: str, depth: int = 0) -> frozenset[int]:
        if ref in memo:
            return memo[ref]
        found: set[int] = set()
        if ref in meta and depth < 64:
            kind, fields = meta[ref]
            if kind in ("!DILocation", "!DISubprogram") and "line" in fields:
                in_module = file_ok(fields.get("scope")) if kind == "!DILocation" else file_ok(ref)
                user = user_line(job, int(fields["line"])) if in_module else None
                if user is not None:
                    found.add(user)
                if "inlinedAt" in fields:
                    found |= resolve(fields["inlinedAt"], depth + 1)
        memo[ref] = frozenset(found)
        return memo[ref]

    result: dict[int, list[int]] = {}
    for i, line in enumerate(lines):
        if line.lstrip().startswith("!"):
            continue  # metadata, not code
        users: set[int] = set()
        for ref in _LL_DBG.findall(line):
            users |= resolve(ref)
        if users:
            result[i] = sorted(users)
    return result


def _asm(text: str, job: CompileJob) -> dict[int, list[int]]:
    ok = _module_file_check(job)
    files: dict[str, str] = {}
    lines = text.splitlines()
    for line in lines:
        m = _ASM_FILE.match(line.strip())
        if m:
            files[m.group(1)] = f"{m.group(2)}/{m.group(3)}" if m.group(3) is not None else m.group(2)
    result: dict[int, list[int]] = {}
    current: int | None = None
    in_asm = False
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("// begin inline asm"):
            in_asm = True
        elif s.startswith("// end inline asm"):
            in_asm = False
        elif in_asm:
            pass  # the block belongs to the location before it, whatever `.loc` it carries
        elif s.startswith(".loc"):
            m = _ASM_LOC.match(s)
            current = None
            if m and (not files or ok(files.get(m.group(1), ""))):
                current = user_line(job, int(m.group(2)))
        elif (line == "}" or s.startswith((".file", ".section", ".Lfunc_end", ".amdgpu_metadata", ".end_amdgpu",
                                             ".amdhsa_kernel", ".size", ".globl", ".visible",
                                             ".entry", ".func", ".text"))):
            current = None  # outside any function body
        if current is not None:
            result[i] = [current]
    return result


def _sass(text: str, job: CompileJob) -> dict[int, list[int]]:
    """nvdisasm -g puts `//## File "...", line N` before the instructions of each source line."""
    ok = _module_file_check(job)
    result: dict[int, list[int]] = {}
    current: int | None = None
    for i, line in enumerate(text.splitlines()):
        m = _SASS_LINE.match(line)
        if m:
            current = user_line(job, int(m.group(2))) if ok(m.group(1)) else None
        elif line.startswith("//---") or line.lstrip().startswith((".section", ".text.")):
            current = None  # the next function or section
        elif current is not None and "/*" in line:
            result[i] = [current]
    return result


def source_lines_of_ir(stage: str, text: str, job: CompileJob) -> dict[int, list[int]]:
    """{IR line (0-based): [user file lines (0-based) it comes from]}; lines from nowhere in the file are absent."""
    if stage in ("ttir", "ttgir"):
        return _mlir(text, job)
    if stage == "llir":
        return _llvm(text, job)
    if stage in ("ptx", "amdgcn"):
        return _asm(text, job)
    if stage == "sass":
        return _sass(text, job)
    raise ValueError(f"unknown IR stage {stage!r}: expected one of {', '.join(STAGES)}")


def ir_lines_for(stage: str, text: str, job: CompileJob, user_line: int) -> list[int]:
    """The IR lines (0-based) that come from one line (0-based) of the user's file, in order."""
    return [i for i, users in sorted(source_lines_of_ir(stage, text, job).items()) if user_line in users]
