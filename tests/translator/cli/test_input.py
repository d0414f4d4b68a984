"""A cell's input() answered from the CLI: `loomgate run` at a terminal (a password without
echo) and from piped stdin, `loomgate wait` and `loomgate input`, and the stream protocol."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateways import GatewayProcess
from tests.support.sse import events, next_event
from tests.support.terminals import Terminal
from tests.translator.cli.test_commands import cli_env, loomgate, stream_session

LOOMGATE = [sys.executable, "-m", "loomgate.translator.cli"]
API = "/api/loomgate/kernels"
ASKS = "name = input('Name? ')\nprint('hello', name)"
# Two frames in ipykernel's wait for the answer, as a rule; on a loaded machine the interrupt may
# land in its send of the request, down in the messaging it calls.
LEFT_OUT = (
    r"… (2 frames inside ipykernel \(kernelbase\.py\)|\d+ frames inside ipykernel, "
    r"jupyter_client and zmq \(kernelbase\.py, [^)]+\)) left out; "
    r"`loomgate output 1 --lines \d+:\d+` shows them …"
)


# ipykernel's words for a SIGINT that lands while it waits for the answer; one that lands in the
# instant between its sending the request and that wait (a loaded machine) raises a bare one.
INTERRUPTED_INPUT = ("KeyboardInterrupt: Interrupted by user", "KeyboardInterrupt: ")


async def test_run_answers_input_from_piped_stdin(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    k = ["--kernel", "piped-input"]
    try:
        status, out, err = await loomgate(env, "run", *k, ASKS, stdin="Ada\n")
        assert (status, out.split("\n")[:3]) == (0, ["In [1]:", "Name? Ada", "hello Ada"]), err
        twice = "a = input('a? ')\nb = input('b? ')\nprint(a + b)"
        status, out, _ = await loomgate(env, "run", *k, twice, stdin="left\nright\n")
        assert out.split("\n")[:4] == ["In [2]:", "a? left", "b? right", "leftright"]
        # The end of stdin: the cell is interrupted, as input() fails at the end of its input.
        status, out, err = await loomgate(env, "run", *k, ASKS, stdin="")
        assert status == 1 and "KeyboardInterrupt" in out and "[interrupted after" in out
        assert err.strip().split("\n")[-1] == (
            "stdin ended while In [3] waits for input; interrupting it "
            "(`loomgate input 3 TEXT` answers a cell from another shell)"
        )
    finally:
        await http.delete(f"{API}/piped-input")


async def test_run_answers_input_at_the_terminal_and_hides_a_password(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    code = (
        "import getpass\n"
        "name = input('Name? ')\n"
        "secret = getpass.getpass('Secret: ')\n"
        "print('hello', name, len(secret))"
    )
    terminal = Terminal([*LOOMGATE, "run", "--kernel", "tty-input", code], env)
    try:
        terminal.expect(r"In \[1\]:\nName\? $")
        terminal.type("Ada\n")
        terminal.expect(r"Name\? Ada\nSecret: $")
        terminal.type("hunter2\n")
        terminal.expect(r"\nhello Ada 7\n")
        assert terminal.wait() == 0
        assert "hunter2" not in terminal.screen  # the terminal did not echo it
    finally:
        terminal.close()
        await http.delete(f"{API}/tty-input")


# A prompt that sets the clipboard (OSC 52), the window's title (OSC 0) and clears the screen.
ESCAPING = "\\x1b]52;c;aGk=\\x07\\x1b]0;owned\\x07\\x1b[2J"


async def test_run_shows_a_prompt_without_its_escape_sequences(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    code = (
        "import getpass\n"
        f"name = input('{ESCAPING}Name? ')\n"
        f"secret = getpass.getpass('{ESCAPING}Secret: ')\n"
        "print('hello', name, len(secret))"
    )
    terminal = Terminal([*LOOMGATE, "run", "--kernel", "escaping-prompt", code], env)
    try:
        terminal.expect(r"In \[1\]:\nName\? $")
        terminal.type("Ada\n")
        terminal.expect(r"Name\? Ada\nSecret: $")
        terminal.type("hunter2\n")
        terminal.expect(r"\nhello Ada 7\n")
        assert terminal.wait() == 0
        assert "\x1b" not in terminal.screen and "\x07" not in terminal.screen
    finally:
        terminal.close()
        await http.delete(f"{API}/escaping-prompt")


async def test_wait_says_a_cell_waits_for_input_and_input_answers_it(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    await http.post(API, json={"name": "answered-later"})
    k = ["--kernel", "answered-later"]
    try:
        r = await http.post(f"{API}/answered-later/executions", json={"code": ASKS, "wait": 30})
        assert r.json()["returned"] == "input"
        status, out, _ = await loomgate(env, "wait", *k)
        lines = out.strip().split("\n")
        assert status == 1
        assert re.fullmatch(r"In \[1\] is waiting for input \(.+\): 'Name\? '", lines[0])
        assert lines[-1] == "Answer with `loomgate input 1 TEXT`, or `loomgate interrupt`."
        status, out, _ = await loomgate(env, "input", *k, "1", "Ada")
        assert status == 0 and out.split("\n")[1:] == ["hello Ada", ""]
        status, out, err = await loomgate(env, "input", *k, "again")
        assert (status, err) == (2, "loomgate: In [1] is not waiting for input; it completed.\n")
        status, out, err = await loomgate(env, "input", *k, "1", "late")
        assert (status, err) == (2, "loomgate: In [1] is not waiting for input; it completed.\n")
        r = await http.post(
            f"{API}/answered-later/executions",
            json={"code": "import getpass\nprint(len(getpass.getpass('pw: ')))", "wait": 30},
        )
        assert r.json()["execution"]["input"] == {"prompt": "pw: ", "password": True}
        status, out, _ = await loomgate(env, "input", *k, "2", "-", stdin="s3cret\n")
        assert status == 0 and out.split("\n")[1:] == ["6", ""]
    finally:
        await http.delete(f"{API}/answered-later")


async def test_the_stream_protocol_answers_and_interrupts_input(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    script = "v = input('q? ')\n--input\nforty-two\nv\ninput('again? ')\n1 + 1\n--interrupt\nexit\n"
    out, delimiter = await stream_session(env, script)
    answers = [r.removeprefix(".\n") for r in out.split(delimiter + "\n")[:-1]]
    assert len(answers) == 6, answers
    waiting = answers[0].strip().split("\n")
    assert re.fullmatch(r"In \[1\] is waiting for input \(.+\): 'q\? '", waiting[0])
    assert waiting[-1] == (
        "Answer with a line `--input`, then the answer's line; or a line `--interrupt`."
    )
    assert re.fullmatch(r"In \[1\] \(.+\):", answers[1].strip())
    assert answers[2].strip().endswith("Out[2]: 'forty-two'")
    assert answers[3].startswith("In [3] is waiting for input")
    assert answers[4] == (
        "error: In [3] is waiting for input; the cell was not run. Answer with a line "
        "`--input`, then the answer's line; or a line `--interrupt`.\n"
    )
    assert "interrupted" in answers[5].split("\n")[0] and "KeyboardInterrupt" in answers[5]


async def waiting_for_input(stream: AsyncIterator[dict[str, Any]], number: int) -> None:
    """Return once the event stream tells that In [`number`] waits for input."""
    while True:
        execution = (await next_event(stream, "execution"))["execution"]
        if (execution["number"], execution["state"]) == (number, "awaiting_input"):
            return


async def test_run_follows_an_answer_given_elsewhere_while_its_stdin_stays_open(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    kernel = (await http.post(API, json={"name": "answered-elsewhere"})).json()["kernel"]["id"]
    k = ["--kernel", "answered-elsewhere"]
    async with events(http, kernel) as stream:
        run = await asyncio.create_subprocess_exec(
            *LOOMGATE,
            "run",
            *k,
            ASKS,
            env=env,
            stdin=asyncio.subprocess.PIPE,  # held open: no answer comes from it
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await waiting_for_input(stream, 1)
            status, out, _ = await loomgate(env, "input", *k, "answer2")
            assert (status, out.split("\n")[1:]) == (0, ["hello answer2", ""])
            answered = time.monotonic()
            # `run` sees the cell stop waiting, prints the rest and exits, its stdin still open.
            assert await asyncio.wait_for(run.wait(), 20) == 0
            exited = time.monotonic() - answered
            assert run.stdout is not None and run.stderr is not None
            printed = (await run.stdout.read()).decode().split("\n")
            assert printed[:3] == ["In [1]:", "Name? ", "hello answer2"], printed
            assert re.fullmatch(r"\[completed after .+\]", printed[3]), printed
            assert "stdin ended" not in (await run.stderr.read()).decode()
            print(f"run exited {exited * 1000:.0f} ms after `loomgate input` did")
        finally:
            if run.returncode is None:
                run.kill()
            await run.wait()
            await http.delete(f"{API}/answered-elsewhere")


async def test_interrupt_waits_for_the_cell_to_end_and_shows_how_it_ended(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    await http.post(API, json={"name": "interrupted-input"})
    k = ["--kernel", "interrupted-input"]
    try:
        r = await http.post(f"{API}/interrupted-input/executions", json={"code": ASKS, "wait": 30})
        assert r.json()["returned"] == "input"
        status, out, _ = await loomgate(env, "interrupt", *k)
        assert (status, out) == (0, "interrupted In [1]\n")
        r = await http.get(f"{API}/interrupted-input/executions/1")  # no wait: it has ended
        assert r.json()["execution"]["state"] == "interrupted"
        status, out, _ = await loomgate(env, "wait", *k, "1")
        lines = out.strip().split("\n")
        assert "----> 1 name = input('Name? ')" in lines
        assert lines[-2] == "" and lines[-1] in INTERRUPTED_INPUT
        assert re.fullmatch(LEFT_OUT, lines[-3]), lines
        caught = "try:\n    input('q? ')\nexcept KeyboardInterrupt:\n    print('caught')"
        r = await http.post(
            f"{API}/interrupted-input/executions", json={"code": caught, "wait": 30}
        )
        assert r.json()["returned"] == "input"
        status, out, _ = await loomgate(env, "interrupt", *k)
        assert status == 0 and re.fullmatch(r"In \[2\] \(.+\):\ncaught\n", out), out
    finally:
        await http.delete(f"{API}/interrupted-input")


async def test_run_shows_an_interrupted_input_without_ipykernels_frames(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    env = cli_env(gateway, tmp_path)
    try:
        status, out, _ = await loomgate(env, "run", "--kernel", "ended-input", ASKS, stdin="")
        lines = out.split("\n")
        assert status == 1 and lines[:2] == ["In [1]:", "Name? "]
        assert "----> 1 name = input('Name? ')" in lines
        assert lines[-4] == "" and lines[-3] in INTERRUPTED_INPUT
        assert re.fullmatch(LEFT_OUT, lines[-5]), lines
        assert re.fullmatch(r"\[interrupted after .+\]", lines[-2])
        assert "kernelbase.py:" not in out
    finally:
        await http.delete(f"{API}/ended-input")
