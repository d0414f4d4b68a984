"""A confined kernel's launch on described machines: its dir, its command (the entry and bwrap
on Linux, started on the entry's thread; the kernel itself under Landlock alone; sandbox-exec on
macOS: its text is all that can be checked here), its init noted from bwrap's info file, its
rules and confiner kept for a later gateway (also one whose probe chose another mechanism, and
one reading what the previous version wrote) and shown on the wire."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from loomgate.gateway.process_end import Ending
from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.sandbox.confinement import bubblewrap, entry, launch, placeholders
from loomgate.gateway.sandbox.confinement.bubblewrap_confiner import BubblewrapConfiner
from loomgate.gateway.sandbox.confinement.landlock_confiner import LandlockConfiner
from loomgate.gateway.sandbox.confinement.launch import (
    SandboxLaunch,
    rules_from_json,
    rules_from_wire,
    rules_to_json,
    sandbox_wire,
)
from loomgate.gateway.sandbox.confinement.limits import KernelLimits
from loomgate.gateway.sandbox.confinement.mechanism import Mechanism, SandboxUnavailable
from loomgate.gateway.sandbox.confinement.sandbox_exec_confiner import SandboxExecConfiner
from loomgate.gateway.sandbox.network.network_rules import NO_NETWORK, PUBLIC
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

RULES = SandboxRules(
    profile="strict",
    confined=True,
    writable=(Path("/work/project"),),
    hidden=(Path("/home/p/.ssh"), Path("/home/p/.local/state/loomgate")),
    network=NO_NETWORK,
    memory=None,
    processes=None,
)
DARWIN = Mechanism(SandboxExecConfiner())


@pytest.mark.parametrize(
    "rules",
    [
        RULES,
        SandboxRules(**{**vars(RULES), "network": PUBLIC, "memory": 1, "processes": 2}),
        SandboxRules(
            **{
                **vars(RULES),
                "protected": (".mcp.json",),
                "read_only": (Path("/work/project/.venv"),),
                "readable": (Path("/home/p/.newtool"),),
            }
        ),
    ],
)
def test_any_rules_survive_the_resident_file_and_the_wire(rules: SandboxRules) -> None:
    assert rules_from_json(json.loads(json.dumps(rules_to_json(rules)))) == rules
    # The wire shows no protected names, read-only or readable paths: the defaults come back.
    shown = SandboxRules(
        **{**vars(rules), "protected": RULES.protected, "read_only": (), "readable": ()}
    )
    assert rules_from_wire(sandbox_wire(rules, "bubblewrap")) == shown


def test_rules_survive_the_resident_file_and_the_wire() -> None:
    assert rules_from_json(rules_to_json(RULES)) == RULES
    shown = sandbox_wire(RULES, "bubblewrap, landlock scopes")
    assert shown["hidden"] == ["/home/p/.ssh", "/home/p/.local/state/loomgate"]
    assert rules_from_wire(shown) == RULES
    assert not rules_from_wire(sandbox_wire(RULES, "")).confined  # nothing enforces it


@pytest.mark.parametrize(
    ("confiner", "has_init"),
    [
        (BubblewrapConfiner("/usr/bin/bwrap", "0.8.0", landlock_abi=7), True),
        (BubblewrapConfiner("/venv/bwrap", "0.11.0", shipped=True), True),
        (LandlockConfiner(4), False),
        (SandboxExecConfiner(), False),
    ],
)
def test_a_launch_is_kept_whole_for_a_later_gateway(
    tmp_path: Path, confiner: launch.Confiner, has_init: bool
) -> None:
    limits = KernelLimits("k1", "cgroup v1", {"memory": tmp_path / "m"}, oom_kills=2)
    lacks = ["its own /tmp"]
    kept = SandboxLaunch(RULES, tmp_path, limits, "said", confiner=confiner, lacks=lacks)
    back = SandboxLaunch.from_json(json.loads(json.dumps(kept.to_json())))
    assert (back.rules, back.directory, back.mechanism) == (RULES, tmp_path, "said")
    assert (back.limits, back.confiner, back.lacks) == (limits, confiner, lacks)
    assert back.has_init is has_init and back.init is None
    assert back.wire() == sandbox_wire(RULES, "said", lacks)


@pytest.mark.parametrize(
    ("mechanism", "confiner"),
    [
        ("bubblewrap, landlock scopes, cgroup v1", BubblewrapConfiner("bubblewrap")),
        ("bubblewrap", BubblewrapConfiner("bubblewrap")),
        ("sandbox-exec", SandboxExecConfiner()),
    ],
)
def test_a_launch_the_previous_version_kept_is_taken_back(
    tmp_path: Path, mechanism: str, confiner: launch.Confiner
) -> None:
    # As the previous version wrote it: no confiner, no lacks; its mechanism said which.
    me = ProcessIdentity.of(os.getpid())
    assert me is not None
    written = {
        "rules": rules_to_json(RULES),
        "directory": str(tmp_path),
        "limits": KernelLimits("k1", "none").to_json(),
        "mechanism": mechanism,
        "init": me.to_json(),
    }
    back = SandboxLaunch.from_json(written)
    assert back.rules == RULES  # its protected names and read-only paths: the defaults
    assert (back.confiner, back.mechanism, back.lacks, back.init) == (confiner, mechanism, [], me)
    assert back.has_init is isinstance(confiner, BubblewrapConfiner)


def test_on_macos_the_kernel_runs_under_sandbox_exec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = SandboxLaunch(RULES, tmp_path, KernelLimits("k1", "none"), "sandbox-exec")
    assert sandbox.confiner == SandboxExecConfiner()
    connection = tmp_path / "kernel-k1.json"
    argv = SandboxExecConfiner().command(
        sandbox,
        ["python", "-m", "ipykernel_launcher", "-f", str(connection)],
        connection,
        ("JPY_PARENT_PID",),
    )
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"]
    text = argv[2]
    assert "(deny network*)" in text
    assert '"/home/p/.ssh"' in text and str(connection) in text
    assert argv[3:] == [
        "/usr/bin/env",
        "-u",
        "JPY_PARENT_PID",
        f"TMPDIR={tmp_path / 'tmp'}",
        f"IPYTHONDIR={tmp_path / 'tmp' / 'ipython'}",
        "python",
        "-m",
        "ipykernel_launcher",
        "-f",
        str(connection),
    ]
    assert not sandbox.has_init  # signals go to the kernel process itself
    assert stat.S_IMODE((tmp_path / "tmp").stat().st_mode) == 0o700  # the kernel's own
    again = SandboxExecConfiner().command(sandbox, ["python"], connection)
    assert again[3:] == ["/usr/bin/env", *argv[6:8], "python"]
    started = sandbox.spawn(
        ["python"],
        lambda argv, fds: (argv, fds),
        cwd=tmp_path,
        connection_file=connection,
        unset_env=(),
    )
    assert started == (again, ())  # no info file: sandbox-exec runs the kernel itself
    assert not bubblewrap.info_file(tmp_path).exists()


def test_macos_refuses_limits_it_cannot_enforce(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxUnavailable, match="sandbox-exec is missing"):
        DARWIN.check(RULES)
    monkeypatch.setattr(
        "loomgate.gateway.sandbox.confinement.macos.SANDBOX_EXEC", "/bin/sh"
    )  # one here
    DARWIN.check(RULES)
    limited = SandboxRules(**{**vars(RULES), "memory": 1 << 30})
    with pytest.raises(SandboxUnavailable, match="cannot enforce on macOS: set memory = false"):
        DARWIN.check(limited)
    assert DARWIN.describe(RULES) == "sandbox-exec"


LINUX = Mechanism(BubblewrapConfiner("/usr/bin/bwrap", "0.8.0", landlock_abi=7))


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp dir of the test's own where the kernel dirs' root goes."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"loomgate-{os.getuid()}"


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> Mechanism:
    """A described Linux machine in place of this one's probe (which runs bwrap)."""
    monkeypatch.setattr(launch, "probe", lambda: LINUX)
    return LINUX


