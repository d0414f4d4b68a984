"""The route table of loomgate's JSON endpoints: each path under /api/loomgate/, the endpoint of
each of its methods, and whether the monitor's credential may read it. HTTP mounts one handler
per route from it (handlers/routes.py); the rpc websocket dispatches its calls by it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from tornado import web

from loomgate.gateway.export.notebook import MEDIA_TYPE, notebook_file
from loomgate.gateway.handlers import checkpoints, executions, kernels, monitor, notebook
from loomgate.gateway.handlers.answers import Endpoint

SEGMENT = re.compile(r"\{(\w+)\}")  # a path argument in a route's name: {ref}
NONE: frozenset[str] = frozenset()  # a body that takes no field


@dataclass(frozen=True)
class FileAnswer:
    """A route whose HTTP answer is a file: its media type, and its text from the answer's
    JSON (the rpc websocket carries the JSON as it is)."""

    media_type: str
    text: Callable[[Mapping[str, object]], str]


@dataclass(frozen=True)
class Route:
    """One path under /api/loomgate/ (`name`, with `{arg}` for a path argument), its endpoint
    per method, and the name of the HTTP handler class made for it."""

    name: str
    handler: str
    endpoints: Mapping[str, Endpoint]
    monitor_readable: bool = False  # whether the monitor credential may GET it (monitor/access)
    # The fields the body of each of its POST and PUT methods takes (any other is refused).
    takes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    file: FileAnswer | None = None  # over HTTP, its answer is that file; refusals stay JSON
    pattern: str = field(init=False)  # the name as tornado's regex, `[^/]+` per argument
    segments: tuple[str | None, ...] = field(init=False, repr=False)  # None: an argument
    arguments: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        parts = self.name.split("/")
        found = [SEGMENT.fullmatch(part) for part in parts]
        object.__setattr__(self, "pattern", SEGMENT.sub(r"(?P<\1>[^/]+)", self.name))
        object.__setattr__(
            self, "segments", tuple(None if m else p for m, p in zip(found, parts, strict=True))
        )
        object.__setattr__(self, "arguments", tuple(m.group(1) for m in found if m))

    def match(self, parts: list[str]) -> dict[str, str] | None:
        """Return the path arguments of a path split at its slashes if it is this route's
        (as its tornado pattern matches: one non-empty segment per argument), else None."""
        arguments: dict[str, str] = {}
        names = iter(self.arguments)
        for literal, part in zip(self.segments, parts, strict=True):
            if literal is None:
                if not part:
                    return None
                name = next(names)
                arguments[name] = path_argument(name, part) if "%" in part else part
            elif literal != part:
                return None
        return arguments


ROUTES: tuple[Route, ...] = (
    Route("info", "InfoHandler", {"GET": kernels.info}, monitor_readable=True),
    Route(
        "kernels",
        "KernelsHandler",
        {"GET": kernels.list_kernels, "POST": kernels.create_kernel},
        monitor_readable=True,
        takes={"POST": kernels.CREATE_FIELDS},
    ),
    Route(
        "kernels/{ref}",
        "KernelHandler",
        {"GET": kernels.get_kernel, "DELETE": kernels.stop_kernel},
        monitor_readable=True,
    ),
    Route(
        "kernels/{ref}/interrupt",
        "InterruptHandler",
        {"POST": kernels.interrupt},
        takes={"POST": frozenset({"execution"})},
    ),
    Route("kernels/{ref}/reset", "ResetHandler", {"POST": kernels.reset}, takes={"POST": NONE}),
    Route(
        "kernels/{ref}/checkpoints",
        "CheckpointsHandler",
        {"GET": checkpoints.listed, "POST": checkpoints.take},
        monitor_readable=True,
        takes={"POST": frozenset({"name"})},
    ),
    Route(
        "kernels/{ref}/checkpoints/{name}",
        "CheckpointHandler",
        {"DELETE": checkpoints.drop},
    ),
    Route(
        "kernels/{ref}/rollback",
        "RollbackHandler",
        {"POST": checkpoints.rollback},
        takes={"POST": frozenset({"to"})},
    ),
    Route(
        "kernels/{ref}/agents",
        "AgentsHandler",
        {"PUT": kernels.open_to_agents},
        takes={"PUT": frozenset({"open"})},
    ),
    Route(
        "kernels/{ref}/setup",
        "SetupHandler",
        {"PUT": kernels.setup},
        takes={"PUT": frozenset({"parts", "wait"})},
    ),
    Route(
        "kernels/{ref}/executions",
        "ExecutionsHandler",
        {"GET": executions.list_executions, "POST": executions.submit},
        monitor_readable=True,
        takes={"POST": executions.SUBMIT_FIELDS},
    ),
    Route(
        "kernels/{ref}/executions/{selector}",
        "ExecutionHandler",
        {"GET": executions.follow},
        monitor_readable=True,
    ),
    Route(
        "kernels/{ref}/executions/{selector}/streams/{stream}",
        "StreamHandler",
        {"GET": executions.read_stream},
        monitor_readable=True,
    ),
    Route(
        "kernels/{ref}/executions/{selector}/rich/{index}",
        "RichHandler",
        {"GET": executions.rich},
        monitor_readable=True,
    ),
    Route(
        "kernels/{ref}/executions/{selector}/traceback",
        "TracebackHandler",
        {"GET": executions.traceback},
        monitor_readable=True,
    ),
    Route(
        "kernels/{ref}/executions/{selector}/input",
        "InputHandler",
        {"POST": executions.answer_input},
        takes={"POST": frozenset({"value"})},
    ),
    Route(
        "kernels/{ref}/search", "SearchHandler", {"GET": executions.search}, monitor_readable=True
    ),
    Route(
        "kernels/{ref}/notebook",
        "NotebookHandler",
        {"GET": notebook.export_notebook},
        monitor_readable=True,
        file=FileAnswer(MEDIA_TYPE, notebook_file),
    ),
    Route(
        "tool-calls",
        "ToolCallsHandler",
        {"GET": monitor.list_tool_calls, "POST": monitor.report_tool_calls},
        monitor_readable=True,
        takes={"POST": frozenset({"tool_calls"})},
    ),
    # The monitor token, to the full token only (not monitor-readable).
    Route("monitor", "MonitorAccessHandler", {"GET": monitor.monitor_access}),
    Route(
        "shutdown",
        "ShutdownHandler",
        {"POST": kernels.shutdown},
        takes={"POST": frozenset({"kernels"})},
    ),
)
BY_NAME: dict[str, Route] = {route.name: route for route in ROUTES}
# The routes a path may be, by its number of segments and its last one (None: an argument).
BY_SHAPE: dict[tuple[int, str | None], list[Route]] = {}
for _route in ROUTES:
    BY_SHAPE.setdefault((len(_route.segments), _route.segments[-1]), []).append(_route)


def path_argument(name: str, raw: str) -> str:
    """Return path argument `name` percent-decoded, as tornado decodes those of a URL."""
    value = unquote_to_bytes(raw)
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise web.HTTPError(400, f"Invalid unicode in {name}: {value[:40]!r}") from None


def find(method: str, path: str) -> tuple[Route, Endpoint, dict[str, str]]:
    """Return the route `path` (relative to /api/loomgate/) is, `method`'s endpoint on it and
    the path's arguments; HTTPError 404 (no such route) or 405 (not that method), as HTTP."""
    parts = path.split("/")
    length = len(parts)
    for shape in ((length, parts[-1]), (length, None)):
        for route in BY_SHAPE.get(shape, ()):
            arguments = route.match(parts)
            if arguments is not None:
                endpoint = route.endpoints.get(method)
                if endpoint is None:
                    raise web.HTTPError(405)
                return route, endpoint, arguments
    raise web.HTTPError(404)
