"""Kernels as loomgate runs them: the manager hooks, the ZMQ channels, each kernel, the registry."""
