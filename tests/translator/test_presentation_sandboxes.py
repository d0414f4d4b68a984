"""A kernel's sandbox as the model and the person read it, table-driven: the profile in a word
(status, connect, list_kernels), its rules, the line naming the rule a cell broke, and the
refusals of a looser or another profile."""

from __future__ import annotations

from typing import cast

import pytest

from loomgate.shared import wire
from loomgate.translator.output_view import CellOutput
from loomgate.translator.presentation import (
    Audience,
    cell_text,
    connected_note,
    looser_sandbox_refusal,
    mechanism_lines,
    render_cell,
    render_execution_status,
    render_kernel,
    render_kernels,
    sandbox_lines,
    sandbox_mismatch,
    sandbox_rule_line,
    sandbox_summary,
    unconfined_refusal,
)
from tests.support.wire_values import execution, failure, kernel, lines, sandbox

STRICT = sandbox(profile="strict", network=False)
NONE = sandbox(profile="none", writable=[], hidden=[], memory=None, processes=None, mechanism="")


@pytest.mark.parametrize(
    ("model", "summary"),
    [
        (sandbox(), "workspace"),
        (STRICT, "strict (no network)"),
        (NONE, "none"),
        (sandbox(profile="none", network=False), "none"),  # nothing to say it lacks
        (sandbox(profile="data", network=False), "data (no network)"),  # by its rules
        (sandbox(profile="data", network=["pypi.org"]), "data (pypi.org)"),
        (sandbox(profile="data", network=[]), "data (no network)"),  # a list of none
        (sandbox(profile="lan", network="host"), "lan (the host's network)"),
        (None, "not sandboxed by loomgate"),
    ],
)
def test_a_sandbox_in_a_few_words(model: wire.Sandbox | None, summary: str) -> None:
    assert sandbox_summary(model) == summary


RULES = [
    (
        "workspace: where it writes, how many hidden, its limits, how it is enforced",
        sandbox(),
        [
            "sandbox: workspace, enforced by bubblewrap, landlock, cgroup v1",
            "  writable: /home/p/proj and its own /tmp",
            "  hidden: 3 paths",
            "  network: every public address; memory: 4 GiB; processes: 512",
        ],
    ),
    (
        "strict, several writable places, no limits",
        sandbox(
            profile="strict",
            network=False,
            writable=["/home/p/proj", "/data"],
            hidden=["/home/p/.ssh"],
            memory=None,
            processes=None,
            mechanism="",
        ),
        [
            "sandbox: strict",
            "  writable: /home/p/proj, /data and its own /tmp",
            "  hidden: 1 path",
            "  network: no network; memory: no limit; processes: no limit",
        ],
    ),
    (
        "nothing writable but its own /tmp",
        sandbox(writable=[], processes=4096),
        [
            "sandbox: workspace, enforced by bubblewrap, landlock, cgroup v1",
            "  writable: only its own /tmp",
            "  hidden: 3 paths",
            "  network: every public address; memory: 4 GiB; processes: 4,096",
        ],
    ),
    ("none is not confined", NONE, ["sandbox: none (not confined)"]),
    ("a kernel loomgate did not start", None, ["sandbox: not sandboxed by loomgate"]),
]


@pytest.mark.parametrize(("case", "model", "expected"), RULES, ids=[c[0] for c in RULES])
def test_a_sandboxs_rules_in_status(
    case: str, model: wire.Sandbox | None, expected: list[str]
) -> None:
    assert sandbox_lines(model) == expected


def test_status_shows_the_sandbox_after_the_cwd() -> None:
    shown = render_kernel(kernel(cwd="/home/p/proj", sandbox=STRICT), gateway="local")
    assert shown.split("\n")[2:5] == [
        "cwd: /home/p/proj",
        "sandbox: strict, enforced by bubblewrap, landlock, cgroup v1",
        "  writable: /home/p/proj and its own /tmp",
    ]


def test_a_kernel_from_a_gateway_before_sandboxes_has_no_sandbox_key() -> None:
    old = kernel()
    del old["sandbox"]  # type: ignore[misc]
    assert "sandbox: not sandboxed by loomgate" in render_kernel(old, gateway="old")
    assert connected_note(old, "old", created=True) == (
        "Created kernel lab on old (2 executions so far)."
    )
    assert "sandbox" not in render_kernels([old], None, "old")


