"""The notebook path a Jupyter session starts a kernel for, as the sessions API names it."""

from __future__ import annotations

import pytest

from loomgate.gateway.kernels.manager import session_path


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"JPY_SESSION_NAME": "/srv/notes/work/analysis.ipynb"}, "work/analysis.ipynb"),
        ({"JPY_SESSION_NAME": "/srv/notes/analysis.ipynb"}, "analysis.ipynb"),
        ({"JPY_SESSION_NAME": "/elsewhere/a.ipynb"}, "/elsewhere/a.ipynb"),
        ({"JPY_SESSION_NAME": "/srv/notes/../notes/b.ipynb"}, "b.ipynb"),
        ({}, ""),
        ({"JPY_SESSION_NAME": ""}, ""),
    ],
    ids=["nested", "top", "outside-the-root", "dot-dot", "no-session", "empty"],
)
def test_session_path(env: dict[str, str], expected: str) -> None:
    assert session_path(env, "/srv/notes") == expected


def test_an_inherited_session_name_is_not_a_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JPY_SESSION_NAME", "/srv/notes/mine.ipynb")
    assert session_path({"JPY_SESSION_NAME": "/srv/notes/mine.ipynb"}, "/srv/notes") == ""
