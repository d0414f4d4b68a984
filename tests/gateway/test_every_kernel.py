"""The kernel scenarios on every kernel we claim (tests/support/kernel_specs.py), under the
shipped default profile: start, output, long output, errors, rich output, input, interrupt,
reset, export and take-back after a gateway's SIGKILL, through loomgate's API."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from playwright.async_api import expect

from loomgate.gateway.residency.kernel_transport import RELAYED_PORTS
from loomgate.gateway.sandbox.confinement.launch import kernel_dirs_location
from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.apps_hosts import apps_extension
from tests.support.browser import page_at
from tests.support.cells import KERNELS as API
from tests.support.cells import PNG, output_texts, run, submit
from tests.support.gateways import GatewayProcess, client
from tests.support.kernel_specs import BY_SPEC, KERNELS, KernelUnderTest, write_kernel_specs
from tests.support.mcp_clients import stop_conversation_kernel, text
from tests.support.sandboxed_gateways import SHIPPED_DEFAULT, confined_gateway, sandbox_root

LINES = 2_000  # a long cell's output: Deno sends most of it after the cell's idle


@dataclass
class Place:
    """The module's gateway (shipped default profile) and the root its files lie in."""

    gateway: GatewayProcess
    root: Path


@pytest.fixture(scope="module")
def place() -> Iterator[Place]:
    """A gateway under the shipped default profile that knows every kernel's spec."""
    with sandbox_root() as root:
        gateway = confined_gateway(root)
        gateway.env["JUPYTER_PATH"] = str(write_kernel_specs(root / "jupyter"))
        try:
            gateway.start()
            yield Place(gateway, root)
        finally:
            gateway.stop()


@pytest.fixture
async def http(place: Place) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the module's gateway."""
    async with client(place.gateway) as http:
        yield http


async def kernel_of(http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place) -> str:
    """Return the name of the module's kernel of `kernel`'s spec, started (confined, in the
    project) when it does not run yet."""
    name = f"k-{kernel.spec}"
    body = {"name": name, "kernel_spec": kernel.spec, "cwd": str(place.root / "project")}
    r = await http.post(API, json=body)
    assert r.status_code in (200, 201), r.text
    model = r.json()["kernel"]
    assert model["sandbox"]["profile"] == SHIPPED_DEFAULT
    return name


def every(kernels: tuple[KernelUnderTest, ...] = KERNELS) -> Any:
    """Parametrize a test over `kernels`, named by spec."""
    return pytest.mark.parametrize("kernel", kernels, ids=str)


