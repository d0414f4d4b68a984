"""A small tmpfs in a mount namespace of its own: a disk the tests can fill or make read-only."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

MOUNT_SCRIPT = (
    'mount -t tmpfs -o "size=$1,mode=0700" tmpfs "$0" && echo ready && exec sleep infinity'
)


class PrivateDisk:
    """A tmpfs at `path`, seen only by processes started through `launcher`.

    A sleeping holder process keeps the namespace; `root` shows its files from outside.
    Without root privileges the namespace maps the user to root in a user namespace.
    """

    def __init__(self, path: Path, size: str) -> None:
        self.path = path
        self.size = size
        self._privileged = os.geteuid() == 0
        self._holder: subprocess.Popen[bytes] | None = None

    def start(self) -> PrivateDisk:
        """Mount the tmpfs in a new namespace and wait until it is there."""
        self.path.mkdir(parents=True, exist_ok=True)
        user = [] if self._privileged else ["--map-root-user"]
        unshare = ["unshare", *user, "--mount", "--propagation", "private"]
        self._holder = subprocess.Popen(
            [*unshare, "sh", "-c", MOUNT_SCRIPT, str(self.path), self.size],
            stdout=subprocess.PIPE,
        )
        assert self._holder.stdout is not None
        ready = self._holder.stdout.readline()
        if ready.strip() != b"ready":
            self.stop()
            raise RuntimeError("could not mount a private tmpfs (is unshare allowed here?)")
        return self

    @property
    def pid(self) -> int:
        """Return the pid of the process holding the namespace."""
        assert self._holder is not None
        return self._holder.pid

    @property
    def launcher(self) -> list[str]:
        """Return the command prefix that runs a program inside the namespace."""
        user = [] if self._privileged else ["--user", "--preserve-credentials"]
        return ["nsenter", "--target", str(self.pid), *user, "--mount"]

    @property
    def root(self) -> Path:
        """Return the namespace's filesystem root as seen from outside it."""
        return Path(f"/proc/{self.pid}/root")

    def seen(self, path: Path) -> Path:
        """Return `path` inside the namespace, as seen from outside it."""
        return self.root / path.relative_to("/")

    def remount(self, mode: str) -> None:
        """Make the tmpfs read-only ("ro") or writable again ("rw")."""
        subprocess.run(
            [*self.launcher, "mount", "-o", f"remount,{mode}", str(self.path)], check=True
        )

    def fill(self, name: str, leave: int = 0) -> Path:
        """Fill the tmpfs but `leave` bytes with file `name`; return it (delete it to free)."""
        filler = self.seen(self.path / name)
        chunk = b"\0" * (1 << 16)
        with filler.open("wb", buffering=0) as f:
            try:
                while True:
                    f.write(chunk)
            except OSError:
                pass
            f.truncate(max(0, f.tell() - leave))
        return filler

    def stop(self) -> None:
        """End the holder process: the namespace and its tmpfs go with it."""
        if self._holder is not None and self._holder.poll() is None:
            self._holder.send_signal(signal.SIGTERM)
            self._holder.wait(30)
