"""Mutation testing (mutmut 3): do the fast tests notice when the code they cover is broken?

Run: `uv run python -m bench.mutation [--module NAME ...] [--out FILE.md]` (all modules: about
20 minutes on 2 cores). It writes bench/results/mutation.md: per module, the mutants killed,
timed out (a hang the tests catch), survived, and each survivor's diff with the reason it is
equivalent (bench/equivalent_mutants.py). Modules run one at a time (`--module NAME --out
/tmp/m-NAME.md`) are combined into one report with `--merge /tmp/m-*.md`.

Not in CI (too slow). Run it before resolving an issue that touches these modules. mutmut wants
one source root, so the three packages' `src/loomgate` trees and `tests/` are staged into a work
dir (default: a fresh one in /var/tmp) and mutated there; the checkout is never touched.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from bench.equivalent_mutants import reason_for
from bench.gateway_bench import publish

if sys.version_info >= (3, 11):
    import tomllib
else:  # the translator depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("shared", "gateway", "translator")
# Only tests that start no process: a mutant's tests run once per mutant, in mutmut's own
# process (`-n 0`: pyproject.toml asks for workers, which mutmut's trampolines would not see).
FAST_TESTS = ["-m", "not process", "-p", "no:cacheprovider", "-q", "-n", "0"]


@dataclass(frozen=True)
class Target:
    """Modules mutated together, and the fast tests that are meant to catch them."""

    name: str
    modules: tuple[str, ...]  # paths under src/loomgate
    tests: tuple[str, ...]
    # Its mutants may signal any process they can see (a broken pid match SIGKILLs all): they
    # run one at a time in a PID namespace of their own (see `mutmut_command`).
    signals: bool = False
    # Tests that hold only in the checkout (they look at where loomgate is installed from, which
    # the staged copy is not), left out of the run.
    checkout_only: tuple[str, ...] = ()


TARGETS = (
    Target(
        "terminal text",
        ("gateway/records/terminal_text.py",),
        ("tests/gateway/records/test_terminal_text.py",),
    ),
    Target(
        "output log",
        ("gateway/records/output_log.py", "gateway/records/output_stream.py"),
        ("tests/gateway/records/test_output_log.py",),
    ),
    Target(
        "line ranges",
        ("gateway/records/line_range.py",),
        ("tests/gateway/records/test_line_range.py",),
    ),
    Target("search", ("gateway/records/search.py",), ("tests/gateway/records/test_search.py",)),
    Target(
        "journal",
        (
            "gateway/records/journal.py",
            "gateway/records/json_lines.py",
            "gateway/records/unsaved.py",
        ),
        ("tests/gateway/records/test_journal.py", "tests/gateway/records/test_unsaved.py"),
    ),
    Target(
        "last seen",
        ("gateway/records/last_seen.py",),
        ("tests/gateway/records/test_last_seen.py",),
    ),
    Target(
        "launch markers",
        ("gateway/residency/launch_markers.py",),
        ("tests/gateway/residency/test_launch_markers.py",),
        signals=True,
    ),
    Target(
        "kernel kinds",
        (
            "gateway/kernels/kernel_kind.py",
            "gateway/kernels/message_sequence.py",
            "gateway/residency/kernel_transport.py",
            "gateway/records/markup_text.py",
        ),
        (
            "tests/gateway/test_kernel_kind.py",
            "tests/gateway/test_message_sequence.py",
            "tests/gateway/residency/test_kernel_transport.py",
            "tests/gateway/records/test_markup_text.py",
        ),
    ),
    Target(
        "notebook export",
        (
            "gateway/export/cells.py",
            "gateway/export/outputs.py",
            "gateway/export/selection.py",
            "gateway/export/notes.py",
            "gateway/export/notebook.py",
        ),
        (
            "tests/gateway/export/test_notebook_cells.py",
            "tests/gateway/export/test_notebook_notes.py",
        ),
    ),
    Target(
        "presentation",
        (
            "translator/presentation/cells.py",
            "translator/presentation/reads.py",
            "translator/presentation/kernels.py",
            "translator/presentation/refusals.py",
            "translator/presentation/sandboxes.py",
            "translator/presentation/notebooks.py",
            "translator/presentation/tracebacks.py",
            "translator/presentation/http_access.py",
            "translator/presentation/agent_access.py",
            "translator/presentation/checkpoints.py",
            "translator/output_view.py",
        ),
        (
            "tests/translator/test_presentation.py",
            "tests/translator/test_presentation_checkpoints.py",
            "tests/translator/test_presentation_status.py",
            "tests/translator/test_presentation_refusals.py",
            "tests/translator/test_cell_text.py",
            "tests/translator/test_presentation_cells.py",
            "tests/translator/test_presentation_reads.py",
            "tests/translator/test_presentation_sandboxes.py",
            "tests/translator/test_presentation_notebooks.py",
            "tests/translator/test_presentation_tracebacks.py",
            "tests/translator/test_presentation_kernel_kinds.py",
            "tests/translator/test_presentation_http_access.py",
            "tests/translator/test_presentation_agent_access.py",
            "tests/translator/test_presentation_kernels.py",
            "tests/translator/test_notebook_file.py",
        ),
    ),
    Target(
        "sandbox policy",
        (
            "gateway/sandbox/policy/profiles.py",
            "gateway/sandbox/policy/config.py",
            "gateway/sandbox/policy/toml_lines.py",
            "gateway/sandbox/policy/environment.py",
            "gateway/sandbox/policy/profile_values.py",
            "gateway/sandbox/policy/home_view.py",
            "gateway/sandbox/policy/state_dirs.py",
            "gateway/sandbox/failures/rule_failures.py",
            "gateway/sandbox/failures/cell_failures.py",
            "shared/sizes.py",
            "shared/credentials.py",
        ),
        (
            "tests/gateway/sandbox/test_profiles.py",
            "tests/gateway/sandbox/test_config.py",
            "tests/gateway/sandbox/test_toml_lines.py",
            "tests/gateway/sandbox/test_environment.py",
            "tests/gateway/sandbox/test_home_view.py",
            "tests/gateway/sandbox/test_state_dirs.py",
            "tests/gateway/sandbox/test_rule_failures.py",
            "tests/gateway/sandbox/test_cell_failures.py",
            "tests/shared/test_sizes.py",
            "tests/shared/test_credentials.py",
        ),
    ),
    Target(
        "sandbox mechanism (core)",
        (
            "gateway/sandbox/confinement/bubblewrap.py",
            "gateway/sandbox/confinement/macos.py",
            "gateway/sandbox/confinement/mechanism.py",
            "gateway/sandbox/confinement/entry.py",
            "gateway/sandbox/confinement/launch.py",
            "gateway/sandbox/confinement/confiner.py",
            "gateway/sandbox/confinement/bubblewrap_confiner.py",
            "gateway/sandbox/confinement/landlock_confiner.py",
        ),
        (
            "tests/gateway/sandbox/test_bubblewrap_command.py",
            "tests/gateway/sandbox/test_macos.py",
            "tests/gateway/sandbox/test_mechanism_decisions.py",
            "tests/gateway/sandbox/test_entry_plan.py",
            "tests/gateway/sandbox/test_launch.py",
            "tests/gateway/sandbox/test_landlock_confiner.py",
        ),
        signals=True,  # its tests signal pids no process has, and SandboxLaunch.signal a sandbox
    ),
    Target(
        "sandbox network",
        (
            "gateway/sandbox/network/network_rules.py",
            "gateway/sandbox/network/public_addresses.py",
            "gateway/sandbox/network/host_addresses.py",
            "gateway/sandbox/network/proxy_http.py",
            "gateway/sandbox/network/handover.py",
        ),
        (
            "tests/gateway/sandbox/test_network_rules.py",
            "tests/gateway/sandbox/test_host_addresses.py",
            "tests/gateway/sandbox/test_proxy_http.py",
            "tests/gateway/sandbox/test_handover.py",
        ),
    ),
    Target(
        "sandbox protections",
        (
            "gateway/sandbox/confinement/placeholders.py",
            "gateway/sandbox/policy/protected_names.py",
            "gateway/sandbox/policy/always_hidden.py",
            "gateway/sandbox/policy/installation.py",
            "gateway/sandbox/confinement/packages.py",
            "gateway/sandbox/confinement/landlock_paths.py",
            "gateway/sandbox/policy/host_code.py",
        ),
        (
            "tests/gateway/sandbox/test_placeholders.py",
            "tests/gateway/sandbox/test_host_code.py",
            "tests/gateway/sandbox/test_protected_names.py",
            "tests/gateway/sandbox/test_always_hidden.py",
            "tests/gateway/sandbox/test_installation.py",
            "tests/gateway/sandbox/test_packages.py",
            "tests/gateway/sandbox/test_landlock_paths.py",
        ),
        checkout_only=(
            "tests/gateway/sandbox/test_installation.py::test_what_this_gateway_runs_from",
        ),
    ),
    Target(
        "sandbox limits",
        ("gateway/sandbox/confinement/limits.py",),
        (
            "tests/gateway/sandbox/test_limits_host.py",
            "tests/gateway/sandbox/test_limits_files.py",
            "tests/gateway/sandbox/test_mechanism_decisions.py",  # what rlimits cannot hold
        ),
    ),
    Target(
        "gateway selection (core)",
        ("translator/client/selection.py", "translator/client/gateways_toml.py"),
        ("tests/translator/client/test_selection.py",),
    ),
    Target(
        "translator settings (core)",
        ("translator/mcp_server/settings.py",),
        ("tests/translator/mcp_server/test_settings.py",),
    ),
    Target(
        "apps view (core)",
        ("translator/presentation/apps.py",),
        ("tests/translator/test_presentation_apps.py",),
    ),
)

STATUS_BY_EXIT_CODE = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests"}
TIMEOUT_CODES = {24, -24, 36, 152, 255}


def stage(work: Path, targets: list[Target]) -> None:
    """Copy the sources and tests into `work` and write its mutmut and pytest configuration."""
    source = work / "src" / "loomgate"
    source.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".venv")
    for package in PACKAGES:
        tree = ROOT / package / "src" / "loomgate" / package
        shutil.copytree(tree, source / package, ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    mutmut = {
        "source_paths": ["src"],
        "only_mutate": [f"src/loomgate/{m}" for t in targets for m in t.modules],
        "pytest_add_cli_args": FAST_TESTS
        + [arg for t in targets for test in t.checkout_only for arg in ("--deselect", test)],
        "pytest_add_cli_args_test_selection": [test for t in targets for test in t.tests],
        "use_git_change_detection": False,
        # A mutant that loops for ever is stopped after 2 × 5 × (its tests' time + 1 s) of CPU,
        # not mutmut's default 2 × 15 ×: with two workers, those waits dominate a run.
        "timeout_multiplier": 5.0,
    }
    lines = ["[tool.mutmut]", *toml_table(mutmut), "", "[tool.pytest.ini_options]"]
    lines += toml_table(pytest_options["ini_options"])
    (work / "pyproject.toml").write_text("\n".join(lines) + "\n")


def toml_table(values: dict[str, object]) -> list[str]:
    """Return `key = value` lines (strings, booleans, numbers and lists of them; JSON spells
    those as TOML does, booleans aside)."""
    return [
        f"{key} = {json.dumps(value) if not isinstance(value, bool) else str(value).lower()}"
        for key, value in values.items()
    ]


def mutmut_command(targets: list[Target]) -> list[str]:
    """Return the command that runs mutmut on `targets`.

    A target whose mutants signal runs under `unshare --pid --mount-proc`: they see and reach
    only the run's own processes, and mutmut, the namespace's init, ignores the SIGKILL of one
    that matches every pid (the kernel drops signals an init has no handler for). One mutant at
    a time, so a mutant that kills its neighbours' tests cannot be credited with their kill.
    """
    command = [sys.executable, "-m", "mutmut", "run"]
    if not any(target.signals for target in targets):
        return command
    namespace = ["unshare", "--pid", "--fork", "--mount-proc"]
    if os.getuid() != 0:
        namespace.insert(1, "--map-root-user")
    return [*namespace, *command, "--max-children", "1"]


def outcome(code: int | None) -> str:
    """Return what a mutant's exit code means."""
    if code in TIMEOUT_CODES:
        return "timeout"
    if code is None:
        return "not checked"
    return STATUS_BY_EXIT_CODE.get(code, "suspicious")


