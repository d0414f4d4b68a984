"""A profile's network rule: parsing, its text, which rule is stricter, the decision on a name
before it is resolved, and the decision on one connection, the host's own addresses among those
it refuses (no traffic: every address here is only judged)."""

from __future__ import annotations

import ipaddress

import pytest

from loomgate.gateway.sandbox.network.network_rules import (
    HOST_NETWORK,
    NO_NETWORK,
    PUBLIC,
    NetworkPolicy,
    NetworkRefusal,
    at_least_as_strict,
    decide,
    decide_name,
    parse_network,
)

NONE_OWN: frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address] = frozenset()


def verdict(
    value: bool | list[str],
    address: str,
    port: int = 443,
    host: str | None = None,
    own: tuple[str, ...] = (),
) -> str:
    """Return "allowed" or the refusal's sentence for one connection under profile 'p', on a
    host whose own addresses are `own`."""
    policy = parse_network(value)
    refusal = decide(
        policy,
        profile="p",
        host=host,
        address=ipaddress.ip_address(address),
        port=port,
        own=frozenset(ipaddress.ip_address(a) for a in own),
    )
    return "allowed" if refusal is None else refusal.reason


@pytest.mark.parametrize(
    ("value", "kind", "json"),
    [
        (True, "public", True),
        (False, "none", False),
        ("host", "host", "host"),
        ([], "none", False),
        (["pypi.org"], "list", ["pypi.org"]),
        (["PyPI.org.", "pypi.org"], "list", ["pypi.org"]),  # case, trailing dot, duplicate
        (["*.GitHub.com:443"], "list", ["*.github.com:443"]),
        (["10.1.2.3", "10.0.0.0/8", "127.0.0.1:8080"], "list",
         ["10.1.2.3", "10.0.0.0/8", "127.0.0.1:8080"]),
        (["::1", "[::1]:8080", "FD00::/8", "[fd00::/8]:53"], "list",
         ["::1", "[::1]:8080", "fd00::/8", "[fd00::/8]:53"]),
        (["::ffff:10.1.2.3", "::ffff:10.0.0.0/104"], "list", ["10.1.2.3", "10.0.0.0/8"]),
        (["[::ffff:127.0.0.1]:80"], "list", ["127.0.0.1:80"]),
        (["files.pythonhosted.org:443", "my_host.internal"], "list",
         ["files.pythonhosted.org:443", "my_host.internal"]),
    ],
)  # fmt: skip
def test_parse_network_and_its_json(value: bool | str | list[str], kind: str, json: object) -> None:
    policy = parse_network(value)
    assert policy.kind == kind
    assert policy.to_json() == json
    assert NetworkPolicy.from_json(policy.to_json()) == policy


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("pypi.org", "network = 'pypi.org' is not allowed: write true, false, \"host\" or a list"),
        ("true", "network = 'true' is not allowed"),
        (3, 'network must be true, false, "host" or a list of patterns, not 3'),
        ([3], "network pattern 3 is not a string"),
        (["host"], "network pattern 'host' cannot stand in a list: write network = \"host\""),
        (["*"], "network pattern '*' cannot stand in a list: write network = true"),
        (["pypi..org"], "network pattern 'pypi..org' is not valid ('' is not a DNS label)"),
        (["-pypi.org"], "'-pypi' is not a DNS label"),
        (["a" * 64 + ".org"], "is not a DNS label"),
        (["a." * 127 + "org"], "a host name has 1 to 253 characters"),
        ([""], "network pattern '' is not valid"),
        ([" pypi.org"], "' pypi' is not a DNS label"),
        (["*."], "network pattern '*.' is not valid"),
        (["*.*.com"], "a wildcard may only be the whole first label"),
        (["a*.com"], "a wildcard may only be the whole first label"),
        (["github.*"], "a wildcard may only be the whole first label"),
        (["bücher.de"], "write an international name in its ASCII form, xn--"),
        (["1.2.3"], "it looks like an IPv4 address but is not one"),
        (["10.0.0.1/8"], "10.0.0.1/8 has host bits set"),
        (["10.0.0.0/33"], "network pattern '10.0.0.0/33' is not valid"),
        (["pypi.org:0"], "the port '0' is not a number from 1 to 65535"),
        (["pypi.org:65536"], "the port '65536' is not a number from 1 to 65535"),
        (["pypi.org:http"], "the port 'http' is not a number from 1 to 65535"),
        (["pypi.org:"], "the port '' is not a number"),
        (["[10.0.0.1]:80"], "brackets hold an IPv6 address"),
        (["[::1]x"], "network pattern '[::1]x' is not valid"),
        (["::1:80x"], "not an IPv6 address"),
        (["https://pypi.org"], "network pattern 'https://pypi.org' is not valid"),
        (["pypi.org/simple"], "network pattern 'pypi.org/simple' is not valid"),
    ],
)
def test_a_bad_value_is_refused_with_one_sentence(value: object, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_network(value)  # type: ignore[arg-type]
    message = str(refused.value)
    assert says in message
    assert "\n" not in message
    if isinstance(value, list) and message.startswith(f"network pattern {value[0]!r} is not valid"):
        assert "pypi.org, *.github.com" not in message  # the forms, each named once:
        assert "*.github.com" in message and "10.0.0.0/8" in message and "[::1]:8080" in message


@pytest.mark.parametrize("value", [{"a": 1}, 2.5, None, ["pypi.org", 1]])
def test_from_json_refuses_what_to_json_never_gives(value: object) -> None:
    with pytest.raises(ValueError, match="network"):
        NetworkPolicy.from_json(value)


@pytest.mark.parametrize(
    ("policy", "text"),
    [
        (PUBLIC, "every public address"),
        (NO_NETWORK, "no network"),
        (HOST_NETWORK, "the host's network"),
        (parse_network(["pypi.org", "*.github.com"]), "pypi.org, *.github.com"),
        (parse_network(["[::1]:8080", "10.0.0.0/8:443"]), "[::1]:8080, 10.0.0.0/8:443"),
    ],
)
def test_describe(policy: NetworkPolicy, text: str) -> None:
    assert policy.describe() == text
    assert policy.proxied == (policy.kind in ("public", "list"))


def judged_text(address: str) -> str:
    """Return how a refusal writes `address`: an IPv4-mapped one as its IPv4."""
    parsed = ipaddress.ip_address(address)
    mapped = parsed.ipv4_mapped if isinstance(parsed, ipaddress.IPv6Address) else None
    return str(mapped or parsed)


NOT_PUBLIC = [
    ("127.0.0.1", "a loopback address"),
    ("127.255.0.9", "a loopback address"),
    ("::1", "a loopback address"),
    ("10.0.0.5", "a private address"),
    ("172.16.0.1", "a private address"),
    ("172.31.255.254", "a private address"),
    ("192.168.1.1", "a private address"),
    ("fc00::1", "a private address"),
    ("fd12:3456::1", "a private address"),
    ("169.254.169.254", "a link-local address"),  # the cloud metadata address
    ("169.254.0.1", "a link-local address"),
    ("fe80::1", "a link-local address"),
    ("100.64.0.1", "a CGNAT address"),
    ("100.127.255.254", "a CGNAT address"),
    ("224.0.0.1", "a multicast address"),
    ("239.255.255.250", "a multicast address"),
    ("ff02::1", "a multicast address"),
    ("0.0.0.0", "an unspecified address"),
    ("::", "an unspecified address"),
    ("255.255.255.255", "a broadcast address"),
    ("240.0.0.1", "a reserved address"),
    ("192.0.2.1", "a documentation address"),
    ("2001:db8::1", "a documentation address"),
    ("198.18.0.1", "a benchmarking address"),
    ("fec0::1", "a site-local address"),
    ("2001::1", "a reserved address"),  # Teredo, inside the IETF's protocol assignments
    ("100::1", "a reserved address"),
    ("4000::1", "a reserved address"),  # outside 2000::/3
    ("::ffff:10.0.0.5", "a private address"),  # IPv4-mapped: judged as 10.0.0.5
    ("::ffff:169.254.169.254", "a link-local address"),
    ("64:ff9b::a00:5", "a form of 10.0.0.5, a private address"),  # NAT64
    ("2002:a9fe:a9fe::1", "a form of 169.254.169.254, a link-local address"),  # 6to4
]


@pytest.mark.parametrize(("address", "what"), NOT_PUBLIC)
def test_every_range_that_is_not_public_is_refused_under_true(address: str, what: str) -> None:
    judged = judged_text(address)
    assert verdict(True, address) == f"{judged} is {what}, which profile 'p' does not name"


@pytest.mark.parametrize(("address", "what"), NOT_PUBLIC)
def test_a_name_that_resolves_to_a_non_public_address_is_refused(address: str, what: str) -> None:
    judged = judged_text(address)
    said = verdict(True, address, host="rebind.example.com")
    assert said == f"rebind.example.com resolves to {what}, which profile 'p' does not name"
    said = verdict(["rebind.example.com", "*.example.com"], address, host="rebind.example.com")
    assert (
        "profile 'p' names rebind.example.com, but a name reaches only public addresses of other "
        "hosts: name the address to reach it" in said
    )
    assert judged not in said and address not in said  # what it resolved to is never told


@pytest.mark.parametrize(
    "address", ["151.101.0.223", "8.8.8.8", "2606:4700::1111", "::ffff:1.1.1.1", "2002:808:808::1"]
)
def test_public_addresses_pass_under_true_on_any_port(address: str) -> None:
    for port in (1, 80, 443, 65535):
        assert verdict(True, address, port) == "allowed"
        assert verdict(True, address, port, host="pypi.org") == "allowed"


@pytest.mark.parametrize(
    ("value", "host", "address", "port", "said"),
    [
        # names and wildcards reach public addresses
        (["pypi.org"], "pypi.org", "151.101.0.223", 443, "allowed"),
        (["pypi.org"], "PyPI.org.", "151.101.0.223", 80, "allowed"),
        (["pypi.org:443"], "pypi.org", "151.101.0.223", 443, "allowed"),
        (["pypi.org:443"], "pypi.org", "151.101.0.223", 80,
         "pypi.org port 80 is not named by profile 'p', which names pypi.org:443"),
        (["pypi.org"], "files.pythonhosted.org", "151.101.0.223", 443,
         "files.pythonhosted.org is not named by profile 'p', which names pypi.org"),
        (["pypi.org"], None, "151.101.0.223", 443,
         "151.101.0.223 is not named by profile 'p', which names pypi.org"),
        (["pypi.org"], "151.101.0.223", "151.101.0.223", 443,  # an address asked for by text
         "151.101.0.223 is not named by profile 'p', which names pypi.org"),
        (["*.github.com"], "api.github.com", "140.82.112.6", 443, "allowed"),
        (["*.github.com"], "a.b.github.com", "140.82.112.6", 443, "allowed"),
        (["*.github.com"], "github.com", "140.82.112.3", 443,  # the apex is not covered
         "github.com is not named by profile 'p', which names *.github.com"),
        (["*.github.com"], "evilgithub.com", "140.82.112.3", 443,
         "evilgithub.com is not named"),
        (["*.github.com"], "github.com.evil.org", "140.82.112.3", 443,
         "github.com.evil.org is not named"),
        (["*.github.com:443"], "api.github.com", "140.82.112.6", 22,
         "api.github.com port 22 is not named by profile 'p'"),
        # addresses and ranges reach what they name, private or not
        (["127.0.0.1:8080"], None, "127.0.0.1", 8080, "allowed"),
        (["127.0.0.1:8080"], "localhost", "127.0.0.1", 8080, "allowed"),
        (["127.0.0.1:8080"], None, "127.0.0.1", 8081,
         "127.0.0.1 is a loopback address, which profile 'p' names for other ports only"),
        (["127.0.0.1:8080"], None, "::ffff:127.0.0.1", 8080, "allowed"),
        (["127.0.0.1:8080"], None, "::1", 8080,
         "::1 is a loopback address, which profile 'p' does not name"),
        (["10.1.2.3"], None, "10.1.2.3", 22, "allowed"),
        (["10.1.2.3"], None, "10.1.2.4", 22,
         "10.1.2.4 is a private address, which profile 'p' does not name"),
        (["10.0.0.0/8"], "db.internal", "10.200.0.1", 5432, "allowed"),
        (["10.0.0.0/8:5432"], "db.internal", "10.200.0.1", 5433,
         "db.internal resolves to a private address, which profile 'p' names for other ports "
         "only"),
        (["169.254.169.254"], None, "169.254.169.254", 80, "allowed"),  # only when named
        (["::1"], None, "::1", 80, "allowed"),
        (["[::1]:8080"], None, "::1", 8080, "allowed"),
        (["[::1]:8080"], None, "::1", 8081, "::1 is a loopback address, which profile 'p' names"),
        (["fd00::/8"], None, "fd00::5", 80, "allowed"),
        (["fd00::/8"], None, "fe80::5", 80, "fe80::5 is a link-local address"),
        (["8.8.8.0/24"], None, "8.8.8.8", 53, "allowed"),
        (["8.8.8.0/24"], "dns.google", "8.8.4.4", 53,
         "dns.google is not named by profile 'p', which names 8.8.8.0/24"),
        # a name pattern never reaches a non-public address
        (["localhost"], "localhost", "127.0.0.1", 80,
         "localhost resolves to a loopback address; profile 'p' names localhost, but a name "
         "reaches only public addresses of other hosts: name the address to reach it"),
        (["*.example.com"], "metadata.example.com", "169.254.169.254", 80,
         "metadata.example.com resolves to a link-local address; profile 'p' names "
         "metadata.example.com"),
        (["pypi.org"], "other.org", "10.0.0.5", 443,
         "other.org resolves to a private address, which profile 'p' does not name"),
    ],
)  # fmt: skip
def test_decide_under_a_list(
    value: list[str], host: str | None, address: str, port: int, said: str
) -> None:
    assert verdict(value, address, port, host=host).startswith(said)


def test_no_network_refuses_everything_and_host_is_never_decided() -> None:
    loopback = ipaddress.ip_address("127.0.0.1")
    refusal = decide(
        NO_NETWORK, profile="strict", host="pypi.org", address=loopback, port=443, own=NONE_OWN
    )
    assert refusal == NetworkRefusal(
        "profile 'strict' has no network", "strict", "pypi.org", None, 443
    )
    with pytest.raises(ValueError, match="not proxied"):
        decide(HOST_NETWORK, profile="mine", host=None, address=loopback, port=80, own=NONE_OWN)


@pytest.mark.parametrize(
    ("host", "address", "port", "destination"),
    [
        ("pypi.org", "151.101.0.223", 443, "pypi.org:443"),  # never what it resolved to
        (None, "10.0.0.5", 22, "10.0.0.5:22"),
        (None, "fd00::1", 80, "[fd00::1]:80"),
        (None, "::ffff:10.0.0.5", 80, "10.0.0.5:80"),
    ],
)
def test_a_refusal_names_its_destination(
    host: str | None, address: str, port: int, destination: str
) -> None:
    refusal = decide(
        parse_network(["other.org"]),
        profile="data",
        host=host,
        address=ipaddress.ip_address(address),
        port=port,
        own=NONE_OWN,
    )
    assert refusal is not None
    assert refusal.destination == destination
    assert refusal.profile == "data"
    assert "profile 'data'" in refusal.reason


def p(value: bool | str | list[str]) -> NetworkPolicy:
    return parse_network(value)


@pytest.mark.parametrize(
    ("a", "b", "stricter"),
    [
        (False, False, True),
        (False, True, True),
        (False, "host", True),
        (False, ["pypi.org"], True),
        (True, False, False),
        (["pypi.org"], False, False),
        ("host", False, False),
        (True, True, True),
        (True, "host", True),
        ("host", "host", True),
        ("host", True, False),
        ("host", ["pypi.org"], False),
        (True, ["pypi.org"], False),
        (["pypi.org"], "host", True),
        # a list against true: only public addresses
        (["pypi.org", "*.github.com:443"], True, True),
        (["8.8.8.0/24", "2606:4700::/32"], True, True),
        (["127.0.0.1:8080"], True, False),
        (["10.0.0.0/8"], True, False),
        (["8.0.0.0/5"], True, False),  # holds 10.0.0.0/8
        (["0.0.0.0/0"], True, False),
        (["::ffff:10.0.0.5"], True, False),
        (["2002::/16"], True, False),  # 6to4 carries private IPv4 too
        (["2000::/3"], True, False),
        (["4000::/8"], True, False),
        # list against list
        (["pypi.org"], ["pypi.org"], True),
        (["pypi.org:443"], ["pypi.org"], True),
        (["pypi.org"], ["pypi.org:443"], False),
        (["pypi.org:80"], ["pypi.org:443"], False),
        (["api.github.com"], ["*.github.com"], True),
        (["*.api.github.com"], ["*.github.com"], True),
        (["*.github.com"], ["*.github.com"], True),
        (["github.com"], ["*.github.com"], False),
        (["*.github.com"], ["github.com"], False),
        (["*.github.com"], ["api.github.com"], False),
        (["*.github.com"], ["*.api.github.com"], False),
        (["10.1.2.3"], ["10.0.0.0/8"], True),
        (["10.1.0.0/16:22"], ["10.0.0.0/8"], True),
        (["10.0.0.0/8"], ["10.1.0.0/16"], False),
        (["10.0.0.0/8"], ["10.0.0.0/8:22"], False),
        (["::1"], ["127.0.0.1"], False),
        (["::ffff:127.0.0.1"], ["127.0.0.0/8"], True),
        (["pypi.org", "10.1.2.3"], ["10.0.0.0/8", "pypi.org", "x.org"], True),
        (["pypi.org", "y.org"], ["pypi.org", "x.org"], False),
        (["151.101.0.223"], ["pypi.org"], False),  # unsure: refused
        (["pypi.org"], ["151.101.0.0/16"], False),
    ],
)  # fmt: skip
def test_at_least_as_strict(
    a: bool | str | list[str], b: bool | str | list[str], stricter: bool
) -> None:
    assert at_least_as_strict(p(a), p(b)) is stricter
    assert at_least_as_strict(p(a), p(a)) is True


# The edges and exact sentences the tables above leave open (each row fails on a mutant of
# network_rules.py that bench/mutation.py found alive without it).
LONGEST_NAME = ".".join(["a" * 63] * 3 + ["b" * 61])  # 253 characters, the most DNS allows


@pytest.mark.parametrize(
    ("value", "json"),
    [
        ([LONGEST_NAME], [LONGEST_NAME]),
        ([LONGEST_NAME + "."], [LONGEST_NAME]),  # the trailing dot is not counted
        (["pypi.org:1"], ["pypi.org:1"]),
        (["pypi.org:65535"], ["pypi.org:65535"]),
    ],
)
def test_the_edges_of_a_valid_pattern(value: list[str], json: list[str]) -> None:
    assert parse_network(value).to_json() == json


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (LONGEST_NAME + "b", "a host name has 1 to 253 characters"),
        ("a*.com", "a wildcard may only be the whole first label, as in *.github.com"),
        ("bücher.de", "write an international name in its ASCII form, xn--…"),
        ("1.2.3", "it looks like an IPv4 address but is not one"),
        ("[10.0.0.1]:80", "brackets hold an IPv6 address"),
        ("::1:80x", "not an IPv6 address"),
    ],
)
def test_the_reason_a_pattern_is_not_valid(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_network([text])
    assert str(refused.value).startswith(
        f"network pattern {text!r} is not valid ({reason}); use a host name (pypi.org)"
    )


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("host", "network pattern 'host' cannot stand in a list: write network = \"host\" for "
         "the host's own network"),
        ("*", "network pattern '*' cannot stand in a list: write network = true"),
    ],
)  # fmt: skip
def test_a_whole_network_value_in_a_list_is_refused_saying_how_to_write_it(
    text: str, sentence: str
) -> None:
    with pytest.raises(ValueError) as refused:
        parse_network([text])
    assert str(refused.value) == sentence


