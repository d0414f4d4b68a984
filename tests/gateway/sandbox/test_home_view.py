"""What a confined kernel sees of the home dir (sandbox/policy/home_view.py), decided on a real
tree: the person's own names, the listed dot names and XDG entries, the cache, the dirs on the way
to a hidden path; never a secret, nor a name no list holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from loomgate.gateway.sandbox.policy.home_view import home_view, xdg_dirs

TREE = (
    "projects/app/main.py",
    "Documents/notes.txt",
    ".bashrc",
    ".newtool/credentials",
    ".gitconfig",
    ".ssh/id_rsa",
    ".config/matplotlib/matplotlibrc",
    ".config/pip/pip.conf",
    ".config/pypoetry/auth.toml",
    ".config/git/config",
    ".config/git/credentials",
    ".config/loomgate/sandbox.toml",
    ".local/bin/tool",
    ".local/lib/python3.11/site-packages/x.py",
    ".local/share/jupyter/kernels/py/kernel.json",
    ".local/share/jupyter/runtime/jpserver-1.json",
    ".local/share/keyrings/login.keyring",
    ".local/state/loomgate/token",
    ".cache/pip/http/x",
    ".cache/huggingface/hub/model",
    ".cache/huggingface/token",
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home dir holding TREE, with a link to a project and one to a secret."""
    home = tmp_path / "home"
    for name in TREE:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("x")
    (home / "current").symlink_to(home / "projects/app")
    (home / ".netrc-link").symlink_to(home / ".netrc")
    return home


def hidden(home: Path) -> list[Path]:
    """Return the hidden paths of a kernel of `home`: a few always hidden, loomgate's dirs."""
    names = (
        ".ssh",
        ".netrc",
        ".config/git/credentials",
        ".cache/huggingface/token",
        ".local/share/keyrings",
        ".local/share/jupyter/runtime",
        ".config/loomgate",
        ".local/state/loomgate",
    )
    return [home / name for name in names]


def relative(home: Path, paths: tuple[Path, ...]) -> list[str]:
    """Return `paths` relative to `home`, as strings."""
    return [str(path.relative_to(home)) for path in paths]


def test_the_view_shows_what_a_kernel_needs_and_no_secret(home: Path) -> None:
    view = home_view(home, hidden(home), [], xdg_dirs(home, {}))
    assert sorted(relative(home, view.listed)) == [
        ".",
        ".cache",
        ".cache/huggingface",
        ".config",
        ".config/git",
        ".local",
        ".local/share",
        ".local/share/jupyter",
        ".local/state",
    ]
    assert sorted(relative(home, view.shown)) == [
        ".cache/huggingface/hub",
        ".cache/pip",
        ".config/git/config",
        ".config/matplotlib",
        ".config/pip",
        ".gitconfig",
        ".local/bin",
        ".local/lib",
        ".local/share/jupyter/kernels",
        "Documents",
        "projects",
    ]
    assert [(str(p.relative_to(home)), t) for p, t in view.links] == [
        ("current", str(home / "projects/app"))
    ]


def test_a_dot_name_no_list_holds_is_left_out_and_a_profile_adds_one(home: Path) -> None:
    plain = home_view(home, hidden(home), [], xdg_dirs(home, {}))
    added = home_view(
        home,
        hidden(home),
        [home / ".newtool", home / ".config/pypoetry/auth.toml", home / ".ssh/id_rsa"],
        xdg_dirs(home, {}),
    )
    assert home / ".newtool" not in plain.shown and home / ".bashrc" not in plain.shown
    assert home / ".config/pypoetry" not in plain.listed + plain.shown
    assert home / ".newtool" in added.shown
    # A path on the way to a readable one is listed, not shown whole: only it is there.
    assert home / ".config/pypoetry" in added.listed
    assert home / ".config/pypoetry/auth.toml" in added.shown
    assert home / ".ssh/id_rsa" not in added.shown  # hidden wins


def test_an_xdg_variable_inside_the_home_dir_is_listed_too(home: Path) -> None:
    (home / "xdg-config/tool").mkdir(parents=True)
    (home / "xdg-config/matplotlib").mkdir()
    env = {"XDG_CONFIG_HOME": str(home / "xdg-config")}
    view = home_view(home, hidden(home), [], xdg_dirs(home, env))
    assert home / "xdg-config" in view.listed
    assert home / "xdg-config/matplotlib" in view.shown
    assert home / "xdg-config/tool" not in view.shown


@pytest.mark.parametrize(
    ("env", "config", "cache"),
    [
        ({}, ["/h/.config"], ["/h/.cache"]),
        (
            {"XDG_CONFIG_HOME": "/elsewhere/config", "XDG_CACHE_HOME": "relative"},
            ["/h/.config", "/elsewhere/config"],
            ["/h/.cache"],
        ),
        ({"XDG_CONFIG_HOME": "/h/.config"}, ["/h/.config"], ["/h/.cache"]),
    ],
)
def test_xdg_dirs_are_the_defaults_and_what_the_variables_name(
    env: dict[str, str], config: list[str], cache: list[str]
) -> None:
    found = xdg_dirs(Path("/h"), env)
    assert ([str(p) for p in found["config"]], [str(p) for p in found["cache"]]) == (config, cache)


def test_every_xdg_dir_is_the_default_and_what_its_variable_names() -> None:
    env = {
        "XDG_CONFIG_HOME": "/x/c",
        "XDG_DATA_HOME": "/x/d",
        "XDG_STATE_HOME": "/x/s",
        "XDG_CACHE_HOME": "/x/k",
    }
    found = {kind: [str(p) for p in paths] for kind, paths in xdg_dirs(Path("/h"), env).items()}
    assert found == {
        "config": ["/h/.config", "/x/c"],
        "data": ["/h/.local/share", "/x/d"],
        "state": ["/h/.local/state", "/x/s"],
        "cache": ["/h/.cache", "/x/k"],
    }
    unset = {kind: [str(p) for p in paths] for kind, paths in xdg_dirs(Path("/h"), {}).items()}
    assert unset == {
        "config": ["/h/.config"],
        "data": ["/h/.local/share"],
        "state": ["/h/.local/state"],
        "cache": ["/h/.cache"],
    }


def test_what_no_list_holds_is_left_out_by_name(home: Path) -> None:
    view = home_view(home, hidden(home), [], xdg_dirs(home, {}))
    assert view.home == home
    assert sorted(relative(home, view.left_out)) == [
        ".bashrc",
        ".config/pypoetry",
        ".netrc-link",  # a link no list holds, too
        ".newtool",
    ]


def test_the_home_dir_named_hidden_or_readable_hides_and_shows_nothing_more(home: Path) -> None:
    plain = home_view(home, hidden(home), [], xdg_dirs(home, {}))
    named = home_view(home, [*hidden(home), home], [home], xdg_dirs(home, {}))
    assert (named.listed, named.shown, named.left_out) == (
        plain.listed,
        plain.shown,
        plain.left_out,
    )
