"""TR002 unmasked-block-access: `tl.load`/`tl.store` of a block at offsets derived from `tl.program_id`, without
`mask=`.
"""

from __future__ import annotations

import ast
import re

from ...model import Related, Severity, Span, TextEdit
from ...resolve import definition_at, resolve_in_file
from .. import Rule, register
from .facts import (
    AR,
    BP,
    CONSTEXPR,
    KERNEL_HEADER,
    PID,
    PIDOFF,
    PLAIN,
    RT,
    TL,
    KernelFacts,
    _is_none,
    _iter_expr,
    _once,
    _short,
    kernel_check,
)

register(Rule(
    code="TR002", name="unmasked-block-access", language="triton", severity=Severity.WARNING,
    summary="`tl.load`/`tl.store` of a block at offsets derived from `tl.program_id`, without `mask=`.",
    explanation="With `offs = pid * BLOCK + tl.arange(0, BLOCK)`, the last program reads or writes past the end "
    "unless the size is a multiple of BLOCK; out-of-bounds stores corrupt memory silently. Add "
    "`mask=offs < n` (and `other=` on loads). Loops and `if`s are analysed too: blocks walked by a runtime "
    "loop (`for start in range(0, n, BLOCK)`) overhang the same way. Not reported: an access that a bounds "
    "guard on the same offsets dominates (an `if`, an early `return`, an `assert`, `tl.device_assert` or "
    "`tl.static_assert` that bounds every tile dimension of the address as a whole: `offs < n`, "
    "`start + BLOCK <= n`, `N % BLOCK == 0`, a flag such as EVEN_K, a padded bound; `if pid * BLOCK >= n: "
    "return` alone only bounds where the last tile starts; `if row >= n_rows: return` covers a row), a kernel "
    "whose launches in the file "
    "assert the size is a multiple of the block or launch `n // BLOCK` programs, blocks counted by floor "
    "division (`M // TILE_M`), buffers allocated padded to whole blocks (`triton.cdiv(n, B) * B`), scalar "
    "per-program accesses such as `tl.load(ptr + pid)`, offsets wrapped with `%`, `tl.where` or "
    "`tl.minimum`, block pointers and tensor descriptors, and `row * stride + tl.arange(0, WIDTH)` rows (or "
    "`pid * HEAD_DIM + tl.arange(0, HEAD_DIM)`) unless the kernel bounds-checks those offsets elsewhere "
    "(WIDTH may be the exact row length). Launchers count wherever they are: under `if has_triton():`, kernels "
    "a factory returns (`kernel = _get_kernel(); kernel[grid](...)`), kernels passed through a wrapper "
    "(`launcher(kernel)[grid](...)`), a grid bound to a name (`grid = (n // BLOCK,)`), and validation helpers "
    "they call, in this file or an imported module, that raise unless sizes are multiples. Rows strided by a size "
    "rounded up on the host (`off * seqlen_rounded + offs`) are padded. A comparison of two tiles' offsets "
    "(`offs_i > offs_j`, a causal selector) is not a bounds check and is never suggested as a mask. The warning "
    "says which guards were looked for; where the kernel's own bound names give a mask indexed as the address "
    "is, the quick fix adds it (`mask=offs < n`, and `other=0.0` on loads).",
    wrong=KERNEL_HEADER + "def scale(X, Y, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n"
    "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n    x = tl.load(X + offs)\n    tl.store(Y + offs, x * 2)\n",
    right=KERNEL_HEADER + "def scale(X, Y, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n"
    "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n    x = tl.load(X + offs, mask=mask)\n"
    "    tl.store(Y + offs, x * 2, mask=mask)\n",
))


