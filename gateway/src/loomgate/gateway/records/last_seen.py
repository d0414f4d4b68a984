"""When a gateway last listened to its kernels: one small file a timer rewrites, off the cell path.

Every BEAT_SECONDS the gateway replaces `last-seen.json` in its state dir with the time and the
ids of the kernels it follows. The next gateway reads it before it writes its own: a record
that ran while no gateway listened was seen running until then, and not beyond.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from loomgate.shared.paths import write_json_atomic

LAST_SEEN_FILE = "last-seen.json"
BEAT_SECONDS = 2.0


def read_last_seen(state_dir: Path) -> dict[str, float]:
    """Return, per kernel id, the last moment the previous gateway was known to listen to it
    (empty when no gateway left the file, or it cannot be read)."""
    try:
        written = json.loads((state_dir / LAST_SEEN_FILE).read_text("utf-8"))
        when = float(written["time"])
        return {str(kernel): when for kernel in written["kernels"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


class Heartbeat:
    """Rewrites `last-seen.json` every BEAT_SECONDS with the kernels `listening` returns."""

    def __init__(
        self, state_dir: Path, listening: Callable[[], Iterable[str]], log: logging.Logger
    ) -> None:
        self.path = state_dir / LAST_SEEN_FILE
        self.listening = listening
        self.log = log
        self._handle: asyncio.TimerHandle | None = None
        self._failing = False

    def start(self) -> None:
        """Beat now and every BEAT_SECONDS until `stop`."""
        self._write()
        self._handle = asyncio.get_running_loop().call_later(BEAT_SECONDS, self.start)

    def stop(self) -> None:
        """Beat a last time (the gateway lets go of its kernels now) and stop."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
            self._write()

    def _write(self) -> None:
        """Note that the gateway listens now (a refused write keeps the older, earlier time)."""
        try:
            write_json_atomic(self.path, {"time": time.time(), "kernels": sorted(self.listening())})
        except OSError as error:
            if not self._failing:
                self.log.warning("Cannot note when the gateway last listened: %s", error)
            self._failing = True
        else:
            self._failing = False
