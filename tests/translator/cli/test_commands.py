"""The person's CLI as a real subprocess against a real gateway."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from loomgate.shared.paths import DAEMON_LOG, TOKEN_FILE
from tests.support.gateways import (
    GatewayProcess,
    alive,
    free_port,
    resident_kernels,
    stop_local_gateway,
    wait_gone,
)
from tests.support.sse import events, next_event

LOOMGATE = [sys.executable, "-m", "loomgate.translator.cli"]


def cli_env(gateway: GatewayProcess, tmp_path: Path) -> dict[str, str]:
    """Return the environment of a CLI process talking to `gateway`."""
    return {
        **os.environ,
        "LOOMGATE_URL": gateway.url,
        "LOOMGATE_TOKEN": gateway.token,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }


async def loomgate(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> tuple[int, str, str]:
    """Run `loomgate ARGS`; return exit status, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        *LOOMGATE,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(
        process.communicate(stdin.encode() if stdin is not None else None), 120
    )
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_state_across_runs_and_exit_codes(gateway: GatewayProcess, tmp_path: Path) -> None:
    env = cli_env(gateway, tmp_path)
    try:
        assert (await loomgate(env, "run", "x = 1"))[0] == 0
        status, out, _ = await loomgate(env, "run", "x + 1")
        assert status == 0 and out.split("\n")[:2] == ["In [2]:", "Out[2]: 2"]
        assert re.fullmatch(r"\[completed after \d+ ms\]", out.split("\n")[2])
        status, out, _ = await loomgate(env, "run", "-", stdin="print('from stdin')\n")
        assert status == 0 and out.split("\n")[:2] == ["In [3]:", "from stdin"]
        status, out, _ = await loomgate(env, "run", "1/0")
        assert status == 1 and "ZeroDivisionError" in out
        status, out, _ = await loomgate(env, "run", "--json", "6 * 7")
        assert status == 0
        record = json.loads(out)
        assert record["execution"]["state"] == "completed"
        assert [line["text"] for line in record["lines"]] == ["42"]
        status, out, _ = await loomgate(env, "kernels", "--json")
        assert status == 0 and any(k["name"] == "default" for k in json.loads(out))
    finally:
        status, out, _ = await loomgate(env, "stop", "default")
    assert (status, out) == (0, "stopped default\n")


async def test_usage_and_connection_errors_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "LOOMGATE_URL": "http://127.0.0.1:1", "LOOMGATE_TOKEN": "x"}
    status, _, err = await loomgate(env, "run", "1")
    assert status == 2 and "cannot reach the gateway at http://127.0.0.1:1" in err
    status, _, err = await loomgate(env, "run")
    assert status == 2


