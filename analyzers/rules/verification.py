"""Rules for what a correctness check found (KV001–KV007): reported from real runs of a kernel against its
PyTorch reference (`kernel_lsp.spec`, docs/specs.md), not by a static check. Registered here so that codes,
severities, suppression and documentation work as for every rule.
"""

from __future__ import annotations

from ..model import Severity
from . import Rule, register

register(Rule(
    code="KV001", name="check-mismatch", language="checks", severity=Severity.ERROR,
    summary="The kernel's output differs from its PyTorch reference on a case of its spec.",
    wrong="", right="",
    explanation="The spec's launcher ran the kernel on fresh random inputs and its output did not match the "
    "reference within the tolerance. The message gives the first failing case (shape, dtype, seed), the largest "
    "absolute and relative errors, how many elements differ and the first of them. \"all in the tail\" means every "
    "wrong element lies past the last full block: the usual sign of a missing or off-by-one mask.",
))
register(Rule(
    code="KV002", name="check-rejected", language="checks", severity=Severity.ERROR,
    summary="The check could not trust the result: the kernel did not really compute it.",
    wrong="", right="",
    explanation="A result only counts when the kernel computed it: the spec's kernel must launch, the launcher "
    "must not fall back to PyTorch or swallow the kernel's exceptions, inputs must stay unmodified, outputs must "
    "be written (they start as NaN), and two runs on the same inputs must agree. The message says which of these "
    "failed.",
))
register(Rule(
    code="KV003", name="out-of-bounds-access", language="checks", severity=Severity.ERROR,
    summary="A load or store touched memory outside every tensor argument (caught on the CPU interpreter).",
    wrong="", right="",
    explanation="On the CPU, checks run through Triton's interpreter with a bounds guard: an active lane whose "
    "address lies outside all of the kernel's tensor arguments stops the run before it corrupts memory. The "
    "diagnostic sits on the load or store and names the pointer argument, the element offset and the program "
    "id. Mask the access (`mask=offs < n`) or fix the offset arithmetic.",
))
register(Rule(
    code="KV004", name="check-crashed", language="checks", severity=Severity.ERROR,
    summary="The kernel crashed, hung or ran out of memory while it was checked.",
    wrong="", right="",
    explanation="The checking process died from a signal, did not finish within `checkTimeoutS`, or exceeded its "
    "memory limit. The message says which and, when known, the kernel line; other checks and the server carry "
    "on.",
))
register(Rule(
    code="KV005", name="check-not-run", language="checks", severity=Severity.WARNING,
    summary="The spec could not be run: the module failed to import, or the spec or its launcher is wrong.",
    wrong="", right="",
    explanation="Nothing was verified. The message gives the error (an import error, an exception in the inputs "
    "function, the reference or the launcher, a spec argument of the wrong kind).",
))
register(Rule(
    code="KV006", name="check-not-trusted", language="checks", severity=Severity.ERROR,
    summary="The spec was not checked: the file changes what the checker relies on or reaches into it, or the "
    "spec cannot tell a right answer from a wrong one.",
    wrong="", right="",
    explanation="A verdict means something only if the inputs, the reference and the comparison are the ones the "
    "spec states. A file that replaces functions of torch, numpy, triton or the checker (`torch.randn = ...`, "
    "`setattr(torch, \"allclose\", ...)`), or that reaches into the checking process (the caller's frames through "
    "`sys._getframe` or `inspect.stack`, the garbage collector's object lists, ctypes, the checker's modules, code "
    "built at run time with `exec`/`eval`), gets no verdict: the diagnostic sits on the line that does it. The "
    "replacement would also apply to every program that imports the file. Remove it, or move it out of the file "
    "that holds the spec. The spec itself is checked too: a reference that returns no tensor, a Tensor subclass, "
    "only NaN or infinities, or values an all-zero output matches; inputs that are the same for every seed; a "
    "reference that launches a Triton kernel (it would certify the kernel under test). An error: a gamed or "
    "unverifiable spec must fail CI like a wrong kernel.",
))
register(Rule(
    code="KV009", name="check-loose-tolerance", language="checks", severity=Severity.WARNING,
    summary="Correct only at a tolerance looser than the dtype warrants.",
    wrong="", right="",
    explanation="The spec's atol/rtol for a dtype let the reference rounded to the next coarser dtype pass (a "
    "float32 spec at 1e-2 accepts float16 or TF32 precision). The kernel matched at that tolerance; whether it "
    "matches at the dtype's own precision is not known. Tighten the tolerance, or keep it where the kernel's "
    "arithmetic is meant to be coarser (TF32 matmuls) and accept the warning.",
))
register(Rule(
    code="KV007", name="nki-cross-check", language="checks", severity=Severity.INFO,
    summary="AWS's nki.simulate and kernel-lsp's NKI model disagree on an NKI kernel: a problem of the tools.",
    wrong="", right="",
    explanation="Where AWS's `nki` package is installed, an NKI spec runs in its simulator and in kernel-lsp's NKI "
    "model (docs/nki-model.md). The simulator's verdict is the one shown; when the model's differs, this note "
    "gives both results. It says nothing against the kernel: one of the two tools is wrong about it. Please "
    "report it with the kernel.",
))
register(Rule(
    code="KV008", name="nki-rule-broken", language="checks", severity=Severity.ERROR,
    summary="An NKI kernel broke a NeuronCore rule while it ran in the NKI model: it fails or computes wrong.",
    wrong="", right="",
    explanation="The check ran the kernel in kernel-lsp's NKI model (docs/nki-model.md), which enforces the rules "
    "the NKI documentation states: at most 128 partitions, one 2 KiB PSUM bank per tile, SBUF and PSUM capacity, "
    "the Tensor Engine's operand shapes and dtypes, which engine reads and writes which memory, read-only inputs, "
    "indices in bounds, masks that are predicates on indices, the first matmul of a PSUM accumulation group "
    "overwriting. The kernel would be refused by the compiler or compute a wrong result on a NeuronCore. The "
    "diagnostic sits on the kernel's line and names the rule (with the static rule's code, NK001..., where one "
    "has the same meaning) and the case it happened on.",
))

# The rule a check's verdict raises, by its status (a correct kernel raises none): one table for every front end.
VERDICT_CODES = {"mismatch": "KV001", "rejected": "KV002", "out-of-bounds": "KV003", "crashed": "KV004",
                 "timeout": "KV004", "out-of-memory": "KV004", "error": "KV005", "not-checked": "KV006",
                 "rule-broken": "KV008"}
# A correct verdict's failed_check that still raises a problem (the verdict says why).
CORRECT_CODES = {"loose-tolerance": "KV009"}
# A verdict's note that is about the tools, not the kernel (AWS's simulator and the NKI model disagree): KV007.
TOOL_NOTE = "tool problem, information:"
