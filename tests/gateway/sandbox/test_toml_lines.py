"""TomlLines: the line a key or table of a TOML text is written on."""

from __future__ import annotations

import pytest

from loomgate.gateway.sandbox.policy.toml_lines import TomlLines

TEXT = """\
# sandbox.toml
default = "data"
jupyter_api='none'

[profiles.data]
writable = [
    "{cwd}",
    '/srv/data',
    "/a\\"b",
]
network = false

[profiles."with space"]
memory = "4GiB"

[profiles]
inline = { network = true, memory = 1 }
dotted.network = false
dotted.hidden = ["~/x"]

[other]
default = "not top level"
"""


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda t: t.top_level("default"), 2),
        (lambda t: t.top_level("jupyter_api"), 3),
        (lambda t: t.top_level("profiles"), 5),
        (lambda t: t.top_level("other"), 21),
        (lambda t: t.top_level("missing"), None),
        (lambda t: t.table("profiles", "data"), 5),
        (lambda t: t.table("profiles", "with space"), 13),
        (lambda t: t.table("profiles", "inline"), 17),
        (lambda t: t.table("profiles", "dotted"), 18),
        (lambda t: t.table("profiles", "missing"), 5),
        (lambda t: t.key("profiles", "data", "network"), 11),
        (lambda t: t.key("profiles", "data", "writable"), 6),
        (lambda t: t.key("profiles", "data", "memory"), 5),
        (lambda t: t.key("profiles", "with space", "memory"), 14),
        (lambda t: t.key("profiles", "inline", "memory"), 17),
        (lambda t: t.key("profiles", "dotted", "hidden"), 19),
        (lambda t: t.item("profiles", "data", "writable", "{cwd}"), 7),
        (lambda t: t.item("profiles", "data", "writable", "/srv/data"), 8),
        (lambda t: t.item("profiles", "data", "writable", '/a"b'), 9),
        (lambda t: t.item("profiles", "data", "writable", "nowhere"), 6),
        (lambda t: t.item("profiles", "dotted", "hidden", "~/x"), 19),
        (lambda t: t.item("profiles", "missing", "hidden", "~/x"), 5),
    ],
)
def test_lines(call: object, expected: int | None) -> None:
    assert call(TomlLines(TEXT)) == expected  # type: ignore[operator]


def test_a_list_ends_at_the_next_key() -> None:
    text = '[profiles.p]\nwritable = [\n  "a=b",\n]\nhidden = ["x"]\n'
    lines = TomlLines(text)
    assert lines.item("profiles", "p", "writable", "a=b") == 3
    assert lines.item("profiles", "p", "writable", "x") == 2


def test_dotted_top_level_tables() -> None:
    lines = TomlLines('default = "x"\nprofiles.p.network = false\n')
    assert lines.table("profiles", "p") == 2
    assert lines.key("profiles", "p", "network") == 2
    assert lines.top_level("profiles") == 2


@pytest.mark.parametrize(
    ("text", "call", "expected"),
    [
        # names and values holding a backslash or a quote, as TOML escapes them
        # (the fallback, the line of [profiles.x], is 1)
        ('[profiles.x]\n[profiles."a\\\\b"]\n', lambda t: t.table("profiles", "a\\b"), 2),
        ('[profiles.x]\n[profiles."a\\"b"]\n', lambda t: t.table("profiles", 'a"b'), 2),
        (
            '[profiles.p]\nhidden = [\n  "/x",\n  "/a\\\\b",\n]\n',
            lambda t: t.item("profiles", "p", "hidden", "/a\\b"),
            4,
        ),
        # a list is searched from its key on, not from the top
        (
            '[profiles.p]\nhidden = ["/x"]\nwritable = ["/x"]\n',
            lambda t: t.item("profiles", "p", "writable", "/x"),
            3,
        ),
        # a key the table does not set: the table's line
        ("[profiles.p]\nnetwork = true\n", lambda t: t.item("profiles", "p", "hidden", "/x"), 1),
        # a table ends at the next header, even on the line right after it
        (
            "[profiles.a]\n[profiles.b]\nnetwork = true\n",
            lambda t: t.key("profiles", "a", "network"),
            1,
        ),
        # dotted keys and inline tables end with their table
        (
            "[profiles]\nd.network = false\n[other]\nd.memory = 1\n",
            lambda t: t.key("profiles", "d", "memory"),
            2,
        ),
        ("[profiles]\na = {}\n[other]\nb = 1\n", lambda t: t.table("profiles", "b"), 1),
        ("[other]\nprofiles.b = 1\n", lambda t: t.table("profiles", "b"), None),
        (
            "profiles.p.network = false\nprofiles.p.memory = 1\n",
            lambda t: t.table("profiles", "p"),
            1,
        ),
        # a top-level key is looked for above the first header only
        ('[profiles.p]\nmemory = "1G"\n', lambda t: t.top_level("memory"), None),
    ],
)
def test_lines_of_small_texts(text: str, call: object, expected: int | None) -> None:
    assert call(TomlLines(text)) == expected  # type: ignore[operator]