@kernel_check
def _tr002_unmasked(k: KernelFacts) -> None:
    tl = k.f.tl
    guards: dict[int, list[ast.AST]] | None = None
    launcher = None
    found: dict[tuple[str, bool, str], list[tuple[ast.Call, str, TextEdit | None]]] = {}
    for c in k.calls:
        if c.name is None or not c.name.startswith(TL + "."):
            continue
        short = c.name[len(TL) + 1:]
        if short == "load":
            mask_pos = 1
        elif short == "store" or (short.startswith("atomic_") and short not in ("atomic_cas", "atomic_load")):
            mask_pos = 2
        else:
            continue
        node = c.node
        kw = {x.arg: x.value for x in node.keywords}
        mask = kw.get("mask", node.args[mask_pos] if len(node.args) > mask_pos else None)
        if (mask is not None and not _is_none(mask)) or "boundary_check" in kw:
            continue
        ptr = node.args[0] if node.args else kw.get("pointer")
        if ptr is None:  # `tl.load()` half-typed: no address to check yet
            continue
        bits = k.expr_facts(ptr)
        if not (bits & PIDOFF and bits & AR) or bits & BP:
            continue
        terms = _terms(k, ptr, set(), node.lineno)
        # A name rebound before this line (`offs = tl.max_contiguous(tl.multiple_of(offs % n, B), B)`) has the
        # facts of its last binding here, not of all of them.
        tiles = [t for t in terms if k.expr_facts(t) & AR and k.expr_facts(t) & PIDOFF]
        if tiles and not any(_pidoff_at(k, t, node.lineno) for t in tiles):
            continue
        # Offsets by the name the user gave them (`offs` in `X + offs`), then names inside the expanded sums.
        shallow = _terms(k, ptr, {n.id for n in _iter_expr(ptr) if isinstance(n, ast.Name)})
        names = [n.id for t in shallow + terms if k.expr_facts(t) & AR
                 for n in _iter_expr(t) if isinstance(n, ast.Name) and k.name_facts(n.id) & AR]
        names = list(dict.fromkeys(names))
        extents = _arange_extents(k, terms)
        check = next((c for n in names for c in _checks_of(k, n, node.lineno) if not _vacuous(c, extents)), None)
        # A tile (`pid * BLOCK + tl.arange(0, BLOCK)`) overhangs the end unless the size is a multiple of BLOCK.
        # A row (`row * stride + tl.arange(0, WIDTH)`) is fine when WIDTH is the exact row length, so it is
        # only reported when the kernel bounds-checks those offsets elsewhere and forgets it here.
        tile = any(_is_tile_term(k, t, extents) for t in terms)
        if not tile and check is None:
            continue
        # What makes the access safe although it has no mask: a bounds test around it, an early return or an
        # assert before it, a launcher that checks divisibility, a buffer padded to whole blocks.
        if tile and _whole_blocks_only(k, extents):
            continue
        if guards is None or launcher is None:
            guards = _access_guards(k)
            launcher = _launcher_guards(k)
        if guards.get(id(node)):
            # Every tile dimension needs its own guard: `if pid_m * BM >= M: return` says nothing of the N tiles.
            parts = [t for t in terms if _is_tile_term(k, t, extents)] if tile else [ptr]
            tests = [g for g in guards[id(node)] if not tile or _covers_tile(k, g, extents)]
            if all(any(_relevant(k, g, _part_names(k, ptr, part)) for g in tests) for part in parts):
                continue
        if launcher[0] or any(isinstance(t, ast.Name) and t.id in launcher[1] for t in terms):
            continue
        if any(_padded_row(k, t) for t in terms):
            continue
        what = "reads" if short == "load" else "writes"
        other = ", other=0.0" if short == "load" else ""
        # Name offsets, not pointers: a pointer is a sum with a bare parameter (the base address) in it, or a
        # name the kernel loads from or stores to (`A = A + ...; tl.load(A)`).
        pointers = _pointer_names(k)
        # The offsets that place this program's block come first: they are what overhangs the end.
        names.sort(key=lambda n: not k.name_facts(n) & PIDOFF)
        offs = next((n for n in names if n not in pointers and not n.lower().endswith(("ptr", "ptrs"))
                     and not any(isinstance(t, ast.Name) and t.id in k.args
                                 for t in _terms(k, ast.Name(n, ast.Load()), set()))), None)
        mask_text = None
        if check is not None:
            hint = f"add mask={_short(k.ctx.src.segment(check), 40)}{other}"
            if _same_shape(k, check, ptr):
                mask_text = k.ctx.src.segment(check)
        else:
            size = _size_param(k, offs)
            subject = offs or "the offsets"
            hint = f"add mask={subject} < {size}{other}" if size and offs else \
                f"add a mask comparing {subject} with the size{other and ' (and other=0.0)'}"
            # The mask is offered where the size is that of the offsets' dimension, or the only size of a 1-D access.
            one_d = len(k.shape(ptr) or ()) == 1
            if size and offs and (one_d or _size_param(k, offs, strict=True) == size) and _same_shape(
                    k, ast.Compare(ast.Name(offs, ast.Load()), [ast.Lt()], [ast.Name(size, ast.Load())]), ptr):
                mask_text = f"{offs} < {size}"
        source = f"{tl}program_id" if bits & PID else "a runtime loop bound"
        if not tile and check is not None:  # a row is only reported with a check to point at
            msg = (f"{tl}{short} {what} a row without a mask although this kernel bounds-checks the same offsets "
                   f"elsewhere ({_short(k.ctx.src.segment(check), 40)}): {hint}")
        else:
            block = next((str(x) for x in sorted(extents, key=str) if isinstance(x, str)), "the block")
            msg = (f"{tl}{short} {what} a block at offsets derived from {source} with no mask: the last block "
                   f"{what} out of bounds unless the size is a multiple of {block}, and no guard says it is (looked "
                   f"for: an `if`/assert on these offsets, a launch that asserts or raises unless the size "
                   f"% {block} == 0, a grid of whole blocks, a buffer padded to whole blocks); {hint}")
        edit = _mask_edit(k, node, mask_text, short == "load" and "other" not in kw) if mask_text else None
        found.setdefault((short, tile, hint), []).append((node, msg, edit))
    # Accesses with the same cause and the same fix (the k and v loads of one loop) are one finding: the first
    # carries the message, the others are listed with it.
    for (short, _, _), group in found.items():
        (node, msg, _), rest = group[0], group[1:]
        if rest:
            lines = ", ".join(str(n.lineno) for n, _, _ in rest)
            msg += f" (the same at line{'s' * (len(rest) > 1)} {lines})"
        related = tuple(Related(k.ctx.src.span(n), f"{tl}{short} with the same unmasked offsets")
                        for n, _, _ in rest)
        edits = [e for _, _, e in group if e is not None]
        # The mask is offered for every access of the group at once, or not at all.
        fix = _once(k, "Add the mask", edits) if k.f.can_fix and len(edits) == len(group) else None
        k.ctx.report("TR002", node, msg, kernel=k.name, related=related, fix=fix)


