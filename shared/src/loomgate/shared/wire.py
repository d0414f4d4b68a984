"""The wire contract: the JSON shapes the gateway sends and the translator reads, typed once.

docs/protocol.md describes each field; these TypedDicts are what both halves are checked against.
A key that is absent unless it applies lives in a `total=False` subclass of the shape.

Longer than 400 lines: it is the one contract, and splitting it would make each half import
several modules to check one reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict, get_args

StreamName = Literal["combined", "stdout", "stderr", "result", "traceback"]
STREAMS: tuple[StreamName, ...] = get_args(StreamName)
LineKind = Literal["stdout", "stderr", "result", "display", "error", "rich"]

ExecutionState = Literal[
    "running", "awaiting_input", "completed", "error", "interrupted", "killed", "died", "lost"
]
FINAL_STATES: frozenset[ExecutionState] = frozenset(
    {"completed", "error", "interrupted", "killed", "died", "lost"}
)
RUNNING_STATES: frozenset[ExecutionState] = frozenset({"running", "awaiting_input"})
GatewayMode = Literal["gateway", "extension"]
# A kernel's state: while its process is not up, where the process is in its life; once it is up,
# whether it runs a cell. (The kernel event's phase calls `gone` "stopped".)
ProcessState = Literal["starting", "restarting", "dead", "gone"]
KernelState = Literal[ProcessState, "idle", "busy", "awaiting_input"]
Lifetime = Literal["persistent", "conversation"]
LIFETIMES: tuple[Lifetime, ...] = get_args(Lifetime)
Source = Literal["loomgate", "other"]
Returned = Literal["final", "input", "silent", "timeout"]
SearchMode = Literal["auto", "literal", "regex"]
SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)
# How a search read its query: "auto" reads one with regex syntax both ways.
SearchReading = Literal["literal", "regex", "literal or regex"]
Marker = Literal["M", "C"]

# -- lines ------------------------------------------------------------------------------------


class _LineBase(TypedDict):
    n: int
    text: str


class Line(_LineBase, total=False):
    """One numbered line of a stream; `kind` is absent in stdout and stderr."""

    kind: LineKind
    start: Literal[True]  # the first line of a result, display or error block
    partial: Literal[True]  # the unfinished last line of a live stream
    clipped: int  # characters cut by max_chars


class OutputView(TypedDict):
    """The head and tail of an execution's `combined` stream, as asked for with head/tail."""

    total: int
    head: list[Line]
    tail: list[Line]
    omitted: int


# -- executions -------------------------------------------------------------------------------


class ErrorInfo(TypedDict):
    """The exception an execution raised."""

    name: str
    value: str


class InputRequest(TypedDict):
    """A pending input() or getpass()."""

    prompt: str
    password: bool


# What ended a kernel's process: it exited (its code in `reason`), a signal killed it, its
# sandbox's memory limit did, it stopped answering, or its status is not known (a process this
# gateway took back from an earlier one, or an upstream's kernel).
DeathCause = Literal["exit", "signal", "memory_limit", "no_answer", "unknown"]


class _DeathBase(TypedDict):
    reason: str
    restarted: bool


class Death(_DeathBase, total=False):
    """How the kernel process died under an execution (`cause` for code, `reason` for people and
    models), and whether it was restarted; `cause` is absent from records before it."""

    cause: DeathCause


class Unstored(TypedDict):
    """Output the disk refused: from which `combined` line on, and why."""

    reason: str
    from_line: int


class _GapBase(TypedDict):
    after_line: int
    since: float
    until: float


# Who dropped output: the kernel (its publisher), or the upstream server between it and us.
DroppedBy = Literal["kernel", "upstream"]


class Gap(_GapBase, total=False):
    """Output that may be missing: after `combined` line `after_line`, between two times.

    No gateway listened in between (it was down; the kernel went on and was taken back), or,
    with `by`, output was dropped: by the kernel, `dropped` of its messages (its IOPub
    publisher, which loomgate cannot tune, could not keep up), or by the upstream server (its
    IOPub rate limit; `dropped` 0: it does not say how many).
    """

    dropped: int
    by: DroppedBy


class StreamSize(TypedDict):
    """How much one stream holds."""

    lines: int
    bytes: int


class RichEntry(TypedDict):
    """Where a rich (non-text) output sits in `combined`, and what it holds."""

    index: int
    line: int
    mimetypes: list[str]
    bytes: int
    result: bool


