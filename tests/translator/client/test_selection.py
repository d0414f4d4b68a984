"""Gateway selection: --gateway, $LOOMGATE_URL, gateways.toml and the local default."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from loomgate.translator.client.errors import GatewayConfigError
from loomgate.translator.client.gateways_toml import (
    decode_error_line,
    find_line,
    load_gateways_toml,
)
from loomgate.translator.client.selection import select_gateway
from loomgate.translator.client.target import GatewayTarget, TokenSource

LOCAL = GatewayTarget("http://127.0.0.1:8787", None, True, None, True)

GATEWAYS = """\
# two remote gateways
[gateways.lab]
url = "https://lab.example.com/gate/"
token_env = "LAB_TOKEN"
verify = false

[gateways.box]
url = "http://box:8787"
token = "box-secret"
"""


@pytest.fixture
def config(config_dir: Path) -> Path:
    """Return the path the test's gateways.toml would have."""
    return config_dir / "gateways.toml"


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    """Write `text` to `path` with `mode`; return the path."""
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("option", "env", "expected"),
    [
        (None, {}, LOCAL),
        ("", {}, LOCAL),
        (None, {"LOOMGATE_TOKEN": "t"}, LOCAL),
        (
            None,
            {"LOOMGATE_URL": "http://h:1/", "LOOMGATE_TOKEN": "t"},
            GatewayTarget("http://h:1", "t", True, None, False),
        ),
        (None, {"LOOMGATE_URL": "https://h"}, GatewayTarget("https://h", None, True, None, False)),
        (
            "https://other:9/x",
            {"LOOMGATE_URL": "http://h:1", "LOOMGATE_TOKEN": "t"},
            GatewayTarget("https://other:9/x", "t", True, None, False),
        ),
        (
            "lab",
            {"LOOMGATE_URL": "http://h:1", "LAB_TOKEN": "lab-t", "LOOMGATE_TOKEN": "t"},
            GatewayTarget(
                "https://lab.example.com/gate", "lab-t", False, "lab", False, "LAB_TOKEN"
            ),
        ),
        ("box", {}, GatewayTarget("http://box:8787", "box-secret", True, "box", False)),
    ],
)
def test_selection_order(
    config: Path, option: str | None, env: dict[str, str], expected: GatewayTarget
) -> None:
    write(config, GATEWAYS)
    assert select_gateway(option, env) == expected


GATEWAYS_AND_OPEN = GATEWAYS + '\n[gateways.open]\nurl = "http://open:1"\n'


FROM_LOOMGATE_TOKEN = TokenSource("in LOOMGATE_TOKEN", "set it to this gateway's token")


@pytest.mark.parametrize(
    ("option", "env", "expected"),
    [
        ("http://h:1", {"LOOMGATE_TOKEN": "t"}, FROM_LOOMGATE_TOKEN),
        (None, {"LOOMGATE_URL": "http://h:1", "LOOMGATE_TOKEN": "t"}, FROM_LOOMGATE_TOKEN),
        (
            "box",
            {"LOOMGATE_TOKEN": "t"},
            TokenSource("of gateway 'box' in {path}", "put this gateway's token there"),
        ),
        (
            "lab",
            {"LAB_TOKEN": "lab-t"},
            TokenSource(
                "in LAB_TOKEN (token_env of gateway 'lab' in {path})",
                "set LAB_TOKEN to this gateway's token",
            ),
        ),
        ("http://h:1", {}, None),
        (None, {"LOOMGATE_URL": "http://h:1"}, None),
        ("open", {"LOOMGATE_TOKEN": "t"}, None),
        (None, {"LOOMGATE_TOKEN": "t"}, None),
    ],
    ids=[
        "--gateway URL",
        "LOOMGATE_URL",
        "token in the file",
        "token_env",
        "--gateway URL, no token",
        "LOOMGATE_URL, no token",
        "named, no token",
        "local",
    ],
)
def test_a_refused_token_is_named_by_where_it_came_from(
    config: Path, option: str | None, env: dict[str, str], expected: TokenSource | None
) -> None:
    """The token's source is what a refusal says: "refused the token {named}; {advice}"."""
    write(config, GATEWAYS_AND_OPEN)
    if expected is not None:
        expected = TokenSource(expected.named.format(path=config), expected.advice)
    assert select_gateway(option, env).token_source == expected


