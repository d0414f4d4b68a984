"""The Landlock-only confiner: what it refuses and lacks per ABI and profile, and the ruleset it
makes for a kernel; no process runs (real starts through it: test_landlock_confiner_runs.py)."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import bubblewrap, entry, landlock, limits
from loomgate.gateway.sandbox.confinement.confiner import SandboxUnavailable
from loomgate.gateway.sandbox.confinement.landlock_confiner import (
    DEVICE_FILES,
    ENV,
    LACKS,
    NO_UDP,
    LandlockConfiner,
    interpreter_prefixes,
    join,
    kernel_temp_dir,
    unheld,
    unread,
    writable_dirs,
)
from loomgate.gateway.sandbox.confinement.limits import (
    NPROC_ROOT,
    NPROC_WEAKER,
    KernelLimits,
    LimitsHost,
)
from loomgate.gateway.sandbox.policy.profiles import DEFAULT_PROTECTED, SandboxRules
from tests.gateway.sandbox import sandboxes

SCOPES = (
    "abstract unix sockets and signals to your other processes are not refused (that needs "
    "Landlock ABI 6, Linux 6.12)"
)
TRUNCATE = "refusing truncate() outside the writable paths (Landlock ABI 3)"
REFER = "moving files from one dir to another (Landlock ABI 2)"


# Below ABI 4 nothing holds a kernel's TCP connections to its proxy.
UNCHECKED = (
    "holding its connections to its proxy: Landlock ABI {} has no network rules (that needs ABI "
    "4, Linux 6.7), so loopback, private and link-local addresses are reachable directly"
)


@dataclass
class Kernel:
    """A kernel's sandbox as a confiner sees it."""

    rules: SandboxRules
    directory: Path
    limits: KernelLimits
    ready_fd: int | None = None
    proxy_port: int | None = 40123  # where its proxy would listen
    made: list[str] = field(default_factory=list)
    tcp_ports: tuple[int, ...] = ()  # a kernel that takes only TCP: its own ports
    relay: list[tuple[Path, int]] = field(default_factory=list)


@pytest.mark.parametrize(
    ("abi", "network", "more"),
    [
        (7, True, []),
        (7, False, [NO_UDP]),
        (6, True, []),
        (5, False, [NO_UDP, SCOPES]),
        (4, True, [SCOPES]),
        (3, True, [SCOPES, UNCHECKED.format(3)]),
        (2, True, [SCOPES, UNCHECKED.format(2), TRUNCATE]),
        (1, True, [SCOPES, UNCHECKED.format(1), TRUNCATE, REFER]),
    ],
)
def test_what_landlock_alone_lacks_per_abi(abi: int, network: bool, more: list[str]) -> None:
    confiner = LandlockConfiner(abi, LimitsHost(1, {"memory": Path("/m"), "pids": Path("/p")}))
    assert confiner.lacks(sandboxes.rules(network=network, processes=5)) == [*LACKS, *more]
    gateway_wide = [*LACKS, NO_UDP, *(m for m in more if m != NO_UDP)]
    assert confiner.lacks() == gateway_wide  # any profile's: without network too


def test_what_a_profile_makes_it_lack(tmp_path: Path) -> None:
    project = tmp_path / "project"
    rules = sandboxes.rules(
        writable=[project], hidden=[project / ".env", project / "keys" / "k"], processes=5
    )
    lacks = LandlockConfiner(7).lacks(rules)  # no cgroup: processes by RLIMIT_NPROC
    assert lacks[len(LACKS) :] == [
        f"creating or removing files directly in {project} (a hidden or read-only path lies "
        "inside it)",
        f"creating or removing files directly in {project / 'keys'} (a hidden or read-only "
        "path lies inside it)",
        NPROC_ROOT if os.getuid() == 0 else NPROC_WEAKER,
    ]


