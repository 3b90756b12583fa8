"""The agent's only way out: an HTTP(S) proxy the host daemon serves on a Unix socket bound
into the session's sandbox, enforcing the workspace's egress policy.

Under bubblewrap the agent's network is a namespace of its own with only loopback; a
forwarder there (egress_forwarder.py) carries each connection made to HTTP(S)_PROXY to
this socket. The proxy takes `CONNECT host:port` (https, any TLS) and absolute-form plain
HTTP requests (`GET http://host:port/path`: one request per connection, sent on with
`Connection: close`). It resolves the name here, checks every address the name resolves
to, and connects to a checked address, so a name cannot be re-pointed between the check and
the connection. A name the policy does not allow is not even resolved (no DNS lookups as a
way out). A refusal is an HTTP 403 whose body says which rule refused it.

Always reachable: the gateway (the daemon's --gateway URL), so MCP works in every mode.
Never, unless an allowlist entry names that very host (or address) and port: loopback, the
host's own addresses, link-local and cloud metadata addresses, private, shared (CGNAT),
unspecified, multicast and other non-public ranges. `open` reaches any other address,
`allowlist` only the names and ports listed, `none` only the gateway.

No Django here: it runs in the host daemon.
"""

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from calvin.workspaces.egress_rules import ALLOWLIST, NONE, OPEN, POLICIES, Entry, allowlist_parse, hostname_problem

log = logging.getLogger("calvin.host")

SANDBOX_SOCKET = "/run/calvin/egress.sock"  # where the sandbox sees this session's socket
FORWARDER_PORT = 3128  # 127.0.0.1:<this> in the sandbox's own network namespace
PROXY_URL = f"http://127.0.0.1:{FORWARDER_PORT}"
HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
MAX_CONNECTIONS = 256  # per session: the daemon's descriptors are shared by every session
CHUNK = 65536
HOP_HEADERS = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te"}

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolve = Callable[[str, int], Awaitable[list[str]]]

# Instance metadata and host services of the clouds (AWS, GCP, Azure, Oracle, Alibaba...):
# the link-local one, AWS's IPv6 one, Azure's wire server and Alibaba's.
METADATA = {ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "168.63.129.16", "100.100.100.200")}
NAT64 = ipaddress.ip_network("64:ff9b::/96")
RANGES = [
    (ipaddress.ip_network("127.0.0.0/8"), "loopback"),
    (ipaddress.ip_network("::1/128"), "loopback"),
    (ipaddress.ip_network("169.254.0.0/16"), "link-local"),
    (ipaddress.ip_network("fe80::/10"), "link-local"),
    (ipaddress.ip_network("10.0.0.0/8"), "private"),
    (ipaddress.ip_network("172.16.0.0/12"), "private"),
    (ipaddress.ip_network("192.168.0.0/16"), "private"),
    (ipaddress.ip_network("fc00::/7"), "private"),
    (ipaddress.ip_network("100.64.0.0/10"), "shared"),
    (ipaddress.ip_network("0.0.0.0/8"), "unspecified"),
    (ipaddress.ip_network("::/128"), "unspecified"),
    (ipaddress.ip_network("224.0.0.0/4"), "multicast"),
    (ipaddress.ip_network("ff00::/8"), "multicast"),
]
WHAT = {
    "loopback": "loopback addresses of the host are never reachable",
    "own": "the host's own addresses are never reachable",
    "metadata": "cloud metadata addresses are never reachable",
    "link-local": "link-local addresses are never reachable",
    "private": "private network addresses are never reachable",
    "shared": "shared (carrier-grade NAT) addresses are never reachable",
    "unspecified": "unspecified addresses are never reachable",
    "multicast": "multicast addresses are never reachable",
    "reserved": "reserved and other non-public addresses are never reachable",
}


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4, Teredo): checked as itself."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped:
        return address.ipv4_mapped
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour:
        return address.sixtofour
    if address.teredo:
        return address.teredo[1]
    return None


def address_kind(address: Address, own: frozenset[Address] = frozenset()) -> str | None:
    """Why this address is never reachable (a key of WHAT), or None for a public one."""
    inner = embedded_ipv4(address)
    if inner is not None:
        return address_kind(inner, own)
    if address in METADATA:
        return "metadata"
    for network, kind in RANGES:
        if address.version == network.version and address in network:
            return kind
    if address in own:
        return "own"
    if not address.is_global:
        return "reserved"
    return None


