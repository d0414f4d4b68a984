"""A typed client of one loomgate gateway: each endpoint of docs/protocol.md as a method."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from loomgate.shared import wire
from loomgate.shared.events import ToolCallReport
from loomgate.translator.client.errors import ProtocolError
from loomgate.translator.client.session import API_PREFIX, GatewaySession, answer_as, drop_none

# A submit may wait up to 30 s for the kernel to start the cell before its own wait begins.
SUBMIT_START_MARGIN = 30.0


def quoted(ref: str | int) -> str:
    """Return a kernel reference or execution selector as one URL path segment."""
    return quote(str(ref), safe="")


def runs_under(kernel: wire.Kernel, profile: str) -> bool:
    """Return whether a kernel runs under the sandbox `profile` (`none`: also one that loomgate
    did not sandbox, which is as unconfined)."""
    sandbox = kernel.get("sandbox")  # absent from a gateway before sandboxes
    if sandbox is None:
        return profile == "none"
    return sandbox["profile"] == profile


def wait_params(
    wait: float, until_silent: float | None, head: int, tail: int, max_chars: int | None
) -> dict[str, Any]:
    """Return the long-poll and output arguments shared by submit and execution requests."""
    return {
        "wait": wait,
        "until_silent": until_silent,
        "head": head,
        "tail": tail,
        "max_chars": max_chars,
    }


class GatewayClient(GatewaySession):
    """The endpoints of one gateway, each returning the wire shape it answers with."""

    # Whether it is loomgate's own gateway or an extension in someone's Jupyter (known once
    # `info` has answered, which opening a client checks).
    mode: wire.GatewayMode = "gateway"
    # What it can do (info's capabilities), known once `info` has answered.
    capabilities: tuple[str, ...] = ()

    # -- gateway and kernels -----------------------------------------------------------------

    async def info(self) -> wire.Info:
        """Return the gateway's info (service, version, protocol, capabilities, kernel specs)."""
        data = await self.request("GET", "info")
        if data.get("service") != "loomgate":
            raise ProtocolError(
                f"{self.url} answers /{API_PREFIX}info but is not a loomgate gateway"
            )
        info = answer_as(wire.Info, data)
        self.mode = info["mode"]
        self.capabilities = tuple(info["capabilities"])
        return info

    async def list_kernels(self, all: bool = False) -> list[wire.Kernel]:
        """Return the live kernels, with `all` also gone ones whose records remain."""
        return (await self.kernel_list(all))["kernels"]

    async def kernel_list(self, all: bool = False) -> wire.KernelList:
        """Return the kernels (with `all` also gone ones), and in upstream mode the upstream's
        kernels not attached here."""
        params = {"all": "true" if all else None}
        return await self.request_as(wire.KernelList, "GET", "kernels", params=params)

    async def create_kernel(
        self,
        name: str | None = None,
        kernel_spec: str | None = None,
        lifetime: wire.Lifetime = "persistent",
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        sandbox: str | None = None,
        stricter_only: bool | None = None,
        fork: str | None = None,
    ) -> wire.KernelCreated:
        """Return the live kernel called `name`, or a new one, and whether it was created; a new
        one runs under the profile `sandbox` (default: the gateway's), which `stricter_only`
        refuses (Forbidden) unless it is at least as strict as the gateway's default; with `fork`
        ("K" or "K@CHECKPOINT"), a new kernel that starts as a copy of that state."""
        body = drop_none(
            {
                "name": name,
                "kernel_spec": kernel_spec,
                "lifetime": lifetime,
                "cwd": cwd,
                "env": dict(env) if env is not None else None,
                "sandbox": sandbox,
                "stricter_only": stricter_only,
                "fork": fork,
            }
        )
        return await self.request_as(wire.KernelCreated, "POST", "kernels", body=body)

    async def get_kernel(self, ref: str) -> wire.Kernel:
        """Return the kernel `ref` names (live or gone)."""
        data = await self.request_as(wire.KernelReply, "GET", f"kernels/{quoted(ref)}")
        return data["kernel"]

    async def open_to_agents(self, ref: str, opened: bool = True) -> wire.Kernel:
        """Return the kernel `ref` names once it is open to agents (`opened`), or closed."""
        path = f"kernels/{quoted(ref)}/agents"
        data = await self.request_as(wire.KernelReply, "PUT", path, body={"open": opened})
        return data["kernel"]

    async def stop_kernel(self, ref: str) -> wire.Kernel:
        """Return the gone model of the kernel `ref` names, after stopping it."""
        data = await self.request_as(wire.KernelReply, "DELETE", f"kernels/{quoted(ref)}")
        return data["kernel"]

    async def interrupt(self, ref: str, number: int | None = None) -> wire.Execution:
        """Return the execution interrupted, as it was when the interrupt was sent; with
        `number`, only that one (Conflict when another one runs, or none)."""
        body = None if number is None else wire.InterruptRequest(execution=number)
        data = await self.request_as(
            wire.ExecutionOnly, "POST", f"kernels/{quoted(ref)}/interrupt", body=body
        )
        return data["execution"]

    async def reset(self, ref: str) -> wire.ResetReply:
        """Return the kernel once its new process is ready, and the execution it killed."""
        return await self.request_as(wire.ResetReply, "POST", f"kernels/{quoted(ref)}/reset")

    async def checkpoint(self, ref: str, name: str | None = None) -> wire.CheckpointReply:
        """Keep a frozen copy of the kernel's state under `name` (by default after-N)."""
        body = {"name": name} if name is not None else {}
        return await self.request_as(
            wire.CheckpointReply, "POST", f"kernels/{quoted(ref)}/checkpoints", body=body
        )

    async def checkpoints(self, ref: str) -> wire.CheckpointsReply:
        """Return the kernel's checkpoints."""
        return await self.request_as(
            wire.CheckpointsReply, "GET", f"kernels/{quoted(ref)}/checkpoints"
        )

    async def drop_checkpoint(self, ref: str, name: str) -> wire.CheckpointsReply:
        """End the kernel's checkpoint `name`; return those left."""
        path = f"kernels/{quoted(ref)}/checkpoints/{quoted(name)}"
        return await self.request_as(wire.CheckpointsReply, "DELETE", path)

    async def rollback(self, ref: str, to: str) -> wire.RollbackReply:
        """Make the kernel's state the checkpoint `to`'s again; return the kernel once ready."""
        return await self.request_as(
            wire.RollbackReply, "POST", f"kernels/{quoted(ref)}/rollback", body={"to": to}
        )

    async def setup(
        self, ref: str, parts: list[wire.SetupPart], *, wait: float = 60.0
    ) -> wire.SetupReply:
        """Register the kernel's setup; it runs now (waiting up to `wait`) unless it already
        ran unchanged in the kernel's current process."""
        body = {"parts": parts, "wait": wait}
        data = await self.request_as(
            wire.SetupReply,
            "PUT",
            f"kernels/{quoted(ref)}/setup",
            body=body,
            read_timeout=wait + self.long_poll_margin(),
        )
        return data

    async def monitor_access(self) -> wire.MonitorAccess:
        """Return the token that opens the gateway's monitor page (refused to a monitor token)."""
        return await self.request_as(wire.MonitorAccess, "GET", "monitor")

    async def shutdown(self, *, keep_kernels: bool) -> None:
        """Ask the gateway to stop once it has answered, ending its kernels or keeping them."""
        await self.request("POST", "shutdown", body={"kernels": "keep" if keep_kernels else "stop"})

    # -- executions --------------------------------------------------------------------------

    async def submit(
        self,
        ref: str,
        code: str,
        *,
        wait: float = 0,
        until_silent: float | None = None,
        head: int = 0,
        tail: int = 0,
        max_chars: int | None = None,
    ) -> wire.ExecutionReply:
        """Return a newly submitted cell's summary, after waiting up to `wait` s for its end."""
        body = drop_none(
            {
                "code": code,
                "client": self.client_label,
                **wait_params(wait, until_silent, head, tail, max_chars),
            }
        )
        data = await self.request_as(
            wire.ExecutionReply,
            "POST",
            f"kernels/{quoted(ref)}/executions",
            body=body,
            read_timeout=wait + SUBMIT_START_MARGIN + self.long_poll_margin(),
            hot=True,
        )
        return data

    async def execution(
        self,
        ref: str,
        selector: str | int = "current",
        *,
        wait: float = 0,
        until_silent: float | None = None,
        head: int = 0,
        tail: int = 0,
        max_chars: int | None = None,
    ) -> wire.ExecutionReply:
        """Return an execution's summary and why it returned, long-polling up to `wait` s."""
        data = await self.request_as(
            wire.ExecutionReply,
            "GET",
            f"kernels/{quoted(ref)}/executions/{quoted(selector)}",
            params=wait_params(wait, until_silent, head, tail, max_chars),
            read_timeout=wait + self.long_poll_margin(),
            hot=True,
        )
        return data

    async def executions(self, ref: str, since: int = 0, limit: int = 100) -> list[wire.Execution]:
        """Return the newest `limit` executions numbered above `since`, oldest first."""
        data = await self.request_as(
            wire.ExecutionList,
            "GET",
            f"kernels/{quoted(ref)}/executions",
            params={"since": since, "limit": limit},
        )
        return data["executions"]

    async def read(
        self,
        ref: str,
        selector: str | int,
        stream: wire.StreamName = "combined",
        lines: str | None = None,
        max_chars: int | None = None,
    ) -> wire.StreamRead:
        """Return a line range of one stream."""
        data = await self.request_as(
            wire.StreamRead,
            "GET",
            f"kernels/{quoted(ref)}/executions/{quoted(selector)}/streams/{quoted(stream)}",
            params={"lines": lines, "max_chars": max_chars},
        )
        return data

    async def rich(self, ref: str, selector: str | int, index: int) -> wire.RichBundle:
        """Return one rich output: its `rich` entry plus `data` and `metadata`."""
        data = await self.request_as(
            wire.RichBundle,
            "GET",
            f"kernels/{quoted(ref)}/executions/{quoted(selector)}/rich/{int(index)}",
        )
        return data

    async def traceback(self, ref: str, selector: str | int) -> wire.ColouredTraceback:
        """Return an execution's traceback with the kernel's ANSI colours (404: none)."""
        data = await self.request_as(
            wire.ColouredTraceback,
            "GET",
            f"kernels/{quoted(ref)}/executions/{quoted(selector)}/traceback",
        )
        return data

    async def send_input(self, ref: str, selector: str | int, value: str) -> wire.Execution:
        """Return the execution after answering its pending input()."""
        data = await self.request_as(
            wire.ExecutionOnly,
            "POST",
            f"kernels/{quoted(ref)}/executions/{quoted(selector)}/input",
            body={"value": value},
        )
        return data["execution"]

    async def left_input(self, ref: str, number: int) -> None:
        """Return once execution `number` no longer waits for input (it was interrupted, say),
        as the kernel's event stream tells: a long poll answers at once while it waits."""
        async with self.event_stream(ref, hold=False) as events:
            async for event in events:
                if event["event"] == "hello":  # subscribed: no change after this is missed
                    execution = (await self.execution(ref, number))["execution"]
                    if execution["state"] != "awaiting_input":
                        return
                elif event["event"] == "execution":
                    changed = event["execution"]
                    if changed["number"] == number and changed["state"] != "awaiting_input":
                        return

    async def search(
        self,
        ref: str,
        query: str,
        *,
        selector: str | int = "current",
        stream: wire.StreamName = "combined",
        mode: wire.SearchMode = "auto",
        context: int = 0,
        ignore_case: bool = False,
        max_matches: int = 50,
    ) -> wire.SearchReply:
        """Return the lines matching `query` in one execution (`selector`), or in all of them
        ("all")."""
        params = {
            "query": query,
            "execution": str(selector),
            "stream": stream,
            "mode": mode,
            "context": context,
            "ignore_case": "true" if ignore_case else "false",
            "max_matches": max_matches,
        }
        data = await self.request_as(
            wire.SearchReply, "GET", f"kernels/{quoted(ref)}/search", params=params
        )
        return data

    async def notebook(
        self,
        ref: str,
        *,
        executions: str | None = None,
        source: wire.Source | None = None,
        client: str | None = None,
        max_lines: int | None = None,
    ) -> wire.Notebook:
        """Return the kernel's records as a notebook: the executions numbered in `executions`
        (`a:b`, `-N:` the last N), run by `source` and by `client` (a label, or its first word),
        each output beyond `max_lines` lines kept as its head and tail."""
        params = {
            "executions": executions,
            "source": source,
            "client": client,
            "max_lines": max_lines,
        }
        return await self.request_as(
            wire.Notebook, "GET", f"kernels/{quoted(ref)}/notebook", params=params
        )

    # -- the monitor -------------------------------------------------------------------------

    async def report_tool_calls(self, calls: list[ToolCallReport]) -> None:
        """Tell the gateway which tool calls this conversation answered (for the monitor)."""
        await self.request("POST", "tool-calls", body={"tool_calls": calls}, read_timeout=5)
