"""Sandboxed kernels on a real gateway: real escapes from real kernels fail and say which rule
stopped them, and everything else a kernel does keeps working.

The gateway runs with a HOME of fake secrets, and everything it and its kernels use lies outside
the host's /tmp (which every sandbox replaces with its own), so that what a test finds hidden is
hidden by the rule under test.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import sysconfig
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cells import KERNELS, PNG, output_texts, run, submit
from tests.support.gateways import GatewayProcess, client

PROFILES = """\
default = "workspace"

[profiles.small]
writable = ["{cwd}"]
network = true
memory = "300MiB"
processes = 40
"""


@dataclass
class Place:
    """Where a sandboxed gateway lives: a fake home with secrets, its state, a project."""

    root: Path
    home: Path
    state: Path
    project: Path
    outside: Path
    config: Path

    @property
    def secrets(self) -> dict[str, Path]:
        """Return the files a kernel must not read, by what they are."""
        runtime = self.home / ".local/share/jupyter/runtime"
        return {
            "ssh key": self.home / ".ssh/id_rsa",
            "aws credentials": self.home / ".aws/credentials",
            "netrc": self.home / ".netrc",
            "gateway.json": self.state / "gateway.json",
            "token": self.state / "token",
            "another kernel's connection file": runtime / "kernel-other.json",
            "a Jupyter server's token": runtime / "jpserver-1.json",
        }


@pytest.fixture(scope="module")
def place() -> Iterator[Place]:
    """A fake home with secrets, a state dir and a project, outside the host's /tmp."""
    root = Path("/var/tmp") / f"loomgate-sandbox-{uuid.uuid4().hex[:8]}"
    home, state, project, outside = (root / n for n in ("home", "state", "project", "outside"))
    config = root / "config" / "loomgate"
    for directory in (home, project, outside / "doomed", config):
        directory.mkdir(parents=True)
    here = Place(root, home, state, project, outside, config)
    for path in here.secrets.values():
        if path.parent != state:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("SECRET\n")
    (config / "sandbox.toml").write_text(PROFILES)
    try:
        yield here
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def sandboxed(place: Place) -> Iterator[GatewayProcess]:
    """A gateway whose default profile is the shipped one (workspace)."""
    env = {"HOME": str(place.home), "XDG_CONFIG_HOME": str(place.config.parent)}
    gateway = GatewayProcess(place.state, env=env)
    try:
        gateway.start()
        yield gateway
    finally:
        gateway.stop()


@pytest.fixture(scope="module")
def kernels(sandboxed: GatewayProcess, place: Place) -> Iterator[dict[str, str]]:
    """One kernel per profile (workspace, strict, none), working in the project."""
    made: dict[str, str] = {}
    with httpx.Client(base_url=sandboxed.url, headers=sandboxed.headers, timeout=120) as http:
        try:
            for profile in ("workspace", "strict", "none"):
                r = http.post(KERNELS, json={"sandbox": profile, "cwd": str(place.project)})
                assert r.status_code == 201, r.text
                made[profile] = r.json()["kernel"]["id"]
            yield made
        finally:
            for kernel_id in made.values():
                http.delete(f"{KERNELS}/{kernel_id}")