def test_repr_hides_the_token(config: Path) -> None:
    write(config, GATEWAYS)
    target = select_gateway("box", {})
    assert target.token == "box-secret"
    assert "box-secret" not in repr(target)


@pytest.mark.parametrize(
    ("option", "env", "message"),
    [
        ("nope", {}, "unknown gateway 'nope'; {path} defines: box, lab"),
        ("lab", {}, "LAB_TOKEN is not set (token_env of gateway 'lab' in {path})"),
        ("lab", {"LAB_TOKEN": ""}, "LAB_TOKEN is not set (token_env of gateway 'lab' in {path})"),
        ("ftp://x", {}, "--gateway 'ftp://x' is not a valid http:// or https:// URL"),
        ("http://", {}, "--gateway 'http://' is not a valid http:// or https:// URL"),
        (None, {"LOOMGATE_URL": "lab"}, "LOOMGATE_URL must be an http:// or https:// URL"),
    ],
)
def test_selection_errors(
    config: Path, option: str | None, env: dict[str, str], message: str
) -> None:
    write(config, GATEWAYS)
    with pytest.raises(GatewayConfigError) as refused:
        select_gateway(option, env)
    assert str(refused.value).startswith(message.format(path=config))
    assert "box-secret" not in str(refused.value)


def test_a_jupyter_entry_carries_its_token_and_headers(config: Path) -> None:
    write(
        config,
        '[gateways.hub]\nkind = "jupyter"\nurl = "https://hub.example.org/user/ada/"\n'
        'token_env = "HUB_TOKEN"\nheaders_env = "HUB_HEADERS"\nverify = false\n',
    )
    env = {"HUB_TOKEN": "t0k", "HUB_HEADERS": '{"X-Proxy": "p"}'}
    target = select_gateway("hub", env)
    assert (target.url, target.upstream, target.verify) == (
        "https://hub.example.org/user/ada",
        True,
        False,
    )
    assert (target.token, target.headers) == ("t0k", '{"X-Proxy": "p"}')
    assert "t0k" not in repr(target) and "X-Proxy" not in repr(target)
    with pytest.raises(GatewayConfigError) as refused:
        select_gateway("hub", {"HUB_TOKEN": "t0k"})
    assert str(refused.value).startswith("HUB_HEADERS is not set (headers_env of gateway 'hub'")


def test_name_without_a_gateways_file(config: Path) -> None:
    with pytest.raises(GatewayConfigError) as refused:
        select_gateway("lab", {})
    assert str(refused.value).startswith(f"unknown gateway 'lab': there is no {config}")


