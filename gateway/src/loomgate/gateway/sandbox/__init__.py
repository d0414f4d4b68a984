"""Sandboxed kernels: the profiles a kernel runs under and the OS mechanisms that enforce them."""