def _forms(nodes, names: set[str]) -> set[str]:
    """How offsets are indexed in some expression nodes: `offs_m[:, None]`, or `offs_m` bare."""
    out: set[str] = set()
    inside: set[int] = set()
    for n in nodes:
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in names:
            out.add(ast.unparse(n))
            inside.add(id(n.value))
    for n in nodes:
        if isinstance(n, ast.Name) and n.id in names and id(n) not in inside:
            out.add(n.id)
    return out


def _same_shape(k: KernelFacts, mask: ast.Compare, ptr: ast.AST) -> bool:
    """Whether a mask indexes its offsets the way the address does (`offs_m[:, None]` in both, or bare `offs`
    in both), so that adding it cannot break the shapes of code that compiles."""
    names = {n.id for n in _iter_expr(mask) if isinstance(n, ast.Name) and k.name_facts(n.id) & AR}
    if not names:
        return False
    nodes = list(_closure(k, ptr)[1].values())
    want, have = _forms(list(_iter_expr(mask)), names), _forms(nodes, names)
    return bool(want) and want <= have and all(
        not any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name
                for n in nodes) for name in want if "[" not in name)


def _mask_edit(k: KernelFacts, node: ast.Call, mask: str, other: bool) -> TextEdit | None:
    """`, mask=...` (and `other=0.0` for a load) after the call's last argument."""
    last = (node.keywords[-1].value if node.keywords else node.args[-1]) if node.args or node.keywords else None
    if last is None or any(kw.arg is None for kw in node.keywords):
        return None
    s = k.ctx.src.span(last)
    return TextEdit(Span.point(s.end_line, s.end_col), f", mask={mask}" + (", other=0.0" if other else ""))


# Compile-time flags that name a bounds property (`EVEN_K`, `DIVISIBLE_N`, `NO_MASK`): an `if` on one is the
# author's fast path for full blocks.
_BOUNDS_FLAG = re.compile(r"(?i)even|divisib|divides|aligned|full|mask|bound|pad|multiple|exact|tail|ragged")
# Extent names that read as a block (tiles of a larger size) rather than a whole dimension (`HEAD_DIM`, `D`).
_BLOCK_NAME = re.compile(r"(?i)block|tile|chunk|^bs|_bs|bs_|^blk|_blk|^b_|_b$|split|^tb|group")


def _guard_test(k: KernelFacts, test: ast.AST) -> bool:
    """Whether a condition is bounds logic: a runtime test on program ids, loop offsets or arange offsets, a
    divisibility test, or a compile-time flag named for a bounds property."""
    has_mod = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in _iter_expr(test))
    bits = k.expr_facts(test)
    if bits & RT:
        return bool(bits & (PID | PIDOFF | AR)) or has_mod
    return has_mod or any(isinstance(n, ast.Name) and _BOUNDS_FLAG.search(n.id) for n in _iter_expr(test))


