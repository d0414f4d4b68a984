"""Sandbox notes on real confined kernels: a shell command (`!cmd`, `%%bash`) that the sandbox
stops gets the same rule note as Python's failure, and nothing the sandbox did not cause does;
a cell that only warns gets none.

The gateway runs with a fake HOME holding a secret; home, project and outside dir lie under
/var/tmp (a confined kernel's /tmp is its own).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cells import KERNELS, output_texts, run
from tests.support.gateways import GatewayProcess, client
from tests.support.sandboxed_gateways import GatewayHome, gateway_home, home_gateway


@dataclass
class Place(GatewayHome):
    """A fake home with a secret and a file only its mode closes, a git project, a dir outside
    the project, and a file in the host's /tmp."""

    host_tmp_file: Path

    @property
    def outside(self) -> Path:
        """Return a dir outside every writable path."""
        return self.root / "outside"


@pytest.fixture(scope="module")
def place() -> Iterator[Place]:
    """The dirs, under /var/tmp, and a file in the host's /tmp; all removed afterwards."""
    with gateway_home("notes") as made:
        here = Place(made.root, Path("/tmp") / f"loomgate-host-{uuid.uuid4().hex[:8]}")
        (here.home / ".ssh").mkdir()
        here.outside.mkdir()
        (here.home / ".ssh" / "id_test").write_text("SECRET\n")
        (here.home / "locked").write_text("x\n")
        (here.home / "locked").chmod(0)
        subprocess.run(["git", "init", "-q", str(here.project)], check=True)
        here.host_tmp_file.write_text("the host's\n")
        try:
            yield here
        finally:
            here.host_tmp_file.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def gateway(place: Place) -> Iterator[GatewayProcess]:
    """A gateway whose kernels get the shipped default profile (workspace)."""
    with home_gateway(place) as started:
        yield started


@pytest.fixture(scope="module")
def kernels(gateway: GatewayProcess, place: Place) -> Iterator[dict[str, str]]:
    """A workspace and a strict kernel, working in the project."""
    made: dict[str, str] = {}
    with httpx.Client(base_url=gateway.url, headers=gateway.headers, timeout=120) as http:
        try:
            for profile in ("workspace", "strict"):
                r = http.post(KERNELS, json={"sandbox": profile, "cwd": str(place.project)})
                assert r.status_code == 201, r.text
                made[profile] = r.json()["kernel"]["id"]
            yield made
        finally:
            for kernel_id in made.values():
                http.delete(f"{KERNELS}/{kernel_id}")


@pytest.fixture
async def http(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for the gateway."""
    async with client(gateway) as c:
        yield c


def note(rule: str, profile: str, path: str | None) -> dict[str, Any]:
    """Return the sandbox failure a reply carries."""
    return {"rule": rule, "profile": profile, "path": path}


# (profile, cell, the note: rule and path, with ~ for the home and {x} for the place's dirs)
NOTED = [
    ("workspace", "!cat ~/.ssh/id_test", "hidden", "~/.ssh/id_test"),
    ("workspace", "!echo start; cat ~/.ssh/id_test; echo after", "hidden", "~/.ssh/id_test"),
    ("workspace", "%%bash\ncat ~/.ssh/id_test", "hidden", "~/.ssh/id_test"),
    ("workspace", "!touch {outside}/x", "read_only", "{outside}/x"),
    ("workspace", "!echo x > ~/y", "read_only", "~/y"),
    ("workspace", "!ls {host_tmp}", "own_tmp", "{host_tmp}"),
    # the same note for a path the host does not have: it tells nothing of the host's /tmp
    (
        "workspace",
        "!cat /tmp/loomgate-not-on-the-host-either",
        "own_tmp",
        "/tmp/loomgate-not-on-the-host-either",
    ),
    ("workspace", "!git config user.name someone", "protected", "{project}/.git/config"),
    ("workspace", "!curl -sS http://127.0.0.1:9/", "network", "127.0.0.1:9"),
    ("strict", "!curl -sS http://127.0.0.1:9/ -o /dev/null", "network", None),
    ("strict", "!touch ~/x", "read_only", "~/x"),
]
# Failures the sandbox did not cause, and cells that only warn: no note.
NOT_NOTED = [
    ("!touch /no-such-dir/x", "completed"),
    ("!cat ~/locked", "completed"),  # its mode, which holds without a sandbox too
    (
        "import warnings, os\n"
        "warnings.warn(f\"could not write: [Errno 30] Read-only file system: '{home}/z'\")",
        "completed",
    ),
    (
        "import logging\nlogging.getLogger('lib').warning("
        '"mkdir -p failed for path {home}/.config/lib: [Errno 30] Read-only file system: '
        "'{home}/.config/lib'\")",
        "completed",
    ),
    (  # a warning does not explain the cell's own error either
        "import warnings\nwarnings.warn(\"[Errno 30] Read-only file system: '{home}/z'\")\n1 / 0",
        "error",
    ),
]


def placed(text: str, place: Place) -> str:
    """Return `text` with the place's dirs filled in."""
    text = text.replace("~/", f"{place.home}/", 1) if text.startswith("~/") else text
    return text.format(
        outside=place.outside,
        home=place.home,
        project=place.project,
        host_tmp=place.host_tmp_file,
    )


@pytest.mark.parametrize(("profile", "cell", "rule", "path"), NOTED)
async def test_a_shell_command_the_sandbox_stopped_gets_the_note(
    http: httpx.AsyncClient,
    kernels: dict[str, str],
    place: Place,
    profile: str,
    cell: str,
    rule: str,
    path: str | None,
) -> None:
    execution = await run(http, kernels[profile], placed(cell, place))
    assert execution.get("sandbox_failure") == note(
        rule, profile, placed(path, place) if path else None
    ), output_texts(execution)
    assert "SECRET" not in "\n".join(output_texts(execution))


@pytest.mark.parametrize(("cell", "state"), NOT_NOTED)
async def test_what_the_sandbox_did_not_cause_gets_no_note(
    http: httpx.AsyncClient, kernels: dict[str, str], place: Place, cell: str, state: str
) -> None:
    execution = await run(http, kernels["workspace"], placed(cell, place))
    assert execution["state"] == state, output_texts(execution)
    assert output_texts(execution), "the cell printed nothing: it tests nothing"
    assert execution.get("sandbox_failure") is None, output_texts(execution)
