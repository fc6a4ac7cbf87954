"""What the model is told: one system prompt, and one request per action. docs/assistant.md lists what is sent."""

from __future__ import annotations

SYSTEM = """You are a GPU kernel engineer working inside kernel-lsp, an editor tool for Triton and AWS NKI kernels.
Every code change you propose is compiled, checked against the file's correctness spec (a PyTorch reference, run
on random inputs of several shapes, hardened against gaming) and timed before a person sees it.

Rules for code:
- Answer with exactly one ```python fenced block holding the complete new or changed top-level definitions
  (functions with their decorators, module constants) and any imports they need. Definitions with the name of
  an existing one replace it; new names are added. Do not repeat definitions you leave unchanged.
- Change only the kernel, its launcher (and plain functions only the launcher calls) and @triton.jit helpers.
  Never change, add or remove a correctness spec (functions decorated with @spec), the reference or inputs
  function a spec names, or anything they use. Never change what the launcher returns or its signature.
- Nothing may run at import besides definitions and constants: no module-level calls or other statements, no
  patching of torch, triton or numpy (`torch.x = ...`, `setattr`), no `global`, no frame or `globals()`
  access, no imports other than torch, triton, math, numpy and typing. Such candidates are refused.
- The kernel must do the work: no falling back to PyTorch in the launcher, no catching exceptions around the
  launch, no skipping launches, no caching results between calls. Such candidates are rejected.
- Keep every load and store masked where a block can run past the end of a tensor.
Keep prose short: one or two sentences before the code block saying what changed and why."""

ACTIONS = {
    "optimize": "Make `{kernel}` faster by changing its tiling: block sizes, num_warps, num_stages, the grid, "
                "or autotune configs, and the launcher's choice of them. Keep the algorithm and the results the "
                "same.",
    "port": "Port `{kernel}` to AWS NKI, in the current `nki` API (NKI >= 0.4): `import nki`, "
            "`import nki.language as nl`, `import nki.isa as nisa`, a function decorated with `@nki.jit`. Never "
            "import `neuronxcc`. Respect NeuronCore limits: partition dimension <= 128, PSUM tiles <= 2 KiB per "
            "partition, nc_matmul operands within 128x128 (stationary) and 128x512 (moving). Write the NKI kernel "
            "under a new name ending in `_nki`, taking the same inputs as the Triton launcher (as arrays) and "
            "returning its output; it goes into a file of its own, with the kernel's correctness spec, so write "
            "only the NKI code and its imports.",
    "fix": "Fix this problem in `{kernel}` with the smallest change:\n{diagnostic}",
    "spec": "Write a correctness spec for `{kernel}`: a plain-PyTorch reference function (new name) and a "
            "function decorated with `@spec(kernel={kernel}, launcher=<the function that launches it>, "
            "reference=<your reference>, shapes=[...], dtypes=[...])` that returns the launcher's positional "
            "inputs for (shape, dtype, device). Use `from kernel_lsp.spec import spec`. The reference must be plain "
            "PyTorch: it may not call the kernel, its launcher or anything that does (a kernel cannot certify "
            "itself). Include shapes that are "
            "not multiples of the block size and keep them small (they run on an interpreter). Add only new "
            "definitions; do not change the kernel or its launcher.",
    "explain": "Explain where the time goes in `{kernel}`, from the latency figures and compile facts below. "
               "Name the bound (memory, compute, latency or launch), what dominates, and the one or two changes "
               "most likely to help, with the expected effect. Answer in short Markdown, without code blocks.",
}

PLAN = ("Before writing code, state a short plan (at most 8 lines): what you will change in `{kernel}` and why "
        "you expect it to help, given the figures below. Do not write code yet; the user will confirm or edit "
        "the plan.")


def context(path_name: str, text: str, kernel: str, facts: str = "", history: str = "") -> str:
    parts = [f"File `{path_name}`:\n```python\n{text}\n```", f"The kernel: `{kernel}`."]
    if facts:
        parts.append(facts)
    if history:
        parts.append("Earlier in this session:\n" + history)
    return "\n\n".join(parts)