def _access_guards(k: KernelFacts) -> dict[int, list[ast.AST]]:
    """For each call of the kernel body, the bounds conditions that dominate it: the tests of the `if`s around it,
    and those of an early `if ...: return`, an `assert`, `tl.device_assert` or `tl.static_assert` before it in
    the same block (or an enclosing one)."""
    out: dict[int, list[ast.AST]] = {}

    def mark(node: ast.AST, tests: list[ast.AST]) -> None:
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                out[id(n)] = tests

    def guard_of(st: ast.stmt) -> ast.AST | None:
        test = None
        if isinstance(st, ast.If) and not st.orelse and st.body and isinstance(st.body[-1], ast.Return) \
                or isinstance(st, ast.Assert):  # an early return, or an assert
            test = st.test
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and st.value.args and k.callee(
                st.value.func) in (f"{TL}.device_assert", f"{TL}.static_assert", f"{TL}.assume"):
            test = st.value.args[0]
        return test if test is not None and _guard_test(k, test) else None

    def block(stmts: list[ast.stmt], tests: list[ast.AST]) -> None:
        for st in stmts:
            visit(st, tests)
            g = guard_of(st)
            if g is not None:
                tests = tests + [g]

    def visit(st: ast.stmt, tests: list[ast.AST]) -> None:
        if isinstance(st, ast.If):
            mark(st.test, tests)
            inner = tests + [st.test] if _guard_test(k, st.test) else tests
            overflows = _overflow_branch(k, st.test)
            block(st.body, tests if overflows == "body" else inner)
            block(st.orelse, tests if overflows == "orelse" else inner)
        elif isinstance(st, (ast.For, ast.While)):
            mark(st.iter if isinstance(st, ast.For) else st.test, tests)
            block(st.body, tests)
            block(st.orelse, tests)
        elif tests:
            mark(st, tests)

    block(k.fn.body, [])
    return out


def _closure(k: KernelFacts, e: ast.AST) -> tuple[set[str], dict[int, ast.AST]]:
    """What an expression is built from, through assignments: the names, and every node visited (by id)."""
    names: set[str] = set()
    nodes: dict[int, ast.AST] = {}
    stack = [e]
    while stack and len(names) < 300:
        for n in _iter_expr(stack.pop()):
            nodes[id(n)] = n
            if isinstance(n, ast.Name) and n.id not in names:
                names.add(n.id)
                for kind, v, _ in k.assigns.get(n.id, ()):
                    if kind in (PLAIN, CONSTEXPR) and isinstance(v, ast.AST):
                        stack.append(v)
                    elif isinstance(v, ast.For):  # kind FOR
                        stack.append(v.iter)
    return names, nodes


def _covers_tile(k: KernelFacts, test: ast.AST, extents: set) -> bool:
    """Whether a condition bounds a whole tile, not just where it starts: `offs < n` (element-wise), a full-block
    test `start + BLOCK <= n`, divisibility, or a bound named for padding or whole blocks (`n_full_blocks`,
    `num_tokens_post_padded`, `EVEN_K`). `if pid * BLOCK >= n: return` alone leaves the last tile overhanging."""
    if k.expr_facts(test) & AR:
        return True

    def extent(x: ast.AST) -> bool:
        return isinstance(x, ast.Name) and x.id in extents or isinstance(x, ast.Constant) and x.value in extents

    def tile_end(n: ast.AST) -> bool:
        # `start + BLOCK`, or `(pid + 1) * BLOCK`: where the tile ends
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and (extent(n.left) or extent(n.right)):
            return True
        return (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and any(
            extent(a) and isinstance(b, ast.BinOp) and isinstance(b.op, ast.Add) and isinstance(b.right, ast.Constant)
            and b.right.value == 1 for a, b in ((n.left, n.right), (n.right, n.left))))

    for n in _iter_expr(test):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):
            return True
        if isinstance(n, ast.Name) and _BOUNDS_FLAG.search(n.id):
            return True
        if tile_end(n):
            return True
    # Through the name an overflow test reads: `overflow = (start_m + 1) * BLOCK_M - seqlen; if overflow > 0: ...`
    return _overflow_branch(k, test) is not None and any(tile_end(n) for n in _closure(k, test)[1].values())


