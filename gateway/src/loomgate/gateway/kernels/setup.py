"""The code a kernel runs after every start (startup.py, inspectors): registered by its clients,
kept with its records, run silently (no number, no record), each part on its own."""

from __future__ import annotations

import ast
import asyncio
import contextlib
from typing import TYPE_CHECKING

from loomgate.gateway.kernels.kernel_kind import KernelKind
from loomgate.gateway.records.terminal_text import TerminalText
from loomgate.shared import wire

if TYPE_CHECKING:
    from loomgate.gateway.kernels.kernel_channels import KernelChannels, SilentRun
    from loomgate.gateway.records.store import RecordStore
    from loomgate.gateway.records.stored_meta import KeptSetup

# A part that catches its own failure leaves its text here; reading it also clears it.
FAILURE_EXPRESSION = "get_ipython().__dict__.pop('_loomgate_setup_failure', None)"
OUTPUT_LIMIT = 10_000  # characters of a part's printed output kept
SETUP_TIMEOUT = 120.0  # how long a start waits for its setup before the kernel is ready anyway


class KernelSetup:
    """One kernel's setup parts and how they ran in its current process (kept in kernel.json,
    so that a gateway taking the kernel back knows both)."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        kept: KeptSetup = store.meta.get("setup") or {"parts": [], "results": []}
        self.parts: list[wire.SetupPart] = list(kept.get("parts", []))
        self.results: list[wire.SetupResult] = list(kept.get("results", []))
        self._lock = asyncio.Lock()
        self._runs: list[SilentRun | None] = []  # None: a part this kernel skipped
        self._late: set[asyncio.Task[None]] = set()  # parts still running after the wait

    @property
    def running(self) -> bool:
        """Return whether a part is still running (a cell sent now would wait behind it)."""
        return any(run is not None and not run.idle.done() for run in self._runs)

    def model(self) -> wire.Setup:
        """Return the setup as the kernel's wire form shows it."""
        return wire.Setup(parts=[p["name"] for p in self.parts], results=list(self.results))

    async def register(
        self,
        parts: list[wire.SetupPart],
        channels: KernelChannels,
        kind: KernelKind,
        timeout: float,
    ) -> bool:
        """Make `parts` the kernel's setup and run them now unless they already ran in this
        process; return whether they ran. Sent at once, they run before any later cell; a part
        a kernel of this `kind` cannot run is skipped."""
        async with self._lock:
            if self._late:  # a part of an earlier run has not ended yet: let it, within `timeout`
                await asyncio.wait(self._late, timeout=timeout)
            if parts == self.parts and len(self.results) == len(parts):
                return False
            self.parts = list(parts)
            await self._run(channels, kind, timeout)
            return True

    async def run(
        self, channels: KernelChannels, kind: KernelKind, timeout: float = SETUP_TIMEOUT
    ) -> None:
        """Run the parts in a just-started process (nothing to do without parts)."""
        async with self._lock:
            for task in self._late:
                task.cancel()  # of the process before: their results are void
            self.results = []
            if self.parts:
                await self._run(channels, kind, timeout)
            else:
                self._save()

    async def _run(self, channels: KernelChannels, kind: KernelKind, timeout: float) -> None:
        # IPython shells report a part's own failure through FAILURE_EXPRESSION; a part in
        # another language fails by its reply alone.
        self._runs = [
            channels.send_silently(
                part["code"], {"failure": FAILURE_EXPRESSION} if kind.ipython else {}
            )
            if kind.runs(part)
            else None
            for part in self.parts
        ]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.results = []
        for index, (part, run) in enumerate(zip(self.parts, self._runs, strict=True)):
            if run is None:
                self.results.append(
                    wire.SetupResult(
                        name=part["name"], state="skipped", output="", failure=kind.skipped(part)
                    )
                )
                continue
            result = await outcome(part["name"], run, deadline - loop.time(), timeout)
            self.results.append(result)
            if result["state"] == "unfinished":
                task = loop.create_task(self._finish_late(index, part["name"], run))
                self._late.add(task)
                task.add_done_callback(self._late.discard)
        self._save()

    async def _finish_late(self, index: int, name: str, run: SilentRun) -> None:
        """Record how a part that outlived the wait ended, once it has."""
        result = await outcome(name, run, SETUP_TIMEOUT * 100, SETUP_TIMEOUT * 100)
        if index < len(self.results) and self.results[index]["name"] == name:
            self.results[index] = result
            self._save()

    def _save(self) -> None:
        self.store.meta["setup"] = {"parts": self.parts, "results": self.results}
        self.store.save()


async def outcome(name: str, run: SilentRun, timeout: float, waited: float) -> wire.SetupResult:
    """Return how one part's run ended, or that it was still running after `timeout` (the
    rest of a wait of `waited` seconds)."""
    try:
        reply, printed = await asyncio.wait_for(run.finished(), max(timeout, 0.0))
    except asyncio.TimeoutError:
        return wire.SetupResult(
            name=name,
            state="unfinished",
            output=clean("".join(run.output)),
            failure=f"still running after {waited:g} s; cells wait for it",
        )
    except ConnectionError as e:
        return wire.SetupResult(name=name, state="failed", output="", failure=str(e))
    content = reply["content"]
    failure: str | None = None
    if content.get("status") == "error":
        traceback = content.get("traceback") or [f"{content.get('ename')}: {content.get('evalue')}"]
        failure = clean("\n".join(traceback))
    else:
        failure = reported_failure(content.get("user_expressions") or {})
    return wire.SetupResult(
        name=name,
        state="failed" if failure else "ok",
        output=clean(printed),
        failure=failure,
    )


def reported_failure(expressions: dict[str, dict[str, object]]) -> str | None:
    """Return the failure text a part left for FAILURE_EXPRESSION, if any."""
    found = expressions.get("failure") or {}
    data = found.get("data") if isinstance(found, dict) else None
    shown = data.get("text/plain") if isinstance(data, dict) else None
    if not isinstance(shown, str):
        return None
    with contextlib.suppress(ValueError, SyntaxError):
        value = ast.literal_eval(shown)
        return clean(value) if isinstance(value, str) and value else None
    return clean(shown)


def clean(text: str) -> str:
    """Return terminal text as plain lines (ANSI colours gone), clipped to OUTPUT_LIMIT."""
    terminal = TerminalText()
    lines = terminal.feed(text) + terminal.finish()
    plain = "\n".join(lines).rstrip("\n")
    if len(plain) > OUTPUT_LIMIT:
        return plain[:OUTPUT_LIMIT] + f"\n…[{len(plain) - OUTPUT_LIMIT:,} more characters]"
    return plain
