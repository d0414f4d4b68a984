"""A command on a pseudo-terminal of its own, so Ctrl-C is a key press, not a signal we send."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import subprocess
import termios
import time


class Terminal:
    """Runs a command with a pty as its controlling terminal; reads what it shows."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            command,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        os.set_blocking(self.master, False)
        self.screen = ""

    def expect(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """Wait until what the terminal showed matches `pattern`; return the match."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.screen)
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{pattern!r} not shown; the terminal shows:\n{self.screen}")
            self._read(min(0.1, max(0.0, deadline - time.monotonic())))

    def type(self, text: str) -> None:
        """Type `text` at the terminal (a line ends with "\n": the Enter key)."""
        os.write(self.master, text.encode())

    def press_ctrl_c(self) -> None:
        """Type Ctrl-C: the terminal sends SIGINT to the foreground process group."""
        os.write(self.master, b"\x03")

    def wait(self, timeout: float = 60) -> int:
        """Wait for the command to exit, keeping what it showed; return its exit status."""
        status = self.process.wait(timeout)
        self._read(0)
        return status

    def close(self) -> None:
        """End the command if it still runs, and close the terminal."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        os.close(self.master)

    def _read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the command exited and closed its side
            return
        self.screen += data.decode(errors="replace").replace("\r\n", "\n")