def _overflow_branch(k: KernelFacts, test: ast.AST) -> str | None:
    """For `if overflow > 0:` with `overflow = <tile end> - size`, the branch where the tile overhangs ("body";
    "orelse" for `overflow <= 0`): only the other one is in bounds. None for any other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0):
        return None
    bound = [v for kind, v, _ in k.assigns.get(test.left.id, ()) if kind == PLAIN]
    if len(bound) != 1 or not (isinstance(bound[0], ast.BinOp) and isinstance(bound[0].op, ast.Sub)):
        return None
    op = test.ops[0]
    return "body" if isinstance(op, (ast.Gt, ast.GtE)) else "orelse" if isinstance(op, (ast.Lt, ast.LtE)) else None


def _part_names(k: KernelFacts, ptr: ast.AST, part: ast.AST) -> set[str]:
    """The names one summand of an address is built from, and the names of the sums that hold it (`offs` for
    the `pid * BLOCK` of `offs = pid * BLOCK + tl.arange(0, BLOCK)`)."""
    names = _closure(k, part)[0]
    for n in _closure(k, ptr)[0] - names:
        if n in k.assigns and id(part) in _closure(k, ast.Name(n, ast.Load()))[1]:
            names.add(n)
    return names


def _relevant(k: KernelFacts, test: ast.AST, related: set[str]) -> bool:
    """A bounds condition protects an access when it tests what the address is built from (`if pid < n_full`,
    `tl.device_assert(offs < n)`, `tl.static_assert(K % BLOCK_K == 0)` for a BLOCK_K tile), or is a
    compile-time bounds flag (`if EVEN_N`)."""
    names = {n.id for n in _iter_expr(test) if isinstance(n, ast.Name)}
    if names & related:
        return True
    if _overflow_branch(k, test) is not None and _closure(k, test)[0] & related - set(k.constexpr):
        return True
    return not k.expr_facts(test) & RT and any(_BOUNDS_FLAG.search(n) for n in names)


def _launcher_guards(k: KernelFacts) -> tuple[bool, set[str]]:
    """From same-file launchers of this kernel: whether every one checks divisibility (`assert n % BLOCK == 0`,
    `if n % BLOCK: raise ...`), and the pointer parameters that always receive buffers padded to whole blocks
    (allocated with triton.cdiv / next_power_of_2 / a `pad` in the size)."""
    ctx = k.ctx
    scopes = k.f.launchers().get(k.name, []) or _factory_launches(k)
    if not scopes:
        return False, set()

    order = list(k.args)

    def block_values(sites: list[ast.Call]) -> set[str]:
        """How the launches spell the kernel's constexpr values (`BLOCK`, `1024`), and the parameter names."""
        out = set(k.constexpr)
        for site in sites:
            out.update(ctx.src.segment(a) for i, a in enumerate(site.args)
                       if i < len(order) and order[i] in k.constexpr)
            out.update(ctx.src.segment(kw.value) for kw in site.keywords if kw.arg in k.constexpr)
        return out

    def checks_divisibility(fn: ast.AST, sites: list[ast.Call]) -> bool:
        """`assert n % BLOCK == 0` or `if n % BLOCK: raise` on a block value this launch passes."""
        blocks = block_values(sites)
        for n in ast.walk(fn):
            test = n.test if isinstance(n, ast.Assert) else \
                n.test if isinstance(n, ast.If) and any(isinstance(b, ast.Raise) for b in n.body) else None
            if test is not None and any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mod)
                                        and ctx.src.segment(x.right) in blocks for x in ast.walk(test)):
                return True
        return False

    def whole_grid(fn: ast.AST, site: ast.Call, sites: list[ast.Call]) -> bool:
        """`kernel[(n // BLOCK,)]`: only whole blocks of a block size this launch passes are launched."""
        if not isinstance(site.func, ast.Subscript):  # launchers() gives `name[grid](...)` calls only
            return False
        grid = site.func.slice
        if isinstance(grid, ast.Name):  # `grid = (n // BLOCK,)` or `grid = lambda META: (...)`, then `k[grid]`
            bound = [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                     and isinstance(n.targets[0], ast.Name) and n.targets[0].id == grid.id]
            if len(bound) != 1:
                return False
            grid = bound[0]
        if isinstance(grid, (ast.Tuple, ast.List)):  # `grid = (n_tiles, B)` with `n_tiles = head_dim // BLOCK_D`
            values = {n.targets[0].id: n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                      and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
            first = grid.elts[0] if grid.elts else None
            if isinstance(first, ast.Name) and first.id in values:
                grid = ast.Tuple([values[first.id], *grid.elts[1:]], ast.Load())
        text = ast.unparse(grid)
        blocks = block_values(sites)
        return "cdiv" not in text and "ceil" not in text and any(
            isinstance(x, ast.BinOp) and isinstance(x.op, ast.FloorDiv) and not _ceiling(x)
            and ast.unparse(x.right) in blocks for x in ast.walk(grid))

    all_checked = all(checks_divisibility(fn, sites) or _helper_checks_divisibility(k, fn)
                      or all(whole_grid(fn, s, sites) for s in sites) for fn, sites in scopes)
    padded: set[str] | None = None
    for fn, sites in scopes:
        allocs = {}
        values: dict[str, ast.expr] = {}
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                values[n.targets[0].id] = n.value
        for name, value in values.items():
            if isinstance(value, ast.Call) and _ALLOCATION.search(ast.unparse(value.func)):
                # `blocks = triton.cdiv(n, B)` then `torch.empty(blocks * B)`: the size's names count with their values
                allocs[name] = " ".join(ctx.src.segment(v) for v in _with_bindings(value, values))
            elif isinstance(value, ast.Call):
                allocs[name] = ctx.src.segment(value)
        for site in sites:
            here = set()
            for i, a in enumerate(site.args):
                if i < len(order) and isinstance(a, ast.Name) and _PADDED.search(allocs.get(a.id, "")):
                    here.add(order[i])
            for kw in site.keywords:
                if kw.arg and isinstance(kw.value, ast.Name) and _PADDED.search(allocs.get(kw.value.id, "")):
                    here.add(kw.arg)
            padded = here if padded is None else padded & here
    return all_checked, padded or set()


def _factory_launches(k: KernelFacts) -> list[tuple[ast.AST, list[ast.Call]]]:
    """Launches of a kernel a factory returns (`def _get_kernel(): @triton.jit def impl(...): ...; return impl`,
    then `kernel = _get_kernel(); kernel[grid](...)`): the launching functions and their calls."""
    defs = [fn for fn in k.ctx.body if isinstance(fn, ast.FunctionDef)]
    factories: set[str] = set()

    def made_by(fn: ast.FunctionDef, known: set[str]) -> set[str]:  # locals bound to what a factory returns
        return {n.targets[0].id for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call)
                and isinstance(n.value.func, ast.Name) and n.value.func.id in known}

    for _ in range(3):  # a factory of a factory (`_get_kernel()` caching `_build_kernel()`)
        grown = {fn.name for fn in defs if any(
            isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id in {k.name} | made_by(fn, factories)
            for r in ast.walk(fn))}
        if grown <= factories:
            break
        factories |= grown
    out: list[tuple[ast.AST, list[ast.Call]]] = []
    for fn in defs:
        if fn.name in factories:
            continue
        made = made_by(fn, factories)
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
                 and (isinstance(n.func.value, ast.Name) and n.func.value.id in made or _wraps(n.func.value, k.name))]
        if calls:
            out.append((fn, calls))
    return out