class _ExecutionBase(TypedDict):
    kernel_id: str
    number: int
    state: ExecutionState
    source: Source
    client: str | None
    code: str
    started: float
    finished: float | None
    elapsed: float
    error: ErrorInfo | None
    input: InputRequest | None
    died: Death | None
    note: str | None
    unstored: Unstored | None
    gaps: list[Gap]
    last_output: float
    silent_for: float
    streams: dict[StreamName, StreamSize]
    rich: list[RichEntry]


class Execution(_ExecutionBase, total=False):
    """An execution's summary; `output` only when head or tail lines were asked for;
    `sandbox_failure` only when the cell failed on a rule of its kernel's sandbox."""

    output: OutputView
    sandbox_failure: SandboxFailure


class ExecutionReply(TypedDict):
    """A submit or an execution status (after its long-poll): the summary and why it returned."""

    execution: Execution
    returned: Returned


class ExecutionOnly(TypedDict):
    """An interrupt or an input answer: the execution it acted on."""

    execution: Execution


class InterruptRequest(TypedDict, total=False):
    """The body of an interrupt: the execution it is meant for (refused if another runs)."""

    execution: int


class ExecutionList(TypedDict):
    """Executions of one kernel, oldest first."""

    executions: list[Execution]


class StreamRead(TypedDict):
    """A line range of one stream."""

    number: int
    state: ExecutionState
    stream: StreamName
    total: int
    range: str
    first: int
    last: int
    truncated: bool
    lines: list[Line]


class RichBundle(RichEntry):
    """One rich output's MIME bundle, with the execution it belongs to."""

    number: int
    data: dict[str, object]
    metadata: dict[str, object]


class Notebook(TypedDict):
    """A kernel's records as an nbformat 4 notebook (docs/protocol.md maps record to cell);
    its cells and metadata are nbformat's, with loomgate's under their `loomgate` keys."""

    nbformat: int
    nbformat_minor: int
    metadata: dict[str, Any]
    cells: list[dict[str, Any]]


class ColouredTraceback(TypedDict):
    """An execution's traceback as the kernel coloured it (ANSI escapes kept)."""

    number: int
    text: str


# -- search -----------------------------------------------------------------------------------


class SearchLine(TypedDict):
    """A matching (M) or context (C) line."""

    n: int
    text: str
    marker: Marker


class SearchGroup(TypedDict):
    """A run of adjacent lines of one execution."""

    execution: int
    lines: list[SearchLine]


class SearchReply(TypedDict):
    """Matches of one search; `mode` is the mode actually used."""

    query: str
    mode: SearchReading
    stream: StreamName
    matches: int
    truncated: bool
    groups: list[SearchGroup]
    searched: int
    execution: int | None  # the one execution searched; None for execution=all


# -- kernels ----------------------------------------------------------------------------------


# skipped: the kernel cannot run the part (another language, or not an IPython shell)
SetupState = Literal["ok", "failed", "unfinished", "skipped"]


class _NamedCode(TypedDict):
    name: str
    code: str


class SetupPart(_NamedCode, total=False):
    """Code a kernel runs silently after every start (no number, no record): startup.py,
    inspectors, `startup.sh`. A part that catches its own failure reports it by setting
    `get_ipython()._loomgate_setup_failure` to the text to show. `runs_in` says which kernels
    run it: "ipython" (IPython shells; the default) or a file extension (".sh": kernels whose
    language_info has it); the others skip it, or, for a `required` part, refuse the setup."""

    runs_in: str
    required: bool


class SetupResult(TypedDict):
    """How one setup part ran in the kernel's current process."""

    name: str
    # unfinished: still running when the wait ended (cells queue behind it); skipped: the
    # kernel cannot run it (`failure` says why)
    state: SetupState
    output: str  # what it printed, clipped
    failure: str | None  # its traceback, when it failed


class Setup(TypedDict):
    """A kernel's setup: the names of its parts, and how they ran in the current process."""

    parts: list[str]
    results: list[SetupResult]


class SetupReply(TypedDict):
    """The answer to a setup registration."""

    setup: Setup
    ran: bool  # False: these parts had already run in this process, unchanged


