"""The names kept read-only in every writable dir: the defaults, a profile's own as written,
and the symlinks a mount cannot keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from loomgate.gateway.sandbox.policy.protected_names import (
    DEFAULT_PROTECTED,
    protected_name,
    protected_name_problem,
    symlinked_protections,
    unprotectable,
)


def test_the_protected_names() -> None:
    for name in (".mcp.json", ".claude", ".vscode", ".envrc", ".gitmodules", ".jupyter"):
        assert name in DEFAULT_PROTECTED
    for app in ("", "_server", "_notebook", "_lab", "_nbconvert"):
        for suffix in ("py", "json"):
            assert f"jupyter{app}_config.{suffix}" in DEFAULT_PROTECTED
    assert ".git" not in DEFAULT_PROTECTED  # always guarded, in its own way
    assert len(set(DEFAULT_PROTECTED)) == len(DEFAULT_PROTECTED)
    assert all(protected_name_problem(name) is None for name in DEFAULT_PROTECTED)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (".envrc", None),
        (".github/workflows", None),
        (".claude/", None),
        (".git", None),  # the whole of it read-only
        ("", "a protected name is empty"),
        ("/", "a protected name is empty"),
        ("/etc/x", "protected name '/etc/x' is not relative"),
        ("~/.envrc", "protected name '~/.envrc' is not relative"),
        ("{cwd}/.envrc", "protected name '{cwd}/.envrc' is not relative"),
        ("../x", "protected name '../x' holds '.' or '..'"),
        ("a/./b", "protected name 'a/./b' holds '.' or '..'"),
        ("a\x00b", "protected name 'a\\x00b' holds a NUL character"),
    ],
)
def test_protected_name_problem(text: str, problem: str | None) -> None:
    found = protected_name_problem(text)
    assert found == problem if problem is None else (found or "").startswith(problem)


@pytest.mark.parametrize(
    ("text", "kept"), [(".claude/", ".claude"), ("a//b/", "a/b"), (".envrc", ".envrc")]
)
def test_protected_name(text: str, kept: str) -> None:
    assert protected_name(text) == kept


def test_symlinks_among_the_protected_paths(tmp_path: Path) -> None:
    top = tmp_path / "w"
    (top / "docs").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (top / ".vscode").symlink_to(tmp_path / "elsewhere")
    (top / "github").symlink_to(tmp_path / "elsewhere")
    names = (".vscode", ".envrc", "github/workflows", "docs/conf.py")
    assert symlinked_protections([top], names) == [
        (top / ".vscode", ".vscode"),
        (top / "github", "github/workflows"),  # a part on the way
    ]
    (top / ".git").symlink_to(tmp_path / "elsewhere")
    assert symlinked_protections([top], ())[0] == (top / ".git", ".git")  # always protected


@pytest.mark.parametrize(
    ("name", "remedy"),
    [
        (".vscode", 'take the name out of a profile (unprotected = [".vscode"]), '),
        (".git", ""),  # never taken out
    ],
)
def test_the_refusal_says_what_to_do(name: str, remedy: str) -> None:
    assert unprotectable("workspace", Path("/p") / name, name) == (
        f"/p/{name} is a symbolic link, which the sandbox of profile 'workspace' cannot keep "
        "from being replaced (what it points to can be made read-only, the link itself cannot): "
        f"replace the link with what it points to, {remedy}or choose profile 'none'."
    )


# What the tests above leave open (each fails on a mutant of protected_names.py that
# bench/mutation.py found alive without it).
@pytest.mark.parametrize(
    "text",
    ["X", ".X", "X..", ". ", " ..", "notes/X."],  # only "/" is taken off before the checks
)
def test_names_that_look_empty_or_dotted_only_once_other_characters_are_stripped(
    text: str,
) -> None:
    assert protected_name_problem(text) is None


def test_a_name_that_is_not_relative_is_told_how_to_write_it() -> None:
    assert protected_name_problem("/etc/x") == (
        "protected name '/etc/x' is not relative: write it as a name in each writable directory "
        "(e.g. '.envrc' or '.github/workflows')"
    )