def _wraps(e: ast.AST, kernel: str) -> bool:
    """`launcher(kernel, ...)`: a call that takes the kernel and gives back what is launched."""
    return isinstance(e, ast.Call) and bool(e.args) and isinstance(e.args[0], ast.Name) and e.args[0].id == kernel


def _padded_row(k: KernelFacts, t: ast.AST) -> bool:
    """`off_hb * seqlen_q_rounded`: rows strided by a size the host rounded up to whole blocks, so a block of
    offsets within the row stays inside the buffer."""
    return isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult) and any(
        isinstance(x, ast.Name) and x.id in k.args and _PADDED_SIZE.search(x.id) for x in (t.left, t.right))


_PADDED_SIZE = re.compile(r"(?i)round|padded|_pad$|^pad_|aligned")


def _ceiling(div: ast.BinOp) -> bool:
    """`(n + BLOCK - 1) // BLOCK`: a ceiling division (partial blocks are launched)."""
    return isinstance(div.left, ast.BinOp) and isinstance(div.left.op, (ast.Add, ast.Sub))


def _divisibility_checks(fn: ast.AST) -> bool:
    """Whether a function asserts, or raises unless, some size is a multiple of something (`x % 128`)."""
    for n in ast.walk(fn):
        test = n.test if isinstance(n, ast.Assert) else \
            n.test if isinstance(n, ast.If) and any(isinstance(b, ast.Raise) for b in n.body + n.orelse) else None
        if test is not None and any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mod) for x in ast.walk(test)):
            return True
    return False


def _helper_checks_divisibility(k: KernelFacts, launcher: ast.AST) -> bool:
    """A validation helper the launcher calls before launching (`_check_shapes(x)`, in this file or another
    module) that asserts or raises unless sizes are multiples of a block."""
    defs = {n.name: n for n in k.ctx.body if isinstance(n, ast.FunctionDef)}
    for call in ast.walk(launcher):
        if not isinstance(call, ast.Call) or not isinstance(call.func, (ast.Name, ast.Attribute)):
            continue
        if isinstance(call.func, ast.Name) and call.func.id in defs and defs[call.func.id] is not launcher:
            if _divisibility_checks(defs[call.func.id]):
                return True
            continue
        name = k.imports.resolve(call.func)
        if not name or "." not in name or name.split(".")[0] in ("torch", "triton", "math", "numpy"):
            continue
        target = resolve_in_file(name, k.ctx.path)
        if target.kind == "plain" and target.where:
            path, _, line = target.where.rpartition(":")
            helper = definition_at(path, int(line))
            if helper is not None and _divisibility_checks(helper):
                return True
    return False


def _with_bindings(node: ast.expr, values: dict[str, ast.expr], depth: int = 0) -> list[ast.expr]:
    """An allocation and what the names it multiplies are bound to in the launcher (a few levels deep): in
    `torch.empty(blocks * B)` with `blocks = triton.cdiv(n, B)` the size is whole blocks; `torch.empty(blocks, m)`
    holds one slot per block, not a padded copy."""
    out = [node]
    if depth < 3:
        for n in ast.walk(node):
            if not (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)):
                continue
            for side in (n.left, n.right):
                if isinstance(side, ast.Name) and side.id in values and values[side.id] is not node:
                    out += _with_bindings(values[side.id], values, depth + 1)
    return out


_ALLOCATION = re.compile(r"(^|\.)(new_)?(empty|zeros|ones|full)$")
_PADDED = re.compile(r"cdiv|next_power_of_2|\bpad|padded|round_up|rounded|align|ceil\(.*\*")