@pytest.mark.parametrize(
    ("model", "note"),
    [
        (sandbox(), "Created kernel lab on local (2 executions so far); sandbox: workspace."),
        (
            STRICT,
            "Created kernel lab on local (2 executions so far); sandbox: strict (no network).",
        ),
        (NONE, "Created kernel lab on local (2 executions so far); sandbox: none."),
        (None, "Created kernel lab on local (2 executions so far)."),
    ],
)
def test_connect_names_the_profile(model: wire.Sandbox | None, note: str) -> None:
    assert connected_note(kernel(sandbox=model), "local", created=True) == note


def test_the_kernel_list_has_a_sandbox_column_when_some_kernel_has_one() -> None:
    kernels = [
        kernel(id="aaaaaaaa-1", name="lab", sandbox=sandbox()),
        kernel(id="bbbbbbbb-2", name="tight", sandbox=STRICT),
        kernel(id="cccccccc-3", name="legacy", sandbox=None),
    ]
    table = render_kernels(kernels, "aaaaaaaa-1", "local", now=0.0).split("\n")
    assert table[1].split() == [
        "name",
        "id",
        "spec",
        "state",
        "lifetime",
        "runs",
        "idle",
        "conn",
        "sandbox",
    ]
    assert table[2].endswith("0     workspace")
    assert table[3].endswith("0     strict (no network)")
    assert table[4].endswith("0     -")
    # The mechanism in force, once (both kernels' is the same).
    assert table[5:] == ["sandboxes enforced by: bubblewrap, landlock, cgroup v1"]


def test_the_kernel_list_names_each_mechanism_its_kernels_run_under() -> None:
    kernels = [
        kernel(id="aaaaaaaa-1", sandbox=sandbox(mechanism="landlock only (ABI 4), rlimits")),
        kernel(id="bbbbbbbb-2", sandbox=sandbox()),  # an earlier gateway's choice
        kernel(id="cccccccc-3", sandbox=NONE),  # no mechanism: not named
    ]
    table = render_kernels(kernels, None, "local", now=0.0).split("\n")
    assert table[-1] == (
        "sandboxes enforced by: landlock only (ABI 4), rlimits | bubblewrap, landlock, cgroup v1"
    )


def test_the_kernel_list_has_no_sandbox_column_when_no_kernel_has_one() -> None:
    table = render_kernels([kernel(sandbox=None)], None, "jupyter:8888", now=0.0)
    assert "sandbox" not in table and "not sandboxed" not in table


