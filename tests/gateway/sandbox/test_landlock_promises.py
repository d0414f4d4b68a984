"""Under Landlock alone (LOOMGATE_SANDBOX_MECHANISM=landlock, as where AppArmor refuses bwrap
its namespaces) a real gateway keeps the default's promises or says it cannot: a profile whose
writable dirs keep .git and the protected names read-only is refused with the sentence naming the
fix, and nothing starts; a profile with no writable dir starts and works. Each way a kernel broke
them there (issue 49) is tried by every profile that starts, and none reaches the project."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement.landlock_confiner import WRITABLE_DIR
from loomgate.gateway.sandbox.policy.protected_names import DEFAULT_PROTECTED
from tests.gateway.sandbox.test_unenforceable_sandbox import kernel_processes
from tests.support.cells import KERNELS, output_texts, run
from tests.support.gateways import GatewayProcess, client, kernel_processes_of
from tests.support.sandboxed_gateways import sandbox_root

# `open` takes every default name out, `held` makes nothing writable.
PROFILES = (
    'default = "workspace"\n\n[profiles.open]\nunprotected = ['
    + ", ".join(f'"{name}"' for name in DEFAULT_PROTECTED)
    + "]\n\n[profiles.held]\nwritable = []\n"
)
FIX = (
    "which Landlock alone cannot hold (a right on a dir holds for its whole tree): install your "
    "distribution's bubblewrap and let it make user namespaces (on Ubuntu, an AppArmor profile "
    "for /usr/bin/bwrap, which 25.04 and later ship), use a profile with no writable dir "
    "(writable = []), or choose the sandbox profile none"
)
# The person's git, without their own config (a hooksPath there would hide the hook).
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def refusal(profile: str, project: Path) -> str:
    """Return the sentence refusing a kernel of `profile` (as PROFILES has it) in `project`."""
    kept = ".git"
    if profile != "open":
        kept += f" and {len(DEFAULT_PROTECTED)} other names (.mcp.json, .claude, …)"
    return f"profile {profile!r} keeps {kept} read-only inside its writable dir {project}, {FIX}"


def git(project: Path, *args: str) -> None:
    """Run the person's git in `project`, as they would, outside any sandbox."""
    subprocess.run(
        ["git", "-c", "user.name=p", "-c", "user.email=p@example.org", *args],
        cwd=project,
        env={**os.environ, **GIT_ENV},
        check=True,
        capture_output=True,
    )


def names_in(directory: Path) -> list[str]:
    """Return the names in `directory`, sorted."""
    return sorted(path.name for path in directory.iterdir())


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """A dir under /var/tmp (a confined kernel's /tmp is its own) with the profiles above."""
    assert shutil.which("git"), "these tests need git"
    with sandbox_root() as path:
        (path / "config" / "loomgate" / "sandbox.toml").write_text(PROFILES)
        yield path


@pytest.fixture(scope="module")
def gateway(root: Path) -> Iterator[GatewayProcess]:
    """A gateway whose confined kernels run under Landlock alone; stopped with its kernels."""
    env = {"XDG_CONFIG_HOME": str(root / "config"), "LOOMGATE_SANDBOX_MECHANISM": "landlock"}
    process = GatewayProcess(root / "state", env=env, cwd=root / "project")
    try:
        process.start()
        yield process
    finally:
        process.stop()


@pytest.fixture
def project(root: Path, request: pytest.FixtureRequest) -> Path:
    """A git repository of its own for this test, with one commit (the real path)."""
    path = (root / f"project-{request.node.name}").resolve()
    path.mkdir()
    (path / "README").write_text("a project\n")
    git(path, "init", "-q")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "first")
    return path


@dataclass(frozen=True)
class Vector:
    """A way a kernel broke its profile's promises under Landlock alone: its cell, what the
    person does afterwards, and the proof that nothing reached the project."""

    name: str
    cell: Callable[[Path], str]  # from the project's path
    holds: Callable[[Path, dict[str, object]], None]  # (project, what was seen before)
    after: Callable[[Path], None] = lambda project: None


def hook(marker: Path) -> str:
    """Return a cell that writes a pre-commit hook touching `marker`."""
    return (
        "import os\n"
        f"open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\ntouch {marker}\\n')\n"
        "os.chmod('.git/hooks/pre-commit', 0o755)"
    )


def no_hook(project: Path, before: dict[str, object]) -> None:
    """Check that .git/hooks holds no pre-commit hook."""
    assert not (project / ".git" / "hooks" / "pre-commit").exists()


def same_config(project: Path, before: dict[str, object]) -> None:
    """Check that .git/config is as it was."""
    assert (project / ".git" / "config").read_bytes() == before["config"]