def test_deciding_under_the_hosts_network_is_a_programming_error_that_says_so() -> None:
    loopback = ipaddress.ip_address("127.0.0.1")
    with pytest.raises(ValueError) as refused:
        decide(HOST_NETWORK, profile="mine", host=None, address=loopback, port=80, own=NONE_OWN)
    assert str(refused.value) == "the host's network is not proxied: decide() has nothing to check"


@pytest.mark.parametrize(
    ("kind", "patterns", "sentence"),
    [
        ("list", (), "a 'list' network policy with patterns ()"),
        ("public", ("pypi.org",), "a 'public' network policy with patterns (NetworkPattern("),
    ],
)
def test_a_policy_has_patterns_exactly_when_it_is_a_list(
    kind: str, patterns: tuple[str, ...], sentence: str
) -> None:
    made = tuple(parse_network(list(patterns)).patterns)
    with pytest.raises(ValueError) as refused:
        NetworkPolicy(kind, made)  # type: ignore[arg-type]
    assert str(refused.value).startswith(sentence)


@pytest.mark.parametrize(
    ("value", "host", "address", "port", "said"),
    [
        # a name pattern whose port matches still reaches public addresses only
        (["localhost:8080"], "localhost", "127.0.0.1", 8080,
         "localhost resolves to a loopback address; profile 'p' names localhost, but a name "
         "reaches only public addresses of other hosts: name the address to reach it"),
        (["localhost:8080"], "localhost", "127.0.0.1", 8081,
         "localhost resolves to a loopback address, which profile 'p' does not name"),
    ],
)  # fmt: skip
def test_decide_a_named_port_on_a_non_public_address(
    value: list[str], host: str, address: str, port: int, said: str
) -> None:
    assert verdict(value, address, port, host=host) == said