@pytest.mark.parametrize(("abi", "refused"), [(1, True), (3, True), (4, False), (7, False)])
def test_no_network_needs_tcp_rules(abi: int, refused: bool) -> None:
    confiner = LandlockConfiner(abi)
    confiner.check(sandboxes.rules(network=True))
    if refused:
        with pytest.raises(SandboxUnavailable, match=f"Landlock ABI {abi} cannot refuse TCP"):
            confiner.check(sandboxes.rules(network=False))
    else:
        confiner.check(sandboxes.rules(network=False))
    where = (Path("/nonexistent"), KernelLimits("k", "none"))
    assert confiner.tcp_ports(Kernel(sandboxes.rules(network=False), *where)) == ()
    assert confiner.tcp_ports(Kernel(sandboxes.rules(network="host"), *where)) is None
    proxied = Kernel(sandboxes.rules(network=True), *where, proxy_port=40123)
    assert confiner.tcp_ports(proxied) == (40123,)  # its proxy's, nothing else


# Under Landlock alone a profile is refused when its writable dirs keep names read-only inside
# them: every writable dir keeps its .git, so any writable dir, whatever the profile's name.
PROJECT, DATA = Path("/srv/project"), Path("/srv/data")
OUT = "or choose the sandbox profile none"
FIX = (
    "which Landlock alone cannot hold (a right on a dir holds for its whole tree): install your "
    "distribution's bubblewrap and let it make user namespaces (on Ubuntu, an AppArmor profile "
    "for /usr/bin/bwrap, which 25.04 and later ship), use a profile with no writable dir "
    f"(writable = []), {OUT}"
)


def named(profile: str, protected: tuple[str, ...] = DEFAULT_PROTECTED) -> SandboxRules:
    """Return test rules under the name `profile`, protecting `protected` (network on)."""
    rules = sandboxes.rules(network=True)
    return SandboxRules(**{**vars(rules), "profile": profile, "protected": protected})


@pytest.mark.parametrize(
    ("rules", "dirs", "refusal"),
    [
        # Nothing writable: nothing it promises lies beyond Landlock, whatever its name.
        (named("workspace"), [], None),
        (named("strict"), [], None),
        (named("mine", ()), [], None),
        (
            named("workspace"),
            [PROJECT],
            f"profile 'workspace' keeps .git and {len(DEFAULT_PROTECTED)} "
            f"other names (.mcp.json, .claude, …) read-only inside its writable dir {PROJECT}, "
            f"{FIX}",
        ),
        (
            named("strict"),
            [PROJECT],
            f"profile 'strict' keeps .git and {len(DEFAULT_PROTECTED)} other "
            f"names (.mcp.json, .claude, …) read-only inside its writable dir {PROJECT}, {FIX}",
        ),
        # Every default name taken out: the .git it always keeps is still beyond Landlock.
        (
            named("open", ()),
            [PROJECT],
            f"profile 'open' keeps .git read-only inside its writable dir {PROJECT}, {FIX}",
        ),
        (
            named("mine", (".envrc",)),
            [PROJECT, DATA],
            "profile 'mine' keeps .git and 1 other name (.envrc) read-only "
            f"inside its writable dirs {PROJECT}, {DATA}, {FIX}",
        ),
        (
            named("sealed", (".git", ".envrc", ".vscode")),
            [DATA],
            "profile 'sealed' keeps .git and 2 other names (.envrc, .vscode) read-only inside "
            f"its writable dir {DATA}, {FIX}",
        ),
    ],
)
def test_landlock_alone_refuses_names_kept_read_only_in_a_writable_dir(
    rules: SandboxRules, dirs: list[Path], refusal: str | None
) -> None:
    assert unheld(rules, dirs) == refusal


def test_the_writable_dirs_are_the_real_dirs_among_the_writable_paths(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "data.db").write_text("")
    (tmp_path / "linked").symlink_to(tmp_path / "project")
    writable = [tmp_path / n for n in ("project", "data.db", "missing", "linked")]
    rules = sandboxes.rules(writable=writable)
    assert writable_dirs(rules) == [tmp_path / "project"]
    # A file or a path not there keeps nothing inside it: such a profile starts.
    LandlockConfiner(7).check(sandboxes.rules(writable=writable[1:3]))
    refused = f"inside its writable dir {tmp_path / 'project'},"
    with pytest.raises(SandboxUnavailable, match=refused):
        LandlockConfiner(7).check(rules)


