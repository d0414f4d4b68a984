"""What loomgate may send a kernel beyond its cells, decided from the kernel's own kernel_info
reply (its language_info and implementation), never from its spec's name.

- an IPython shell runs a cell's code (ipykernel, ipymini, xeus-python): the person's startup.py
  and inspectors.py (IPython's AST transformers and events) run there;
- ipykernel alone counts cells as IPython does, which loomgate seeds after a restart and reads
  back after a take-back, and has the IOPub thread told to keep every message;
- any Python kernel runs the prewarm claim (a move into a directory, plain Python);
- a kernel of another language gets its cells and nothing else (but a setup part written in its
  own language: `startup.sh` for a `.sh` kernel);
- an interrupt goes to a kernel that can take one and live on (not xeus-python, nor Deno).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loomgate.shared import wire

# Implementations whose cells an IPython InteractiveShell runs (checked: their get_ipython() is
# one, with ast_transformers and events).
IPYTHON_SHELLS = frozenset({"ipython", "ipymini", "xeus-python"})
IPYKERNEL = "ipython"  # ipykernel's implementation name
# Implementations that cannot interrupt a running cell (checked with jupyter_client: xeus-python
# 0.19 from PyPI and Deno 2.9 end on SIGINT and ignore an interrupt_request on control).
UNINTERRUPTIBLE = frozenset({"xeus-python", "Deno kernel"})
IPYTHON_PART = "ipython"  # a setup part for IPython shells (startup.py, inspectors.py)


@dataclass(frozen=True)
class KernelKind:
    """A kernel's language, file extension and implementation, as its kernel_info gave them."""

    language: str = ""  # language_info's name, lower-case ("python", "bash", "typescript")
    implementation: str = ""  # "ipython", "ipymini", "xeus-python", "bash_kernel", …
    file_extension: str = ""  # language_info's (".py", ".sh", ".ts")

    @classmethod
    def of(cls, content: Mapping[str, Any]) -> KernelKind:
        """Return the kind a kernel_info reply's content describes."""
        info = content.get("language_info")
        info = info if isinstance(info, Mapping) else {}
        return cls(
            language=str(info.get("name") or "").lower(),
            implementation=str(content.get("implementation") or ""),
            file_extension=str(info.get("file_extension") or ""),
        )

    @property
    def known(self) -> bool:
        """Return whether the kernel has answered kernel_info (nothing is sent before)."""
        return bool(self.language or self.implementation)

    @property
    def python(self) -> bool:
        """Return whether the kernel runs Python (the prewarm claim is plain Python)."""
        return self.language == "python"

    @property
    def ipython(self) -> bool:
        """Return whether an IPython shell runs the kernel's cells (startup.py, inspectors.py)."""
        return self.python and self.implementation in IPYTHON_SHELLS

    @property
    def ipykernel(self) -> bool:
        """Return whether the kernel is ipykernel: its counter is IPython's, seeded by
        loomgate, and its IOPub thread can be told to keep every message."""
        return self.implementation == IPYKERNEL

    @property
    def interrupts(self) -> bool:
        """Return whether the kernel can interrupt a running cell (by the signal or the message
        its spec's interrupt_mode names) and live on."""
        return self.implementation not in UNINTERRUPTIBLE

    def runs(self, part: wire.SetupPart) -> bool:
        """Return whether this kernel runs setup `part` (for IPython shells, or written in the
        language of the kernel's file extension)."""
        wanted = part.get("runs_in", IPYTHON_PART)
        if wanted == IPYTHON_PART:
            return self.ipython
        return bool(self.file_extension) and wanted == self.file_extension

    def skipped(self, part: wire.SetupPart) -> str:
        """Return why this kernel does not run `part`, in one sentence."""
        wanted = part.get("runs_in", IPYTHON_PART)
        where = "IPython kernels" if wanted == IPYTHON_PART else f"{wanted} kernels"
        return f"{part['name']} runs in {where}; this kernel is {self.describe()}"

    def describe(self) -> str:
        """Return the kernel's language and implementation in a few words ("bash
        (bash_kernel)")."""
        language = self.language or "of an unknown language"
        return f"{language} ({self.implementation})" if self.implementation else language