def test_valid_file(tmp_path: Path) -> None:
    targets = load_gateways_toml(write(tmp_path / "g.toml", GATEWAYS))
    assert targets == {
        "lab": GatewayTarget(
            "https://lab.example.com/gate", None, False, "lab", False, token_env="LAB_TOKEN"
        ),
        "box": GatewayTarget("http://box:8787", "box-secret", True, "box", False),
    }
    assert load_gateways_toml(write(tmp_path / "empty.toml", "")) == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[gateways.lab]\nurl = "http://x"\nverify = \n', "line 3: invalid TOML"),
        ('[gateways.lab\nurl = "http://x"\n', "line 1: invalid TOML"),
        (
            '# c\n\n[gateways.a]\nurl = "http://a"\n\n[gateways.lab]\ntoken_env = "T"\n',
            ("line 6: gateway 'lab' needs a url"),
        ),
        (
            '[gateways.lab]\nurl = "http://x"\ntoken = "s"\ntoken_env = "T"\n',
            ("line 3: gateway 'lab' has both token and token_env; keep one"),
        ),
        (
            '[gateways.lab]\nurl = "http://x"\n\nverfy = true\n',
            (
                "line 4: gateway 'lab' has an unknown key 'verfy' (allowed: url, token_env, token, "
                "verify, kind, headers_env)"
            ),
        ),
        (
            '[gateways.lab]\nurl = "http://x"\nverify = "no"\n',
            ("line 3: the verify of gateway 'lab' must be true or false"),
        ),
        ("[gateways.lab]\nurl = 8787\n", "line 2: the url of gateway 'lab' must be an http://"),
        ('[gateways.lab]\nurl = "lab.example.com"\n', "line 2: the url of gateway 'lab' must be"),
        (
            '[gateways.lab]\nurl = "http://x"\ntoken_env = 3\n',
            ("line 3: the token_env of gateway 'lab' must be a non-empty string"),
        ),
        (
            '[gateways.lab]\nurl = "http://x"\ntoken = ""\n',
            ("line 3: the token of gateway 'lab' must be a non-empty string"),
        ),
        (
            '[gateways.lab]\nurl = "http://x"\nkind = "hub"\n',
            "line 3: the kind of gateway 'lab' must be 'loomgate' or 'jupyter'",
        ),
        (
            '[gateways.lab]\nurl = "http://x"\nheaders_env = "H"\n',
            "line 3: the headers_env of gateway 'lab' must be a variable name, and only a kind",
        ),
        ('[gateways]\nlab = "http://x"\n', "line 2: gateway 'lab' must be a table"),
        ("gateways = 3\n", ": 'gateways' must be a table"),
        (
            'x = 1\n[gateways.lab]\nurl = "http://x"\n',
            ("line 1: unknown key 'x' (expected only [gateways.NAME] tables)"),
        ),
    ],
)
def test_invalid_files_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "gateways.toml", text)
    with pytest.raises(GatewayConfigError) as refused:
        load_gateways_toml(path)
    assert str(refused.value).startswith(
        f"{path}{message}" if message[0] == ":" else f"{path} {message}"
    ), str(refused.value)


def test_readable_token_file_warns_without_the_token(tmp_path: Path) -> None:
    path = write(tmp_path / "gateways.toml", GATEWAYS, mode=0o644)
    with pytest.warns(UserWarning, match="chmod 600") as caught:
        load_gateways_toml(path)
    assert all("box-secret" not in str(w.message) for w in caught)