@pytest.mark.parametrize(
    ("host", "address", "refusal"),
    [
        # an address asked for, in brackets or not, is told as the address
        ("[fd00::1]", "fd00::1", NetworkRefusal(
            "fd00::1 is a private address, which profile 'data' does not name",
            "data", None, "fd00::1", 80)),
        ("[2606:4700::1111]", "2606:4700::1111", NetworkRefusal(
            "2606:4700::1111 is not named by profile 'data', which names other.org",
            "data", None, "2606:4700::1111", 80)),
        ("2606:4700::1111", "2606:4700::1111", NetworkRefusal(
            "2606:4700::1111 is not named by profile 'data', which names other.org",
            "data", None, "2606:4700::1111", 80)),
        ("[10.0.0.5]", "10.0.0.5", NetworkRefusal(
            "10.0.0.5 is a private address, which profile 'data' does not name",
            "data", None, "10.0.0.5", 80)),
        # a name, or anything else asked for, is told as the name (only brackets are taken off)
        ("X10.0.0.5", "10.0.0.5", NetworkRefusal(
            "x10.0.0.5 resolves to a private address, which profile 'data' does not name",
            "data", "x10.0.0.5", None, 80)),
        (" 10.0.0.5", "10.0.0.5", NetworkRefusal(
            " 10.0.0.5 resolves to a private address, which profile 'data' does not name",
            "data", " 10.0.0.5", None, 80)),
        ("pypi.org", "151.101.0.223", NetworkRefusal(
            "pypi.org is not named by profile 'data', which names other.org",
            "data", "pypi.org", None, 80)),
    ],
)  # fmt: skip
def test_which_host_is_an_address_asked_for(
    host: str, address: str, refusal: NetworkRefusal
) -> None:
    assert (
        decide(
            parse_network(["other.org"]),
            profile="data",
            host=host,
            address=ipaddress.ip_address(address),
            port=80,
            own=NONE_OWN,
        )
        == refusal
    )


