"""Rules for what the compiler says about a kernel (KC001–KC010): produced by the compile service
(`kernel_lsp.engine.compile.service.compile_problems`) from real compiles for the configured targets, not by a
static check. Registered here so that codes, severities, suppression and documentation work as for every rule.
"""

from __future__ import annotations

from ..model import Severity
from . import Rule, register

register(Rule(
    code="KC001", name="compile-error", language="compile", severity=Severity.ERROR,
    summary="The kernel does not compile for a configured target and configuration.",
    wrong="", right="",
    explanation="Triton (or ptxas) rejected the kernel when it was compiled ahead of time for a target in the "
    "`targets` setting (`kernel-lsp check --target`), without a GPU. The error is placed on the line the compiler "
    "blamed; when it is inside a @triton.jit helper, the related locations show the call sites. The message names "
    "the target and the configuration (autotune config, launch site or defaults) that failed.",
))
register(Rule(
    code="KC002", name="compile-warning", language="compile", severity=Severity.WARNING,
    summary="The compiler warned about this line for a configured target.",
    wrong="", right="",
    explanation="A warning Triton or ptxas printed while compiling the kernel, mapped to the user's line.",
))
register(Rule(
    code="KC003", name="register-spill", language="compile", severity=Severity.WARNING,
    summary="The kernel spills registers to local memory in a configuration.",
    wrong="", right="",
    explanation="ptxas (or the AMD backend) ran out of registers and moved values to slow local (scratch) memory. "
    "Reduce the per-program tile (block sizes), raise `num_warps` so that each thread holds fewer values, or "
    "split the work; the message gives the spilled bytes, the target and the configuration.",
))
register(Rule(
    code="KC004", name="shared-memory-over-limit", language="compile", severity=Severity.ERROR,
    summary="The kernel compiles but needs more shared memory (LDS) per block than the target allows: it fails at "
    "launch.",
    wrong="", right="",
    explanation="The compiled kernel asks for more shared memory per block than the target can give (for example "
    "227 KB on sm_90, 64 KB on gfx942), so the launch fails with an out-of-resources error. Use smaller "
    "BLOCK_SIZE_* tiles or fewer pipeline stages (`num_stages`) for this configuration, or drop it from the "
    "autotune list for that target.",
))
register(Rule(
    code="KC005", name="dot-without-tensor-cores", language="compile", severity=Severity.WARNING,
    summary="A tl.dot did not compile to tensor-core (matrix) instructions on a target that has them.",
    wrong="", right="",
    explanation="The target has matrix units (mma/wgmma on NVIDIA, mfma on AMD) but the compiled kernel uses none, "
    "so tl.dot runs on the ordinary FMA units, many times slower. Usual causes: tiles smaller than 16 in a "
    "dimension, fp32 inputs with `input_precision=\"ieee\"`, or integer/fp64 operands. Use 16-bit (or tf32) "
    "inputs and tiles of at least 16x16x16.",
))
register(Rule(
    code="KC006", name="compile-job-failed", language="compile", severity=Severity.INFO,
    summary="kernel-lsp could not compile the kernel (a timeout, a crash or a failure of its own); its results are "
    "missing.",
    wrong="", right="",
    explanation="The worker compiling this kernel did not answer within `compileTimeoutS`, died (a signal, the "
    "memory limit), or failed for a reason that is not the kernel's. This says nothing wrong about the kernel: "
    "nothing is known about this configuration. Raise `compileTimeoutS` for very large kernels (a timeout is "
    "remembered with the timeout it had, and tried again once the setting is raised), or report the failure with "
    "the message shown.",
))
register(Rule(
    code="KC007", name="scalar-global-access", language="compile", severity=Severity.WARNING,
    summary="A block load or store compiled to one scalar access per element instead of vector accesses.",
    wrong="", right="",
    explanation="Each thread of the compiled kernel handles several elements of this load or store, but the "
    "PTX moves them one at a time (for example `ld.global.b32` rather than `ld.global.v4.b32`), which needs "
    "several times more memory instructions. Triton vectorizes only accesses it can prove contiguous and 16-byte "
    "aligned: offsets built from `tl.arange` with a unit stride in the innermost dimension, base pointers and "
    "sizes divisible by 16 (the JIT specializes on that at launch), or hints such as "
    "`tl.multiple_of(offs, 16)` and `tl.max_contiguous(offs, BLOCK)`. A runtime stride on the innermost "
    "dimension (`offs * stride`) prevents it; pass contiguous tensors and drop the stride, or accept a gather.",
))
register(Rule(
    code="KC008", name="not-compiled-offline", language="compile", severity=Severity.INFO,
    summary="The kernel was not compiled: it needs code of the workspace's that the offline compile does not run.",
    wrong="", right="",
    explanation="Background and `--target` compiles evaluate nothing of the workspace's code: they compile a copy "
    "of the kernel, its @jit helpers, the imports of triton and math it uses, and module-level constants that are "
    "literals or built from literals with pure functions (`tl.constexpr(128)`, `2 ** 10`, `math.log2(64)`). A "
    "kernel whose constexpr default, annotation or constant is computed by other code, that reads a name imported "
    "from the user's modules, or that reaches a module other than triton.language and math at compile time, is "
    "not compiled, and nothing is said about it beyond that. This says nothing wrong about the kernel; write the "
    "value as a literal (or a `tl.constexpr(...)` of one) to get its compile facts, or run the checks in a trusted "
    "workspace, which import the file.",
))
register(Rule(
    code="KC009", name="not-compiled-unknown-value", language="compile", severity=Severity.INFO,
    summary="The kernel was not compiled, or not compiled usefully, because a value or type it needs is not known.",
    wrong="", right="",
    explanation="kernel-lsp compiles a kernel only with values it read: a launch site's literals (also through "
    "names, tuple assignments, dict literals, `min`/`max` and `triton.next_power_of_2` of literals), an autotune "
    "config, a parameter's default or the `pins` setting. When a constexpr's value is known only at run time, the "
    "kernel is not compiled rather than compiled with a made-up value whose registers and spills would describe a "
    "kernel nobody runs. Pointer element types that cannot be read are assumed (and shown with the results); when "
    "the compile fails on a type error under such an assumption, it is reported here instead of as an error. Pin "
    "the value or type with the `pins` setting, an annotation (`x_ptr: \"*bf16\"`) or a launch with literals.",
))
register(Rule(
    code="KC010", name="not-in-installed-triton", language="compile", severity=Severity.WARNING,
    summary="The kernel uses a construct the installed triton no longer has (removed or renamed).",
    wrong="", right="",
    explanation="The installed triton release does not have this construct: block pointers (`tl.make_block_ptr`, "
    "`tl.advance`) were removed in favour of tensor descriptors, the experimental descriptor functions became "
    "`tl.make_tensor_descriptor`, `tl.math.max`/`min` became `tl.maximum`/`tl.minimum`, libdevice moved under "
    "`triton.language.extra`. The message names the construct and the version. The kernel may be fine on the "
    "release it was written for; with the installed one it does not compile.",
))
register(Rule(
    code="KC011", name="ptxas-performance-note", language="compile", severity=Severity.INFO,
    summary="ptxas reported a potential performance loss for a configuration.",
    wrong="", right="",
    explanation="ptxas prints \"Potential Performance Loss\" notes when it compiles code it cannot schedule as "
    "written, for example wgmma instructions serialized because the wgmma pipeline lacks registers (C7511). The "
    "kernel computes the same result; the note is a performance fact of that configuration. On an H200 every "
    "matmul tile of bench/sweeps/ with this note ran 3.7 to 28 times slower than the sweep's best. Smaller tiles "
    "per warp (smaller BLOCK_M x BLOCK_N or more num_warps) give each thread fewer accumulator registers.",
))
