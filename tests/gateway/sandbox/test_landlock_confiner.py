"""The Landlock-only confiner: what it refuses and lacks per ABI and profile, and the ruleset it
makes for a kernel; no process runs (real starts through it: test_landlock_confiner_runs.py)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import bubblewrap, landlock
from loomgate.gateway.sandbox.confiner import SandboxUnavailable
from loomgate.gateway.sandbox.landlock_confiner import (
    DEVICE_FILES,
    LACKS,
    NO_UDP,
    LandlockConfiner,
    interpreter_prefixes,
    kernel_temp_dir,
)
from loomgate.gateway.sandbox.limits import (
    NPROC_ROOT,
    NPROC_WEAKER,
    KernelLimits,
    LimitsHost,
)
from loomgate.gateway.sandbox.profiles import SandboxRules
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


def test_the_ruleset_of_a_kernel(place: Path) -> None:
    kernel = kernel_in(place, KernelLimits("k1", "none"), network=False)
    connection = place / "home" / ".ssh" / "kernel.json"  # inside a hidden dir
    connection.write_text("{}")
    confiner = LandlockConfiner(7)
    ruleset = confiner.ruleset(kernel, ["/usr/bin/python3"], connection)
    assert (ruleset.abi, ruleset.tcp_ports, ruleset.scopes) == (7, (), True)
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
