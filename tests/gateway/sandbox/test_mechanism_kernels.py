"""Real gateways under each mechanism this machine can be made to choose: bubblewrap on PATH, the
shipped one (a bwrap on PATH failing as AppArmor makes it fail), Landlock alone (that bwrap, and
LOOMGATE_SANDBOX_MECHANISM=landlock, as a person would force it). Each names the mechanism in
force (info, the kernel's wire form), and a kernel under each profile it holds (the shipped ones
under bubblewrap; under Landlock alone, which refuses them, the same with a writable file for a
writable dir) starts, runs cells, writes in the project and fails to read a hidden file or write
outside; a kernel that takes only TCP starts and runs under each too."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import landlock
from loomgate.gateway.sandbox.confinement.landlock_confiner import LACKS
from tests.support.cells import KERNELS, output_texts, run
from tests.support.gateways import GatewayProcess, client
from tests.support.sandboxed_gateways import sandbox_root

APPARMOR = "bwrap: setting up uid map: Permission denied"
# Workspace and strict with a writable file, not a dir: nothing lies in it that Landlock alone
# would have to keep read-only.
HELD = (
    '[profiles.held]\nwritable = ["{cwd}/made.txt"]\n\n'
    '[profiles.held-strict]\nextends = "strict"\nwritable = ["{cwd}/made.txt"]\n'
)
MECHANISMS = {
    "bubblewrap": "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes, cgroup v1",
    "shipped": "bubblewrap 0.11.0 (shipped with loomgate), landlock scopes, cgroup v1",
    "landlock": f"landlock only (ABI {landlock.abi_version()}), cgroup v1",
}


@pytest.fixture
def root() -> Iterator[Path]:
    """A directory outside the host's /tmp with a fake home holding a key, a project, a dir
    outside it and a PATH dir holding a bwrap that AppArmor refuses."""
    with sandbox_root() as path:
        (path / "home" / ".ssh").mkdir(parents=True)
        (path / "home" / ".ssh" / "id_rsa").write_text("SECRET\n")
        (path / "outside").mkdir()
        denied = path / "bin" / "bwrap"
        denied.parent.mkdir()
        denied.write_text(
            '#!/bin/sh\n[ "$1" = --version ] && { echo "bubblewrap 0.9.0"; exit 0; }\n'
            f"echo '{APPARMOR}' >&2\nexit 1\n"
        )
        denied.chmod(0o755)
        (path / "project" / "made.txt").write_text("")
        (path / "config" / "loomgate" / "sandbox.toml").write_text(HELD)
        yield path


def gateway_under(root: Path, mechanism: str) -> GatewayProcess:
    """Return a gateway (the shipped default profile, a fake home) whose probe chooses
    `mechanism`, as a person's machine or choice would make it."""
    env = {"XDG_CONFIG_HOME": str(root / "config"), "HOME": str(root / "home")}
    if mechanism != "bubblewrap":  # the bwrap on PATH fails first
        env["PATH"] = f"{root / 'bin'}:{os.environ['PATH']}"
    if mechanism == "landlock":
        env["LOOMGATE_SANDBOX_MECHANISM"] = "landlock"
    return GatewayProcess(root / "state", env=env, cwd=root / "project")


@pytest.mark.parametrize("mechanism", list(MECHANISMS))
async def test_each_mechanism_runs_a_confined_kernel(root: Path, mechanism: str) -> None:
    gateway = gateway_under(root, mechanism)
    server = socket.create_server(("127.0.0.1", 0))
    try:
        gateway.start()
        async with client(gateway) as http:
            info = (await http.get("/api/loomgate/info")).json()
            assert info["sandbox_mechanism"] == MECHANISMS[mechanism]
            denied = f"bubblewrap on PATH ({root / 'bin' / 'bwrap'}) cannot make namespaces here"
            refused = {
                "bubblewrap": [],
                "shipped": [f"{denied}: {APPARMOR}"],
                "landlock": [
                    "bubblewrap on PATH: not tried (LOOMGATE_SANDBOX_MECHANISM=landlock)",
                    "bubblewrap shipped with loomgate: not tried "
                    "(LOOMGATE_SANDBOX_MECHANISM=landlock)",
                ],
            }[mechanism]
            assert info["sandbox_refused"] == refused
            assert (info["sandbox_lacks"][: len(LACKS)] == list(LACKS)) is (mechanism == "landlock")
            profiles = ("workspace", "strict")
            if mechanism == "landlock":
                for refused_profile in profiles:
                    r = await http.post(KERNELS, json={"sandbox": refused_profile})
                    assert r.status_code == 503, r.text
                    assert "which Landlock alone cannot hold" in r.json()["message"], r.text
                profiles = ("held", "held-strict")
            for name, profile in zip(("workspace", "strict"), profiles, strict=True):
                r = await http.post(KERNELS, json={"name": name, "sandbox": profile})
                assert r.status_code == 201, r.text
                sandbox = r.json()["kernel"]["sandbox"]
                assert sandbox["mechanism"] == MECHANISMS[mechanism]  # limits: the defaults
                assert bool(sandbox["lacks"]) is (mechanism == "landlock")
            done = await run(http, "workspace", "print(6 * 7)")
            assert output_texts(done) == ["42"], done
            wrote = await run(http, "workspace", "open('made.txt', 'w').write('x'); print('ok')")
            assert output_texts(wrote) == ["ok"], wrote
            assert (root / "project" / "made.txt").read_text() == "x"
            secret = await run(
                http, "workspace", f"open({str(root / 'home/.ssh/id_rsa')!r}).read()"
            )
            assert secret["state"] == "error" and "SECRET" not in str(secret)
            outside = await run(
                http, "workspace", f"open({str(root / 'outside' / 'x')!r}, 'w').write('x')"
            )
            assert outside["state"] == "error" and not (root / "outside" / "x").exists()
            port = server.getsockname()[1]
            reach = (
                f"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('in')"
            )
            offline = await run(http, "strict", reach)
            assert offline["state"] == "error", offline
            # A kernel that takes only TCP (ipymini): its own ports on its own loopback, or,
            # under Landlock alone, the five it may bind; with and without network.
            for kind, profile in zip(("workspace", "strict"), profiles, strict=True):
                name = f"tcp-{kind}"
                body = {"name": name, "sandbox": profile, "kernel_spec": "py"}
                r = await http.post(KERNELS, json=body)
                assert r.status_code == 201, r.text
                done = await run(http, name, "print(6 * 7)")
                assert output_texts(done) == ["42"], done
            for name in ("workspace", "strict", "tcp-workspace", "tcp-strict"):
                await http.delete(f"{KERNELS}/{name}")
    finally:
        server.close()
        gateway.stop()