@pytest.fixture
async def http(sandboxed: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for the sandboxed gateway."""
    async with client(sandboxed) as c:
        yield c


def four_ways(path: Path, python: str, command: str, flags: str, then: str = "") -> dict[str, str]:
    """Return cells that touch `path` through plain Python (`python`, with `{p}` for the path),
    `os.system` and `subprocess` (`command` PATH), and ctypes (`open(path, flags)`, `then`
    after it); each raises or prints its failure."""
    p = repr(str(path))
    return {
        "python": python.format(p=p),
        "os.system": (
            f"import os\nif os.system('{command} ' + {p}): raise OSError('{command} failed')"
        ),
        "subprocess": f"import subprocess; subprocess.run(['{command}', {p}], check=True)",
        "ctypes": (
            "import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"fd = libc.open({p}.encode(), {flags})\n"
            f"if fd < 0: raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), {p})"
            + then
        ),
    }


def reads(path: Path) -> dict[str, str]:
    """Return cells that read `path` four ways."""
    then = "\nbuf = ctypes.create_string_buffer(64)\nprint(libc.read(fd, buf, 64), buf.value)"
    return four_ways(path, "print(open({p}).read())", "cat", "os.O_RDONLY", then)


def writes(path: Path) -> dict[str, str]:
    """Return cells that write `path` four ways."""
    return four_ways(path, "open({p}, 'w').write('x')", "touch", "os.O_WRONLY | os.O_CREAT, 0o644")


async def rule_of(http: httpx.AsyncClient, execution: dict[str, Any]) -> dict[str, Any] | None:
    """Return the sandbox failure of a finished execution: from its reply, else once a
    subprocess's stderr, which reaches IOPub after the cell's end, has amended its record (no
    event says it will come: the record is read again for a while)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LATE_OUTPUT
    path = f"{KERNELS}/{execution['kernel_id']}/executions/{execution['number']}"
    while execution.get("sandbox_failure") is None and loop.time() < deadline:
        await asyncio.sleep(0.05)
        execution = (await http.get(path)).json()["execution"]
    failure: dict[str, Any] | None = execution.get("sandbox_failure")
    return failure


LATE_OUTPUT = 3.0  # seconds a subprocess's stderr may come after its cell's end


def failed(execution: dict[str, Any]) -> bool:
    """Return whether a cell failed (raised; a command's failure raises too)."""
    return execution["state"] == "error"


CONFINED = ("workspace", "strict")
SECRETS = (
    "ssh key",
    "aws credentials",
    "netrc",
    "gateway.json",
    "token",
    "another kernel's connection file",
    "a Jupyter server's token",
)


@pytest.mark.parametrize("profile", CONFINED)
@pytest.mark.parametrize("secret", SECRETS)
async def test_a_secret_cannot_be_read_and_the_reply_names_the_rule(
    http: httpx.AsyncClient,
    kernels: dict[str, str],
    place: Place,
    profile: str,
    secret: str,
) -> None:
    path = place.secrets[secret]
    for way, code in reads(path).items():
        execution = await run(http, kernels[profile], code)
        assert failed(execution), (way, execution)
        assert "SECRET" not in "\n".join(output_texts(execution)), way
        failure = await rule_of(http, execution)
        assert failure is not None, (way, "\n".join(output_texts(execution)))
        assert (failure["rule"], failure["profile"]) == ("hidden", profile), way


async def test_the_unconfined_kernel_reads_what_the_others_cannot(
    http: httpx.AsyncClient, kernels: dict[str, str], place: Place
) -> None:
    execution = await run(http, kernels["none"], reads(place.secrets["ssh key"])["python"])
    assert execution["state"] == "completed"
    assert "SECRET" in output_texts(execution)


@pytest.mark.parametrize("profile", CONFINED)
async def test_the_gateway_process_is_out_of_sight_and_reach(
    http: httpx.AsyncClient, kernels: dict[str, str], sandboxed: GatewayProcess, profile: str
) -> None:
    assert sandboxed.proc is not None
    pid = sandboxed.proc.pid
    environ = await run(http, kernels[profile], f"open('/proc/{pid}/environ').read()")
    assert failed(environ)
    signal = await run(http, kernels[profile], f"import os; os.kill({pid}, 0)")
    assert failed(signal)
    assert signal["error"]["name"] in ("ProcessLookupError", "PermissionError")


@pytest.mark.parametrize("profile", CONFINED)
async def test_the_gateways_environ_cannot_be_read_four_ways(
    http: httpx.AsyncClient, kernels: dict[str, str], sandboxed: GatewayProcess, profile: str
) -> None:
    # The gateway's environ holds its state dir (and its token under --token-env). The kernel
    # has a /proc of its own pid namespace, where the gateway's pid names no process: the read
    # fails with ENOENT, as for any pid that does not exist, so no rule can be claimed for it
    # (no path of it lies in a hidden one, and nothing was refused).
    assert sandboxed.proc is not None
    environ = Path(f"/proc/{sandboxed.proc.pid}/environ")
    for way, code in reads(environ).items():
        execution = await run(http, kernels[profile], code)
        assert failed(execution), (way, execution)
        assert "LOOMGATE_STATE_DIR" not in "\n".join(output_texts(execution)), way
        if way in ("python", "ctypes"):  # their error is the cell's own
            assert execution["error"]["name"] in ("FileNotFoundError", "OSError"), way
            assert "No such file or directory" in execution["error"]["value"], way
    unconfined = await run(http, kernels["none"], reads(environ)["python"])
    assert "LOOMGATE_STATE_DIR" in "\n".join(output_texts(unconfined))


def removals(path: Path) -> dict[str, str]:
    """Return cells that delete directory `path` (and what it holds) four ways."""
    p = repr(str(path))
    return {
        "python": f"import shutil; shutil.rmtree({p})",
        "os.system": f"import os\nif os.system('rm -r ' + {p}): raise OSError('rm failed')",
        "subprocess": f"import subprocess; subprocess.run(['rm', '-r', {p}], check=True)",
        "ctypes": (
            "import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"if libc.rmdir({p}.encode()) < 0:\n"
            f"    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), {p})"
        ),
    }


@pytest.mark.parametrize("profile", CONFINED)
async def test_a_directory_outside_the_working_directory_cannot_be_deleted_four_ways(
    http: httpx.AsyncClient, kernels: dict[str, str], place: Place, profile: str
) -> None:
    doomed = place.outside / f"doomed-{profile}"
    (doomed / "inner").mkdir(parents=True)
    (doomed / "inner" / "kept.txt").write_text("kept")
    empty = place.outside / f"empty-{profile}"  # rmdir(2) through ctypes takes only an empty one
    empty.mkdir()
    for way, code in removals(doomed).items():
        if way == "ctypes":
            code = removals(empty)[way]
        execution = await run(http, kernels[profile], code)
        assert failed(execution), (way, output_texts(execution))
        failure = await rule_of(http, execution)
        assert failure is not None, (way, output_texts(execution))
        assert (failure["rule"], failure["profile"]) == ("read_only", profile), way
        # shutil.rmtree's error names the file relative to its dir: the rule comes without it.
        if way != "python":
            assert str(failure["path"]).startswith(str(doomed if way != "ctypes" else empty)), way
        assert (doomed / "inner" / "kept.txt").read_text() == "kept", way
        assert empty.is_dir(), way


@pytest.mark.parametrize("profile", CONFINED)
async def test_writes_outside_the_working_directory_fail(
    http: httpx.AsyncClient, kernels: dict[str, str], place: Place, profile: str
) -> None:
    site_packages = Path(sysconfig.get_paths()["purelib"])
    for target in (place.home / "x", site_packages / "loomgate-x.pth", place.outside / "x"):
        for way, code in writes(target).items():
            execution = await run(http, kernels[profile], code)
            assert failed(execution), (target, way, output_texts(execution))
            failure = await rule_of(http, execution)
            assert failure is not None and failure["rule"] == "read_only", (target, way)
            assert not target.exists()
    removal = await run(
        http, kernels[profile], f"import shutil; shutil.rmtree({str(place.outside / 'doomed')!r})"
    )
    assert failed(removal)
    assert (place.outside / "doomed").is_dir()


@pytest.mark.parametrize("profile", CONFINED)
async def test_the_host_tmp_is_not_the_kernels(
    http: httpx.AsyncClient, kernels: dict[str, str], profile: str
) -> None:
    host_file = Path("/tmp") / f"loomgate-x-{uuid.uuid4().hex[:8]}"
    execution = await run(
        http, kernels[profile], f"open({str(host_file)!r}, 'w').write('x'); print('written')"
    )
    assert execution["state"] == "completed"  # into the kernel's own /tmp
    assert not host_file.exists()


@pytest.mark.parametrize("profile", CONFINED)
async def test_the_working_directory_and_temp_dir_are_writable(
    http: httpx.AsyncClient, kernels: dict[str, str], place: Place, profile: str
) -> None:
    name = f"made-by-{profile}.txt"
    code = (
        "import tempfile, os\n"
        f"open({name!r}, 'w').write('kept')\n"
        "with tempfile.NamedTemporaryFile() as f: f.write(b'x')\n"
        "print(os.getcwd())"
    )
    execution = await run(http, kernels[profile], code)
    assert execution["state"] == "completed", output_texts(execution)
    assert output_texts(execution) == [str(place.project)]
    assert (place.project / name).read_text() == "kept"


@pytest.mark.parametrize("profile", CONFINED)
async def test_ipython_has_a_writable_dir_of_its_own(
    http: httpx.AsyncClient, kernels: dict[str, str], profile: str
) -> None:
    # ~/.ipython is read-only inside: IPython would warn and make a new temp dir at each ask.
    code = (
        "import os, warnings\nfrom IPython.paths import get_ipython_dir\n"
        "warnings.simplefilter('error')\n"
        "d = get_ipython_dir(); print(d, os.access(d, os.W_OK), get_ipython_dir() == d)"
    )
    execution = await run(http, kernels[profile], code)
    assert execution["state"] == "completed", output_texts(execution)
    assert output_texts(execution) == ["/tmp/ipython True True"]


class Listener:
    """A TCP and a UDP server on loopback, outside any sandbox, noting what reaches them."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)

    def datagrams(self) -> list[bytes]:
        """Return the datagrams received so far."""
        got = []
        while True:
            try:
                got.append(self.udp.recv(100))
            except BlockingIOError:
                return got

    def close(self) -> None:
        """Close both servers."""
        self.tcp.close()
        self.udp.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    """Loopback servers for a kernel to try to reach."""
    servers = Listener()
    try:
        yield servers
    finally:
        servers.close()


def reach(listener: Listener) -> str:
    """Return a cell that connects over TCP and sends a UDP datagram to `listener`."""
    tcp_port = listener.tcp.getsockname()[1]
    udp_port = listener.udp.getsockname()[1]
    return (
        "import socket\n"
        "udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"udp.sendto(b'hi', ('127.0.0.1', {udp_port}))\n"
        f"socket.create_connection(('127.0.0.1', {tcp_port}), timeout=5).close()\n"
        "print('reached')"
    )


async def test_strict_has_no_network(
    http: httpx.AsyncClient, kernels: dict[str, str], listener: Listener
) -> None:
    execution = await run(http, kernels["strict"], reach(listener))
    assert failed(execution)
    failure = execution.get("sandbox_failure")
    assert failure is not None and (failure["rule"], failure["profile"]) == ("network", "strict")
    await asyncio.sleep(0)  # nothing to wait for: a datagram sent would already be queued
    assert listener.datagrams() == []


async def test_workspace_reaches_nothing_of_the_host_but_its_proxy(
    http: httpx.AsyncClient, kernels: dict[str, str], listener: Listener
) -> None:
    # Its own network namespace: the host's loopback services (the gateway's port among them)
    # are out of reach of a raw socket, TCP or UDP; the proxy decides the rest (its tests:
    # test_kernel_network.py). An unconfined kernel reaches the same listener (the control).
    execution = await run(http, kernels["workspace"], reach(listener))
    assert execution["error"]["value"] == "[Errno 111] Connection refused"
    assert execution["sandbox_failure"] == {"rule": "network", "profile": "workspace", "path": None}
    control = await run(http, kernels["none"], reach(listener))
    assert output_texts(control) == ["reached"]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    got: list[bytes] = []
    while not got and loop.time() < deadline:
        got = listener.datagrams()
        await asyncio.sleep(0.01)
    assert got == [b"hi"]  # the unconfined kernel's only: the confined one's never arrived


async def test_a_model_cannot_widen_the_default_but_the_person_can(
    http: httpx.AsyncClient, place: Place
) -> None:
    asked = {"sandbox": "none", "stricter_only": True, "cwd": str(place.project)}
    refused = await http.post(KERNELS, json=asked)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"] == "forbidden"
    assert "workspace" in refused.json()["message"]
    stricter = await http.post(KERNELS, json={**asked, "sandbox": "strict"})
    assert stricter.status_code == 201, stricter.text
    await http.delete(f"{KERNELS}/{stricter.json()['kernel']['id']}")
    person = await http.post(KERNELS, json={**asked, "stricter_only": False})
    assert person.status_code == 201, person.text
    assert person.json()["kernel"]["sandbox"]["profile"] == "none"
    await http.delete(f"{KERNELS}/{person.json()['kernel']['id']}")


async def test_a_kernel_shows_its_profile_and_the_default_is_workspace(
    http: httpx.AsyncClient, place: Place
) -> None:
    r = await http.post(KERNELS, json={"cwd": str(place.project)})
    assert r.status_code == 201, r.text
    kernel = r.json()["kernel"]
    try:
        sandbox = kernel["sandbox"]
        assert sandbox["profile"] == "workspace"
        assert sandbox["writable"] == [str(place.project)]
        assert str(place.home / ".ssh") in sandbox["hidden"]
        assert str(place.state) in sandbox["hidden"]
        assert sandbox["network"] is True
        assert "bubblewrap" in sandbox["mechanism"]
        listed = (await http.get(KERNELS)).json()["kernels"]
        assert [k["sandbox"]["profile"] for k in listed if k["id"] == kernel["id"]] == ["workspace"]
        info = (await http.get("/api/loomgate/info")).json()
        assert info["sandbox_default"] == "workspace"
        assert {"none", "workspace", "strict", "small"} <= set(info["sandbox_profiles"])
    finally:
        await http.delete(f"{KERNELS}/{kernel['id']}")


@pytest.fixture
async def small(http: httpx.AsyncClient, place: Place) -> AsyncIterator[str]:
    """A kernel under the test profile `small` (300 MiB, 40 processes)."""
    r = await http.post(KERNELS, json={"sandbox": "small", "cwd": str(place.project)})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["kernel"]["id"]
    try:
        yield kernel_id
    finally:
        await http.delete(f"{KERNELS}/{kernel_id}")


async def test_the_memory_limit_ends_a_runaway_cell_and_the_kernel_comes_back(
    http: httpx.AsyncClient, small: str
) -> None:
    await run(http, small, "kept = 1")
    execution = await run(http, small, "hog = []\nwhile True: hog.append(bytearray(10**7))")
    assert execution["state"] == "died", execution
    assert execution["died"]["reason"] == "killed: memory limit 300 MiB reached"
    assert execution["died"]["cause"] == "memory_limit"
    assert execution["sandbox_failure"]["rule"] == "memory"
    after = await run(http, small, "print(1 + 1)")  # submitted once the restart is ready
    assert after["state"] == "completed", after
    assert after["number"] == execution["number"] + 1
    assert output_texts(after) == ["2"]


async def test_the_process_limit_holds_a_fork_loop(http: httpx.AsyncClient, small: str) -> None:
    code = (
        "import subprocess\n"
        "children = []\n"
        "try:\n"
        "    while True: children.append(subprocess.Popen(['sleep', '30']))\n"
        "finally:\n"
        "    started = len(children)\n"
        "    for child in children: child.kill(); child.wait()\n"
        "    print(started)"
    )
    execution = await run(http, small, code)
    assert failed(execution)
    assert int(output_texts(execution)[0]) < 40
    assert execution["sandbox_failure"]["rule"] == "processes"
    after = await run(http, small, "print('still here')")
    assert output_texts(after) == ["still here"]


async def test_interrupt_input_setup_reset_and_images_work_inside(
    http: httpx.AsyncClient, place: Place
) -> None:
    r = await http.post(KERNELS, json={"sandbox": "strict", "cwd": str(place.project)})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["kernel"]["id"]
    try:
        started = await submit(
            http, kernel_id, "import time; print('go', flush=True); time.sleep(60)", wait=0
        )
        number = started["execution"]["number"]
        interrupted = await http.post(f"{KERNELS}/{kernel_id}/interrupt")
        assert interrupted.status_code == 200, interrupted.text
        ended = (
            await http.get(f"{KERNELS}/{kernel_id}/executions/{number}", params={"wait": 30})
        ).json()["execution"]
        assert ended["state"] == "interrupted", ended
        asking = await submit(http, kernel_id, "print(input('name? '))", wait=10)
        assert asking["execution"]["state"] == "awaiting_input"
        asked = f"{KERNELS}/{kernel_id}/executions/{asking['execution']['number']}"
        answer = await http.post(f"{asked}/input", json={"value": "ada"})
        assert answer.status_code == 200, answer.text
        answered = (await http.get(asked, params={"wait": 30, "head": 10})).json()["execution"]
        assert answered["state"] == "completed" and output_texts(answered)[-1] == "ada"
        image = await run(
            http,
            kernel_id,
            "from IPython.display import Image, display\n"
            f"display(Image(data=__import__('base64').b64decode({PNG!r})))",
        )
        assert image["rich"] and image["rich"][0]["mimetypes"][0] == "image/png"
        examples = Path(__file__).parents[3] / "examples"
        parts = [
            {"name": "startup.py", "code": "import json\nready = 'set up'"},
            {"name": "inspectors.py", "code": (examples / "inspectors.py").read_text()},
        ]
        setup = await http.put(f"{KERNELS}/{kernel_id}/setup", json={"parts": parts, "wait": 30})
        assert setup.status_code == 200, setup.text
        assert [r["state"] for r in setup.json()["setup"]["results"]] == ["ok", "ok"]
        reset = await http.post(f"{KERNELS}/{kernel_id}/reset")
        assert reset.status_code == 200, reset.text
        assert reset.json()["kernel"]["sandbox"]["profile"] == "strict"
        again = await run(http, kernel_id, "print(ready)")  # the setup ran again after the reset
        assert output_texts(again) == ["set up"]
        after = await run(
            http, kernel_id, "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=3)"
        )
        assert after["sandbox_failure"]["rule"] == "network"
    finally:
        await http.delete(f"{KERNELS}/{kernel_id}")


async def test_a_kernel_of_the_stock_jupyter_api_keeps_its_kernelspec_as_it_is(
    http: httpx.AsyncClient, place: Place
) -> None:
    r = await http.post("/api/kernels", json={"name": "python3"})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["id"]
    try:
        kernel = (await http.get(f"{KERNELS}/{kernel_id}")).json()["kernel"]
        assert kernel["sandbox"]["profile"] == "none"  # sandbox.toml's jupyter_api: none
        execution = await run(http, kernel_id, reads(place.secrets["ssh key"])["python"])
        assert output_texts(execution) == ["SECRET", ""]
    finally:
        await http.delete(f"/api/kernels/{kernel_id}")


PROTECTED_CELLS = {
    ".vscode/tasks.json": "import os; os.makedirs('.vscode', exist_ok=True)\n"
    "open('.vscode/tasks.json', 'w').write('{}')",
    ".mcp.json": "open('.mcp.json', 'w').write('{}')",
    ".git/hooks/pre-commit": "import os; os.makedirs('.git/hooks', exist_ok=True)\n"
    "open('.git/hooks/pre-commit', 'w').write('#!/bin/sh')",
    # a shell's message, on the cell's stderr
    ".envrc": "import subprocess\n"
    "subprocess.run(\"echo 'export X=1' > .envrc\", shell=True, check=True)",
}


@pytest.mark.parametrize("profile", CONFINED)
@pytest.mark.parametrize("name", list(PROTECTED_CELLS))
async def test_a_write_to_a_protected_path_names_it(
    http: httpx.AsyncClient, kernels: dict[str, str], place: Place, profile: str, name: str
) -> None:
    """Files programs outside act on (git, editors, MCP hosts, direnv) stay read-only in the
    project, also before they exist, and the reply says so."""
    execution = await run(http, kernels[profile], PROTECTED_CELLS[name])
    assert failed(execution), output_texts(execution)
    failure = await rule_of(http, execution)
    assert failure is not None, output_texts(execution)
    assert (failure["rule"], failure["profile"]) == ("protected", profile)
    path = Path(str(failure["path"]))
    assert path.is_relative_to(place.project / name.partition("/")[0]), path
    assert not (place.project / name).is_file()  # a placeholder dir at most, while it runs


@pytest.mark.parametrize("host_has_it", [True, False])
@pytest.mark.parametrize("way", ["python", "shell"])
async def test_a_path_of_the_hosts_tmp_names_its_own_tmp(
    http: httpx.AsyncClient, kernels: dict[str, str], way: str, host_has_it: bool
) -> None:
    """The same note whether the host has the path or not: it tells nothing of the host's
    /tmp."""
    with tempfile.NamedTemporaryFile(prefix="loomgate-host-", dir="/tmp") as host_file:
        path = host_file.name if host_has_it else f"{host_file.name}-not-on-the-host"
        code = {
            "python": f"open({path!r}).read()",
            "shell": f"import subprocess; subprocess.run(['cat', {path!r}], check=True)",
        }
        execution = await run(http, kernels["workspace"], code[way])
        failure = await rule_of(http, execution)
    assert failure == {"rule": "own_tmp", "profile": "workspace", "path": path}


REPOSITORY = Path(__file__).resolve().parents[3]


async def test_a_kernel_started_in_loomgates_clone_writes_only_its_tmp(
    http: httpx.AsyncClient,
) -> None:
    """The README's first command runs in the clone, an editable install: what a kernel wrote
    into the gateway's source or environment would run at the gateway's next start."""
    r = await http.post(KERNELS, json={"cwd": str(REPOSITORY)})
    assert r.status_code == 201, r.text
    kernel = r.json()["kernel"]
    try:
        assert kernel["sandbox"]["writable"] == []  # status: "only its own /tmp"
        target = REPOSITORY / "gateway/src/loomgate/gateway" / f"x{uuid.uuid4().hex[:8]}.py"
        execution = await run(http, kernel["id"], f"open({str(target)!r}, 'w').write('x')")
        assert failed(execution), output_texts(execution)
        failure = await rule_of(http, execution)
        assert failure == {"rule": "read_only", "profile": "workspace", "path": str(target)}
        assert not target.exists()
        written = await run(http, kernel["id"], "open('/tmp/x', 'w').write('x')")
        assert written["state"] == "completed", output_texts(written)
    finally:
        await http.delete(f"{KERNELS}/{kernel['id']}")


async def test_a_stopped_kernel_leaves_nothing_in_its_directory(
    http: httpx.AsyncClient, place: Place
) -> None:
    """The placeholders of its protected names go with it, by the time its stop answers."""
    project = place.root / f"project-{uuid.uuid4().hex[:8]}"
    project.mkdir()
    (project / "data.csv").write_text("a,b\n")
    r = await http.post(KERNELS, json={"cwd": str(project)})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["kernel"]["id"]
    try:
        assert (project / ".mcp.json").is_dir() and (project / ".git").is_dir()  # while it runs
        execution = await run(http, kernel_id, "open('made.txt', 'w').write('x')")
        assert execution["state"] == "completed", output_texts(execution)
    finally:
        await http.delete(f"{KERNELS}/{kernel_id}")
    assert sorted(p.name for p in project.iterdir()) == ["data.csv", "made.txt"]


async def test_a_confined_kernel_killed_by_a_signal_says_so(
    http: httpx.AsyncClient, place: Place
) -> None:
    # bwrap passes its command's death by SIGKILL on as exit code 137: read as the signal.
    r = await http.post(KERNELS, json={"sandbox": "workspace", "cwd": str(place.project)})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["kernel"]["id"]
    try:
        killed = await run(
            http, kernel_id, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"
        )
        assert killed["state"] == "died", killed
        assert killed["died"]["reason"] == "the kernel process was killed by SIGKILL", killed
        assert killed["died"]["cause"] == "signal", killed
    finally:
        await http.delete(f"{KERNELS}/{kernel_id}")