@pytest.mark.parametrize(
    ("program", "hidden", "prefixes"),
    [
        ("/tmp/x/.venv/bin/python", [], ["/tmp/x/.venv"]),
        ("python", [], []),
        ("/opt/py/bin/python", ["/opt/py"], []),
        ("/usr/bin/python3", [], ["/usr"]),
    ],
)
def test_the_interpreters_prefix_stays_readable(
    program: str, hidden: list[str], prefixes: list[str]
) -> None:
    rules = sandboxes.rules(hidden=[Path(h) for h in hidden])
    found = interpreter_prefixes([program, "-m", "ipykernel_launcher"], rules)
    assert found == [Path(p) for p in prefixes]


@pytest.fixture
def place() -> Iterator[Path]:
    """A home with a secret, a project and a kernel dir, outside the host's /tmp (which the
    ruleset closes)."""
    root = Path("/var/tmp") / f"loomgate-landlock-{uuid.uuid4().hex[:8]}"
    (root / "home" / ".ssh").mkdir(parents=True)
    (root / "home" / ".ssh" / "id_rsa").write_text("SECRET")
    (root / "project").mkdir()
    (root / "outside").mkdir()
    (root / "kernels").mkdir(mode=0o700)
    try:
        yield root
    finally:
        shutil.rmtree(root)


def kernel_in(place: Path, limits: KernelLimits, **rules: object) -> Kernel:
    """Return a kernel of `place` whose dir is prepared."""
    directory = place / "kernels" / "k1"
    bubblewrap.prepare_kernel_dir(directory)
    kernel_temp_dir(directory).mkdir(mode=0o700)
    confined = sandboxes.rules(
        writable=[place / "project"], hidden=[place / "home" / ".ssh"], **rules
    )
    return Kernel(confined, directory, limits)


def test_a_kernel_that_takes_only_tcp_may_bind_its_own_ports_and_no_other(place: Path) -> None:
    kernel = kernel_in(place, KernelLimits("k1", "none"), network=False)
    kernel.tcp_ports = (40001, 40002, 40003, 40004, 40005)
    connection = place / "kernel.json"
    connection.write_text("{}")
    ruleset = LandlockConfiner(7).ruleset(kernel, ["/usr/bin/python3"], connection)
    assert ruleset.tcp_ports == ()  # it connects nowhere
    assert ruleset.bind_ports == kernel.tcp_ports


def test_the_ruleset_of_a_kernel(place: Path) -> None:
    kernel = kernel_in(place, KernelLimits("k1", "none"), network=False)
    connection = place / "home" / ".ssh" / "kernel.json"  # inside a hidden dir
    connection.write_text("{}")
    confiner = LandlockConfiner(7)
    ruleset = confiner.ruleset(kernel, ["/usr/bin/python3"], connection)
    assert (ruleset.abi, ruleset.tcp_ports, ruleset.scopes) == (7, (), True)
    assert ruleset.bind_ports == ()  # an ipc kernel binds no port at all
    rules = dict(ruleset.paths)
    read, write = landlock.READ, landlock.READ | landlock.WRITE
    assert rules[place / "project"] == write
    for own in ("tmp", "ipc", "packages"):
        assert rules[kernel.directory / own] == write
    assert rules[connection] == landlock.READ_FILE
    assert rules[Path("/usr")] == read and rules[Path("/etc")] == read
    for device in DEVICE_FILES:
        assert rules[device] == landlock.READ_FILE | landlock.WRITE_FILE
    assert rules[Path("/dev/shm")] == write
    # Nothing beneath the hidden path but the connection file; neither /tmp nor /dev whole, and
    # no dir on the way to a hidden path (/ itself) has a right of its own.
    assert [p for p in rules if p.is_relative_to(place / "home" / ".ssh")] == [connection]
    assert Path("/") not in rules and Path("/tmp") not in rules and Path("/dev") not in rules
    assert place / "home" not in rules and place not in rules
    assert not any(
        p.is_relative_to(kernel.directory) and p.name == "bwrap-info.json" for p in rules
    )


