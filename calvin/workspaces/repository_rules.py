"""What a workspace definition's repository may hold: its name, `owner/name`, clone URL and
default branch. Pure Python (no Django), so the gateway checks them when a definition is
saved and a host checks them again before it runs git with them.

A clone URL is where a host's git reaches out with the workspace's name on it, so only
plain transports pass: never a remote helper (`ext::sh -c …` runs a command, `fd::` reads
the host's descriptors), an option in disguise (`-u…`, `ssh://-oProxyCommand=…`) or a
control character. Local paths and file:// URLs read the host's own disks, so they pass
only where the gateway allows "file" (a laptop, tests), never by default on a served one.
"""

import re
from urllib.parse import urlsplit

MAX_NAME = 100
MAX_FULL_NAME = 200
MAX_CLONE_URL = 500
MAX_BRANCH = 200

# The name becomes a directory in the session directory: no dots or dashes first, no slashes.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Files Calvin writes into every session directory: a checkout there would collide.
RESERVED_NAMES = {"agents.md", "claude.md"}
FULL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
BRANCH_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
# git's remote-helper syntax: <transport>::<address>, which runs git-remote-<transport>.
HELPER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
# scp-like ssh: [user@]host:path, where host has no slash before the colon.
SCP_RE = re.compile(r"^(?:[A-Za-z0-9._~-]+@)?([A-Za-z0-9.-]+):(?!//)(.+)$")
CONTROL_RE = re.compile(r"[\x00-\x20\x7f]")

# Transports as git's GIT_ALLOW_PROTOCOL names them.
KNOWN_SCHEMES = ("https", "http", "ssh", "git", "file")
DEFAULT_SCHEMES = ("https", "ssh", "git")


def name_problem(name: str) -> str | None:
    if not isinstance(name, str) or not name:
        return "a repository name is required"
    if len(name) > MAX_NAME:
        return f"a repository name has at most {MAX_NAME} characters"
    if not NAME_RE.fullmatch(name):
        return (
            f"repository name {name!r}: letters, digits, '.', '_' and '-', starting with a letter or digit"
            " (it becomes a directory in the session directory)"
        )
    if name.lower() in RESERVED_NAMES or name.lower().endswith(".lock"):
        return f"repository name {name!r} is reserved: Calvin writes a file of that name into every session"
    return None


def full_name_problem(full_name: str) -> str | None:
    if not isinstance(full_name, str) or len(full_name) > MAX_FULL_NAME or not FULL_NAME_RE.fullmatch(full_name):
        return f"{full_name!r} is not owner/name (letters, digits, '.', '_', '-'; at most {MAX_FULL_NAME} characters)"
    return None


def branch_problem(branch: str) -> str | None:
    """A branch name git accepts, and one that cannot pass for an option or a revision expression."""
    ok = (
        isinstance(branch, str)
        and 0 < len(branch) <= MAX_BRANCH
        and BRANCH_RE.fullmatch(branch)
        and ".." not in branch
        and "//" not in branch
        and "/." not in branch
        and not branch.endswith(("/", ".", ".lock"))
    )
    if not ok:
        return f"{branch!r} is not a usable branch name (letters, digits, '.', '_', '-', '/'; at most {MAX_BRANCH})"
    return None


def clone_url_scheme(url: str) -> str | None:
    """The transport a clone URL uses, as GIT_ALLOW_PROTOCOL names it; None when git would
    read it some other way (a remote helper, something unrecognised)."""
    if url.startswith("/"):
        return "file"
    if HELPER_RE.match(url):
        return None
    if "://" in url:
        scheme = url.split("://", 1)[0].lower()
        return scheme if scheme in KNOWN_SCHEMES else None
    if SCP_RE.match(url):
        return "ssh"
    return None


def clone_url_problem(url: str, *, allowed_schemes=DEFAULT_SCHEMES) -> str | None:
    """Why git must not be given this clone URL, or None."""
    if not isinstance(url, str) or not url:
        return "a clone URL is required"
    if len(url) > MAX_CLONE_URL:
        return f"a clone URL has at most {MAX_CLONE_URL} characters"
    if CONTROL_RE.search(url):
        return "a clone URL holds no spaces or control characters"
    if url.startswith("-"):
        return "a clone URL cannot start with '-' (git would read it as an option)"
    if HELPER_RE.match(url):
        return f"clone URL {url!r} names a git remote helper ('…::'); only {_listed(allowed_schemes)} URLs are allowed"
    scheme = clone_url_scheme(url)
    if scheme is None:
        return f"clone URL {url!r} is not a git URL this gateway clones; allowed: {_listed(allowed_schemes)}"
    if scheme not in allowed_schemes:
        allowed = _listed(allowed_schemes)
        return f"clone URL {url!r} uses {scheme}, which this gateway does not allow; allowed: {allowed}"
    if scheme == "file":
        path = url[len("file://") :] if url.lower().startswith("file://") else url
        if not path.startswith("/") or "/../" in f"{path}/":
            return "a local clone URL is an absolute path without '..'"
        return None
    host = _host(url, scheme)
    if not host:
        return f"clone URL {url!r} names no host"
    if host.startswith("-") or any(part.startswith("-") for part in _user_and_port(url, scheme)):
        return "a clone URL's host, user or port cannot start with '-' (ssh would read it as an option)"
    return None


def _host(url: str, scheme: str) -> str:
    if "://" not in url:  # scp-like
        match = SCP_RE.match(url)
        return match.group(1) if match else ""
    try:
        parts = urlsplit(url)
        return parts.hostname or ""
    except ValueError:
        return ""


def _user_and_port(url: str, scheme: str) -> list[str]:
    if "://" not in url:
        return [url.split("@", 1)[0]] if "@" in url.split(":", 1)[0] else []
    netloc = url.split("://", 1)[1].split("/", 1)[0]
    pieces = []
    if "@" in netloc:
        pieces.append(netloc.rsplit("@", 1)[0])
    return pieces


def _listed(schemes) -> str:
    return ", ".join(schemes) or "no"
