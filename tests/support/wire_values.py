"""Whole wire values for table tests (an execution, a stream read, output lines, a kernel),
each with defaults that a test overrides field by field."""

from __future__ import annotations

from typing import Any, cast

from loomgate.shared import wire


def execution(**fields: Any) -> wire.Execution:
    """Return a whole execution summary: In [5], completed in 1.23 s, with `fields` laid over."""
    base = wire.Execution(
        kernel_id="k",
        number=5,
        state="completed",
        source="loomgate",
        code="x",
        started=0.0,
        finished=1.23,
        elapsed=1.23,
        error=None,
        input=None,
        died=None,
        note=None,
        unstored=None,
        gaps=[],
        last_output=0.0,
        silent_for=0.0,
        streams={},
        rich=[],
    )
    return cast(wire.Execution, base | fields)


def read(**fields: Any) -> wire.StreamRead:
    """Return a whole stream read: one of In [3] stdout, with `fields` laid over it."""
    base = wire.StreamRead(
        number=3,
        state="completed",
        stream="stdout",
        total=0,
        range=":",
        first=1,
        last=0,
        truncated=False,
        lines=[],
    )
    return cast(wire.StreamRead, base | fields)


def lines(*specs: tuple[str, str] | str, start: int = 1) -> list[dict[str, Any]]:
    """Return line objects; a spec is text (stdout) or (kind, text); kind '+k' starts a part."""
    out = []
    for offset, spec in enumerate(specs):
        kind, text = ("stdout", spec) if isinstance(spec, str) else spec
        line: dict[str, Any] = {"n": start + offset, "text": text, "kind": kind.lstrip("+")}
        if kind.startswith("+"):
            line["start"] = True
        out.append(line)
    return out


def kernel(**fields: Any) -> wire.Kernel:
    """Return a whole kernel model: `lab`, idle and persistent, with `fields` laid over it."""
    base = wire.Kernel(
        id="cccccccc-3",
        name="lab",
        kernel_spec="python3",
        lifetime="persistent",
        state="idle",
        alive=True,
        current_execution=None,
        executions=2,
        last_execution=2,
        last_activity=None,
        connections=0,
        holders=0,
        held_by=[],
        stops_at=None,
        cwd=None,
        paths=[],
        created=1.0,
        ended=None,
        end_reason=None,
        attached=None,
        implementation="",
        language="",
        setup=wire.Setup(parts=[], results=[]),
        sandbox=None,
        open_to_agents=True,
        checkpoints=[],
        forked_from=None,
    )
    return cast(wire.Kernel, base | fields)


def sandbox(**fields: Any) -> wire.Sandbox:
    """Return a whole kernel sandbox: `workspace` in /home/p/proj, 4 GiB and 512 processes, by
    bubblewrap, with `fields` laid over it."""
    base = wire.Sandbox(
        profile="workspace",
        writable=["/home/p/proj"],
        hidden=["/home/p/.ssh", "/home/p/.aws", "/home/p/.netrc"],
        network=True,
        memory=4 << 30,
        processes=512,
        mechanism="bubblewrap, landlock, cgroup v1",
        lacks=[],
        packages=None,
    )
    return cast(wire.Sandbox, base | fields)


def failure(
    rule: wire.SandboxRule, path: str | None = None, profile: str = "workspace"
) -> wire.SandboxFailure:
    """Return the sandbox rule a cell failed on."""
    return wire.SandboxFailure(rule=rule, profile=profile, path=path)
