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


_LL_FILE_FIELDS = re.compile(r'\b(filename|directory):\s*"((?:[^"\\]|\\.)*)"')
_LL_LINE_FIELD = re.compile(r"\bline:\s*(\d+)")
_ASM_LOC_COMMENT = re.compile(r"//\s*(\S+\.py):(\d+):(\d+)")
_ASM_LOC_LINE = re.compile(r"^(\s*\.loc\s+(\d+)\s+)(\d+)")


def relabel(stage: str, text: str, job: CompileJob, user_path: str) -> str:
    """The IR with the extracted module's file name replaced by the user's file and its line numbers by the user's
    (1-based), so a reader (and `.loc` / `loc(...)` aware tools) sees where each instruction comes from. Lines
    that do not come from the user's file (triton's own library) keep theirs. Line count and order unchanged."""
    ok = _module_file_check(job)
    quoted = user_path.replace("\\", "\\\\").replace('"', '\\"')

    def line_of(n: str) -> str:
        user = user_line(job, int(n))
        return str(user + 1) if user is not None else n

    if stage in ("ttir", "ttgir"):
        return _MLIR_FILE.sub(lambda m: f'"{quoted}":{line_of(m.group(2))}:{m.group(3)}' if ok(m.group(1))
                              else m.group(0), text)
    lines = text.splitlines(keepends=True)
    if stage == "llir":
        meta: dict[str, tuple[str, dict[str, str]]] = {}
        for line in lines:
            m = _LL_META.match(line.strip())
            if m:
                meta[m.group(1)] = (m.group(2), dict(_LL_FIELD.findall(m.group(3))))

        def in_module(ref: str | None, depth: int = 0) -> bool:
            if ref is None or ref not in meta or depth > 32:
                return False
            kind, fields = meta[ref]
            if kind == "!DIFile":
                name = fields.get("filename", "").strip('"')
                directory = fields.get("directory", "").strip('"')
                return ok(f"{directory}/{name}" if directory and not name.startswith("/") else name)
            return in_module(fields.get("file") or fields.get("scope"), depth + 1)

        folder, _, base = user_path.replace("\\", "/").rpartition("/")

        def file_field(f: re.Match) -> str:
            return f'{f.group(1)}: "{base if f.group(1) == "filename" else folder}"'

        out = []
        for line in lines:
            m = _LL_META.match(line.strip())
            if m and m.group(2) == "!DIFile" and in_module(m.group(1)):
                line = _LL_FILE_FIELDS.sub(file_field, line)
            elif m and m.group(2) in ("!DILocation", "!DISubprogram", "!DILexicalBlock") and \
                    in_module(m.group(1) if m.group(2) != "!DILocation" else meta[m.group(1)][1].get("scope")):
                line = _LL_LINE_FIELD.sub(lambda f: f"line: {line_of(f.group(1))}", line, count=1)
            out.append(line)
        return "".join(out)
    if stage in ("ptx", "amdgcn"):
        user_base = user_path.replace("\\", "/").rsplit("/", 1)[-1]
        module_ids: set[str] = set()
        module_names: set[str] = set()
        out = []
        for line in lines:
            m = _ASM_FILE.match(line.strip())
            if m:
                name = f"{m.group(2)}/{m.group(3)}" if m.group(3) is not None else m.group(2)
                if ok(name):
                    module_ids.add(m.group(1))
                    module_names.add(name.replace("\\", "/"))
                    indent = line[:len(line) - len(line.lstrip())]
                    line = f'{indent}.file\t{m.group(1)} "{quoted}"' + ("\n" if line.endswith("\n") else "")
            out.append(line)
        # `.loc` inside inline asm blocks is mapped the same way: LLVM's numbers there are rough either way.
        for i, line in enumerate(out):
            if line.lstrip().startswith(".loc"):
                line = _ASM_LOC_LINE.sub(lambda f: f.group(1) + (line_of(f.group(3)) if f.group(2) in module_ids
                                                                  else f.group(3)), line, count=1)
            # LLVM's comment after a `.loc` repeats the place: `// module_abc.py:4:0`
            out[i] = _ASM_LOC_COMMENT.sub(lambda f: f"// {user_base}:{line_of(f.group(2))}:{f.group(3)}"
                                          if ok(f.group(1)) else f.group(0), line)
        joined = "".join(out)
        user_dir = user_path.replace("\\", "/").rpartition("/")[0]
        for name in module_names:  # debug sections repeat the module's folder and name as strings
            folder, _, base = name.rpartition("/")
            joined = joined.replace(base, user_base)
            if folder and user_dir:
                joined = joined.replace(folder, user_dir)
        return joined
    if stage == "sass":
        def sass(m: re.Match) -> str:
            indent = m.group(0)[:m.group(0).index("//##")]
            return f'{indent}//## File "{quoted}", line {line_of(m.group(2))}' if ok(m.group(1)) else m.group(0)

        return "".join(_SASS_LINE.sub(sass, line, count=1) for line in lines)
    return text