def test_the_kernel_dirs_root_is_private(temp_root: Path) -> None:
    assert launch.kernel_dirs_root() == temp_root
    assert stat.S_IMODE(temp_root.stat().st_mode) == 0o700
    assert launch.kernel_dirs_root() == temp_root  # again: as it is


@pytest.mark.parametrize("spoil", ["mode", "owner", "symlink"])
def test_a_kernel_dirs_root_not_private_is_refused(temp_root: Path, spoil: str) -> None:
    if spoil == "symlink":
        (temp_root.parent / "elsewhere").mkdir(mode=0o700)
        temp_root.symlink_to(temp_root.parent / "elsewhere")
    else:
        temp_root.mkdir(mode=0o700)
    if spoil == "mode":
        temp_root.chmod(0o750)
    elif spoil == "owner":
        if os.getuid() != 0:
            return  # only root can give it away
        os.chown(temp_root, os.getuid() + 1000, -1)
    with pytest.raises(
        SandboxUnavailable,
        match=f"^{temp_root} is not a private directory of this user; remove it and start again$",
    ):
        launch.kernel_dirs_root()


def test_an_unconfined_kernels_own_dir(temp_root: Path) -> None:
    directory = launch.unconfined_kernel_dir("0123456789abcdef-ffff")
    assert directory == temp_root / "0123456789abc"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "ipc").stat().st_mode) == 0o700
    assert launch.unconfined_kernel_dir("0123456789abcdef-ffff") == directory
    assert launch.ipc_prefix(directory) == f"{directory}/ipc/k"


