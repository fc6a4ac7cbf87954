# The fixture project has its own pytest suite, run by `kernel-lsp record` in the tests, not by this one.
collect_ignore = ["fixtures"]