RULE_LINES = [
    (
        "a read-only path names where it may write",
        failure("read_only", "/etc"),
        sandbox(),
        "Sandbox (workspace): /etc is not writable from this kernel; it may write in "
        "/home/p/proj and its own /tmp.",
    ),
    (
        "a read-only path when nothing but /tmp is writable",
        failure("read_only", "/home/p/x"),
        sandbox(writable=[]),
        "Sandbox (workspace): /home/p/x is not writable from this kernel; it may write only "
        "in its own /tmp.",
    ),
    (
        "a read-only path without the kernel's rules",
        failure("read_only", "/etc"),
        None,
        "Sandbox (workspace): /etc is not writable from this kernel; it may write only in its "
        "working directory, its own /tmp and what its profile adds.",
    ),
    (
        "the rules of another profile are not the kernel's",
        failure("read_only", "/etc", profile="strict"),
        sandbox(),
        "Sandbox (strict): /etc is not writable from this kernel; it may write only in its "
        "working directory, its own /tmp and what its profile adds.",
    ),
    (
        "a write with no path named",
        failure("read_only"),
        sandbox(),
        "Sandbox (workspace): the cell wrote where this kernel may not write; it may write in "
        "/home/p/proj and its own /tmp.",
    ),
    (
        "a hidden path",
        failure("hidden", "~/.ssh"),
        sandbox(),
        "~/.ssh is hidden from this kernel by its sandbox (workspace).",
    ),
    (
        "a hidden path not named",
        failure("hidden"),
        None,
        "The cell read a path that is hidden from this kernel by its sandbox (workspace).",
    ),
    (
        "a protected path, named",
        failure("protected", "/home/p/proj/.vscode/tasks.json"),
        sandbox(),
        "/home/p/proj/.vscode/tasks.json is kept read-only by this kernel's sandbox (workspace), "
        "also before it exists: programs outside the sandbox act on it later (git, editors, "
        "agents' hosts, the Python environment it runs on); only the person can take a name out.",
    ),
    (
        "a protected path not named",
        failure("protected"),
        None,
        "What the cell wrote is kept read-only by this kernel's sandbox (workspace), also before "
        "it exists: programs outside the sandbox act on it later (git, editors, agents' hosts, "
        "the Python environment it runs on); only the person can take a name out.",
    ),
    (
        "a path of the host's /tmp",
        failure("own_tmp", "/tmp/data.csv"),
        sandbox(),
        "/tmp/data.csv: the host's /tmp is not visible here; this kernel's /tmp is its own "
        "(sandbox workspace).",
    ),
    (
        "the host's /tmp, no path",
        failure("own_tmp"),
        None,
        "The host's /tmp is not visible here; this kernel's /tmp is its own (sandbox workspace).",
    ),
    (
        "no network",
        failure("network", profile="strict"),
        STRICT,
        "This kernel's sandbox (strict) has no network.",
    ),
    (
        "a connection its proxy refused",
        failure("network", "10.0.0.5:443"),
        sandbox(),
        "This kernel's sandbox (workspace) refused the connection to 10.0.0.5:443: it reaches "
        "every public address, and loopback, private, link-local and this host's own addresses "
        "only when the profile names them (the person names them in sandbox.toml's network).",
    ),
    (
        "a refusal under a list of destinations",
        failure("network", "example.org:443", profile="data"),
        sandbox(profile="data", network=["pypi.org", "*.github.com:443"]),
        "This kernel's sandbox (data) refused the connection to example.org:443: it reaches "
        "pypi.org, *.github.com:443, and loopback, private, link-local and this host's own "
        "addresses only when the profile names them (the person names them in sandbox.toml's "
        "network).",
    ),
    (
        "a refused connection without the kernel's rules",
        failure("network", "10.0.0.5:443"),
        None,
        "This kernel's sandbox (workspace) refused the connection to 10.0.0.5:443: its rule, "
        "and loopback, private, link-local and this host's own addresses only when the profile "
        "names them (the person names them in sandbox.toml's network).",
    ),
    (
        "a raw socket, which no proxy carries",
        failure("network"),
        sandbox(),
        "This kernel (workspace) reaches the network only through its proxy (HTTP_PROXY, "
        "HTTPS_PROXY, ALL_PROXY; it reaches every public address): a raw socket reaches "
        "nothing, not even the host's loopback.",
    ),
    (
        "the memory limit, with its size",
        failure("memory"),
        sandbox(),
        "The kernel reached its memory limit (4 GiB), set by its sandbox (workspace); a cell "
        "must use less memory (only the person can choose a profile with a higher limit).",
    ),
    (
        "the memory limit, its size unknown",
        failure("memory"),
        None,
        "The kernel reached its memory limit, set by its sandbox (workspace); a cell must use "
        "less memory (only the person can choose a profile with a higher limit).",
    ),
    (
        "the process limit",
        failure("processes"),
        sandbox(),
        "The kernel reached its process limit (512 processes), set by its sandbox (workspace); "
        "a cell must start fewer processes (only the person can choose a profile with a higher "
        "limit).",
    ),
    (
        "a process limit of one",
        failure("processes"),
        sandbox(processes=1),
        "The kernel reached its process limit (1 process), set by its sandbox (workspace); "
        "a cell must start fewer processes (only the person can choose a profile with a higher "
        "limit).",
    ),
    (
        "the process limit without the kernel's rules",
        failure("processes"),
        None,
        "The kernel reached its process limit, set by its sandbox (workspace); a cell must "
        "start fewer processes (only the person can choose a profile with a higher limit).",
    ),
    (
        "the process limit, unknown",
        failure("processes"),
        sandbox(processes=None),
        "The kernel reached its process limit, set by its sandbox (workspace); a cell must "
        "start fewer processes (only the person can choose a profile with a higher limit).",
    ),
]