async def test_output_streams_live_and_ctrl_c_interrupts(
    gateway: GatewayProcess, tmp_path: Path, live_kernel: str
) -> None:
    env = cli_env(gateway, tmp_path)
    code = "import time\nprint('first', flush=True)\ntime.sleep(60)\nprint('never')"
    process = await asyncio.create_subprocess_exec(
        *LOOMGATE,
        "run",
        "--kernel",
        live_kernel,
        code,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    status, out, _ = await live_then_interrupt(process)
    assert out.startswith("In [1]:\nfirst\n")
    assert "KeyboardInterrupt" in out and "never" not in out.split("\n")
    assert "[interrupted after" in out
    assert status == 1


async def live_then_interrupt(process: asyncio.subprocess.Process) -> tuple[int, str, str]:
    """Read the first line while the cell runs, then press Ctrl-C; return status and output."""
    assert process.stdout is not None and process.stderr is not None
    header = await asyncio.wait_for(process.stdout.readline(), 60)
    first = header + await asyncio.wait_for(process.stdout.readline(), 60)
    assert process.returncode is None  # the line arrived while the cell still runs
    process.send_signal(signal.SIGINT)
    rest, err = await asyncio.wait_for(
        asyncio.gather(process.stdout.read(), process.stderr.read()), 60
    )
    await process.wait()
    return process.returncode or 0, (first + rest).decode(), err.decode()


@pytest.fixture
async def live_kernel(http: httpx.AsyncClient) -> AsyncIterator[str]:
    """A persistent kernel for the CLI to use (stopped afterwards); yields its name."""
    await http.post("/api/loomgate/kernels", json={"name": "cli-live"})
    try:
        yield "cli-live"
    finally:
        await http.delete("/api/loomgate/kernels/cli-live")


async def test_gateway_start_status_restart_stop(tmp_path: Path) -> None:
    port = free_port()
    state = tmp_path / "state"
    env = {**os.environ, "LOOMGATE_STATE_DIR": str(state)}
    status, out, err = await loomgate(env, "gateway", "start", "--port", str(port))
    assert status == 0, err
    info = json.loads((state / "gateway.json").read_text())
    try:
        status, out, _ = await loomgate(env, "gateway", "status")
        assert status == 0 and f"pid: {info['pid']}" in out and str(port) in out
        assert "kernels: 0" in out
        # The default prewarmed kernel, with its memory, once it has started.
        kept = "prewarmed: 1 idle kernel per kernel spec, sandbox profile and directory in use"
        assert re.search(
            f"^{kept}(:\n  python3, none, any directory: pid \\d+, \\d+ MB|; none)", out, re.M
        ), out
        status, out, _ = await loomgate(env, "run", "kept = 'across restarts'")
        assert status == 0
        # The gateway logs a request whose path holds its token (404), redacted in both logs.
        async with httpx.AsyncClient(base_url=info["url"]) as anon:
            headers = {"Authorization": f"token {info['token']}"}
            probe = await anon.get(f"/api/loomgate/kernels/{info['token']}", headers=headers)
            assert probe.status_code == 404
        status, out, _ = await loomgate(env, "gateway", "logs")
        assert status == 0 and "404 GET /api/loomgate/kernels/<token>" in out
        # One log, the useful one: the gateway's events at its log level (INFO), no DEBUG.
        assert " DEBUG " not in out
        assert f"listening on {info['url']}" in out and "Kernel started: " in out
        daemon_log = (state / DAEMON_LOG).read_text()
        assert "404 GET /api/loomgate/kernels/<token>" in daemon_log
        assert info["token"] not in out and info["token"] not in daemon_log
        # The monitor's address carries only the read-only token; it opens the page.
        status, out, _ = await loomgate(env, "monitor", "--no-browser")
        page = f"{info['url']}/loomgate/monitor?token={info['monitor_token']}"
        assert (status, out) == (0, page + "\n")
        async with httpx.AsyncClient() as browser:
            assert (await browser.get(page)).status_code == 200
        status, out, _ = await loomgate(env, "gateway", "logs")
        assert info["monitor_token"] not in out and info["monitor_token"] not in daemon_log
        kernels = {kernel.pid for kernel in resident_kernels(state, pool=False)}
        assert kernels, "the daemon should be running the default kernel"

        # restart and stop --keep-kernels leave the kernel running; the next start takes it back
        status, out, err = await loomgate(env, "gateway", "restart")
        assert status == 0, err
        assert out.splitlines() == [
            f"stopped the gateway at {info['url']} (its kernels keep running)",
            f"gateway running at {info['url']}",
        ]
        restarted = json.loads((state / "gateway.json").read_text())
        assert restarted["pid"] != info["pid"] and restarted["token"] == info["token"]
        status, out, _ = await loomgate(env, "run", "kept")
        assert out.splitlines()[1] == "Out[2]: 'across restarts'"
        status, out, _ = await loomgate(env, "gateway", "stop", "--keep-kernels")
        assert (
            status == 0
            and out == f"stopped the gateway at {info['url']} (its kernels keep running)\n"
        )
        assert all(alive(pid) for pid in kernels)
        status, out, err = await loomgate(env, "gateway", "start", "--port", str(port))
        assert status == 0, err
        status, out, _ = await loomgate(env, "run", "kept")
        assert out.splitlines()[1] == "Out[3]: 'across restarts'"

        # The README's way to the token, and a new one (the kernels stay; the old token fails)
        status, out, _ = await loomgate(env, "gateway", "token")
        assert (status, out) == (0, f"{info['token']}\n")
        status, out, err = await loomgate(env, "gateway", "rotate-token")
        assert status == 0, err
        rotated = json.loads((state / "gateway.json").read_text())
        assert rotated["token"] != info["token"]
        assert rotated["monitor_token"] not in (info["monitor_token"], rotated["token"])
        assert (await loomgate(env, "gateway", "token"))[1] == f"{rotated['token']}\n"
        async with httpx.AsyncClient(base_url=info["url"]) as anon:
            old = await anon.get("/api/loomgate/kernels", headers=headers)
            assert old.status_code == 403
        status, out, _ = await loomgate(env, "run", "kept")
        assert out.splitlines()[1] == "Out[4]: 'across restarts'"
        kernels = {kernel.pid for kernel in resident_kernels(state, pool=False)}
        info = rotated
    finally:
        status, out, _ = await loomgate(env, "gateway", "stop")
        stop_local_gateway(state)  # after a failure above: kernels left for a gateway now gone
    assert (
        status == 0 and out == f"stopped the gateway at {info['url']} (its kernels are shut down)\n"
    )
    assert wait_gone({info["pid"], *kernels}, 30) == set()
    status, out, _ = await loomgate(env, "gateway", "status")
    assert status == 1
    # A full stop keeps the (rotated) token, private, for the next start.
    assert stat.S_IMODE((state / TOKEN_FILE).stat().st_mode) == 0o600
    assert (state / TOKEN_FILE).read_text().strip() == info["token"]
    try:
        status, out, err = await loomgate(env, "gateway", "start", "--port", str(port))
        assert status == 0, err
        assert json.loads((state / "gateway.json").read_text())["token"] == info["token"]
    finally:
        await loomgate(env, "gateway", "stop")
        stop_local_gateway(state)


async def test_gateway_install_service_prints_and_writes_a_unit(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "LOOMGATE_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    status, printed, hint = await loomgate(env, "gateway", "install-service", "--print")
    assert status == 0
    unit = tmp_path / "config" / "systemd" / "user" / "loomgate-gateway.service"
    assert not unit.exists()
    lines = printed.splitlines()
    [exec_start] = [line for line in lines if line.startswith("ExecStart=")]
    assert f"--state-dir {tmp_path / 'state'}" in exec_start
    assert "-m loomgate.gateway " in exec_start or "loomgate-gateway" in exec_start
    assert {"Restart=on-failure", "KillMode=process", "WantedBy=default.target"} <= set(lines)
    assert "systemctl --user enable --now loomgate-gateway.service" in hint
    status, out, _ = await loomgate(env, "gateway", "install-service")
    assert status == 0 and unit.read_text() == printed
    assert out.splitlines()[0] == f"wrote {unit}"


async def test_output_search_wait_interrupt_reset(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path, live_kernel: str
) -> None:
    env = cli_env(gateway, tmp_path)
    k = ["--kernel", live_kernel]
    status, _, _ = await loomgate(env, "run", *k, "for i in range(1, 31): print(f'row {i}')")
    assert status == 0
    status, out, _ = await loomgate(env, "output", *k, "1", "--lines", "29:")
    assert status == 0 and out.strip().split("\n") == [
        "In [1] combined, lines 29–30 of 30:",
        "29│row 29",
        "30│row 30",
    ]
    status, out, _ = await loomgate(env, "search", *k, "row 17")
    assert status == 0 and "M 17│row 17" in out
    status, _, _ = await loomgate(env, "search", *k, "absent")
    assert status == 1
    async with events(http, live_kernel) as stream:
        background = await asyncio.create_subprocess_exec(
            *LOOMGATE,
            "run",
            *k,
            "import time; time.sleep(60)",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await next_event(stream, "execution")  # the cell has started
            status, out, _ = await loomgate(env, "interrupt", *k)
            assert (status, out) == (0, "interrupted In [2]\n")
            status, out, _ = await loomgate(env, "wait", *k, "2")
            assert status == 1 and out.startswith("In [2] (") and "KeyboardInterrupt" in out
        finally:
            await asyncio.wait_for(background.communicate(), 60)
        assert background.returncode == 1  # the cell it ran was interrupted
    status, out, _ = await loomgate(env, "reset", *k)
    assert status == 0 and "records and numbering kept" in out


async def test_checkpoint_and_rollback(
    gateway: GatewayProcess, tmp_path: Path, live_kernel: str
) -> None:
    env = cli_env(gateway, tmp_path)
    k = ["--kernel", live_kernel]
    assert (await loomgate(env, "run", *k, "rows = 30"))[0] == 0
    status, out, _ = await loomgate(env, "checkpoint", *k, "thirty")
    assert (status, out) == (
        0,
        f"Checkpoint thirty of kernel {live_kernel} keeps its state after In [1]; "
        "rollback(to='thirty') brings it back.\n",
    )
    assert (await loomgate(env, "run", *k, "rows = 0"))[0] == 0
    status, out, _ = await loomgate(env, "rollback", *k, "thirty")
    assert status == 0 and out.startswith(f"Kernel {live_kernel} was rolled back to thirty")
    status, out, _ = await loomgate(env, "run", *k, "rows")
    assert status == 0 and "Out[3]: 30" in out.splitlines(), out
    status, _, err = await loomgate(env, "rollback", *k, "forty")
    assert status == 2 and "has no checkpoint 'forty' (its checkpoints: thirty)" in err
    status, out, _ = await loomgate(env, "fork", "cli-fork", "--from", f"{live_kernel}@thirty")
    try:
        assert (status, out.splitlines()[0]) == (0, "started cli-fork"), out
        assert f"copy of kernel {live_kernel}: its checkpoint thirty after In [1]" in out
        status, out, _ = await loomgate(env, "run", "--kernel", "cli-fork", "rows")
        assert status == 0 and "Out[1]: 30" in out.splitlines(), out
    finally:
        await loomgate(env, "stop", "cli-fork")


async def stream_session(env: dict[str, str], script: str) -> tuple[str, str]:
    """Run `loomgate stream` with `script` on stdin (DELIM replaced); return output, delimiter."""
    process = await asyncio.create_subprocess_exec(
        *LOOMGATE,
        "stream",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    banner = await asyncio.wait_for(process.stdout.readline(), 60)
    delimiter = (await process.stdout.readline()).decode().strip()
    assert delimiter.encode() in banner
    out, _ = await asyncio.wait_for(
        process.communicate(script.replace("DELIM", delimiter).encode()), 120
    )
    assert process.returncode == 0
    return out.decode(), delimiter


async def test_stream_protocol(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    before = {k["id"] for k in (await http.get("/api/loomgate/kernels")).json()["kernels"]}
    script = "x = 20\nx * 2\n--\nfor i in range(2):\n    print('loop', i)\nDELIM\n1/0\nexit\n"
    out, delimiter = await stream_session(env, script)
    responses = out.split(delimiter + "\n")
    assert responses[-1] == ""
    answers = [r.removeprefix(".\n") for r in responses[:-1]]
    assert len(answers) == 4
    assert answers[0].startswith("In [1] (")
    assert answers[1].strip().endswith("Out[2]: 40")
    assert answers[2].strip().split("\n")[1:] == ["loop 0", "loop 1"]
    assert "ZeroDivisionError" in answers[3]
    assert out.count(delimiter) == 4
    again, other = await stream_session(env, "print('eof ends it')\n")
    assert other != delimiter and "eof ends it" in again
    after = {k["id"] for k in (await http.get("/api/loomgate/kernels")).json()["kernels"]}
    assert after == before, "each stream session stops the kernel it created"


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


async def test_run_starts_a_named_kernel_with_the_users_setup(
    gateway: GatewayProcess, tmp_path: Path, config_dir: Path
) -> None:
    (config_dir / "startup.py").write_text("import numpy_that_is_not_installed\n")
    (config_dir / "inspectors.py").write_text((EXAMPLES / "inspectors.py").read_text())
    env = cli_env(gateway, tmp_path)
    try:
        status, out, err = await loomgate(
            env, "run", "--kernel", "fresh-work", "import shutil\nshutil.rmtree('/x')"
        )
        assert err.split("\n")[:3] == [
            f"starting kernel 'fresh-work' on {gateway.url} …",
            "sandbox: none",  # the suite's gateways default to none
            "startup.py failed; the kernel is usable without it:",
        ]
        assert "RuleBlock: shutil.rmtree is blocked here" in out
        assert (status, out.split("\n")[0]) == (1, "In [1]:")
        status, out, err = await loomgate(env, "run", "--kernel", "fresh-work", "40 + 2")
        assert (status, err) == (0, "")  # set up already: nothing said twice
        assert out.split("\n")[:2] == ["In [2]:", "Out[2]: 42"]
    finally:
        await loomgate(env, "stop", "fresh-work")


async def test_a_stopped_kernel_is_listed_and_read_by_name(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    assert (await loomgate(env, "run", "--kernel", "cli-stopped", "print('kept')"))[0] == 0
    assert (await loomgate(env, "stop", "cli-stopped"))[0] == 0
    status, out, _ = await loomgate(env, "kernels", "--json")
    assert "cli-stopped" not in [k["name"] for k in json.loads(out)]
    status, out, _ = await loomgate(env, "kernels", "--all", "--json")
    [gone] = [k for k in json.loads(out) if k["name"] == "cli-stopped"]
    assert gone["state"] == "gone"
    status, out, _ = await loomgate(env, "output", "1", "--kernel", "cli-stopped")
    assert (status, out.split("\n")[1:3]) == (0, ["1│kept", ""])
    status, out, _ = await loomgate(env, "kernels", "--all")
    [row] = [line for line in out.split("\n") if line.split()[:1] == ["cli-stopped"]]
    assert row.split()[3] == "stopped" and "gone" not in out  # name, id, spec, state
    status, out, err = await loomgate(
        env, "output", "1", "--kernel", "cli-stopped", "--lines", "5:"
    )
    assert (status, out, err) == (
        2,
        "",
        "loomgate: In [1] combined has 1 line; lines 5: are past its end. "
        "`loomgate output 1 --lines -1:` reads its last line.\n",
    )
