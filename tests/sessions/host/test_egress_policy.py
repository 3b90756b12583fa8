"""The egress proxy's decisions, one rule at a time, with the names' resolutions given."""

import asyncio
import http.server
import ipaddress
import os
import threading

import pytest

from sessions.host.egress import EgressPolicy, EgressProxy, Refused, address_kind, gateways_of, request_parse

OWN = frozenset({ipaddress.ip_address("203.0.113.7")})  # this host's public address (as if)
RESOLVES = {
    "pypi.org": ["151.101.0.223", "2a04:4e42::223"],
    "internal.example": ["10.0.0.5"],
    "mixed.example": ["93.184.215.14", "192.168.1.9"],  # one public, one private address
    "registry.npmjs.org": ["104.16.0.35"],
    "gateway.example": ["198.51.100.10"],
}


def proxy(mode="open", *entries, gateways=(("gateway.example", 443),), resolved=None):
    asked = [] if resolved is None else resolved

    async def resolve(host, port):
        asked.append(host)
        if host not in RESOLVES:
            raise OSError("no such name")
        return RESOLVES[host]

    policy = EgressPolicy.from_turn({"policy": mode, "allowlist": list(entries), "workspace": "acme"})
    return EgressProxy(policy=policy, gateways=frozenset(gateways), resolve=resolve, own=OWN)


def decide(p: EgressProxy, host: str, port: int) -> list[str]:
    return asyncio.run(p.decide(host, port))


def refusal(p: EgressProxy, host: str, port: int) -> str:
    with pytest.raises(Refused) as refused:
        decide(p, host, port)
    return str(refused.value)