def _checks_of(k: KernelFacts, name: str, at: int) -> list[ast.Compare]:
    """Bounds checks of a name that test the value it has on line `at`: a name reassigned for other offsets
    (`o_a = ...` twice) is checked only by comparisons after its last assignment before that line."""
    plain = [b[2].lineno for b in k.assigns.get(name, ()) if b[2] is not None]
    since = max((ln for ln in plain if ln < at), default=0) if len(plain) > 1 else 0
    return [c for c in k.comparisons.get(name, ()) if c.lineno >= since and not _selector(k, c)]


def _pidoff_at(k: KernelFacts, e: ast.AST, line: int, depth: int = 0) -> bool:
    """Whether an expression carries unbounded program-id offsets on `line`, reading each name rebound with `=`
    (and never with `+=`) as its last binding before that line."""
    if depth > 12:
        return bool(k.expr_facts(e) & PIDOFF)
    if isinstance(e, ast.Name):
        binds = k.assigns.get(e.id, ())
        if len(binds) <= 1 or any(b[2] is None for b in binds) or any(b[0] != PLAIN for b in binds):
            return bool(k.name_facts(e.id) & PIDOFF)
        before = [b for b in binds if b[2] is not None and b[2].lineno < line]
        if not before:
            return bool(k.name_facts(e.id) & PIDOFF)
        last = max(before, key=lambda b: b[2].lineno if b[2] is not None else 0)
        return isinstance(last[1], ast.AST) and _pidoff_at(k, last[1], last[2].lineno if last[2] else line,
                                                            depth + 1)
    if isinstance(e, ast.BinOp):
        if isinstance(e.op, ast.Mod):
            return bool(k.expr_facts(e) & PIDOFF)
        return _pidoff_at(k, e.left, line, depth + 1) or _pidoff_at(k, e.right, line, depth + 1)
    if isinstance(e, ast.Subscript):
        return _pidoff_at(k, e.value, line, depth + 1)
    if isinstance(e, ast.Call) and e.args and k.callee(e.func) in (
            f"{TL}.multiple_of", f"{TL}.max_contiguous", f"{TL}.max_constancy"):
        return _pidoff_at(k, e.args[0], line, depth + 1)
    return bool(k.expr_facts(e) & PIDOFF)


def _selector(k: KernelFacts, c: ast.Compare) -> bool:
    """`offs_i > offs_j`, `offs_m[:, None] >= start_n + offs_n[None, :]`: offsets of one tile compared with
    offsets of another (a causal or diagonal selector), not with a size. As a mask it changes the result."""
    return all(k.expr_facts(x) & AR for x in (c.left, *c.comparators))


def _whole_blocks_only(k: KernelFacts, extents: set) -> bool:
    """The kernel counts its blocks with floor division by the block size (`Ms = M // TILE_M`): only whole blocks
    exist, so the last one cannot overhang."""
    for n in ast.walk(k.fn):
        # `(n + BLOCK - 1) // BLOCK` is a ceiling division: partial blocks do exist.
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv) and any(
                isinstance(x, ast.Name) and x.id in extents for x in _iter_expr(n.right)) and not any(
                isinstance(x, ast.Name) and x.id in extents for x in _iter_expr(n.left)):
            return True
    return False


def _vacuous(check: ast.Compare, extents: set) -> bool:
    """`cols < D` with cols = tl.arange(0, D): always true, not a real bounds check."""
    return len(check.comparators) == 1 and isinstance(check.ops[0], ast.Lt) and (
        isinstance(check.comparators[0], ast.Name) and check.comparators[0].id in extents)


def _pointer_names(k: KernelFacts) -> set[str]:
    """Names a load or store of this kernel takes its address from."""
    pointers: set[str] = set()
    for c in k.calls:
        if c.name in (f"{TL}.load", f"{TL}.store") and c.node.args:
            pointers.update(t.id for t in _terms(k, c.node.args[0], set()) if isinstance(t, ast.Name))
            if isinstance(c.node.args[0], ast.Name):
                pointers.add(c.node.args[0].id)
    return pointers


def _size_param(k: KernelFacts, offs: str | None = None, strict: bool = False) -> str | None:
    """A runtime size parameter of this kernel to name in a mask hint (never one the kernel does not have).

    With several sizes, the one of the offsets' dimension (`offs_bn` -> `N`, `offs_cm` -> `M`); None when that is
    not clear: a hint naming the wrong dimension is worse than none."""
    pointers = _pointer_names(k)
    sizes = [n for n in k.args if n not in k.constexpr and n not in pointers and "stride" not in n.lower()
             and not n.lower().endswith("ptr") and _SIZE_NAME.search(n)]
    if len(sizes) <= 1 and not strict:
        return sizes[0] if sizes else None
    if offs:
        dim = offs.lower().rsplit("_", 1)[-1][-1:]
        same = [n for n in sizes if n.lower() in (dim, f"n_{dim}", f"size_{dim}", f"{dim}_size", f"num_{dim}")]
        if len(same) == 1:
            return same[0]
    return None