class Kernel(TypedDict):
    """A kernel as the gateway knows it, live or gone."""

    id: str
    name: str | None
    kernel_spec: str | None
    lifetime: Lifetime
    state: KernelState
    alive: bool
    current_execution: int | None
    executions: int
    last_execution: int | None
    last_activity: float | None
    connections: int
    holders: int
    held_by: list[str]
    # When the gateway stops it unless a holder comes back (a conversation kernel nobody holds:
    # the end of its grace period; once past, it is stopped when its running cell ends; a cap on
    # unheld conversation kernels may stop it sooner); None for any other kernel.
    stops_at: float | None
    cwd: str | None
    # The notebooks and consoles (Jupyter session paths) that use the kernel; for a gone kernel,
    # the last ones known.
    paths: list[str]
    created: float | None
    ended: float | None
    # Why a gone kernel is gone when nobody stopped it (its process died while the gateway was
    # down, its start failed), or why it is not taken back yet; None for a stopped kernel.
    end_reason: str | None
    # When loomgate began recording a kernel it did not start (one already running on an
    # upstream): its earlier cells have no records. None for a kernel loomgate started.
    attached: float | None
    implementation: str
    # Its language_info's name ("python", "bash", "typescript"); "" until it has answered.
    language: str
    setup: Setup
    # The sandbox profile it runs under, fixed for its life; None for a kernel loomgate did not
    # start (attached to, on an upstream, or started before sandboxes existed).
    sandbox: Sandbox | None
    # Whether a model (through MCP) may use it: its profile was at least as strict as the
    # gateway's default when it started, or the person opened it to agents.
    open_to_agents: bool
    # Its checkpoints, in the order they were taken (none for a gone kernel).
    checkpoints: list[Checkpoint]
    # What it was forked from (None: not a fork).
    forked_from: ForkedFrom | None


class ForkedFrom(TypedDict):
    """A fork's origin: the kernel, and its checkpoint (None: its live state) after In [after];
    `lacks`: what the copy did not carry, in sentences (absent from a gateway before it)."""

    kernel: str
    name: str | None
    checkpoint: str | None
    after: int
    lacks: list[str]


class Checkpoint(TypedDict):
    """A frozen copy of a kernel's state, kept under a name."""

    name: str
    after: int  # the latest execution number when it was taken: the state after In [after]
    created: float
    held: int | None  # bytes of memory it alone holds (where the kernel's state since differs)


SandboxRule = Literal[
    "hidden", "read_only", "protected", "own_tmp", "network", "memory", "processes"
]
SANDBOX_RULES: tuple[SandboxRule, ...] = get_args(SandboxRule)


class Sandbox(TypedDict):
    """A kernel's sandbox: its profile's name and its rules made concrete for that kernel."""

    profile: str  # "none": not confined
    writable: list[str]  # absolute paths it may write in (besides its own temp dir)
    hidden: list[str]  # absolute paths it cannot read
    # As sandbox.toml writes it: true (every public address), false, "host", or the patterns.
    network: bool | str | list[str]
    memory: int | None  # bytes; None: no limit
    processes: int | None  # None: no limit
    # How the OS enforces it here, e.g. "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes,
    # cgroup v1"; "" for none.
    mechanism: str
    # What that mechanism cannot give this kernel ("its own /tmp", …): [] when nothing.
    lacks: list[str]
    # The kernel's own dir `pip install` installs into (first on its sys.path, kept for its
    # life); None where pip is left as it is. Absent from records before packages dirs.
    packages: str | None


class SandboxFailure(TypedDict):
    """The sandbox rule a failed cell ran into, so the model stops retrying."""

    rule: SandboxRule
    profile: str
    # The path the rule concerns, when there is one; for `network`, the destination refused.
    path: str | None


class KernelReply(TypedDict):
    """One kernel."""

    kernel: Kernel


class KernelCreated(TypedDict):
    """A create-or-get: the kernel, and whether it was started for this request."""

    kernel: Kernel
    created: bool


class UpstreamKernel(TypedDict):
    """A kernel running on the upstream (upstream mode) that this gateway does not record:
    started there by someone else; a reference to its id attaches it."""

    id: str
    kernel_spec: str
    state: str  # the upstream's execution_state
    connections: int


class KernelList(TypedDict):
    """A gateway's kernels; in upstream mode also the upstream's kernels not attached here
    ([] otherwise, or when the upstream does not list its kernels)."""

    kernels: list[Kernel]
    unattached: list[UpstreamKernel]


class ResetReply(TypedDict):
    """A reset: the kernel once its new process is ready, and the execution it killed."""

    kernel: Kernel
    killed: Execution | None


class CheckpointReply(TypedDict):
    """A checkpoint just taken, its kernel, and what a copy of the kernel does not carry (each
    in a sentence: threads other than the kernel's own)."""

    checkpoint: Checkpoint
    kernel: Kernel
    lacks: list[str]


class CheckpointsReply(TypedDict):
    """A kernel's checkpoints."""

    checkpoints: list[Checkpoint]


