"""A kernel's processes beyond the one its provisioner launched: its frozen copies (its
checkpoints: its state after a cell, kept by name; inside a sandbox with an init, the starter of
fresh kernels there, so that a restart keeps the sandbox and the checkpoints in it) and, once it
has copies or was made from one, its own live process.

Each is a fork of the kernel's process that stopped itself (kernels/kernel_copy.py's cells make
them): no CPU, and memory only where the kernel's state later differs. Continued (SIGCONT)
after its order file names a connection file, it forks a live kernel on that file, its own child,
and stops again; it stays until it is dropped or its kernel ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_core.paths import secure_write

from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency.kernel_process import (
    children,
    private_bytes,
    resident_bytes,
    stopped,
)
from loomgate.shared.wire import Checkpoint

# The connection file a copy starts on, beside the kernel's ipc sockets (named as they are, so
# that it goes with them).
COPY_CONNECTION = "-connection.json"
COPY_TIMEOUT = 10.0  # how long a continued copy has to fork its live one
COPY_POLL = 0.002


class CopyFailed(RuntimeError):
    """A frozen copy did not make a live one (it ended, or forked nothing in time)."""


@dataclass(frozen=True)
class Frozen:
    """One frozen copy: its process, the order file it reads when continued, and (a
    checkpoint's) the latest execution number when it was taken, when, and what it lacks."""

    process: ProcessIdentity
    order: Path
    after: int = 0
    created: float = 0.0
    lacks: tuple[str, ...] = ()  # what the copy does not carry, in sentences

    def held(self) -> int | None:
        """Return the memory this copy alone holds, in bytes (None where it cannot be told)."""
        return private_bytes(self.process.pid)

    def end(self) -> None:
        """Kill this copy (a stopped process ends on SIGKILL); its order file goes."""
        if self.process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
        self.order.unlink(missing_ok=True)

    async def live_copy(self, connection_file: Path) -> ProcessIdentity:
        """Continue this copy to fork a live kernel on `connection_file`; return that kernel's
        process (CopyFailed when none comes)."""
        if not self.process.is_alive():
            raise CopyFailed("its process has ended")
        pid = self.process.pid
        deadline = time.monotonic() + COPY_TIMEOUT
        # Made a moment ago, it may not have stopped itself yet: continued before, it would stop
        # after, and fork nothing.
        while not stopped(pid) and time.monotonic() < deadline:  # noqa: ASYNC110 (a stranger's stop has no event)
            await asyncio.sleep(COPY_POLL)
        before = set(children(pid))
        self.order.write_text(str(connection_file))
        os.kill(pid, signal.SIGCONT)
        while time.monotonic() < deadline:
            # A stranger's fork has no event to wait for: its children are polled.
            new = [child for child in children(pid) if child not in before]
            if new and (copy := ProcessIdentity.of(new[0])) is not None:
                return copy
            if not self.process.is_alive():
                raise CopyFailed("its process ended as it was continued")
            await asyncio.sleep(COPY_POLL)
        raise CopyFailed(f"it forked no live kernel within {COPY_TIMEOUT:.0f} s")

    def to_json(self) -> dict[str, Any]:
        """Return this copy as JSON values."""
        return {
            "process": self.process.to_json(),
            "order": str(self.order),
            "after": self.after,
            "created": self.created,
            "lacks": list(self.lacks),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Frozen:
        """Return the copy `to_json` described."""
        return cls(
            ProcessIdentity.from_json(data["process"]),
            Path(data["order"]),
            int(data.get("after", 0)),
            float(data.get("created", 0.0)),
            tuple(str(lack) for lack in data.get("lacks", ())),
        )


class KernelFamily:
    """A kernel's checkpoints, by name in the order they were taken, its starter, and its own
    process (`own`), noted apart from the launched one."""

    def __init__(self) -> None:
        self.checkpoints: dict[str, Frozen] = {}
        self.starter: Frozen | None = None
        # The kernel's own process: inside a sandbox with an init, the launched process is
        # bubblewrap's (which exits with the first kernel, while the sandbox lives on as long as
        # copies do); or a copy that replaced the launched one.
        self.own: ProcessIdentity | None = None
        self.replace_from: Frozen | None = None  # what the next launch continues, not a start
        # The memory each checkpoint alone holds, as last measured (`measure`: reading it costs
        # a walk of the copy's page tables, some 20 ms per GiB).
        self.held: dict[str, int | None] = {}

    def __bool__(self) -> bool:
        return bool(self.checkpoints) or self.starter is not None

    def has_starter(self) -> bool:
        """Return whether the kernel has a starter whose process lives."""
        return self.starter is not None and self.starter.process.is_alive()

    def own_gone(self) -> bool:
        """Return whether the kernel's own process, noted, has ended."""
        return self.own is not None and not self.own.is_alive()

    def signal_own(self, signum: int) -> None:
        """Signal the kernel's own process: its process group where it leads one (a copy, a
        fresh start), else it alone (a sandbox's first kernel shares its init's group)."""
        own = self.own
        if own is None or not own.is_alive():
            return  # never signal a pid that now belongs to another process
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(own.pid) == own.pid:
                os.killpg(own.pid, signum)
            else:
                os.kill(own.pid, signum)

    def wire(self) -> list[Checkpoint]:
        """Return the checkpoints' wire forms, in the order they were taken."""
        return [self.checkpoint(name) for name in self.checkpoints]

    def checkpoint(self, name: str) -> Checkpoint:
        """Return the checkpoint `name`'s wire form, `held` as last measured (KeyError when
        there is none)."""
        frozen = self.checkpoints[name]
        return Checkpoint(
            name=name, after=frozen.after, created=frozen.created, held=self.held.get(name)
        )

    def hold_at_most(self, limit: int) -> bool:
        """Return whether the checkpoints surely hold no more than `limit` together: their
        resident sizes, which count what they share with the kernel too, say so."""
        most = [resident_bytes(frozen.process.pid) for frozen in self.checkpoints.values()]
        return None not in most and sum(size or 0 for size in most) <= limit

    async def measure(self) -> None:
        """Measure the memory each checkpoint alone holds (off the event loop)."""
        for name, frozen in list(self.checkpoints.items()):
            self.held[name] = await asyncio.to_thread(frozen.held)

    def drop(self, name: str) -> None:
        """End the checkpoint `name` (KeyError when there is none)."""
        self.checkpoints.pop(name).end()
        self.held.pop(name, None)

    def forget_ended(self) -> list[str]:
        """Forget the copies whose process ended (killed from outside, or a reboot); return the
        names of the checkpoints among them."""
        ended = [name for name, frozen in self.checkpoints.items() if not frozen.process.is_alive()]
        for name in ended:
            self.checkpoints.pop(name).end()
        if self.starter is not None and not self.starter.process.is_alive():
            self.starter.end()
            self.starter = None
        return ended

    def end(self) -> None:
        """End every copy (the kernel ends for good)."""
        for frozen in [*self.checkpoints.values(), *([self.starter] if self.starter else [])]:
            frozen.end()
        self.checkpoints.clear()
        self.starter = None
        self.own = None

    def to_json(self) -> dict[str, Any]:
        """Return the family as JSON values (for the gateway that takes the kernel back)."""
        return {
            "checkpoints": {name: frozen.to_json() for name, frozen in self.checkpoints.items()},
            "starter": self.starter.to_json() if self.starter is not None else None,
            "own": self.own.to_json() if self.own is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> KernelFamily:
        """Return the family `to_json` described, without the copies that have ended since."""
        family = cls()
        if data:
            family.checkpoints = {
                str(name): Frozen.from_json(frozen)
                for name, frozen in (data.get("checkpoints") or {}).items()
            }
            starter = data.get("starter")
            family.starter = Frozen.from_json(starter) if starter else None
            own = data.get("own")
            family.own = ProcessIdentity.from_json(own) if own else None
            family.forget_ended()
        return family


def copy_connection(info: dict[str, Any], ipc_prefix: Path) -> Path:
    """Write the connection file a copy starts on, beside the kernel's ipc sockets at
    `ipc_prefix` (which its sandbox sees: the file bound into the sandbox at its start is gone
    once a restart rewrote it); return its path."""
    named = ipc_prefix.with_name(ipc_prefix.name + COPY_CONNECTION)
    with secure_write(str(named)) as f:
        json.dump(info, f)
    return named