# The host's own addresses (as host_addresses() would list them on a host with public ones).
OWN = ("151.101.0.223", "2606:4700::1111", "10.0.0.5", "127.0.0.1", "::1")


@pytest.mark.parametrize(
    ("value", "host", "address", "said"),
    [
        (True, None, "151.101.0.223",
         "151.101.0.223 is an address of this host, which profile 'p' does not name"),
        (True, None, "::ffff:151.101.0.223",
         "151.101.0.223 is an address of this host, which profile 'p' does not name"),
        (True, None, "2606:4700::1111",
         "2606:4700::1111 is an address of this host, which profile 'p' does not name"),
        (True, "box.example", "151.101.0.223",
         "box.example resolves to an address of this host, which profile 'p' does not name"),
        (["box.example"], "box.example", "151.101.0.223",
         "box.example resolves to an address of this host; profile 'p' names box.example, but a "
         "name reaches only public addresses of other hosts: name the address to reach it"),
        (["pypi.org"], None, "151.101.0.223",
         "151.101.0.223 is an address of this host, which profile 'p' does not name"),
        (["151.101.0.223:80"], None, "151.101.0.223",  # named by itself, on another port
         "151.101.0.223 is an address of this host, which profile 'p' names for other ports "
         "only"),
        # what is not public keeps its own sentence, the host's or not
        (True, None, "127.0.0.1", "127.0.0.1 is a loopback address, which profile 'p' does not "
         "name"),
        (True, None, "10.0.0.5", "10.0.0.5 is a private address, which profile 'p' does not name"),
        # an address or range the profile names is reached, the host's own too
        (["151.101.0.223"], None, "151.101.0.223", "allowed"),
        (["151.101.0.0/16"], "box.example", "151.101.0.223", "allowed"),
        (["127.0.0.1:443"], None, "127.0.0.1", "allowed"),
        # other hosts' public addresses pass as before
        (True, None, "151.101.0.224", "allowed"),
        (True, "pypi.org", "2606:4700::1112", "allowed"),
    ],
)  # fmt: skip
def test_the_hosts_own_addresses_are_refused_unless_named(
    value: bool | list[str], host: str | None, address: str, said: str
) -> None:
    assert verdict(value, address, 443, host=host, own=OWN) == said


