"""kernel-lsp: a language server and checker for GPU and accelerator kernels (Triton, NKI)."""

__version__ = "0.1.0"