@pytest.mark.parametrize(
    ("case", "broken", "rules", "line"), RULE_LINES, ids=[c[0] for c in RULE_LINES]
)
def test_the_rule_line(
    case: str, broken: wire.SandboxFailure, rules: wire.Sandbox | None, line: str
) -> None:
    assert sandbox_rule_line(broken, rules) == line


ERROR = execution(
    state="error",
    error={"name": "PermissionError", "value": "[Errno 13] Permission denied: '/home/p/.ssh'"},
    sandbox_failure=failure("hidden", "/home/p/.ssh"),
    output={
        "total": 2,
        "head": lines(("+error", "PermissionError: [Errno 13]"), ("error", "  …")),
        "tail": [],
        "omitted": 0,
    },
)
HIDDEN_LINE = "/home/p/.ssh is hidden from this kernel by its sandbox (workspace)."


def test_a_cell_that_broke_a_rule_ends_with_its_line() -> None:
    blocks = render_cell(ERROR, CellOutput.from_gateway(ERROR["output"]), sandbox=sandbox())
    assert blocks == [
        "\n".join(["In [5] (1.2 s):", "PermissionError: [Errno 13]", "  …", HIDDEN_LINE])
    ]
    assert cell_text(ERROR).split("\n")[-1] == HIDDEN_LINE  # the CLI's wait


def test_the_memory_limits_death_reads_with_its_line() -> None:
    died = execution(
        state="died",
        died={"reason": "killed: memory limit 4 GiB reached", "restarted": True},
        sandbox_failure=failure("memory"),
    )
    text = cell_text(died, sandbox=sandbox())
    assert text.split("\n") == [
        "In [5] (1.2 s, died: killed: memory limit 4 GiB reached; the kernel was restarted and "
        "its variables are gone):",
        "The kernel reached its memory limit (4 GiB), set by its sandbox (workspace); a cell "
        "must use less memory (only the person can choose a profile with a higher limit).",
    ]


def test_a_cell_with_no_failure_has_no_rule_line() -> None:
    assert "sandbox" not in cell_text(execution(), sandbox=sandbox())


def test_an_executions_status_names_the_rule_after_its_error() -> None:
    shown = render_execution_status(ERROR, sandbox()).split("\n")
    assert shown[1:3] == [
        "error: PermissionError: [Errno 13] Permission denied: '/home/p/.ssh'",
        HIDDEN_LINE,
    ]


def test_an_executions_status_tells_the_rule_with_its_kernels_limit() -> None:
    """Status words the rule line with the kernel's sandbox, as the cell's reply does."""
    died = execution(state="died", sandbox_failure=failure("memory"))
    shown = render_execution_status(died, sandbox()).split("\n")
    assert (
        "The kernel reached its memory limit (4 GiB), set by its sandbox (workspace); a cell "
        "must use less memory (only the person can choose a profile with a higher limit)."
    ) in shown


@pytest.mark.parametrize(
    ("profile", "default", "sentence"),
    [
        (
            "none",
            "workspace",
            "The sandbox profile none is looser than this gateway's default (workspace); only "
            "the person can widen a kernel's sandbox (`loomgate run --kernel lab --sandbox "
            "none`, or sandbox.toml).",
        ),
        (
            "open",
            None,
            "The sandbox profile open is looser than this gateway's default; only the person "
            "can widen a kernel's sandbox (`loomgate run --kernel lab --sandbox open`, or "
            "sandbox.toml).",
        ),
    ],
)
def test_a_looser_profile_is_the_persons_to_choose(
    profile: str, default: str | None, sentence: str
) -> None:
    assert looser_sandbox_refusal(profile, default, "lab") == sentence


def test_the_persons_command_starts_the_kernel_spec_the_model_asked_for() -> None:
    assert looser_sandbox_refusal("none", "workspace", "sh", "bash") == (
        "The sandbox profile none is looser than this gateway's default (workspace); only "
        "the person can widen a kernel's sandbox (`loomgate run --kernel sh --kernel-spec bash "
        "--sandbox none`, or sandbox.toml)."
    )