@pytest.mark.parametrize(
    "address, kind",
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("168.63.129.16", "metadata"),
        ("169.254.3.4", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.0.1", "private"),
        ("fd12:3456::1", "private"),
        ("100.64.0.1", "shared"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("203.0.113.7", "own"),
        ("192.0.2.1", "reserved"),
        ("240.0.0.1", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:a9fe:a9fe::1", "metadata"),  # 6to4 of 169.254.169.254
    ],
)
def test_every_never_reachable_range_is_named(address, kind):
    assert address_kind(ipaddress.ip_address(address), OWN) == kind


@pytest.mark.parametrize("address", ["151.101.0.223", "172.32.0.1", "100.128.0.1", "2a04:4e42::223", "8.8.8.8"])
def test_public_addresses_pass(address):
    assert address_kind(ipaddress.ip_address(address), OWN) is None


def test_open_reaches_public_names_and_checks_every_address_a_name_resolves_to():
    p = proxy("open")
    assert decide(p, "pypi.org", 443) == ["151.101.0.223", "2a04:4e42::223"]
    text = refusal(p, "internal.example", 443)
    assert text == (
        "internal.example:443 refused (internal.example resolves to 10.0.0.5): private network addresses are never"
        " reachable; only an entry internal.example:443 on workspace acme's allowlist would allow it"
    )
    assert "resolves to 192.168.1.9" in refusal(p, "mixed.example", 443)  # one bad address is enough
    assert "loopback addresses of the host" in refusal(p, "127.0.0.1", 6379)
    assert "the host's own addresses" in refusal(p, "203.0.113.7", 22)


def test_an_explicit_entry_opens_a_private_address_and_a_wildcard_does_not():
    p = proxy("open", "internal.example:5432", "10.9.9.9:80", "*.example:443")
    assert decide(p, "internal.example", 5432) == ["10.0.0.5"]
    assert decide(p, "10.9.9.9", 80) == ["10.9.9.9"]
    assert "private network addresses" in refusal(p, "internal.example", 443)  # the wildcard's port, not explicit
    assert "private network addresses" in refusal(p, "10.9.9.9", 81)  # another port


def test_allowlist_matches_names_wildcards_and_ports_and_does_not_resolve_others():
    asked = []
    p = proxy("allowlist", "pypi.org:443", "*.npmjs.org:443", "[2a04:4e42::223]:443", resolved=asked)
    assert decide(p, "PyPI.org.", 443) == ["151.101.0.223", "2a04:4e42::223"]
    assert decide(p, "registry.npmjs.org", 443) == ["104.16.0.35"]
    assert decide(p, "[2a04:4e42::223]", 443) == ["2a04:4e42::223"]
    assert refusal(p, "npmjs.org", 443) == "npmjs.org:443 refused: npmjs.org:443 is not on workspace acme's allowlist"
    assert "pypi.org:80 is not on workspace acme's allowlist" in refusal(p, "pypi.org", 80)
    assert "evilnpmjs.org:443 is not on" in refusal(p, "evilnpmjs.org", 443)
    refusal(p, "secret-data.attacker.example", 443)
    # No DNS lookups as a way out: only listed names (and the gateway's own, for its address).
    assert set(asked) == {"pypi.org", "registry.npmjs.org", "gateway.example"}


def test_the_gateway_is_reached_in_every_mode_by_name_or_address():
    for mode in ("open", "allowlist", "none"):
        p = proxy(mode, gateways=(("gateway.example", 443), ("127.0.0.1", 8000)))
        assert decide(p, "gateway.example", 443) == ["198.51.100.10"]
        assert decide(p, "127.0.0.1", 8000) == ["127.0.0.1"]  # the embedded gateway, on loopback
        assert decide(p, "198.51.100.10", 443) == ["198.51.100.10"]
        assert "refused" in refusal(p, "127.0.0.1", 8001)
    none = proxy("none", "pypi.org:443")
    assert "egress policy is none: only the gateway is reached" in refusal(none, "pypi.org", 443)


def test_an_unreadable_policy_fails_closed_and_bad_entries_are_left_out():
    assert EgressPolicy.from_turn(None).mode == "open"  # a gateway from before policies
    assert EgressPolicy.from_turn({"policy": "everything"}).mode == "none"
    assert EgressPolicy.from_turn("open").mode == "none"
    policy = EgressPolicy.from_turn({"policy": "allowlist", "allowlist": ["pypi.org:443", "bad entry", "x:0"]})
    assert [str(entry) for entry in policy.allowlist] == ["pypi.org:443"]


def test_requests_are_parsed_strictly():
    assert request_parse(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n") == (
        "pypi.org",
        "443",
        b"",
        True,
    )
    host, port, first, connect = request_parse(
        b"GET http://h.example:8080/a?b=1 HTTP/1.1\r\nHost: h.example:8080\r\nProxy-Authorization: x\r\n"
        b"Connection: keep-alive\r\n\r\n"
    )
    assert (host, port, connect) == ("h.example", 8080, False)
    assert first == b"GET /a?b=1 HTTP/1.1\r\nHost: h.example:8080\r\nConnection: close\r\n\r\n"
    for bad in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"GET https://x/ HTTP/1.1\r\n\r\n", b"garbage\r\n\r\n"):
        with pytest.raises(Refused) as refused:
            request_parse(bad)
        assert refused.value.status == 400
    with pytest.raises(Refused):
        decide(proxy(), "pypi.org", 0)
    with pytest.raises(Refused):
        decide(proxy(), "bad_name!", 443)


def test_the_gateways_are_the_urls_hosts_and_ports():
    assert gateways_of(["http://127.0.0.1:8000/mcp", "https://Calvin.example/mcp", "nonsense", None]) == {
        ("127.0.0.1", 8000),
        ("calvin.example", 443),
    }


def test_the_proxy_connects_to_the_address_it_checked_and_never_looks_the_name_up_again(tmp_path):
    """A name known only to the proxy's resolver, answering differently the second time: the
    page is reached, so the connection went to the checked address, and the name was asked once."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    answers = [["127.0.0.1"], ["10.255.255.1"]]

    async def resolve(host, port):
        return answers.pop(0)

    async def fetch() -> bytes:
        policy = EgressPolicy.from_turn({"policy": "allowlist", "allowlist": [f"rebind.example:{port}"]})
        p = EgressProxy(policy=policy, gateways=frozenset(), resolve=resolve, own=OWN)
        await p.start(tmp_path / "egress.sock")
        try:
            # By the directory's descriptor: a deep tmp_path is longer than a socket address may be.
            directory = os.open(tmp_path, os.O_PATH)
            try:
                reader, writer = await asyncio.open_unix_connection(f"/proc/self/fd/{directory}/egress.sock")
            finally:
                os.close(directory)
            writer.write(f"GET http://rebind.example:{port}/page HTTP/1.1\r\nHost: rebind.example\r\n\r\n".encode())
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return answer
        finally:
            await p.close()

    try:
        answer = asyncio.run(fetch())
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"page /page"), answer
    assert answers == [["10.255.255.1"]]  # asked once
    assert (tmp_path / "egress.sock").stat().st_mode & 0o777 == 0o666  # whatever uid the agent runs as


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(f"page {self.path}".encode())

    def log_message(self, *args):
        pass