def results(work: Path, target: Target) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Return the count per outcome of `target`'s mutants, and their names by outcome."""
    counts: dict[str, int] = {}
    names: dict[str, list[str]] = {}
    for module in target.modules:
        meta = work / "mutants" / "src" / "loomgate" / f"{module}.meta"
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        for name, code in sorted(codes.items()):
            status = outcome(code)
            counts[status] = counts.get(status, 0) + 1
            names.setdefault(status, []).append(name)
    return counts, names


def diff_of(work: Path, mutant: str) -> str:
    """Return mutmut's diff of one mutant."""
    shown = subprocess.run(
        [sys.executable, "-m", "mutmut", "show", mutant],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    )
    return shown.stdout.strip()


def report(work: Path, targets: list[Target], seconds: float) -> list[str]:
    """Return the Markdown report of a finished run in `work`."""
    lines = [
        "## Mutation testing (mutmut)",
        "",
        f"Generated by `uv run python -m bench.mutation` on {date.today()}: Python "
        f"{platform.python_version()}, {os.cpu_count()} cores, {seconds / 60:.0f} min. Each mutant"
        " ran against the module's fast tests (`-m 'not process'`); a timeout is a mutant that"
        " made them hang, caught by the per-mutant time limit.",
        "",
        "| module | mutants | killed | timed out | survived | no tests | killed or timed out |",
        "|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    for target in targets:
        counts, names = results(work, target)
        survivors, suspicious = names.get("survived", []), names.get("suspicious", [])
        total = sum(counts.values())
        caught = counts.get("killed", 0) + counts.get("timeout", 0)
        lines.append(
            f"| {target.name} (`{'`, `'.join(target.modules)}`) | {total} "
            f"| {counts.get('killed', 0)} | {counts.get('timeout', 0)} "
            f"| {counts.get('survived', 0)} | {counts.get('no tests', 0)} "
            f"| {100 * caught / max(total, 1):.0f} % |"
        )
        if survivors or suspicious:
            details += ["", f"### Survivors: {target.name}", ""]
        if suspicious:  # in no column of the table: its total counts them
            shown = ", ".join(f"`{name.rsplit('.', 1)[1]}`" for name in suspicious)
            details += [
                f"Suspicious (the tests' process died of a signal, not counted as killed; a "
                f"SIGKILL a mutant sent to the tests' own process ends it so): {shown}.",
            ]
        for mutant in survivors:
            diff = diff_of(work, mutant)
            reason = reason_for(mutant, diff) or "not shown to be equivalent: a test is missing"
            details += [f"Equivalent: {reason}.", "```diff", diff, "```"]
    return [*lines, *details]


def merge(reports: list[Path]) -> list[str]:
    """Return one report of per-module reports (their rows in TARGETS order, their minutes
    added, their survivors kept; where two report one target, the later one's)."""
    rows: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    minutes = 0
    header = ""
    for path in reports:
        text = path.read_text().splitlines()
        header = next(line for line in text if line.startswith("Generated by"))
        minutes += int(header.rsplit(" cores, ", 1)[1].split(" min", 1)[0])
        section: list[str] | None = None
        for line in text:
            if line.startswith("| ") and not line.startswith("| module "):
                name = line[2:].split(" (`", 1)[0]
                rows[name] = line
                sections.pop(name, None)  # an earlier report's survivors of it are gone
            elif line.startswith("### Survivors: "):
                section = sections.setdefault(line.removeprefix("### Survivors: "), [])
            elif section is not None and line:
                section.append(line)
    prefix, _, rest = header.partition(" cores, ")
    command = "`uv run python -m bench.mutation`"
    if f"{command} (one module a run)" not in prefix:  # a merged report merged again says it once
        prefix = prefix.replace(command, f"{command} (one module a run)")
    tail = rest.split(" min", 1)[1].removeprefix(" in all")
    lines = [
        "## Mutation testing (mutmut)",
        "",
        f"{prefix} cores, {minutes} min in all{tail}",
        "",
        "| module | mutants | killed | timed out | survived | no tests | killed or timed out |",
        "|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    for target in TARGETS:
        if target.name in rows:
            lines.append(rows[target.name])
        if sections.get(target.name):
            details += ["", f"### Survivors: {target.name}", "", *sections[target.name]]
    return [*lines, *details]


def main() -> None:
    """Stage, run mutmut, and publish the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    names = [t.name for t in TARGETS]
    parser.add_argument("--module", action="append", choices=names, help="default: all")
    parser.add_argument("--work", type=Path, help="work dir (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "mutation.md")
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="REPORT",
        help="write one report of these per-module reports (from --out) instead of running",
    )
    args = parser.parse_args()
    if args.merge:
        publish(merge(args.merge), args.out)
        return
    targets = [t for t in TARGETS if not args.module or t.name in args.module]
    # Not under /tmp: a kernel's sandbox binds a loomgate installed there into its own /tmp, and
    # the sandbox's tests count its binds.
    work = args.work or Path(tempfile.mkdtemp(prefix="loomgate-mutation-", dir="/var/tmp"))
    if args.work and args.work.exists():
        shutil.rmtree(args.work)
    stage(work, targets)
    started = time.monotonic()
    with (work / "mutmut.log").open("w") as log:
        subprocess.run(mutmut_command(targets), cwd=work, stdout=log, stderr=log, check=True)
    publish(report(work, targets, time.monotonic() - started), args.out)
    print(f"work dir (mutmut browse / show there): {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