MISMATCHES = [
    (
        kernel(sandbox=sandbox()),
        "model",
        "The kernel lab runs under the sandbox profile workspace, fixed for its life; "
        "connect(kernel='lab') without sandbox attaches to it as it is, or a new name starts a "
        "kernel under strict.",
    ),
    (
        kernel(sandbox=None),
        "model",
        "The kernel lab is not sandboxed by loomgate; connect(kernel='lab') without sandbox "
        "attaches to it as it is, or a new name starts a kernel under strict.",
    ),
    (
        kernel(name=None, sandbox=sandbox()),
        "model",
        "The kernel cccccccc runs under the sandbox profile workspace, fixed for its life; "
        "connect(kernel='cccccccc') without sandbox attaches to it as it is, or a new name "
        "starts a kernel under strict.",
    ),
    (
        kernel(sandbox=sandbox()),
        "person",
        "kernel lab runs under the sandbox profile workspace, fixed for its life; leave out "
        "--sandbox to use it as it is, or give --kernel a new name",
    ),
]


@pytest.mark.parametrize(("running", "audience", "sentence"), MISMATCHES)
def test_a_running_kernel_keeps_its_profile(
    running: wire.Kernel, audience: Audience, sentence: str
) -> None:
    assert sandbox_mismatch(running, "strict", audience) == sentence


@pytest.mark.parametrize(
    ("audience", "sentence"),
    [
        (
            "model",
            "The gateway at http://h:1 does not run kernels under sandbox profiles, so no "
            "kernel runs under strict; connect without sandbox for an unconfined kernel.",
        ),
        (
            "person",
            "the gateway at http://h:1 does not run kernels under sandbox profiles, so no "
            "kernel runs under strict; leave out --sandbox for an unconfined kernel",
        ),
    ],
)
def test_a_gateway_that_ignores_profiles(audience: Audience, sentence: str) -> None:
    assert unconfined_refusal("the gateway at http://h:1", "strict", audience) == sentence


def test_a_kernels_status_says_what_its_mechanism_lacks() -> None:
    lacking = sandbox(mechanism="landlock only (ABI 7)", lacks=["its own /tmp", "UDP"])
    assert sandbox_lines(lacking)[0] == "sandbox: workspace, enforced by landlock only (ABI 7)"
    assert sandbox_lines(lacking)[-1] == "  this mechanism cannot give it: its own /tmp; UDP"
    assert len(sandbox_lines(sandbox())) == 4  # nothing lacking: nothing said
    old = {key: value for key, value in sandbox().items() if key != "lacks"}  # an older gateway
    assert sandbox_lines(cast(wire.Sandbox, old)) == sandbox_lines(sandbox())


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {
                "sandbox_mechanism": "bubblewrap 0.11.0 (shipped with loomgate), cgroup v2",
                "sandbox_refused": [
                    "bubblewrap on PATH (/usr/local/bin/bwrap) cannot make namespaces here: "
                    "bwrap: setting up uid map: Permission denied"
                ],
                "sandbox_lacks": [],
            },
            [
                "sandbox: bubblewrap 0.11.0 (shipped with loomgate), cgroup v2",
                "  not used: bubblewrap on PATH (/usr/local/bin/bwrap) cannot make namespaces "
                "here: bwrap: setting up uid map: Permission denied",
            ],
        ),
        (
            {
                "sandbox_mechanism": "landlock only (ABI 4), rlimits",
                "sandbox_refused": ["no bubblewrap on PATH", "no bubblewrap shipped with loomgate"],
                "sandbox_lacks": ["its own /tmp", "a pid namespace"],
            },
            [
                "sandbox: landlock only (ABI 4), rlimits",
                "  not used: no bubblewrap on PATH",
                "  not used: no bubblewrap shipped with loomgate",
                "  this mechanism cannot give it: its own /tmp; a pid namespace",
            ],
        ),
        (
            {
                "sandbox_mechanism": None,
                "sandbox_refused": ["no bubblewrap on PATH", "Landlock is not available"],
                "sandbox_lacks": [],
            },
            [
                "sandbox: no mechanism works here",
                "  refused: no bubblewrap on PATH",
                "  refused: Landlock is not available",
            ],
        ),
        (
            {"upstream": "http://jupyter:8888", "sandbox_mechanism": None},
            ["sandbox: none (the upstream starts the kernels)"],
        ),
    ],
)
def test_the_gateways_mechanism_in_its_status(
    fields: dict[str, object], expected: list[str]
) -> None:
    assert mechanism_lines(cast(wire.Info, fields)) == expected
