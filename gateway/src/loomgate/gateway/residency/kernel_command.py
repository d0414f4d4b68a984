"""What a kernel spec's command says of the kernel: whether it runs ipykernel, the flag that
keeps ipykernel's IPython history in memory (no SQLite file shared between kernels), the
command that runs it under the copy launcher (residency/copy_launcher.py: a kernel that can be
copied) and the environment that makes its copies cheap."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

from loomgate.gateway.residency import copy_launcher

# IPython's history database is one SQLite file shared by every kernel of the user: under many
# kernels a lock times out, IPython moves the file aside, and every other kernel's saving thread
# then prints its error into a cell's output. The record is a gateway kernel's history.
IPYTHON_HISTORY_IN_MEMORY = "--HistoryManager.hist_file=:memory:"
IPYKERNEL_MODULES = frozenset({"ipykernel_launcher", "ipykernel"})
LAUNCHER = Path(copy_launcher.__file__)


def runs_ipykernel(argv: Sequence[str]) -> bool:
    """Return whether a kernel spec's command runs ipykernel (`python -m ipykernel_launcher`)."""
    return any(
        flag == "-m" and module in IPYKERNEL_MODULES for flag, module in itertools.pairwise(argv)
    )


def copyable(cmd: Sequence[str]) -> list[str]:
    """Return an ipykernel command (`python -m ipykernel_launcher …`) that runs the kernel under
    the copy launcher instead (any other command as it is)."""
    for at, (flag, module) in enumerate(itertools.pairwise(cmd)):
        if flag == "-m" and module in IPYKERNEL_MODULES:
            return [*cmd[:at], str(LAUNCHER), *cmd[at + 2 :]]
    return list(cmd)


# glibc's malloc asks for transparent huge pages (madvise) for what it maps: a large buffer
# (bytes, arrays) then sits in 2 MiB pages, and fork(), which copies a process's page tables,
# copies 512 times fewer entries (a checkpoint of a kernel holding 4 GiB: ~2 ms instead of
# ~60 ms). Copy-on-write still copies 4 KiB at a time. Only where the system's THP mode is
# "madvise" does this change anything ("always" gives them anyway, "never" refuses them).
HUGE_PAGES_TUNABLE = "glibc.malloc.hugetlb"


def with_huge_pages(env: Mapping[str, str]) -> dict[str, str]:
    """Return `env` with glibc's malloc asking for transparent huge pages (unless the
    environment already tunes that)."""
    tunables = env.get("GLIBC_TUNABLES", "")
    if HUGE_PAGES_TUNABLE in tunables:
        return dict(env)
    joined = ":".join(filter(None, [tunables, f"{HUGE_PAGES_TUNABLE}=1"]))
    return {**env, "GLIBC_TUNABLES": joined}