def no_mcp_json(project: Path, before: dict[str, object]) -> None:
    """Check that the project has no .mcp.json."""
    assert not (project / ".mcp.json").exists()


def same_git(project: Path, before: dict[str, object]) -> None:
    """Check that .git is the dir it was, and no other took its name."""
    assert (project / ".git").stat().st_ino == before["git"]
    assert not (project / ".git-moved").exists()


def hook_never_ran(project: Path, before: dict[str, object]) -> None:
    """Check that the person's commit ran no hook the kernel wrote."""
    assert not (project.parent / f"{project.name}.hook-ran").exists()


VECTORS = [
    Vector("hooks", lambda project: hook(project.parent / "unused"), no_hook),
    Vector(
        "config",
        lambda project: "open('.git/config', 'a').write('[core]\\n\\thooksPath = /var/tmp\\n')",
        same_config,
    ),
    Vector(
        "mcp-json",
        lambda project: "open('.mcp.json', 'w').write('{\"mcpServers\": {}}')",
        no_mcp_json,
    ),
    Vector(
        "git-renamed",
        lambda project: "import os\nos.rename('.git', '.git-moved')\nos.mkdir('.git')",
        same_git,
    ),
    Vector(
        "hook-at-commit",
        lambda project: hook(project.parent / f"{project.name}.hook-ran"),
        hook_never_ran,
        after=lambda project: git(project, "commit", "-q", "--allow-empty", "-m", "person's"),
    ),
]


@pytest.mark.parametrize("vector", VECTORS, ids=[vector.name for vector in VECTORS])
async def test_no_profile_breaks_what_it_keeps_read_only_under_landlock_alone(
    gateway: GatewayProcess, project: Path, vector: Vector
) -> None:
    before: dict[str, object] = {
        "config": (project / ".git" / "config").read_bytes(),
        "git": (project / ".git").stat().st_ino,
    }
    refused: dict[str, tuple[int, str]] = {}
    started: list[str] = []
    async with client(gateway) as http:
        try:
            for profile in ("workspace", "strict", "open", "held"):
                body = {"name": f"{vector.name}-{profile}", "sandbox": profile, "cwd": str(project)}
                r = await http.post(KERNELS, json=body)
                if r.status_code != 201:
                    refused[profile] = (r.status_code, r.json()["message"])
                    continue
                started.append(profile)
                # Whatever starts tries the vector.
                await run(http, f"{vector.name}-{profile}", vector.cell(project))
        finally:
            for profile in started:
                await http.delete(f"{KERNELS}/{vector.name}-{profile}")
    vector.after(project)
    vector.holds(project, before)
    assert started == ["held"]
    assert refused == {p: (503, refusal(p, project)) for p in ("workspace", "strict", "open")}


async def test_the_default_is_refused_with_the_fix_and_a_profile_landlock_holds_works(
    gateway: GatewayProcess, project: Path
) -> None:
    assert gateway.proc is not None
    listed = names_in(project)
    async with client(gateway) as http:
        info = (await http.get("/api/loomgate/info")).json()
        assert info["sandbox_mechanism"].startswith("landlock only")
        assert WRITABLE_DIR in info["sandbox_lacks"]
        r = await http.post(KERNELS, json={"name": "default", "cwd": str(project)})
        assert (r.status_code, r.json()["message"]) == (503, refusal("workspace", project))
        assert kernel_processes(gateway.proc.pid) == []
        assert kernel_processes_of(gateway.state_dir) == set()
        assert (await http.get(KERNELS)).json()["kernels"] == []
        assert (await http.get("/api/kernels")).json() == []
        # Nothing was made in the project either: no placeholder, no record of one.
        assert names_in(project) == listed
        # What the sentence offers: a profile with no writable dir starts and works.
        r = await http.post(KERNELS, json={"name": "held", "sandbox": "held", "cwd": str(project)})
        assert r.status_code == 201, r.text
        try:
            sandbox = r.json()["kernel"]["sandbox"]
            assert sandbox["profile"] == "held" and sandbox["writable"] == []
            assert (
                sandbox["mechanism"].startswith("landlock only")
                and WRITABLE_DIR in sandbox["lacks"]
            )
            done = await run(http, "held", "print(6 * 7)")
            assert output_texts(done) == ["42"], done
            temp = await run(
                http,
                "held",
                "import tempfile\nwith tempfile.TemporaryFile() as f: print(f.write(b'xy'))",
            )
            assert output_texts(temp) == ["2"], temp
            readme = await run(http, "held", "print(open('README').read().strip())")
            assert output_texts(readme) == ["a project"], readme
            wrote = await run(http, "held", "open('made.txt', 'w').write('x')")
            assert wrote["state"] == "error" and not (project / "made.txt").exists()
        finally:
            await http.delete(f"{KERNELS}/held")