def test_private_token_file_and_token_env_files_do_not_warn(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_gateways_toml(write(tmp_path / "private.toml", GATEWAYS))
        only_env = '[gateways.lab]\nurl = "http://x"\ntoken_env = "T"\n'
        load_gateways_toml(write(tmp_path / "open.toml", only_env, mode=0o644))


@pytest.mark.parametrize(
    ("option", "env", "url"),
    [
        ("http://h:1//", {}, "http://h:1"),
        ("http://h:1/AX", {}, "http://h:1/AX"),
        (None, {"LOOMGATE_URL": "https://h/x/"}, "https://h/x"),
        (None, {"LOOMGATE_URL": "https://h/BOX"}, "https://h/BOX"),
    ],
)
def test_a_urls_trailing_slashes_go_and_nothing_else(
    config: Path, option: str | None, env: dict[str, str], url: str
) -> None:
    assert select_gateway(option, env).url == url


@pytest.mark.parametrize("option", ["http:x", "https:x", "http:/x", "tcp://x"])
def test_something_like_a_url_is_never_taken_for_a_name(config: Path, option: str) -> None:
    write(config, GATEWAYS)
    with pytest.raises(GatewayConfigError) as refused:
        select_gateway(option, {})
    assert str(refused.value) == f"--gateway '{option}' is not a valid http:// or https:// URL"


def test_a_bad_loomgate_url_says_how_to_name_a_gateway(config: Path) -> None:
    with pytest.raises(GatewayConfigError) as refused:
        select_gateway(None, {"LOOMGATE_URL": "lab"})
    assert str(refused.value) == (
        "LOOMGATE_URL must be an http:// or https:// URL, not 'lab' "
        "(use --gateway NAME for a gateway from gateways.toml)"
    )


def test_a_name_without_a_gateways_file_says_what_a_gateway_is(config: Path) -> None:
    with pytest.raises(GatewayConfigError) as refused:
        select_gateway("lab", {})
    assert str(refused.value) == (
        f"unknown gateway 'lab': there is no {config} (a gateway is a name defined there, "
        "or an http:// or https:// URL)"
    )


def test_a_gateways_file_that_defines_none(config: Path) -> None:
    write(config, "# nothing yet\n")
    with pytest.raises(GatewayConfigError) as refused:
        select_gateway("lab", {})
    assert str(refused.value) == f"unknown gateway 'lab'; {config} defines: none"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[gateways.a]\nurl = "http://a"\n\n[gateways.lab]\nurl = 8787\n',
            "line 5: the url of gateway 'lab' must be an http:// or https:// URL",
        ),
        (
            '[gateways.a]\ntoken_env = "A"\nurl = "http://a"\n\n[gateways.lab]\nurl = "http://x"\n'
            "token_env = 3\n",
            "line 7: the token_env of gateway 'lab' must be a non-empty string",
        ),
        (
            '[gateways.a]\nurl = "http://a"\ntoken = "s"\n\n[gateways.lab]\nurl = "http://x"\n'
            'token_env = "T"\ntoken = "t"\n',
            "line 8: gateway 'lab' has both token and token_env; keep one",
        ),
        (
            '[gateways.a]\nurl = "http://a"\nverify = true\n\n[gateways.lab]\nurl = "http://x"\n'
            'verify = "no"\n',
            "line 7: the verify of gateway 'lab' must be true or false",
        ),
        (
            '[gateways.verfy]\nurl = "http://v"\n\n[gateways.lab]\nurl = "http://x"\n'
            "verfy = true\n",
            "line 6: gateway 'lab' has an unknown key 'verfy' (allowed: url, token_env, token, "
            "verify, kind, headers_env)",
        ),
        ('[gateways.lab]\nurl = "http://x"\nverify = \n', "line 3: invalid TOML (Invalid value)"),
        ('x = "abc', ": invalid TOML (Unterminated string (at end of document))"),
        ('"\\u0078" = 1\n', ": unknown key 'x' (expected only [gateways.NAME] tables)"),
        ("gateways = 3\n", ": 'gateways' must be a table of [gateways.NAME] tables"),
    ],
)
def test_errors_point_at_the_line_of_the_gateway_at_fault(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path / "gateways.toml", text)
    with pytest.raises(GatewayConfigError) as refused:
        load_gateways_toml(path)
    assert str(refused.value) == (f"{path}{message}" if message[0] == ":" else f"{path} {message}")


def test_a_gateways_file_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(GatewayConfigError) as refused:
        load_gateways_toml(tmp_path)
    assert str(refused.value) == f"cannot read {tmp_path}: Is a directory"


def test_a_gateway_url_keeps_all_but_its_trailing_slashes(tmp_path: Path) -> None:
    text = '[gateways.a]\nurl = "http://a/X//"\n\n[gateways.b]\nurl = "http://b/AX"\n'
    targets = load_gateways_toml(write(tmp_path / "g.toml", text))
    assert (targets["a"].url, targets["b"].url) == ("http://a/X", "http://b/AX")


def test_the_readable_token_warning_says_how_to_fix_it(tmp_path: Path) -> None:
    path = write(tmp_path / "gateways.toml", GATEWAYS, mode=0o644)
    with pytest.warns(UserWarning) as caught:
        load_gateways_toml(path)
    assert len(caught) == 1
    assert str(caught[0].message) == (
        f"{path} holds a token but others can read it; run: chmod 600 {path}"
    )


LINES = '[gateways.a]\nurl = "http://a"\n  [gateways.b]\nverify = true\n'


@pytest.mark.parametrize(
    ("text", "name", "key", "line"),
    [
        (LINES, "a", None, 1),
        (LINES, "a", "url", 2),
        (LINES, "a", "verify", 1),
        (LINES, "b", "verify", 4),
        ('[gateways.a]\nurl = "http://a"\n', "a", "token", 1),
        ('# c\n[gateways]\na = "x"\n', "a", None, 3),
        ('gateways.a = "x"\n', "a", "url", 1),
        (LINES, "missing", None, None),
        (LINES, "missing", "url", None),
    ],
)
def test_the_line_of_a_gateway_or_its_key(
    text: str, name: str, key: str | None, line: int | None
) -> None:
    assert find_line(text, name, key) == line


