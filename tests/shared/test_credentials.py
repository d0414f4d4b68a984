"""Which values carry a credential in a URL (what neither a started gateway nor a confined
kernel is passed)."""

from __future__ import annotations

import pytest

from loomgate.shared.credentials import carries_credentials


@pytest.mark.parametrize(
    ("value", "carries"),
    [
        ("https://user:SECRET@index.example/simple", True),
        ("https://__token__@index.example/simple", True),  # a token as the user
        ("git+https://ghp_x@github.com/o/r.git", True),
        ("postgres://app:pw@db.internal:5432/app", True),
        ("https://pypi.org/simple https://u:p@extra.example/simple", True),  # one of a list
        ("internal=https://u:p@index.example/simple", True),  # UV_INDEX's name=url
        ("HTTPS://U:P@HOST/", True),
        ("https://pypi.org/simple", False),
        ("https://pypi.org/simple?to=a@b", False),  # "@" after the host
        ("https://pypi.org/~me@home/x", False),
        ("https://@pypi.org/", False),  # an empty user part
        ("user@host", False),  # no scheme: an address, not a URL
        ("git@github.com:o/r.git", False),
        ("/home/me/.cache/uv", False),
        ("", False),
    ],
)
def test_carries_credentials(value: str, carries: bool) -> None:
    assert carries_credentials(value) is carries