def test_a_linux_launch_is_prepared_with_its_dir_and_limits(
    temp_root: Path, here: Mechanism
) -> None:
    sandbox = SandboxLaunch.prepare(RULES, "0123456789abcdef-ffff")
    assert sandbox.directory == temp_root / "0123456789abc"
    assert bubblewrap.empty_file(sandbox.directory).is_file()
    assert sandbox.limits == KernelLimits("0123456789abcdef-ffff", "none")
    assert (sandbox.rules, sandbox.mechanism, sandbox.init, sandbox.lacks) == (
        RULES,
        "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes",
        None,
        [],
    )
    assert sandbox.confiner is LINUX.confiner
    assert sandbox.ipc_prefix == f"{sandbox.directory}/ipc/k"
    limited = SandboxRules(**{**vars(RULES), "memory": 1 << 30})
    assert SandboxLaunch.prepare(limited, "k2").limits.rlimits == {
        "RLIMIT_DATA": (1 << 30, 1 << 30)
    }


def test_a_launch_this_machine_cannot_enforce_is_refused(
    temp_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "probe", lambda: Mechanism(None, problem="no bwrap here"))
    with pytest.raises(SandboxUnavailable, match=r"^no bwrap here$"):
        SandboxLaunch.prepare(RULES, "k1")
    assert not temp_root.exists()


def test_a_macos_launch_has_no_limits(temp_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "probe", lambda: DARWIN)
    monkeypatch.setattr(
        "loomgate.gateway.sandbox.confinement.macos.SANDBOX_EXEC", "/bin/sh"
    )  # one here
    sandbox = SandboxLaunch.prepare(RULES, "k1")
    assert sandbox.limits == KernelLimits("k1", "none")
    assert sandbox.mechanism == "sandbox-exec" and not sandbox.has_init
    assert sandbox.lacks == SandboxExecConfiner().lacks(RULES)


