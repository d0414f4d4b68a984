"""The CLI's argument handling, without a gateway."""

from __future__ import annotations

import pytest

from loomgate.translator.cli.main import attached_ranges, parser


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["output", "4", "--lines", "-2:"], ["output", "4", "--lines=-2:"]),
        (["output", "--lines", "-20:-5", "4"], ["output", "--lines=-20:-5", "4"]),
        (["output", "4", "--lines", "3:9"], ["output", "4", "--lines", "3:9"]),
        (["output", "4", "--lines", "--json"], ["output", "4", "--lines", "--json"]),
        (["run", "-"], ["run", "-"]),
        (["run", "--", "-2"], ["run", "--", "-2"]),
    ],
)
def test_a_negative_range_stays_with_lines(argv: list[str], expected: list[str]) -> None:
    assert attached_ranges(argv) == expected


def test_output_takes_a_range_from_the_end() -> None:
    args = parser().parse_args(attached_ranges(["output", "4", "--lines", "-2:"]))
    assert (args.execution, args.lines) == ("4", "-2:")


@pytest.mark.parametrize(
    "command",
    [["run", "1"], ["output"], ["search", "q"], ["wait"], ["interrupt"], ["reset"], ["stream"]],
)
def test_every_command_on_one_kernel_takes_kernel(command: list[str]) -> None:
    args = parser().parse_args([*command, "--kernel", "work", "--gateway", "lab"])
    assert (args.kernel, args.gateway) == ("work", "lab")


def test_stream_help_says_which_kernel_it_uses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["stream", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "default: a kernel of the session's own, stopped after the grace period" in shown


def test_run_takes_a_sandbox_profile() -> None:
    args = parser().parse_args(["run", "1", "--kernel", "wide", "--sandbox", "none"])
    assert (args.kernel, args.sandbox) == ("wide", "none")
    assert parser().parse_args(["run", "1"]).sandbox is None


def test_run_help_says_when_the_sandbox_applies(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["run", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--sandbox PROFILE" in shown
    assert "the sandbox profile --kernel starts under when this run creates it" in shown
