"""Forks through the gateway's API (SPEC §10): a new kernel that starts as a copy of another's
live state or of one of its checkpoints, its origin untouched; refusals in one sentence."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import nbformat
import pytest

from loomgate.gateway.errors import BadRequest
from loomgate.gateway.kernels.forks import origin_of
from tests.gateway.copies.test_checkpoints import API, checkpoint, value
from tests.support.cells import run
from tests.support.gateways import GatewayProcess, client


def present(path: Path) -> bool:
    """Return whether `path` exists."""
    return path.exists()


@pytest.fixture
async def forks(http: httpx.AsyncClient) -> AsyncIterator[list[str]]:
    """The ids of the forks a test makes (stopped afterwards)."""
    made: list[str] = []
    try:
        yield made
    finally:
        for fork in made:
            await http.delete(f"{API}/{fork}")


async def forked(http: httpx.AsyncClient, made: list[str], fork: str) -> dict[str, object]:
    """Fork `fork` into a new named kernel; return its model."""
    r = await http.post(API, json={"name": f"fork-{os.urandom(3).hex()}", "fork": fork})
    assert r.status_code == 201, r.text
    model: dict[str, object] = r.json()["kernel"]
    made.append(str(model["id"]))
    return model


async def test_a_fork_starts_as_its_origins_copy_and_goes_its_own_way(
    http: httpx.AsyncClient, kernel: str, forks: list[str]
) -> None:
    sleeper = "threading.Thread(target=time.sleep, args=(60,), name='sleeper', daemon=True).start()"
    await run(http, kernel, f"x = 41\nimport os, threading, time\norigin = os.getpid()\n{sleeper}")
    fork = await forked(http, forks, kernel)
    lacks = ["threads ['sleeper'] run in the kernel; a copy has none of them"]
    assert fork["forked_from"] == {
        "kernel": kernel,
        "name": None,
        "checkpoint": None,
        "after": 1,
        "lacks": lacks,
    }
    assert fork["state"] == "idle" and fork["executions"] == 0
    first = await run(http, str(fork["id"]), "x += 1\nprint(x, os.getpid() != origin)")
    assert first["number"] == 1  # its own records, from 1
    assert first["state"] == "completed" and "42 True" in str(first["output"])
    assert await value(http, kernel, "x") == "41"  # the origin is untouched
    # Its notebook tells its whole story: the origin's cells up to the fork, then its own.
    book = (await http.get(f"{API}/{fork['id']}/notebook")).json()
    nbformat.validate(nbformat.from_dict(book))
    assert [(c["cell_type"], c["id"]) for c in book["cells"]] == [
        ("code", "origin-in-1"),
        ("markdown", "forked"),
        ("code", "in-1"),
    ]
    assert book["cells"][1]["source"] == (
        f"**Forked here** from kernel {kernel}: its state after In [1]. The cells above ran in "
        "that kernel; the cells below ran in the fork, numbered from In [1]."
    )
    await checkpoint(http, kernel, name="cp")
    await run(http, kernel, "x = 7")
    from_checkpoint = await forked(http, forks, f"{kernel}@cp")
    assert from_checkpoint["forked_from"] == {
        "kernel": kernel,
        "name": None,
        "checkpoint": "cp",
        "after": 2,
        "lacks": lacks,  # what the checkpoint lacked when it was taken
    }
    assert await value(http, str(from_checkpoint["id"]), "x") == "41"
    assert await value(http, kernel, "x") == "7"
    # It shares its origin's packages dir, which stays while either uses it.
    origin = (await http.get(f"{API}/{kernel}")).json()["kernel"]
    packages = Path(str(origin["sandbox"]["packages"]))
    assert fork["sandbox"]["packages"] == str(packages) and present(packages)
    await http.delete(f"{API}/{kernel}")  # a fork is a kernel of its own: it outlives its origin
    assert await value(http, str(fork["id"]), "x") == "42"
    assert present(packages)
    await http.delete(f"{API}/{from_checkpoint['id']}")
    assert present(packages)
    await http.delete(f"{API}/{fork['id']}")
    assert not present(packages)  # with the last of its kernels


async def test_forks_are_refused_in_one_sentence(http: httpx.AsyncClient, kernel: str) -> None:
    mismatch = (
        "a fork runs under its origin's profile (none), never another: leave out sandbox, or "
        "connect to a new kernel under workspace"
    )
    for body, status, message in [
        (
            {"fork": f"{kernel}@"},
            400,
            f"fork must be a kernel, or KERNEL@CHECKPOINT, not '{kernel}@'",
        ),
        (
            {"fork": f"{kernel}@nope"},
            404,
            f"kernel {kernel[:8]} has no checkpoint 'nope' (its checkpoints: none)",
        ),
        ({"fork": kernel, "sandbox": "workspace"}, 409, mismatch),
        (
            {"fork": kernel, "cwd": "/"},
            400,
            "a fork takes its origin's kernel spec, cwd and environment",
        ),
    ]:
        r = await http.post(API, json={"name": "refused-fork", **body})
        assert (r.status_code, r.json()["message"]) == (status, message), r.text


NOTE = "__import__('tempfile').gettempdir() + '/note'"  # in the kernel's sandbox's dir


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
async def test_a_fork_shares_its_origins_sandbox_and_outlives_it(
    confined_root: Path, confined_gateway: GatewayProcess, mechanism: str
) -> None:
    body = {"name": "origin"}
    if mechanism == "landlock":  # Landlock alone refuses the default (its .git read-only)
        confined_gateway.env["LOOMGATE_SANDBOX_MECHANISM"] = "landlock"
        config = confined_root / "config" / "loomgate" / "sandbox.toml"
        config.write_text(config.read_text() + "\n[profiles.held]\nwritable = []\n")
        body["sandbox"] = "held"
    gateway = confined_gateway.start()
    async with client(gateway) as http:
        r = await http.post(API, json=body)
        assert r.status_code == 201, r.text
        origin = r.json()["kernel"]
        assert str(origin["sandbox"]["mechanism"]).startswith(
            "bubblewrap" if mechanism == "bubblewrap" else "landlock only"
        )
        sandbox_dir = Path(str(origin["sandbox"]["packages"])).parent
        # Its temporary files are in its sandbox's dir: the fork finds them there.
        await run(http, "origin", f"x = 41\nopen({NOTE}, 'w').write('kept')")
        fork = await forked(http, [], "origin")
        assert fork["sandbox"] == origin["sandbox"]  # the same rules, mechanism and packages dir
        assert await value(http, str(fork["id"]), f"x, open({NOTE}).read()") == "41 kept"
        # A restart of either starts its next process in the sandbox, and leaves the other's.
        reset = await http.post(f"{API}/{fork['id']}/reset")
        assert reset.status_code == 200, reset.text
        assert await value(http, str(fork["id"]), "'x' in dir()") == "False"
        assert await value(http, "origin", "x") == "41"
        await run(http, str(fork["id"]), "x = 1")
        assert (await http.post(f"{API}/origin/reset")).status_code == 200
        assert await value(http, str(fork["id"]), f"x, open({NOTE}).read()") == "1 kept"
        # Its origin's stop leaves the sandbox to the fork.
        assert (await http.delete(f"{API}/origin")).status_code == 200
        assert await value(http, str(fork["id"]), f"open({NOTE}).read()") == "kept"
        assert present(sandbox_dir)
        gateway.kill()
    gateway.start()
    async with client(gateway) as http:
        assert await value(http, str(fork["id"]), "x") == "1"  # taken back
        assert (await http.delete(f"{API}/{fork['id']}")).status_code == 200
    assert not present(sandbox_dir)  # the last of its kernels took it away


@pytest.mark.parametrize(
    ("fork", "expected"),
    [
        ("k", ("k", None)),
        ("k@cp1", ("k", "cp1")),
        ("analysis.ipynb@after-3", ("analysis.ipynb", "after-3")),
        ("a@b@c", ("a@b", "c")),  # the checkpoint is what follows the last @
        ("k@", None),
        ("@cp", None),
    ],
)
def test_what_a_fork_names(fork: str, expected: tuple[str, str | None] | None) -> None:
    if expected is None:
        with pytest.raises(BadRequest, match="fork must be a kernel, or KERNEL@CHECKPOINT"):
            origin_of(fork)
    else:
        assert origin_of(fork) == expected