def open_on(path: Path) -> list[int]:
    """Return this process's fds open on `path`."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # the listing's own fd is gone by now
            if fd.readlink() == path:
                found.append(int(fd.name))
    return found


async def test_on_linux_the_kernel_runs_through_the_entry_and_bwrap(
    tmp_path: Path, here: Mechanism
) -> None:
    (tmp_path / "project").mkdir()
    bubblewrap.prepare_kernel_dir(tmp_path / "k")
    kept = KernelLimits(
        "k1",
        "systemd scope",
        {"memory": tmp_path / "m"},
        {"RLIMIT_DATA": (1, 2)},
        ["/usr/bin/systemd-run", "--scope"],
    )
    confiner = LINUX.confiner
    assert isinstance(confiner, BubblewrapConfiner)
    sandbox = SandboxLaunch(RULES, tmp_path / "k", kept, "bubblewrap", confiner=confiner)
    connection = tmp_path / "kernel-k1.json"
    connection.write_text("{}")
    seen: list[tuple[list[str], tuple[int, ...], str]] = []

    def start(argv: list[str], fds: tuple[int, ...]) -> str:
        seen.append((argv, fds, str(Path(f"/proc/self/fd/{fds[0]}").readlink())))
        return "started"

    kernel = ["python", "-m", "ipykernel_launcher"]
    project = tmp_path / "project"
    assert (
        sandbox.spawn(kernel, start, cwd=project, connection_file=connection, unset_env=["TOKEN"])
        == "started"
    )
    [(argv, fds, opened)] = seen
    info = bubblewrap.info_file(tmp_path / "k")
    assert opened == str(info) and not open_on(info)  # open for bwrap while it starts, alone
    assert argv[:2] == ["/usr/bin/systemd-run", "--scope"]
    plan = entry.Plan([str(tmp_path / "m/cgroup.procs")], {"RLIMIT_DATA": (1, 2)}, landlock=True)
    assert confiner.plan(sandbox) == plan
    assert argv[2:] == entry.command(
        plan,
        bubblewrap.command(
            RULES,
            kernel,
            bwrap="/usr/bin/bwrap",
            cwd=project,
            kernel_dir=tmp_path / "k",
            connection_file=connection,
            unset_env=["TOKEN"],
            info_fd=fds[0],
        ),
    )
    assert argv[argv.index("/usr/bin/bwrap") + 1 : argv.index("/usr/bin/bwrap") + 3] == [
        "--info-fd",
        str(fds[0]),
    ]

    def fail(argv: list[str], fds: tuple[int, ...]) -> str:
        raise OSError(2, "no bwrap")

    with pytest.raises(OSError, match="no bwrap"):
        sandbox.spawn(kernel, fail, cwd=project, connection_file=connection, unset_env=[])
    assert not open_on(info)
    assert sandbox.has_init and sandbox.init is None
    info.write_text(f'{{"child-pid": {os.getpid()}}}')
    await sandbox.started()
    assert sandbox.init == ProcessIdentity.of(os.getpid())
    assert SandboxLaunch.from_json(sandbox.to_json()).init == sandbox.init


async def test_on_macos_no_init_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bubblewrap.info_file(tmp_path).write_text(f'{{"child-pid": {os.getpid()}}}')
    sandbox = SandboxLaunch(RULES, tmp_path, KernelLimits("k1", "none"), "sandbox-exec")
    await sandbox.started()
    assert sandbox.init is None


def test_a_sandbox_whose_init_is_gone_is_not_signalled(tmp_path: Path) -> None:
    me = ProcessIdentity.of(os.getpid())
    assert me is not None
    gone = ProcessIdentity(me.pid, "not when it started", me.boot)  # its pid, reused
    for init in (None, gone):
        confiner = Recording()  # defined below
        sandbox = SandboxLaunch(
            RULES, tmp_path, KernelLimits("k1", "none"), "bubblewrap", init, confiner=confiner
        )
        sandbox.signal(signal.SIGKILL)  # would end this test's process
        sandbox.signal(signal.SIGINT)
        assert confiner.signalled == []


@pytest.mark.parametrize(
    ("mechanism_", "memory", "kills_before", "ending"),
    [
        ("cgroup v1", 1 << 30, 2, Ending("memory_limit", "killed: memory limit 1 GiB reached")),
        ("cgroup v1", 1 << 30, 3, None),  # the kills were before this start
        ("cgroup v1", None, 2, None),
        ("none", 1 << 30, 0, None),
    ],
)
def test_how_the_sandbox_ended_the_kernel(
    tmp_path: Path, mechanism_: str, memory: int | None, kills_before: int, ending: Ending | None
) -> None:
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    kept = KernelLimits("k1", mechanism_, {"memory": tmp_path}, oom_kills=kills_before)
    rules = SandboxRules(**{**vars(RULES), "memory": memory})
    assert SandboxLaunch(rules, tmp_path, kept, "bubblewrap").ending() == ending


def test_a_removed_sandbox_leaves_nothing(tmp_path: Path) -> None:
    directory, group, project = tmp_path / "k", tmp_path / "group", tmp_path / "project"
    bubblewrap.prepare_kernel_dir(directory)
    group.mkdir()
    project.mkdir()
    assert placeholders.make(directory, [(project / ".vscode", "dir")]) == [project / ".vscode"]
    sandbox = SandboxLaunch(
        RULES, directory, KernelLimits("k1", "cgroup v1", {"memory": group}), "b"
    )
    sandbox.remove()
    assert not directory.exists() and not group.exists()
    assert list(project.iterdir()) == []  # its placeholders too, as it ends
    assert not placeholders.record_file(directory).exists()
    sandbox.remove()  # twice: harmless
    assert sandbox.wire() == sandbox_wire(RULES, "b")
    assert sandbox.wire()["lacks"] == []


@pytest.mark.process  # it starts one (mutmut's fast-test stats lose their coverage with it)
def test_a_sandbox_reaps_the_process_it_was_launched_with_as_it_ends(tmp_path: Path) -> None:
    sandbox = SandboxLaunch(RULES, tmp_path, KernelLimits("k1", "none"), "b")
    assert sandbox.launched is None
    sandbox.reap()  # nothing launched here (a kernel taken back): nothing to wait for
    launched = subprocess.Popen([sys.executable, "-c", "pass"])
    sandbox.launched = launched
    sandbox.reap()
    assert launched.returncode == 0 and sandbox.launched is None  # waited for: no zombie


async def test_under_landlock_alone_the_kernel_is_the_launched_process(
    temp_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    confiner = LandlockConfiner(7)
    monkeypatch.setattr(launch, "probe", lambda: Mechanism(confiner))
    sandbox = SandboxLaunch.prepare(RULES, "0123456789abcdef-eeee")
    assert sandbox.confiner is confiner and not sandbox.has_init
    assert sandbox.mechanism == "landlock only (ABI 7)"
    assert sandbox.lacks == confiner.lacks(RULES)
    temp = sandbox.directory / "tmp"
    assert stat.S_IMODE(temp.stat().st_mode) == 0o700  # its own temp dir, made by prepare
    connection = tmp_path / "kernel.json"
    connection.write_text("{}")
    seen: list[tuple[list[str], tuple[int, ...]]] = []
    kernel = ["/usr/bin/python3", "-m", "ipykernel_launcher"]
    sandbox.spawn(
        kernel,
        lambda argv, fds: seen.append((argv, fds)),
        cwd=tmp_path,
        connection_file=connection,
        unset_env=["JPY_PARENT_PID"],
    )
    [(argv, fds)] = seen
    assert fds == ()  # no cgroup here (no limits in RULES)
    assert argv[:4] == ["/bin/sh", "-c", entry.SCRIPT, entry.NAME]
    assert argv[4:6] == ["0", "0"]  # no cgroup to join, no rlimit
    assert argv[6:] == [
        "/usr/bin/env",
        "-u",
        "JPY_PARENT_PID",
        f"TMPDIR={temp}",
        f"IPYTHONDIR={temp / 'ipython'}",
        *kernel,
    ]
    await sandbox.started()
    assert sandbox.init is None
    sandbox.signal(signal.SIGKILL)  # nothing to signal through: the provisioner signals it
    sandbox.remove()
    assert not sandbox.directory.exists()


# What the tests above leave open (each fails on a mutant of launch.py that bench/mutation.py
# found alive without it): the proxy's port kept for a later gateway and a restart, a start
# that never finished, and what goes to the confiner.
class Recording(BubblewrapConfiner):
    """A bubblewrap confiner that records what it is asked to signal and finish."""

    def __init__(self) -> None:
        super().__init__("/usr/bin/bwrap")
        self.signalled: list[tuple[int, int]] = []
        self.finished: list[int | None] = []

    def signal_init(self, init_pid: int, signum: int) -> None:
        self.signalled.append((init_pid, signum))

    async def started(self, sandbox: launch.KernelSandbox, pid: int | None) -> ProcessIdentity:
        self.finished.append(pid)
        me = ProcessIdentity.of(os.getpid())
        assert me is not None
        return me


async def test_the_confiner_is_told_the_launched_pid_and_the_signal(tmp_path: Path) -> None:
    confiner = Recording()
    sandbox = SandboxLaunch(
        RULES, tmp_path, KernelLimits("k1", "none"), "bubblewrap", confiner=confiner
    )
    await sandbox.started(4321)
    assert confiner.finished == [4321] and sandbox.init == ProcessIdentity.of(os.getpid())
    sandbox.signal(signal.SIGUSR1)
    assert confiner.signalled == [(os.getpid(), signal.SIGUSR1)]


def test_the_proxys_port_is_kept_for_a_later_gateway(tmp_path: Path) -> None:
    kept = SandboxLaunch(RULES, tmp_path, KernelLimits("k1", "none"), "landlock", proxy_port=40123)
    assert kept.proxy_port == 40123 and kept.proxy is None
    assert kept.network_refusals(0.0) == []  # no proxy listens yet
    data = json.loads(json.dumps(kept.to_json()))
    assert data["proxy_port"] == 40123
    assert SandboxLaunch.from_json(data).proxy_port == 40123


def test_a_restart_keeps_the_proxy_of_the_start_before(temp_root: Path, here: Mechanism) -> None:
    before = SandboxLaunch.prepare(RULES, "0123456789abcdef-ffff")
    before.proxy_port = 40123
    again = SandboxLaunch.prepare(RULES, "0123456789abcdef-ffff", previous=before)
    assert (again.proxy, again.proxy_port) == (before.proxy, 40123)
    assert SandboxLaunch.prepare(RULES, "0123456789abcdef-ffff").proxy_port is None


def test_removing_a_start_that_never_finished_lets_its_shell_go(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    sandbox = SandboxLaunch(RULES, tmp_path / "k", KernelLimits("k1", "none"), "landlock")
    sandbox.ready_fd = write_end
    sandbox.remove()
    assert sandbox.ready_fd is None
    assert os.read(read_end, 1) == b""  # the end of the pipe: the shell runs nothing
    os.close(read_end)


def test_the_wire_leaves_the_packages_dir_to_the_provisioner() -> None:
    assert sandbox_wire(RULES, "bubblewrap")["packages"] is None


class Refusals:
    """A kernel's proxy as network_refusals() reads it: the times asked for, and its answer."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def refusals_since(self, since: float) -> list[str]:
        self.asked.append(since)
        return ["refused"]


def test_the_refusals_are_its_proxys_since_the_time_asked(tmp_path: Path) -> None:
    sandbox = SandboxLaunch(RULES, tmp_path, KernelLimits("k1", "none"), "landlock")
    proxy = Refusals()
    sandbox.proxy = proxy  # type: ignore[assignment]
    assert sandbox.network_refusals(12.5) == ["refused"]
    assert proxy.asked == [12.5]


def test_rules_kept_before_readable_paths_existed_show_none() -> None:
    kept = rules_to_json(RULES)
    assert kept["readable"] == []
    del kept["readable"]
    assert rules_from_json(kept).readable == ()
    more = rules_to_json(SandboxRules(**{**vars(RULES), "readable": (Path("/home/p/.x"),)}))
    assert more["readable"] == ["/home/p/.x"]
