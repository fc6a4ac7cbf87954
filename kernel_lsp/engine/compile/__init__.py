"""Ahead-of-time compilation of Triton kernels for the user's GPU targets, in worker processes, cached on disk."""