@every()
async def test_a_kernel_starts_confined_and_says_what_it_is(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    model = (await http.get(f"{API}/{name}")).json()["kernel"]
    assert (model["language"], model["implementation"]) == (kernel.language, kernel.implementation)
    assert model["state"] == "idle"
    assert model["sandbox"]["mechanism"]  # enforced, not only named


@every()
async def test_a_cell_prints_into_its_record(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    execution = await run(http, name, kernel.echo.format(text="hello there"))
    assert execution["state"] == "completed"
    assert output_texts(execution) == ["hello there"]
    assert execution["streams"]["stdout"]["lines"] == 1


@every()
async def test_every_line_of_a_long_cell_is_in_its_record_when_it_ends(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    execution = await run(http, name, kernel.count.format(n=LINES), head=3, tail=2)
    assert execution["state"] == "completed"
    assert execution["streams"]["combined"]["lines"] == LINES, execution["gaps"]
    assert output_texts(execution) == ["1", "2", "3", str(LINES - 1), str(LINES)]
    number = execution["number"]
    r = await http.get(
        f"{API}/{name}/executions/{number}/streams/combined", params={"lines": "1000:1002"}
    )
    assert [line["text"] for line in r.json()["lines"]] == ["1000", "1001", "1002"]
    r = await http.get(f"{API}/{name}/search", params={"query": "1999", "execution": number})
    found = r.json()["groups"]
    assert [[line["n"] for line in group["lines"]] for group in found] == [[1999]]


@every()
async def test_an_error_ends_its_cell_with_its_name(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    execution = await run(http, name, kernel.fail)
    assert execution["state"] == "error"
    assert execution["error"]["name"] == kernel.error_name
    assert execution["streams"]["traceback"]["lines"] >= 1
    assert all(text.strip() for text in output_texts(execution)[-1:])  # no bare ": 2"


@every()
async def test_reset_clears_the_state_and_numbering_goes_on(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    before = await run(http, name, kernel.remember)
    r = await http.post(f"{API}/{name}/reset")
    assert r.status_code == 200, r.text
    after = await run(http, name, kernel.recall)
    assert after["number"] > before["number"]
    # The variable is gone: an error (Python, Deno) or an empty line (bash).
    assert after["state"] == "error" or output_texts(after) in ([], [""])


@every(tuple(kernel for kernel in KERNELS if kernel.ask is not None))
async def test_a_cell_asks_for_input_and_gets_its_answer(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    assert kernel.ask is not None
    reply = await submit(http, name, kernel.ask, wait=30)
    execution = reply["execution"]
    assert execution["state"] == "awaiting_input", execution
    assert execution["input"]["prompt"] == "name? "
    number = execution["number"]
    r = await http.post(f"{API}/{name}/executions/{number}/input", json={"value": "ada"})
    assert r.status_code == 200, r.text
    r = await http.get(f"{API}/{name}/executions/{number}", params={"wait": 30, "head": 10})
    ended = r.json()["execution"]
    assert ended["state"] == "completed"
    assert output_texts(ended)[-1] == "hi ada"


@every()
async def test_an_interrupt_ends_a_running_cell_or_is_refused_in_one_sentence(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    running = (await submit(http, name, kernel.sleep, wait=0.5))["execution"]
    assert running["state"] == "running"
    r = await http.post(f"{API}/{name}/interrupt")
    if kernel.interrupts:
        assert r.status_code == 200, r.text
        r = await http.get(f"{API}/{name}/executions/{running['number']}", params={"wait": 30})
        assert r.json()["execution"]["state"] in ("interrupted", "error")
        assert (await http.get(f"{API}/{name}")).json()["kernel"]["alive"]
        return
    assert r.status_code == 409
    assert r.json()["message"] == (
        f"this kernel ({kernel.language} ({kernel.implementation})) cannot interrupt a running "
        "cell: an interrupt would end it; reset restarts it (its variables are lost)"
    )
    r = await http.post(f"{API}/{name}/reset")  # the way the refusal names
    assert r.status_code == 200, r.text
    ended = (await http.get(f"{API}/{name}/executions/{running['number']}")).json()["execution"]
    assert ended["state"] == "killed"


@every()
async def test_the_notebook_export_carries_the_kernels_language(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    await run(http, name, kernel.echo.format(text="exported"))
    notebook = (await http.get(f"{API}/{name}/notebook")).json()
    metadata = notebook["metadata"]
    assert metadata["kernelspec"]["name"] == kernel.spec
    assert metadata["language_info"]["name"] == kernel.language
    assert metadata["language_info"]["file_extension"] == kernel.file_extension


async def test_every_kernel_is_taken_back_after_a_gateway_sigkill(
    http: httpx.AsyncClient, place: Place
) -> None:
    names = {kernel.spec: await kernel_of(http, kernel, place) for kernel in KERNELS}
    for kernel in KERNELS:
        assert (await run(http, names[kernel.spec], kernel.remember))["state"] == "completed"
    place.gateway.kill()
    place.gateway.start()
    async with client(place.gateway) as again:
        for kernel in KERNELS:
            model = (await again.get(f"{API}/{names[kernel.spec]}")).json()["kernel"]
            assert model["state"] == "idle", model
            execution = await run(again, names[kernel.spec], kernel.recall)
            assert output_texts(execution) == ["42"], (kernel.spec, execution)


@every()
async def test_html_output_is_recorded_as_its_words(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    execution = await run(http, name, kernel.html)
    assert execution["state"] == "completed", execution
    assert output_texts(execution) == [
        "Dog, not a cat.",
        "[text/html shown as its words: its markup left out]",
    ]
    # The HTML itself is kept beside the text, for the monitor and the notebook export.
    assert [("text/html" in entry["mimetypes"], entry["line"]) for entry in execution["rich"]] == [
        (True, 1)
    ]


INSPECTORS = """
def inspect(tree, source):
    if "forbidden" in source:
        raise RuleBlock("this cell is forbidden")
"""
# Each kernel's startup file leaves `greeting` set in its language.
STARTUPS = {
    "startup.py": "greeting = 'hello from python'\n",
    "startup.sh": "greeting='hello from bash'\n",
    "startup.ts": "var greeting = 'hello from typescript';\n",
}
GREET = {
    "python": "print(greeting)",
    "bash": "echo $greeting",
    "typescript": "console.log(greeting)",
}


def translator(place: Place, **env: str) -> Client:
    """Return an MCP client of a translator in memory, on the module's gateway."""
    settings = Settings(
        gateway=place.gateway.url,
        autostart=False,
        cwd=str(place.root / "project"),
        env={"LOOMGATE_TOKEN": place.gateway.token, **env},
    )
    return Client(build_server(settings))


@every()
async def test_each_kernel_runs_the_setup_of_its_language_and_says_what_it_cannot(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place, config_dir: Path
) -> None:
    for name, source in STARTUPS.items():
        (config_dir / name).write_text(source)
    (config_dir / "inspectors.py").write_text(INSPECTORS)
    ipython = kernel.language == "python"
    name = f"setup-{kernel.spec}"
    try:
        async with translator(place) as mcp:
            reply = text(
                await mcp.call_tool("connect", {"kernel": name, "kernel_spec": kernel.spec})
            )
            uninspected = (
                "This kernel's cells are not inspected: inspectors.py runs in IPython kernels; "
                f"this kernel is {kernel.language} ({kernel.implementation})."
            )
            assert (uninspected in reply) is not ipython, reply
            assert "startup.sh" not in reply and "startup.ts" not in reply  # another's: no news
            greeted = await mcp.call_tool("run_cell", {"code": GREET[kernel.language]})
            assert text(greeted).splitlines()[-1] == f"hello from {kernel.language}"
            blocked = await mcp.call_tool(
                "run_cell", {"code": kernel.echo.format(text="forbidden")}
            )
            if ipython:  # the inspector holds in every IPython kernel
                assert "RuleBlock: this cell is forbidden" in text(blocked)
            else:
                assert text(blocked).splitlines()[-1] == "forbidden"
    finally:
        await http.delete(f"{API}/{name}")


async def test_a_kernel_that_cannot_be_inspected_is_refused_when_the_person_says_so(
    http: httpx.AsyncClient, place: Place, config_dir: Path
) -> None:
    (config_dir / "inspectors.py").write_text(INSPECTORS)
    async with translator(place, LOOMGATE_UNINSPECTED="refuse") as mcp:
        refused = await mcp.call_tool("connect", {"kernel": "guarded", "kernel_spec": "bash"})
        assert refused.is_error
        assert text(refused) == (
            "inspectors.py is required, and inspectors.py runs in IPython kernels; this kernel "
            "is bash (bash_kernel): LOOMGATE_UNINSPECTED=refuse refuses kernels whose cells "
            "would not be inspected; the kernel started for this was stopped; no kernel is "
            "connected: the next run_cell starts one of the gateway's default kernel spec"
        )
        fine = await mcp.call_tool("connect", {"kernel": "guarded-py", "kernel_spec": "py"})
        assert not fine.is_error, text(fine)
    listed = (await http.get(API)).json()["kernels"]
    assert "guarded" not in [kernel["name"] for kernel in listed]
    await http.delete(f"{API}/guarded-py")


async def test_the_cli_starts_the_kernel_spec_it_is_told(
    http: httpx.AsyncClient, place: Place
) -> None:
    env = {
        **os.environ,
        "LOOMGATE_URL": place.gateway.url,
        "LOOMGATE_TOKEN": place.gateway.token,
    }
    command = [sys.executable, "-m", "loomgate.translator.cli", "run"]
    cli = await asyncio.create_subprocess_exec(
        *command,
        "--kernel", "cli-bash", "--kernel-spec", "bash", "echo $((6 * 7))",
        env=env,
        cwd=place.root / "project",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(cli.communicate(), 120)
    assert cli.returncode == 0, err.decode()
    assert out.decode().splitlines()[:2] == ["In [1]:", "42"], out.decode()
    model = (await http.get(f"{API}/cli-bash")).json()["kernel"]
    assert model["kernel_spec"] == "bash"
    again = await asyncio.create_subprocess_exec(
        *command,
        "--kernel", "cli-bash", "--kernel-spec", "deno", "1",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(again.communicate(), 120)
    assert again.returncode == 2
    assert err.decode().splitlines()[-1] == (
        "loomgate: kernel 'cli-bash' already runs kernel spec 'bash', not 'deno'; choose "
        "another name or stop it first"
    )
    await http.delete(f"{API}/cli-bash")


REACH = """
import socket
reached = []
for port in {ports}:
    with socket.socket() as s:
        s.settimeout(2)
        if s.connect_ex(("127.0.0.1", port)) == 0:
            reached.append(port)
for path in {paths}:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(path)
            reached.append(path)
        except OSError:
            pass
print(reached)
"""


async def test_no_kernel_reaches_another_kernels_channels(
    http: httpx.AsyncClient, place: Place
) -> None:
    relayed = BY_SPEC["deno"]
    target = await kernel_of(http, relayed, place)
    model = (await http.get(f"{API}/{target}")).json()["kernel"]
    # Its ports on its own loopback, and the gateway's side of them: the relay's sockets.
    own_dir = kernel_dirs_location() / model["id"][:13]
    paths = [str(own_dir / "ipc" / f"k-{n}") for n in range(1, 6)]
    # They are there, seen from the host (a quick look at local files: no await needed).
    assert all(Path(path).is_socket() for path in paths)  # noqa: ASYNC240
    ports = list(RELAYED_PORTS.values())
    attacker = await kernel_of(http, BY_SPEC["python3"], place)
    execution = await run(http, attacker, REACH.format(ports=ports, paths=paths))
    assert output_texts(execution) == ["[]"], execution


async def test_a_cells_header_names_its_language_once_the_conversation_has_several(
    http: httpx.AsyncClient, place: Place
) -> None:
    async with translator(place) as mcp:
        first = text(await mcp.call_tool("run_cell", {"code": "print('py')"}))
        assert first.splitlines()[0].startswith("In [1] (") and "python" not in first
        own = (await mcp.call_tool("list_kernels", {})).structured_content or {}
        await mcp.call_tool("connect", {"kernel": "several", "kernel_spec": "bash"})
        shell = text(await mcp.call_tool("run_cell", {"code": "echo sh"}))
        assert shell.splitlines()[0].startswith("In [1] (bash, ")
        back = await mcp.call_tool("run_cell", {"code": "print('py')", "kernel": own["current"]})
        assert text(back).splitlines()[0].startswith("In [2] (python, ")
        await stop_conversation_kernel(mcp)
        await mcp.call_tool("stop_kernel", {"kernel": own["current"]})


FLOOD_WHEN_TOLD = (
    "while [ ! -e go ]; do sleep 0.01; done; for i in $(seq 1 {n}); do echo $i; done; touch ended"
)


async def test_what_a_kernel_drops_is_marked_as_a_gap_in_its_record(
    http: httpx.AsyncClient, place: Place
) -> None:
    # bash_kernel's publisher keeps ZMQ's limit (loomgate cannot tune it): with the gateway
    # stopped, a flood overflows it and the kernel drops messages; its numbered ids tell how many.
    name = await kernel_of(http, BY_SPEC["bash"], place)
    project = place.root / "project"
    submitted = await submit(http, name, FLOOD_WHEN_TOLD.format(n=20_000), wait=0)
    number = submitted["execution"]["number"]
    gateway = place.gateway.proc
    assert gateway is not None
    gateway.send_signal(signal.SIGSTOP)
    try:
        (project / "go").touch()
        deadline = time.monotonic() + 60
        while not (project / "ended").exists():  # the kernel's own sign: no event reaches here
            assert time.monotonic() < deadline, "the flood did not end"
            await asyncio.sleep(0.05)
    finally:
        gateway.send_signal(signal.SIGCONT)
        for flag in ("go", "ended"):
            (project / flag).unlink(missing_ok=True)
    r = await http.get(f"{API}/{name}/executions/{number}", params={"wait": 30, "head": 0})
    execution = r.json()["execution"]
    assert execution["state"] == "completed"
    assert execution["streams"]["stdout"]["lines"] < 20_000  # what the kernel dropped
    dropped = [gap for gap in execution["gaps"] if gap.get("dropped")]
    assert dropped and all(gap["dropped"] > 1 for gap in dropped), execution["gaps"]


async def pooled(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    """Return the prewarmed kernels the gateway reports, once one is ready (polled: no event
    announces it)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready = (await http.get("/api/loomgate/info")).json()["prewarmed"]
        if ready:
            return list(ready)
        await asyncio.sleep(0.05)
    raise AssertionError("no prewarmed kernel became ready")


def own_gateway(root: Path, *extra: str) -> GatewayProcess:
    """Return a (not started) gateway of the shipped default in `root`, knowing every kernel's
    spec, prewarming one kernel, with `extra` arguments."""
    gateway = confined_gateway(root)
    gateway.env["JUPYTER_PATH"] = str(write_kernel_specs(root / "jupyter"))
    gateway.extra_args = [*gateway.extra_args, *extra]
    gateway.prewarm = 1
    return gateway


async def test_ipymini_can_be_the_default_kernel_and_is_prewarmed() -> None:
    with sandbox_root() as root:
        gateway = own_gateway(root, "--kernel-spec", "py")
        try:
            gateway.start()
            async with client(gateway) as http:
                [ready] = await pooled(http)
                assert ready["kernel_spec"] == "py" and ready["pid"] is not None, ready
                info = (await http.get("/api/loomgate/info")).json()
                assert info["default_kernel_spec"] == "py"
                r = await http.post(API, json={"cwd": str(root / "project")})
                kernel = r.json()["kernel"]
                assert (kernel["kernel_spec"], kernel["implementation"]) == ("py", "ipymini")
                execution = await run(http, kernel["id"], "import os; print(os.getcwd())")
                assert output_texts(execution) == [str(root / "project")]  # the claim moved it
        finally:
            gateway.stop()


async def test_a_default_kernel_a_claim_cannot_move_is_not_prewarmed() -> None:
    with sandbox_root() as root:
        gateway = own_gateway(root, "--kernel-spec", "bash")
        try:
            gateway.start()
            async with client(gateway) as http:
                deadline = time.monotonic() + 60
                said = "Not prewarming bash kernels: a claim runs Python, and this kernel is bash"
                while said not in gateway.log_path.read_text():  # no event says it
                    assert time.monotonic() < deadline, "the pool did not give bash up"
                    await asyncio.sleep(0.05)
                assert (await http.get("/api/loomgate/info")).json()["prewarmed"] == []
                r = await http.post(API, json={"cwd": str(root / "project")})
                kernel = r.json()["kernel"]
                assert kernel["kernel_spec"] == "bash"
                assert output_texts(await run(http, kernel["id"], "echo $((1 + 1))")) == ["2"]
        finally:
            gateway.stop()


def test_a_default_kernel_spec_that_is_not_there_is_refused_at_the_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loomgate.gateway", "--kernel-spec", "nosuch", "--port", "1"],
        env={**os.environ, "LOOMGATE_STATE_DIR": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--kernel-spec 'nosuch' is not a kernel spec here" in done.stderr.splitlines()[-1]


async def test_a_stream_session_starts_the_kernel_spec_it_is_told(
    http: httpx.AsyncClient, place: Place
) -> None:
    env = {
        **os.environ,
        "LOOMGATE_URL": place.gateway.url,
        "LOOMGATE_TOKEN": place.gateway.token,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "loomgate.translator.cli", "stream", "--kernel-spec", "deno",
        env=env,
        cwd=place.root / "project",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    await asyncio.wait_for(process.stdout.readline(), 60)  # the banner
    delimiter = (await process.stdout.readline()).decode().strip()
    out, err = await asyncio.wait_for(process.communicate(b"console.log(6 * 7)\nexit\n"), 120)
    assert process.returncode == 0, err.decode()
    [answer, rest] = out.decode().split(delimiter + "\n")
    assert answer.strip().splitlines()[-1] == "42" and rest == ""
    kernels = (await http.get(API, params={"all": "true"})).json()["kernels"]
    own = max((k for k in kernels if k["lifetime"] == "conversation"), key=lambda k: k["created"])
    assert own["kernel_spec"] == "deno"


async def test_a_failed_connect_says_where_the_cells_still_go(place: Place) -> None:
    async with translator(place) as mcp:
        await mcp.call_tool("run_cell", {"code": "print('here')"})
        own = (await mcp.call_tool("list_kernels", {})).structured_content or {}
        refused = await mcp.call_tool("connect", {"kernel": "js", "kernel_spec": "nosuch"})
        assert refused.is_error
        assert text(refused) == (
            "no kernel spec named 'nosuch' on this gateway; this conversation's cells still go "
            f"to kernel {own['current'][:8]} (python)"
        )
        await stop_conversation_kernel(mcp)


@every()
async def test_the_monitor_shows_each_kernels_cells(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    model = (await http.get(f"{API}/{name}")).json()["kernel"]
    execution = await run(http, name, kernel.echo.format(text="seen on the monitor"))
    gateway = place.gateway
    url = f"{gateway.url}/loomgate/monitor?token={gateway.monitor_token}#{model['id']}"
    async with page_at(url) as page:
        shown = page.locator(f"#x-{execution['number']}")
        await expect(shown).to_contain_text("seen on the monitor", timeout=20_000)
        listed = page.locator(f'#kernels li[data-kernel="{model["id"]}"]')
        await expect(listed).to_contain_text(name)


@every()
async def test_an_image_is_kept_as_an_image(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    execution = await run(http, name, kernel.image.format(png=PNG))
    assert execution["state"] == "completed", execution
    [image] = execution["rich"]
    assert "image/png" in image["mimetypes"]
    r = await http.get(f"{API}/{name}/executions/{execution['number']}/rich/{image['index']}")
    assert r.json()["data"]["image/png"].strip() == PNG


@every()
async def test_the_apps_view_reads_each_kernels_cells(
    http: httpx.AsyncClient, kernel: KernelUnderTest, place: Place
) -> None:
    name = await kernel_of(http, kernel, place)
    settings = Settings(
        gateway=place.gateway.url,
        autostart=False,
        cwd=str(place.root / "project"),
        env={"LOOMGATE_TOKEN": place.gateway.token},
    )
    async with Client(build_server(settings), extensions=[apps_extension()]) as host:
        ran = await host.call_tool(
            "run_cell", {"code": kernel.image.format(png=PNG), "kernel": name}
        )
        assert not ran.is_error, text(ran)
        number = ran.structured_content["execution"]
        viewed = await host.call_tool("view_execution", {"execution": number, "kernel": name})
        assert viewed.structured_content["execution"]["state"] == "completed"
        rich = await host.call_tool("view_rich", {"execution": number, "index": 0, "kernel": name})
        assert rich.structured_content["data"]["image/png"].strip() == PNG
