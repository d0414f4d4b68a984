"""What a kernel's event stream says it runs: its current execution and each running one's last
output line."""

from __future__ import annotations

from loomgate.shared.events import Event
from loomgate.shared.wire import FINAL_STATES


class KernelActivity:
    """The execution one kernel runs now and the last line each running one printed, as its
    event stream tells them (a hello, on every connection, says afresh which one runs)."""

    def __init__(self) -> None:
        self.current: int | None = None
        self._last_lines: dict[int, str] = {}  # running executions' only: ended ones are dropped

    def __call__(self, event: Event) -> None:
        """Take in one event of the kernel's stream (a hold's `on_event`)."""
        if event["event"] == "hello":
            kernel = event["kernel"]
            current = kernel["current_execution"] if kernel is not None else None
            self._last_lines = {n: line for n, line in self._last_lines.items() if n == current}
            self.current = current
        elif event["event"] == "execution":
            execution = event["execution"]
            number = execution["number"]
            if execution["state"] in FINAL_STATES:
                self._last_lines.pop(number, None)
                if self.current == number:
                    self.current = None
            else:
                self.current = number
        elif event["event"] == "output":
            if event["number"] == self.current:
                self._last_lines[event["number"]] = event["last_line"]
        elif event["event"] == "kernel" and event["phase"] in ("restarting", "dead", "stopped"):
            self.current = None  # restarting, dead or stopped: nothing runs on
            self._last_lines.clear()

    def last_line(self, number: int) -> str:
        """Return the last output line execution `number` printed while running ("" if none
        was seen)."""
        return self._last_lines.get(number, "")
