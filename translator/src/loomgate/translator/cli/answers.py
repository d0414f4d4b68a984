"""The person's answers to a cell's input() in `loomgate run`: a line typed at the terminal
(without echo for a password prompt) or read from piped stdin."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios
from collections.abc import Iterator


class Answers:
    """Reads answers from stdin one line at a time, without blocking the event loop; a read
    gives way to Ctrl-C."""

    def __init__(self) -> None:
        self._pending = bytearray()  # read past the line the last answer took (piped stdin)
        self.ended = False  # stdin is at its end: no answer will come from it

    async def answer(self, prompt: str, password: bool, *cancelled: asyncio.Event) -> str | None:
        """Show `prompt` and return the line given for it (without its line end); None when
        stdin has ended or one of `cancelled` is set first (Ctrl-C, an answer given elsewhere)."""
        try:
            self.fd = sys.stdin.fileno()
        except (OSError, ValueError):  # no stdin to read (closed, or not a file)
            self.ended = True
            return None
        self.terminal = os.isatty(self.fd)
        with no_echo(self.fd, password and self.terminal):  # before the prompt shows
            sys.stdout.write(prompt)
            sys.stdout.flush()
            line = await self._line(cancelled)
        if line is None or self.terminal:
            # The terminal showed what was typed, and its Enter (unless it was a password).
            ended = line is None or password
            sys.stdout.write("\n" if ended else "")
        else:
            sys.stdout.write(("" if password else line) + "\n")  # as a terminal would show it
        sys.stdout.flush()
        return line

    async def _line(self, cancelled: tuple[asyncio.Event, ...]) -> str | None:
        """Return the next line of stdin; None at its end or once one of `cancelled` is set."""
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        try:
            loop.add_reader(self.fd, readable.set)
        except (OSError, ValueError):  # a regular file: reading it never blocks
            self._pending += sys.stdin.buffer.readline()
            return self._take(final=True)
        try:
            while b"\n" not in self._pending:
                readable.clear()
                waits = [asyncio.ensure_future(e.wait()) for e in (readable, *cancelled)]
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiting in waits:
                        waiting.cancel()
                if any(event.is_set() for event in cancelled):
                    return None
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    return self._take(final=True)
                self._pending += chunk
        finally:
            loop.remove_reader(self.fd)
        return self._take(final=False)

    def _take(self, *, final: bool) -> str | None:
        """Return the first pending line (at the end of stdin, what is left; None if nothing)."""
        line, newline, rest = bytes(self._pending).partition(b"\n")
        if not newline and final:
            self.ended = True
            if not line:
                return None
        self._pending = bytearray(rest)
        return line.decode(errors="replace").removesuffix("\r")


@contextlib.contextmanager
def no_echo(fd: int, hidden: bool) -> Iterator[None]:
    """Keep the terminal at `fd` from echoing what is typed, while `hidden` (a password)."""
    if not hidden:
        yield
        return
    saved = termios.tcgetattr(fd)
    quiet = list(saved)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSADRAIN, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