class RollbackReply(TypedDict):
    """A rollback: the kernel once its state is the checkpoint's, and the checkpoint."""

    kernel: Kernel
    checkpoint: Checkpoint


class Info(TypedDict):
    """What a gateway says of itself (so a client can tell it from a stock Jupyter server)."""

    service: Literal["loomgate"]
    version: str
    # "gateway": loomgate's own resident server; "extension": an extension of someone's Jupyter
    # server (JupyterLab, Notebook), whose kernels are the person's.
    mode: GatewayMode
    protocol: int
    capabilities: list[str]
    pid: int
    started: float
    kernel_specs: list[str]
    default_kernel_spec: str
    conversation_grace_seconds: float
    prewarm: int
    prewarmed: list[PooledKernel]
    # Upstream mode: the Jupyter server the kernels run on, and why it cannot be used now
    # (None while it answers). Both None for a gateway whose kernels are its own processes.
    upstream: str | None
    upstream_error: str | None
    # The profile kernels created through loomgate get, and every profile this gateway knows
    # (None and [] for a gateway whose kernels run on an upstream: it confines none of them).
    sandbox_default: str | None
    sandbox_profiles: list[str]
    # The mechanism confining this gateway's kernels (None: none works here, or upstream mode),
    # what it cannot give them, and why each stronger mechanism is not used (or none at all).
    sandbox_mechanism: str | None
    sandbox_lacks: list[str]
    sandbox_refused: list[str]


class MonitorAccess(TypedDict):
    """The read-only token that opens a gateway's monitor page (None: it has none, as a Jupyter
    server's extension has not); answered only to the full token."""

    monitor_token: str | None


class PooledKernel(TypedDict):
    """A prewarmed kernel: started, idle, no one's yet (it is in no kernel list)."""

    # Its pool: what a new kernel must ask for to be given it.
    kernel_spec: str
    sandbox: str | None  # its profile (None: an upstream's kernel, which loomgate never confines)
    cwd: str | None  # a confined one's directory, fixed at its start (None: moves when claimed)
    # The kernel's own process (the one running the kernel command, inside its sandbox; None
    # once it has ended) and its resident memory (None where the system does not tell).
    pid: int | None
    rss_bytes: int | None
    launched_pid: int | None  # the process the gateway started: bubblewrap, for a confined one


# The stable code of a gateway's refusal (the HTTP status says the same coarser).
ErrorCode = Literal[
    "bad_request",  # 400: malformed input (a range, a regex, a name, an argument)
    "ambiguous",  # 400: a kernel reference that matches more than one kernel
    "not_found",  # 404: an unknown kernel, execution, stream or rich output
    "busy",  # 409: the kernel runs an execution; submissions are refused, never queued
    "conflict",  # 409: the request does not fit the state (nothing to interrupt, …)
    "forbidden",  # 403: a model's request to run less confined than the person decided
    "unavailable",  # 503: the kernel is starting, restarting, dead or did not answer
    "storage_failed",  # 507: the disk refuses the writes a record needs
    "internal",  # 500: a fault of the gateway's own
]
ERROR_CODES: tuple[ErrorCode, ...] = get_args(ErrorCode)


def refusal_code(answer: Mapping[str, object]) -> ErrorCode | None:
    """Return the code of a refusal answer (None when its `error` is none of ERROR_CODES)."""
    return next((code for code in ERROR_CODES if code == answer.get("error")), None)


class Refusal(TypedDict):
    """An error answer: a stable code and one sentence (details vary by code)."""

    error: ErrorCode
    message: str


# A request made for a model (the MCP translator's) carries this header, set to "1"; the gateway
# then refuses what a model may not do (a kernel not open to agents), whoever holds the token.
AGENT_HEADER = "Loomgate-Agent"


# -- the rpc websocket (GET /rpc) -------------------------------------------------------------

RpcMethod = Literal["GET", "POST", "PUT", "DELETE"]
RPC_METHODS: tuple[RpcMethod, ...] = get_args(RpcMethod)


class _RpcCallBase(TypedDict):
    id: int
    method: RpcMethod
    path: str  # relative to /api/loomgate/, as HTTP's: "kernels/K/executions"


class RpcCall(_RpcCallBase, total=False):
    """One request over the rpc websocket: any JSON endpoint's method, path, query and body."""

    query: dict[str, str]
    body: dict[str, Any]


class RpcAnswer(TypedDict):
    """The answer to an rpc call: the status and body its HTTP request would have had."""

    id: int
    status: int
    body: dict[str, Any]