def host_addresses() -> frozenset[Address]:
    """This machine's own addresses (every interface): a service bound to 0.0.0.0 answers on
    the public one too."""
    found = set()
    with contextlib.suppress(OSError):
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for before, line in zip(lines, lines[1:], strict=False):
            if line.strip() == "/32 host LOCAL":
                found.add(before.strip().removeprefix("|-- "))
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            hexa = line.split()[0]
            found.add(":".join(hexa[i : i + 4] for i in range(0, 32, 4)))
    with contextlib.suppress(OSError):
        found |= {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)}
    addresses = set()
    for text in found:
        with contextlib.suppress(ValueError):
            addresses.add(ipaddress.ip_address(text.split("%", 1)[0]))
    return frozenset(addresses)


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


class Refused(Exception):
    """The request is not carried; `status` and the text go back to the agent."""

    def __init__(self, text: str, status: int = 403):
        super().__init__(text)
        self.status = status


def target_parse(host: str, port) -> tuple[str, int, Address | None]:
    """A request's host and port, normalised: (name or address text, port, address or None)."""
    host = host.strip().lower().removesuffix(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise Refused(f"{port!r} is not a port", 400) from None
    if not 1 <= port <= 65535:
        raise Refused(f"port {port} is not 1 to 65535", 400)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is None and hostname_problem(host):
        raise Refused(f"{host[:80]!r} is not a hostname or an IP address", 400)
    return (str(address) if address else host), port, address


def shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class EgressPolicy:
    mode: str = OPEN
    allowlist: tuple[Entry, ...] = ()
    workspace: str = ""

    @classmethod
    def from_turn(cls, part) -> "EgressPolicy":
        """From the turn's `egress` key. Absent: `open` (a gateway from before policies);
        anything unreadable fails closed (`none`)."""
        if part is None:
            return cls()
        if not isinstance(part, dict) or part.get("policy") not in POLICIES:
            log.warning("unreadable egress policy in the turn (%r): only the gateway is reachable", part)
            return cls(mode=NONE, workspace=str(part.get("workspace", "")) if isinstance(part, dict) else "")
        lines = part.get("allowlist") if isinstance(part.get("allowlist"), list) else []
        entries, problems = allowlist_parse([str(line) for line in lines])
        if problems:
            log.warning("egress allowlist entries left out: %s", "; ".join(problems))
        return cls(mode=part["policy"], allowlist=tuple(entries), workspace=str(part.get("workspace") or ""))

    def whose(self) -> str:
        return f"workspace {self.workspace}'s" if self.workspace else "the workspace's"

    def matches(self, host: str, port: int) -> tuple[bool, bool]:
        """(listed at all, listed by this very name or address)."""
        listed = explicit = False
        for entry in self.allowlist:
            if entry.port != port:
                continue
            if entry.host == host and not entry.wildcard:
                listed = explicit = True
            elif entry.wildcard and host.endswith("." + entry.host):
                listed = True
        return listed, explicit


@dataclass
class EgressProxy:
    """One session's proxy for one turn: `start` binds its socket, `close` ends it and every
    connection it carries."""

    policy: EgressPolicy
    gateways: frozenset[tuple[str, int]]  # (host, port) of the gateway's URLs
    resolve: Resolve = system_resolve
    own: frozenset[Address] = field(default_factory=host_addresses)
    _server: asyncio.AbstractServer | None = None
    _writers: set = field(default_factory=set)
    _gateway_addresses: dict = field(default_factory=dict)

    async def decide(self, host: str, port: int) -> list[str]:
        """The checked addresses to connect to, or Refused saying which rule refused it."""
        host, port, address = target_parse(host, port)
        target = shown(host, port)
        if (host, port) in self.gateways:
            return await self._resolved(host, port)
        if address is not None and await self._is_gateway([str(address)], port):
            return [str(address)]
        listed, explicit = self.policy.matches(host, port)
        if self.policy.mode == NONE:
            raise Refused(f"{target} refused: {self.policy.whose()} egress policy is none: only the gateway is reached")
        if self.policy.mode == ALLOWLIST and not listed:
            raise Refused(f"{target} refused: {target} is not on {self.policy.whose()} allowlist")
        addresses = [str(address)] if address is not None else await self._resolved(host, port)
        if explicit or await self._is_gateway(addresses, port):
            return addresses
        for text in addresses:
            kind = address_kind(ipaddress.ip_address(text.split("%", 1)[0]), self.own)
            if kind:
                through = "" if address is not None else f" ({host} resolves to {text})"
                unless = f"; only an entry {target} on {self.policy.whose()} allowlist would allow it"
                raise Refused(f"{target} refused{through}: {WHAT[kind]}{unless}")
        return addresses

    async def _resolved(self, host: str, port: int) -> list[str]:
        with contextlib.suppress(ValueError):
            return [str(ipaddress.ip_address(host))]  # an address is not looked up
        try:
            addresses = await asyncio.wait_for(self.resolve(host, port), CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as error:
            raise Refused(f"{shown(host, port)}: the name could not be resolved ({error})", 502) from None
        if not addresses:
            raise Refused(f"{shown(host, port)}: the name resolves to no address", 502)
        return addresses

    async def _is_gateway(self, addresses: list[str], port: int) -> bool:
        """Every address is one of the gateway's, at its port (the gateway named otherwise)."""
        gateway = set()
        for host, gateway_port in self.gateways:
            if gateway_port != port:
                continue
            if host not in self._gateway_addresses:
                with contextlib.suppress(Refused):
                    self._gateway_addresses[host] = await self._resolved(host, gateway_port)
            gateway |= set(self._gateway_addresses.get(host, ()))
        return bool(gateway) and set(addresses) <= gateway

    # Serving

    async def start(self, path: Path) -> None:
        """Listen on `path` (its directory is the caller's 0700 one). Bound through the
        directory's descriptor: a Unix socket's path is limited to 107 bytes."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(f"/proc/self/fd/{directory}/{path.name}")
            # Whatever uid the agent runs as: only this socket is bound into its sandbox, and
            # only its own sandbox.
            os.chmod(path, 0o666)
            listener.listen(128)
            listener.setblocking(False)
            self._server = await asyncio.start_unix_server(self._serve, sock=listener, limit=HEAD_LIMIT)
        except BaseException:
            listener.close()
            raise
        finally:
            os.close(directory)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._writers) >= MAX_CONNECTIONS:
            await _answer(writer, 503, f"at most {MAX_CONNECTIONS} connections at once through the egress proxy")
            return
        self._writers.add(writer)
        upstream = None
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
                host, port, first, connect = request_parse(head)
                addresses = await self.decide(host, port)
                upstream = await _connect(addresses, port, shown(*target_parse(host, port)[:2]))
            except Refused as refused:
                log.info("egress of a sandbox refused: %s", refused)
                await _answer(writer, refused.status, str(refused))
                return
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, TimeoutError):
                await _answer(writer, 400, "a request head of at most 64 KiB, ending in a blank line, is expected")
                return
            up_reader, up_writer = upstream
            self._writers.add(up_writer)
            if connect:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(first)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except OSError:
            pass  # either side went away: the other is closed below
        finally:
            for each in (writer, upstream[1] if upstream else None):
                if each is not None:
                    self._writers.discard(each)
                    each.close()


def request_parse(head: bytes) -> tuple[str, int, bytes, bool]:
    """(host, port, what to send the target first, is CONNECT) of a proxy request's head."""
    try:
        text = head.decode("latin-1")
        request_line, *headers = text[:-4].split("\r\n")
        method, target, version = request_line.split(" ")
    except ValueError:
        raise Refused("not an HTTP request", 400) from None
    if not version.startswith("HTTP/1."):
        raise Refused(f"{version[:20]!r}: HTTP/1.x is expected", 400)
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        if not host:
            raise Refused("CONNECT wants host:port", 400)
        return host, port, b"", True
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        raise Refused(
            "only CONNECT host:port and absolute http:// URLs are carried (set HTTP_PROXY and HTTPS_PROXY)", 400
        )
    try:
        port = parts.port or 80
    except ValueError:
        raise Refused(f"{parts.netloc[:80]!r}: not host:port", 400) from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    kept = [line for line in headers if line.split(":", 1)[0].strip().lower() not in HOP_HEADERS]
    first = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
    return parts.hostname, port, first.encode("latin-1"), False


async def _connect(addresses: list[str], port: int, target: str):
    """To the first checked address that answers: never to one resolved again."""
    last = None
    for address in addresses:
        try:
            return await asyncio.wait_for(asyncio.open_connection(address, port, limit=CHUNK), CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as error:
            last = error
    raise Refused(f"{target}: could not connect ({last})", 502)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # half-close: the other way may still be talking
    except OSError:
        writer.close()


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reasons = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 503: "Service Unavailable"}
    body = f"calvin egress: {text}\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()
    writer.close()


def gateways_of(urls) -> frozenset[tuple[str, int]]:
    """(host, port) of each http(s) URL: the gateway the agent always reaches."""
    found = set()
    for url in urls:
        with contextlib.suppress(ValueError, TypeError):
            parts = urlsplit(url)
            if parts.scheme in ("http", "https") and parts.hostname:
                found.add((parts.hostname.lower(), parts.port or (443 if parts.scheme == "https" else 80)))
    return frozenset(found)


def proxy_environment() -> dict[str, str]:
    """The agent's variables: every client goes through the forwarder; NO_PROXY empty, so a
    loopback-looking name goes through too and the policy decides."""
    names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
    return {**dict.fromkeys(names, PROXY_URL), "NO_PROXY": "", "no_proxy": ""}
