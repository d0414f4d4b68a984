"""The sandbox-exec (SBPL) profile generated from a kernel's rules, read back as S-expressions
(untested on macOS here: these tests are what holds it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement.macos import (
    SANDBOX_EXEC,
    sandbox_exec_command,
    sbpl_profile,
    sbpl_regex,
    sbpl_string,
)
from loomgate.gateway.sandbox.network.network_rules import HOST_NETWORK, NO_NETWORK, PUBLIC
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

Form = list["Form | str"]


def read_sbpl(text: str) -> list[Form]:
    """Return the top-level forms of SBPL `text`: lists of symbols and ("quoted") strings (a
    symbol outside a form fails)."""
    stack: list[Form] = [[]]
    i = 0
    while i < len(text):
        c = text[i]
        if c == ";":
            i = text.index("\n", i)
        elif c == "(":
            stack.append([])
        elif c == ")":
            done = stack.pop()
            stack[-1].append(done)
        elif c == '"':
            j, chars = i + 1, []
            while text[j] != '"':
                if text[j] == "\\":
                    j += 1
                chars.append(text[j])
                j += 1
            stack[-1].append('"' + "".join(chars) + '"')
            i = j
        elif not c.isspace():
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in '()"':
                j += 1
            stack[-1].append(text[i:j])
            i = j - 1
        i += 1
    assert len(stack) == 1, "unbalanced parentheses"
    assert all(isinstance(f, list) for f in stack[0]), f"not a form: {stack[0]}"
    return [f for f in stack[0] if isinstance(f, list)]


RULES = SandboxRules(
    "strict",
    True,
    (Path("/Users/u/project"), Path('/Volumes/My "Data"\\x')),
    (Path("/Users/u/.ssh"), Path("/Users/u/.local/state/loomgate"), Path("/Users/u/.netrc")),
    NO_NETWORK,
    4 << 30,
    512,
    protected=(".envrc",),
)
TEMP = Path("/private/var/folders/ab/T/loomgate-k1")
KERNEL = Path("/Users/u/.local/state/loomgate/kernels/k1")
CONNECTION = Path("/Users/u/Library/Jupyter/runtime/kernel-k1.json")


def forms(rules: SandboxRules = RULES) -> list[Form]:
    return read_sbpl(sbpl_profile(rules, temp_dir=TEMP, kernel_dir=KERNEL, readable=[CONNECTION]))


def q(text: str | Path) -> str:
    return f'"{text}"'


def test_the_profile_in_order() -> None:
    assert forms() == [
        ["version", "1"],
        ["allow", "default"],
        ["deny", "file-write*"],
        [
            "allow",
            "file-write*",
            ["subpath", q("/Users/u/project")],
            ["subpath", q('/Volumes/My "Data"\\x')],
            ["subpath", q(TEMP)],
            ["subpath", q(KERNEL)],
            ["subpath", q("/dev/fd")],
            ["literal", q("/dev/null")],
            ["literal", q("/dev/zero")],
            ["literal", q("/dev/tty")],
            ["literal", q("/dev/dtracehelper")],
            ["literal", q("/dev/urandom")],
        ],
        # what stays read-only in the writable paths, by path, also before it exists
        [
            "deny",
            "file-write*",
            ["subpath", q("/Users/u/project/.git")],
            ["subpath", q("/Users/u/project/.envrc")],
            ["subpath", q('/Volumes/My "Data"\\x/.git')],
            ["subpath", q('/Volumes/My "Data"\\x/.envrc')],
            ["regex", "#", q("^/Users/u/project/(.*/)?(__pycache__|node_modules)(/|$)")],
            ["regex", "#", q('^/Volumes/My "Data"\\\\x/(.*/)?(__pycache__|node_modules)(/|$)')],
        ],
        [
            "deny",
            "file-read*",
            "file-write*",
            ["subpath", q("/Users/u/.ssh")],
            ["subpath", q("/Users/u/.local/state/loomgate")],
            ["subpath", q("/Users/u/.netrc")],
        ],
        ["allow", "file-read*", "file-write*", ["subpath", q(TEMP)], ["subpath", q(KERNEL)]],
        ["allow", "file-read*", ["literal", q(CONNECTION)]],
        ["deny", "signal"],
        ["allow", "signal", ["target", "same-sandbox"]],
        ["deny", "process-info*"],
        ["allow", "process-info*", ["target", "same-sandbox"]],
        ["deny", "mach-priv-task-port"],
        ["allow", "mach-priv-task-port", ["target", "same-sandbox"]],
        ["deny", "appleevent-send"],
        [
            "deny",
            "mach-lookup",
            ["global-name", q("com.apple.coreservices.launchservicesd")],
            ["global-name", q("com.apple.SecurityServer")],
            ["global-name", q("com.apple.securityd.xpc")],
        ],
        ["deny", "network*"],
        [
            "allow",
            "network-bind",
            "network-inbound",
            ["local", "unix-socket", ["subpath", q(KERNEL)]],
        ],
        [
            "allow",
            "network-outbound",
            ["remote", "unix-socket", ["subpath", q(KERNEL)]],
            ["literal", q("/private/var/run/syslog")],
        ],
    ]


def test_with_network_nothing_about_it_is_said() -> None:
    with_network = forms(replace(RULES, network=PUBLIC))
    assert not any(any(str(w).startswith("network") for w in f) for f in with_network)
    assert with_network == forms()[: len(with_network)]


def test_no_writable_path_and_nothing_hidden() -> None:
    rules = SandboxRules("bare", True, (), (), PUBLIC, None, None)
    text = sbpl_profile(rules, temp_dir=TEMP, kernel_dir=KERNEL)
    parsed = read_sbpl(text)
    assert ["deny", "file-read*", "file-write*"] not in [f[:3] for f in parsed]
    assert parsed[3][:3] == ["allow", "file-write*", ["subpath", q(TEMP)]]
    assert not any(f[:2] == ["allow", "file-read*"] and len(f) == 3 for f in parsed)


@pytest.mark.parametrize(
    ("text", "literal"),
    [
        ("/a/b", '"/a/b"'),
        ('/a"b', '"/a\\"b"'),
        ("/a\\b", '"/a\\\\b"'),
        ('/a\\"b', '"/a\\\\\\"b"'),
        ("/répertoire/ü", '"/répertoire/ü"'),
        ("/a (1)/;x", '"/a (1)/;x"'),
    ],
)
def test_sbpl_string(text: str, literal: str) -> None:
    assert sbpl_string(text) == literal
    assert read_sbpl(f"(x {literal})") == [["x", f'"{text}"']]


@pytest.mark.parametrize("text", ["/a\nb", "/a\x00", "/a\tb", "/a\x7f"])
def test_control_characters_are_refused(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        sbpl_string(text)
    assert str(refused.value) == (
        f"Path {text!r} holds a control character, which a macOS sandbox profile cannot name; "
        "rename it or choose profile 'none'."
    )


def test_refusals() -> None:
    unconfined = SandboxRules("none", False, (), (), HOST_NETWORK, None, None)
    with pytest.raises(ValueError, match="'none' is not confined"):
        sbpl_profile(unconfined, temp_dir=TEMP, kernel_dir=KERNEL)
    with pytest.raises(ValueError, match="'k1' is not absolute"):
        sbpl_profile(RULES, temp_dir=TEMP, kernel_dir=Path("k1"))
    with pytest.raises(
        ValueError,
        match=r"^The kernel command is empty: there is nothing to run in the sandbox\.$",
    ):
        sandbox_exec_command("(version 1)", [])


def test_sandbox_exec_command() -> None:
    profile = sbpl_profile(RULES, temp_dir=TEMP, kernel_dir=KERNEL)
    argv = sandbox_exec_command(profile, ["python", "-m", "ipykernel_launcher", "-f", "c.json"])
    assert argv == [
        SANDBOX_EXEC,
        "-p",
        profile,
        "python",
        "-m",
        "ipykernel_launcher",
        "-f",
        "c.json",
    ]


def test_a_kernel_that_takes_only_tcp_may_listen_on_its_own_ports_without_network() -> None:
    rules = replace(RULES, network=NO_NETWORK)
    text = sbpl_profile(rules, temp_dir=TEMP, kernel_dir=KERNEL, tcp_ports=(40001, 40002))
    [allowed] = [
        form for form in read_sbpl(text) if form[:3] == ["allow", "network-bind", "network-inbound"]
    ]
    assert allowed[3:] == [
        ["local", "unix-socket", ["subpath", q(KERNEL)]],
        ["local", "ip", q("localhost:40001")],
        ["local", "ip", q("localhost:40002")],
    ]


def test_a_writable_dirs_venv_and_environment_stay_read_only_by_path(tmp_path: Path) -> None:
    project = tmp_path / "proj.x"
    (project / "tools").mkdir(parents=True)
    (project / "tools/pyvenv.cfg").write_text("home = /usr/bin\n")
    rules = replace(RULES, writable=(project,), read_only=(project / "src",), protected=())
    denied = next(f for f in forms(rules) if f[:2] == ["deny", "file-write*"] and len(f) > 2)
    assert denied[2:] == [
        ["subpath", q(project / ".git")],
        ["subpath", q(project / "src")],
        ["subpath", q(project / "tools")],
        # the regex matches the dir as it is named: its "." is no wildcard
        [
            "regex",
            "#",
            q("^" + str(project).replace(".", "\\.") + "/(.*/)?(__pycache__|node_modules)(/|$)"),
        ],
    ]


def test_a_regex_names_its_dir_as_it_is_and_refuses_a_control_character() -> None:
    assert sbpl_regex(Path("/p/X.y+z"), "/a") == '  (regex #"^/p/X\\\\.y\\\\+z/a")'
    with pytest.raises(ValueError, match="control character"):
        sbpl_regex(Path("/p/a\nb"), "/a")
