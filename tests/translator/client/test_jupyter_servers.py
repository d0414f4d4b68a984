"""Finding the person's Jupyter servers: runtime files, dirs, names, the extension's config."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from loomgate.translator.client import jupyter_servers
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.jupyter_servers import (
    enabled_config,
    is_enabled,
    is_notebook_path,
    live_cells_enabled,
    read_runtime_file,
    running_servers,
    set_enabled,
)
from loomgate.translator.client.target import GatewayTarget

DEAD_PID = 2**22 + 7  # above Linux's pid_max: never a running process


def runtime_file(directory: Path, name: str, **fields: object) -> Path:
    """Write a jpserver-style runtime file; return its path."""
    data = {
        "url": "http://localhost:8888/",
        "token": "t0k",
        "pid": os.getpid(),
        "port": 8888,
        "root_dir": "/home/me",
        "version": "2.21.1",
        **fields,
    }
    path = directory / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("fields", "url", "root"),
    [
        ({}, "http://localhost:8888", "/home/me"),
        ({"url": "http://localhost:8888/lab-base/"}, "http://localhost:8888/lab-base", "/home/me"),
        ({"root_dir": None, "notebook_dir": "/old/nb"}, "http://localhost:8888", "/old/nb"),
    ],
    ids=["plain", "base-url", "classic-notebook"],
)
def test_a_runtime_file_is_read(
    tmp_path: Path, fields: dict[str, object], url: str, root: str
) -> None:
    server = read_runtime_file(runtime_file(tmp_path, "jpserver-1.json", **fields))
    assert server is not None
    assert (server.url, server.root_dir, server.name) == (url, root, "jupyter:8888")
    assert "t0k" not in repr(server)
    assert server.target().token == "t0k"


@pytest.mark.parametrize(
    "text", ["", "{", "[]", '{"url": "http://x/"}', '{"url": "u", "pid": "x", "port": 1}']
)
def test_a_broken_runtime_file_is_skipped(tmp_path: Path, text: str) -> None:
    path = tmp_path / "jpserver-2.json"
    path.write_text(text)
    assert read_runtime_file(path) is None


def test_only_running_servers_are_listed(tmp_path: Path) -> None:
    runtime_file(tmp_path, "jpserver-10.json", port=8890)
    runtime_file(tmp_path, "jpserver-11.json", port=8889, pid=DEAD_PID)
    runtime_file(tmp_path, "nbserver-12.json", port=8891)
    runtime_file(tmp_path, "kernel-abc.json", port=9999)  # a kernel's, not a server's
    (tmp_path / "jpserver-13.json").write_text("{")
    assert [s.port for s in running_servers(tmp_path)] == [8890, 8891]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"JUPYTER_RUNTIME_DIR": "/r"}, "/r"),
        ({"JUPYTER_DATA_DIR": "/d"}, "/d/runtime"),
        ({"XDG_DATA_HOME": "/x"}, "/x/jupyter/runtime"),
    ],
    ids=["runtime-dir", "data-dir", "xdg"],
)
def test_the_runtime_dir(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    for name in ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(jupyter_servers.sys, "platform", "linux")
    assert str(jupyter_servers.runtime_dir()) == expected


@pytest.mark.parametrize(
    ("ref", "notebook"),
    [
        ("analysis.ipynb", True),
        ("work/analysis.ipynb", True),
        ("train.py", False),  # a kernel may be named so
        ("default", False),
        ("3f2a9b1c", False),
        ("my-kernel.v2", False),
    ],
)
def test_what_only_a_notebook_path_can_mean(ref: str, notebook: bool) -> None:
    assert is_notebook_path(ref) is notebook


def shipped(directory: Path, enabled: bool) -> None:
    """List the extension in `directory` as the package ships it (or Jupyter's enable left it)."""
    file = directory / "jupyter_server_config.d" / "loomgate.gateway.json"
    file.parent.mkdir(parents=True)
    file.write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"loomgate.gateway": enabled}}})
    )


@pytest.mark.parametrize(
    ("order", "listed", "written"),
    [
        # Nothing lists it yet: the person's config dir alone.
        (("person", "env", "system"), {}, {"person"}),
        # A virtual environment's dir comes first (Jupyter's default in one) and lists it
        # disabled, as the package ships it: written there too, or it would decide.
        (("env", "person", "system"), {"env": False}, {"env", "person"}),
        (("env", "person", "system"), {"env": True}, {"env", "person"}),
        # After the person's dir: the person's decides, the environment's is left as it is.
        (("person", "env", "system"), {"env": False}, {"person"}),
        # A dir before the person's that does not list it is left alone.
        (("env", "person", "system"), {"system": False}, {"person"}),
    ],
)
def test_enable_and_disable_write_where_jupyter_decides(
    tmp_path: Path, order: tuple[str, ...], listed: dict[str, bool], written: set[str]
) -> None:
    path = [tmp_path / name for name in order]
    person = tmp_path / "person"
    for name, state in listed.items():
        shipped(tmp_path / name, state)
    for enabled in (True, False, True):
        files = set(set_enabled(enabled, path, person))
        assert files == {
            tmp_path / n / "jupyter_server_config.d" / "loomgate.gateway.json" for n in written
        }
        for file in files:
            assert json.loads(file.read_text()) == {
                "ServerApp": {"jpserver_extensions": {"loomgate.gateway": enabled}}
            }
        assert is_enabled(path) is enabled
        assert enabled_config(path) == tmp_path / order[min(order.index(n) for n in written)] / (
            "jupyter_server_config.d/loomgate.gateway.json"
        )


def test_nothing_listed_is_not_enabled(tmp_path: Path) -> None:
    assert not is_enabled([tmp_path / "person", tmp_path / "env"])
    shipped(tmp_path / "env", False)
    assert not is_enabled([tmp_path / "person", tmp_path / "env"])
    assert enabled_config([tmp_path / "person", tmp_path / "env"]) == (
        tmp_path / "env" / "jupyter_server_config.d" / "loomgate.gateway.json"
    )


def test_enable_without_live_cells_writes_the_extensions_setting_beside_it(
    tmp_path: Path,
) -> None:
    path = [tmp_path]  # the person's own config dir, the only one on Jupyter's path
    assert live_cells_enabled(path)  # the default, with no config at all
    [written] = set_enabled(True, path, tmp_path, live_cells=False)
    assert json.loads(written.read_text()) == {
        "ServerApp": {"jpserver_extensions": {"loomgate.gateway": True}},
        "LoomgateExtension": {"live_cells": False},
    }
    assert is_enabled(path) and not live_cells_enabled(path)
    set_enabled(True, path, tmp_path)
    assert live_cells_enabled(path)


async def test_a_server_that_does_not_answer_holds_up_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jupyter_servers, "ASK_TIMEOUT", 0.3)

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # takes the request, never answers
        writer.close()

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        path = runtime_file(tmp_path, "jpserver-1.json", url=f"http://127.0.0.1:{port}/", port=port)
        server = read_runtime_file(path)
        assert server is not None

        async def opener(target: GatewayTarget) -> GatewayClient:
            client = GatewayClient(target.url, target.token or "", name=target.name)
            opened.append(client)
            await client.info()
            return client

        opened: list[GatewayClient] = []
        [listing] = await jupyter_servers.list_server_kernels([server], opener)
        assert (listing.kernels, listing.problem) == (None, "no answer within 0.3 s")
        assert await jupyter_servers.find_in_servers("a.ipynb", [server], opener) == []
        for client in opened:
            await client.aclose()
    finally:
        listener.close()