class LineError(ValueError):
    """A parser error that carries its line, as newer Pythons' TOML errors do."""

    lineno = 7


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (LineError("bad (at line 3, column 1)"), 7),
        (ValueError("bad (at line 3, column 1)"), 3),
        (ValueError("bad (at end of document)"), None),
    ],
)
def test_the_line_a_toml_error_points_at(error: ValueError, line: int | None) -> None:
    assert decode_error_line(error) == line


@pytest.fixture
def jupyter_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Jupyter runtime dir listing one running server, jupyter:8899 (this process stands in
    for it)."""
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    server = {"url": "http://127.0.0.1:8899/", "token": "tok", "pid": os.getpid(), "port": 8899}
    (runtime / "jpserver-1.json").write_text(json.dumps(server))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    return runtime


def test_a_running_jupyter_server_is_reached_by_its_name(
    config: Path, jupyter_runtime: Path
) -> None:
    assert select_gateway("jupyter:8899", {}) == GatewayTarget(
        "http://127.0.0.1:8899", "tok", True, "jupyter:8899", False
    )
    write(config, GATEWAYS)
    assert select_gateway("jupyter:8899", {}).token == "tok"


def test_a_jupyter_name_that_runs_nowhere(config: Path, jupyter_runtime: Path) -> None:
    with pytest.raises(GatewayConfigError) as refused:
        select_gateway("jupyter:8900", {})
    assert str(refused.value) == "no Jupyter server 'jupyter:8900' is running on this machine"


def test_a_gateways_file_may_name_a_gateway_like_a_jupyter_server(
    config: Path, jupyter_runtime: Path
) -> None:
    write(config, '[gateways."jupyter:8899"]\nurl = "http://elsewhere:1"\n')
    target = select_gateway("jupyter:8899", {})
    assert (target.url, target.token, target.name) == ("http://elsewhere:1", None, "jupyter:8899")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[gateways.a]\nurl = "http://a"\nkind = "jupyter"\n\n[gateways.lab]\nurl = "http://x"\n'
            'kind = "hub"\n',
            "line 7: the kind of gateway 'lab' must be 'loomgate' or 'jupyter' (a Jupyter server, "
            "JupyterHub user server, Kernel Gateway or Enterprise Gateway)",
        ),
        (
            '[gateways.a]\nurl = "http://a"\nkind = "jupyter"\nheaders_env = "H"\n\n'
            '[gateways.lab]\nurl = "http://x"\nheaders_env = "H"\n',
            "line 8: the headers_env of gateway 'lab' must be a variable name, and only a "
            "kind = 'jupyter' gateway takes it",
        ),
    ],
)
def test_kind_errors_point_at_the_gateway_at_fault(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "gateways.toml", text)
    with pytest.raises(GatewayConfigError) as refused:
        load_gateways_toml(path)
    assert str(refused.value) == f"{path} {message}"


@pytest.mark.parametrize(
    ("option", "env", "token"),
    [
        # a URL the model names: no token, whatever the environment holds
        ("http://elsewhere:9", {"LOOMGATE_TOKEN": "t"}, None),
        ("http://h:1", {"LOOMGATE_URL": "http://h:1", "LOOMGATE_TOKEN": "t"}, None),
        # a gateways.toml name carries its own token to the gateway it names
        ("box", {"LOOMGATE_TOKEN": "t"}, "box-secret"),
    ],
)
def test_a_url_the_model_names_carries_no_token(
    config: Path, option: str, env: dict[str, str], token: str | None
) -> None:
    write(config, GATEWAYS)
    target = select_gateway(option, env, named_by_model=True)
    assert (target.token, target.token_source is None) == (token, token is None)
    assert select_gateway(option, env).token == (token or "t")  # the person's: as before