@pytest.mark.parametrize("value", [True, ["pypi.org"], ["rebind.example.com"], ["10.0.0.0/8:22"]])
@pytest.mark.parametrize(
    "address", ["10.0.0.5", "127.0.0.1", "169.254.169.254", "151.101.0.223", "::ffff:10.0.0.5"]
)
def test_no_refusal_tells_the_address_a_name_resolved_to(
    value: bool | list[str], address: str
) -> None:
    refusal = decide(
        parse_network(value),
        profile="p",
        host="rebind.example.com",
        address=ipaddress.ip_address(address),
        port=443,
        own=frozenset({ipaddress.ip_address("151.101.0.223")}),
    )
    assert refusal is not None
    assert (refusal.host, refusal.address, refusal.destination) == (
        "rebind.example.com",
        None,
        "rebind.example.com:443",
    )
    for form in {address, judged_text(address)}:
        assert form not in refusal.reason


@pytest.mark.parametrize(
    ("value", "host", "port", "said"),
    [
        # under a list, only a name the list names is ever looked up
        (["pypi.org"], "secret-data.exfil.example.com", 443,
         "secret-data.exfil.example.com is not named by profile 'p', which names pypi.org"),
        (["pypi.org"], "pypi.org", 443, None),
        (["pypi.org"], "PyPI.org.", 443, None),
        (["pypi.org:443"], "pypi.org", 443, None),
        (["pypi.org:443"], "pypi.org", 80,
         "pypi.org port 80 is not named by profile 'p', which names pypi.org:443"),
        (["*.github.com"], "api.github.com", 443, None),
        (["*.github.com"], "github.com", 443,
         "github.com is not named by profile 'p', which names *.github.com"),
        # an address or range in the list is reached by its address, not by a name
        (["10.0.0.0/8"], "db.internal", 5432,
         "db.internal is not named by profile 'p', which names 10.0.0.0/8"),
        (["127.0.0.1:8080"], "localhost", 8080,
         "localhost is not named by profile 'p', which names 127.0.0.1:8080"),
        # every public address is reachable under true: any name is looked up
        (True, "secret-data.exfil.example.com", 443, None),
        (False, "pypi.org", 443, "profile 'p' has no network"),
    ],
)  # fmt: skip
def test_decide_a_name_before_it_is_resolved(
    value: bool | list[str], host: str, port: int, said: str | None
) -> None:
    refusal = decide_name(parse_network(value), profile="p", host=host, port=port)
    name = host.lower().removesuffix(".")
    assert refusal == (None if said is None else NetworkRefusal(said, "p", name, None, port))


def test_deciding_a_name_under_the_hosts_network_is_a_programming_error() -> None:
    with pytest.raises(ValueError) as refused:
        decide_name(HOST_NETWORK, profile="mine", host="pypi.org", port=443)
    assert str(refused.value) == "the host's network is not proxied: decide() has nothing to check"