def test_what_stays_read_only_inside_a_writable_path_is_walked_around(place: Path) -> None:
    venv = place / "project" / ".venv"
    (venv / "lib").mkdir(parents=True)
    (place / "project" / "src").mkdir()
    (place / "project" / "notes.txt").write_text("")
    kernel = kernel_in(place, KernelLimits("k1", "none"))
    kernel.rules = SandboxRules(**{**vars(kernel.rules), "read_only": (venv,)})
    connection = kernel.directory / "kernel.json"
    connection.write_text("{}")
    rules = dict(LandlockConfiner(7).ruleset(kernel, ["/usr/bin/python3"], connection).paths)
    write = landlock.READ | landlock.WRITE
    # Beside the environment, the project's entries are writable; the environment is only
    # readable (the project's read grant holds beneath it), and the project itself has no write
    # right of its own (nothing is made or removed directly in it).
    assert rules[place / "project" / "src"] == rules[place / "project" / "notes.txt"] == write
    assert rules[place / "project"] == landlock.READ
    assert [p for p in rules if p.is_relative_to(venv)] == []
    way = f"creating or removing files directly in {place / 'project'}"
    assert any(line.startswith(way) for line in LandlockConfiner(7).lacks(kernel.rules))


# What the tests above leave open (each fails on a mutant of landlock_confiner.py that
# bench/mutation.py found alive without it): its identity, its limits, the FIFO a start with
# cgroups waits on, the plan and command of a start, and the gateway's side of the wait.
NOWHERE = LimitsHost()
GONE_PID = 2**22 + 7  # above the kernel's largest pid: no process has it
STAND_IN = LimitsHost(2, {"memory": Path("/nonexistent/g"), "pids": Path("/nonexistent/g")})


def test_a_landlock_confiner_equals_only_its_like() -> None:
    assert LandlockConfiner(4, NOWHERE) == LandlockConfiner(4)
    assert LandlockConfiner(4) != LandlockConfiner(5)
    assert LandlockConfiner(4) != LandlockConfiner(4, STAND_IN)
    assert LandlockConfiner(4) != "landlock"
    assert LandlockConfiner.from_json({"kind": "landlock"}) == LandlockConfiner(1)
    assert repr(LandlockConfiner(4)) == f"LandlockConfiner(4, {NOWHERE!r})"


def test_the_limits_go_where_its_host_puts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "limits_host", LimitsHost)  # never this machine's cgroups
    confiner = LandlockConfiner(7, LimitsHost(2, {"memory": tmp_path, "pids": tmp_path}))
    made = confiner.create_limits("k", sandboxes.rules(processes=5))
    assert (made.mechanism, made.groups) == ("cgroup v2", {"pids": tmp_path / "loomgate-k"})


def test_what_rlimits_lack_is_said_only_for_processes() -> None:
    weaker = NPROC_ROOT if os.getuid() == 0 else NPROC_WEAKER
    confiner = LandlockConfiner(7, NOWHERE)
    assert weaker not in confiner.lacks(sandboxes.rules(memory=1))
    assert confiner.lacks(sandboxes.rules(processes=5))[-1] == weaker
    assert confiner.lacks()[-1] == weaker  # any profile's


def test_its_own_temp_dir_is_made_once_per_start_and_kept(tmp_path: Path) -> None:
    kernel = Kernel(sandboxes.rules(), tmp_path, KernelLimits("k", "none"))
    LandlockConfiner(7).prepare(kernel)
    (kernel_temp_dir(tmp_path) / "left").write_text("")
    LandlockConfiner(7).prepare(kernel)  # a restart
    assert (kernel_temp_dir(tmp_path) / "left").exists()


