"""A workspace's egress policy: the modes and the allowlist's entries, checked the same way
by the gateway (when an admin saves them) and by the host's egress proxy (which trusts
nothing it is sent). No Django here: the host imports it.

An entry is `host:port`: a hostname (an optional leading `*.` matches any name below it,
not the name itself), an IPv4 address, or an IPv6 address in brackets; the port 1-65535.
"""

import ipaddress
import re
from dataclasses import dataclass

OPEN, ALLOWLIST, NONE = "open", "allowlist", "none"
POLICIES = (OPEN, ALLOWLIST, NONE)
MAX_ENTRIES = 200
MAX_NAME = 253
LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
ENTRY = re.compile(r"(?:\[(?P<ipv6>[^\]]+)\]|(?P<host>[^:\[\]]+)):(?P<port>[0-9]{1,5})")


@dataclass(frozen=True)
class Entry:
    host: str  # lowercase name without the "*.", or an address's text
    port: int
    wildcard: bool = False
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None

    def __str__(self) -> str:
        host = f"[{self.host}]" if isinstance(self.address, ipaddress.IPv6Address) else self.host
        return f"{'*.' if self.wildcard else ''}{host}:{self.port}"


class EntryInvalid(ValueError):
    pass


def hostname_problem(name: str) -> str | None:
    if not name or len(name) > MAX_NAME:
        return f"a hostname has 1 to {MAX_NAME} characters"
    labels = name.split(".")
    if not all(LABEL.fullmatch(label) for label in labels):
        return "a hostname is labels of letters, digits and hyphens (not first or last), joined by dots"
    if labels[-1].isdigit():
        return "the last label of a hostname is not all digits (write an IP address in full)"
    return None


def entry_parse(text: str) -> Entry:
    """One allowlist entry, or EntryInvalid saying what is wrong with it."""
    raw = text.strip()
    shown = raw[:80]
    found = ENTRY.fullmatch(raw)
    if not found:
        raise EntryInvalid(f"{shown!r}: write host:port (an IPv6 address as [address]:port)")
    port = int(found["port"])
    if not 1 <= port <= 65535:
        raise EntryInvalid(f"{shown!r}: the port must be 1 to 65535")
    if found["ipv6"] is not None:
        try:
            address = ipaddress.IPv6Address(found["ipv6"])
        except ValueError:
            raise EntryInvalid(f"{shown!r}: {found['ipv6'][:60]!r} is not an IPv6 address") from None
        return Entry(host=str(address), port=port, address=address)
    host = found["host"].lower()
    wildcard = host.startswith("*.")
    name = host[2:] if wildcard else host
    if not wildcard:
        try:
            address = ipaddress.IPv4Address(name)
        except ValueError:
            pass
        else:
            return Entry(host=str(address), port=port, address=address)
    problem = hostname_problem(name)
    if problem:
        raise EntryInvalid(f"{shown!r}: {problem} (a wildcard only as a leading '*.')")
    return Entry(host=name, port=port, wildcard=wildcard)


def allowlist_lines(text: str) -> list[str]:
    """The entries' texts: one a line, blank lines ignored."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def allowlist_parse(lines: list[str]) -> tuple[list[Entry], list[str]]:
    """The entries that parse, and every problem (not only the first)."""
    entries, problems = [], []
    if len(lines) > MAX_ENTRIES:
        problems.append(f"at most {MAX_ENTRIES} entries ({len(lines)} given)")
    for line in lines[:MAX_ENTRIES]:
        try:
            entries.append(entry_parse(line))
        except EntryInvalid as invalid:
            problems.append(str(invalid))
    return entries, problems
