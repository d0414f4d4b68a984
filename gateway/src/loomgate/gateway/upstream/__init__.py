"""Upstream mode: kernels on another Jupyter server (Jupyter Server, JupyterHub, Kernel
Gateway, Enterprise Gateway), with their records kept here."""