def test_a_proxied_kernel_is_told_only_of_its_proxy() -> None:
    where = (Path("/k"), KernelLimits("k", "none"))
    confiner = LandlockConfiner(7)
    with pytest.raises(AssertionError, match=r"^the kernel's proxy listens before it starts$"):
        confiner.tcp_ports(Kernel(sandboxes.rules(network=True), *where, proxy_port=None))


@pytest.mark.parametrize(
    ("network", "port", "told"),
    [(True, 40123, True), (True, None, False), (False, 40123, False), ("host", 40123, False)],
)
def test_the_command_points_only_a_proxied_kernel_at_its_proxy(
    network: bool | str, port: int | None, told: bool
) -> None:
    kernel = Kernel(sandboxes.rules(network=network), Path("/k"), KernelLimits("k", "none"))
    kernel.proxy_port = port
    argv = LandlockConfiner(7).command(kernel, entry.Plan(), ["python"], ["JPY_PARENT_PID"])
    url = f"http://127.0.0.1:{port}"
    variables = [f"{name}={url}" for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY")]
    variables += [f"{name}={url}" for name in ("https_proxy", "ALL_PROXY", "all_proxy")]
    start = argv.index(ENV)
    temp = ["TMPDIR=/k/tmp", "IPYTHONDIR=/k/tmp/ipython"]
    unset = ["-u", "JPY_PARENT_PID", *(["-u", "NO_PROXY", "-u", "no_proxy"] if told else [])]
    assert argv[start:] == [ENV, *unset, *temp, *(variables if told else []), "python"]


def test_the_interpreter_prefix_is_read_even_in_the_hosts_tmp(place: Path) -> None:
    kernel = kernel_in(place, KernelLimits("k1", "none"))
    connection = kernel.directory / "kernel.json"
    connection.write_text("{}")
    kernel_cmd = ["/tmp/x/.venv/bin/python", "-m", "ipykernel_launcher"]
    ruleset = LandlockConfiner(6).ruleset(kernel, kernel_cmd, connection)
    assert dict(ruleset.paths)[Path("/tmp/x/.venv")] == landlock.READ
    assert ruleset.scopes  # ABI 6 is the first with scopes


def test_no_interpreter_prefix_is_the_root() -> None:
    assert interpreter_prefixes(["/python"], sandboxes.rules()) == []


def test_a_start_with_cgroups_waits_on_a_fifo_of_its_own(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = kernel_in(place, KernelLimits("k1", "cgroup v1", {"pids": place / "outside"}))
    kernel.limits.rlimits = {"RLIMIT_DATA": (1, 1)}
    connection = kernel.directory / "kernel.json"
    connection.write_text("{}")
    plans: list[entry.Plan] = []

    def spawn(plan: entry.Plan, start: Callable[[], list[str]]) -> list[str]:
        plans.append(plan)
        return start()

    monkeypatch.setattr(entry, "spawn", spawn)
    # An interpreter under the host's /tmp: only its own rule makes it readable.
    confiner, kernel_cmd = LandlockConfiner(7), ["/tmp/x/.venv/bin/python", "-m", "ipykernel"]
    argv = confiner.spawn(
        kernel, kernel_cmd, lambda argv, fds: argv, cwd=place, connection_file=connection,
        unset_env=(),
    )  # fmt: skip
    fifo = kernel.directory / "joined"
    try:
        assert stat.S_ISFIFO(fifo.stat().st_mode) and stat.S_IMODE(fifo.stat().st_mode) == 0o600
        assert kernel.ready_fd is not None
        assert fcntl.fcntl(kernel.ready_fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR
        assert fcntl.fcntl(kernel.ready_fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        ruleset = confiner.ruleset(kernel, kernel_cmd, connection, fifo)
        assert dict(ruleset.paths)[fifo] == landlock.READ_FILE | landlock.WRITE_FILE
        assert dict(ruleset.paths)[Path("/tmp/x/.venv")] == landlock.READ
        expected = entry.Plan(
            [f"<{fifo}"], {"RLIMIT_DATA": (1, 1)}, ruleset=ruleset, drop_capabilities=True
        )
        assert plans == [expected]
        assert argv == confiner.command(kernel, expected, kernel_cmd, ())
    finally:
        os.close(kernel.ready_fd or os.open(os.devnull, os.O_RDONLY))
    kernel.ready_fd = None
    confiner.spawn(  # a restart: the last start's FIFO is replaced
        kernel, kernel_cmd, lambda argv, fds: argv, cwd=place, connection_file=connection,
        unset_env=(),
    )  # fmt: skip
    assert kernel.ready_fd is not None
    os.close(kernel.ready_fd)


def waiting(place: Path, join_files: list[str]) -> tuple[Kernel, int]:
    """Return a kernel whose start waits on its FIFO, as spawn() leaves it, and a reader of
    that FIFO (the entry's shell)."""
    kernel = kernel_in(place, KernelLimits("k1", "cgroup v1"))
    kernel.limits.groups = {"pids": Path(join_files[0]).parent} if join_files else {}
    fifo = kernel.directory / "joined"
    os.mkfifo(fifo, 0o600)
    kernel.ready_fd = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)
    return kernel, os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)


async def test_a_start_is_let_go_once_its_launched_process_is_in_its_cgroups(
    place: Path,
) -> None:
    (place / "outside" / "cgroup.procs").write_text("")
    kernel, shell = waiting(place, [str(place / "outside" / "cgroup.procs")])
    try:
        await LandlockConfiner(7).started(kernel, GONE_PID)  # its process is gone: no wait
        assert (place / "outside" / "cgroup.procs").read_text() == str(GONE_PID)
        assert os.read(shell, 10) == b"\n"
        assert kernel.ready_fd is None and not (kernel.directory / "joined").exists()
    finally:
        os.close(shell)


def test_a_start_whose_process_is_unknown_is_ended(place: Path) -> None:
    kernel, shell = waiting(place, [])
    fd = kernel.ready_fd
    try:
        with pytest.raises(ProcessLookupError, match=r"^the kernel's launched process is not "):
            join(kernel, None)
        assert os.read(shell, 10) == b""  # nothing to run: the FIFO's end
        assert kernel.ready_fd is None and not (kernel.directory / "joined").exists()
        with pytest.raises(OSError):
            os.fstat(fd or -1)  # closed
    finally:
        os.close(shell)
    join(kernel, None)  # no start waits: nothing to do


def test_the_gateway_holds_the_fifo_until_the_line_is_read(place: Path) -> None:
    kernel, shell = waiting(place, [])
    (kernel.directory / "joined").unlink()  # what removes it is missing_ok
    failed: list[BaseException] = []

    def run() -> None:
        try:
            join(kernel, os.getpid())  # a live process: it waits for the line to be read
        except BaseException as error:
            failed.append(error)

    holder = threading.Thread(target=run, daemon=True)  # a broken wait must not hang the run
    holder.start()
    try:
        while not unread(shell):
            assert holder.is_alive(), failed
        holder.join(timeout=0.2)  # the line is unread: it must not have let go
        assert holder.is_alive()
        assert os.read(shell, 10) == b"\n"
        holder.join(timeout=5)  # read: it lets go at once (its deadline is 10 s away)
        assert not holder.is_alive() and failed == []
    finally:
        os.close(shell)
        holder.join(timeout=15)


def test_the_home_dir_is_read_as_listed_a_profiles_readable_included(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = place / "home"
    for name in (".newtool/config", ".other/config", "projects/a.csv"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("")
    monkeypatch.setenv("HOME", str(home))
    kernel = kernel_in(place, KernelLimits("k1", "none"), network=False)
    kernel.rules = SandboxRules(**{**vars(kernel.rules), "readable": (home / ".newtool",)})
    connection = kernel.directory / "kernel.json"
    connection.write_text("{}")
    rules = dict(LandlockConfiner(7).ruleset(kernel, ["/usr/bin/python3"], connection).paths)
    assert rules[home / ".newtool"] == rules[home / "projects"] == landlock.READ
    assert home / ".other" not in rules  # no list holds it: walked around