_SIZE_NAME = re.compile(r"(?i)^(n|m|k|l|size|numel|length|len|total)$|^n_|^num_|_size$|numel|elements|^len|_len$|"
                        r"^(n|m|k)[a-z]?$|^seq|rows$|cols$")


def _is_tile_term(k: KernelFacts, t: ast.AST, extents: set) -> bool:
    """A summand that places this program's block along the arange: a vector already holding the program id
    (`offs * stride` with offs = pid * BLOCK + arange), or `pid * BLOCK` scaled by the arange's own extent.
    `row * stride_row` with a different scale starts a row instead, and may be exactly as wide as the arange."""
    bits = k.expr_facts(t)
    if not bits & PIDOFF:
        return False
    if bits & AR:
        return True
    for _ in range(4):  # follow `start = pid * BLOCK`
        if isinstance(t, ast.Name):
            binds = k.assigns.get(t.id, ())
            if len(binds) != 1:
                return False
            kind, value, _ = binds[0]
            if isinstance(value, ast.For) and isinstance(value.iter, ast.Call):  # kind FOR
                # `for start in range(0, n, BLOCK)`: a block origin when the step is the arange's extent.
                it = value.iter
                step = it.args[2] if len(it.args) > 2 else None
                return step is not None and any(
                    isinstance(n, ast.Name) and n.id in extents or isinstance(n, ast.Constant) and n.value in extents
                    for n in _iter_expr(step))
            if kind != PLAIN or value is None:
                return False
            t = value
        if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult):
            scale = t.right if k.expr_facts(t.left) & PIDOFF else t.left
            # `pid * HEAD_DIM + tl.arange(0, HEAD_DIM)` walks rows of a whole dimension: not a tile.
            return any(isinstance(n, ast.Name) and n.id in extents and _BLOCK_NAME.search(n.id)
                       or isinstance(n, ast.Constant) and n.value in extents for n in _iter_expr(scale))
    return False


def _arange_extents(k: KernelFacts, terms: list[ast.AST]) -> set:
    """Names and literals in the bounds of the tl.arange calls a pointer's offsets come from."""
    out: set = set()
    stack, seen = list(terms), set()
    while stack:
        for n in _iter_expr(stack.pop()):
            if isinstance(n, ast.Call) and k.callee(n.func) == f"{TL}.arange":
                out.update(x.id if isinstance(x, ast.Name) else x.value for a in n.args for x in _iter_expr(a)
                           if isinstance(x, ast.Name) or isinstance(x, ast.Constant) and isinstance(x.value, int))
            elif isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                stack.extend(b[1] for b in k.assigns.get(n.id, ()) if b[0] in (PLAIN, CONSTEXPR) and b[1] is not None)
    out.discard(0)
    return out


def _terms(k: KernelFacts, e: ast.AST | None, seen: set[str], at: int | None = None) -> list[ast.AST]:
    """The summands of a pointer expression, through names bound to sums (`ptrs = X + offs`). With `at` (the
    line of the use), a name assigned several times with `=` is followed to its last assignment before that line
    (kernels reuse names such as `o_dA` for different offsets); `+=` updates always count (loops)."""
    if isinstance(e, ast.BinOp) and type(e.op) in (ast.Add, ast.Sub):
        return _terms(k, e.left, seen, at) + _terms(k, e.right, seen, at)
    if isinstance(e, ast.Name) and "\0" + e.id in seen:
        return []  # `ptrs += step` refers back to the sum being expanded
    if isinstance(e, ast.Name) and e.id not in seen:
        binds = k.assigns.get(e.id, ())
        plain = [(b[2].lineno, b) for b in binds if b[2] is not None]  # (line, binding) of each `=` of the name
        if at is not None and len(plain) > 1:
            before = [lb for lb in plain if lb[0] < at]
            if before:
                last = max(before, key=lambda lb: lb[0])[1]
                binds = [b for b in binds if b[2] is None or b is last]
                value = last[1]
                if len(binds) == 1 and last[0] == PLAIN and value is not None and not (
                        isinstance(value, ast.BinOp) and type(value.op) in (ast.Add, ast.Sub)):
                    return [value]  # the value itself: the name's facts mix in its other assignments
        if binds and all(b[0] == PLAIN and isinstance(b[1], ast.BinOp) and type(b[1].op) in (ast.Add, ast.Sub)
                         for b in binds):
            seen.update((e.id, "\0" + e.id))
            return [t for b in binds for t in _terms(k, b[1], seen, at)]
    return [e] if e is not None else []
