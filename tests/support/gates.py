"""Gates: cells that block until the test opens them, so "still running" is a fact, not a race."""

from __future__ import annotations

from pathlib import Path


class Gate:
    """A file a cell waits for; the test creates it to let the cell go on."""

    def __init__(self, directory: Path, name: str = "gate") -> None:
        self.path = directory / name

    @property
    def wait(self) -> str:
        """Return one Python statement that blocks until the gate is opened."""
        return (
            f"while not __import__('os').path.exists({str(self.path)!r}):"
            " __import__('time').sleep(0.02)"
        )

    def open(self) -> None:
        """Let every cell waiting on this gate go on."""
        self.path.touch()
