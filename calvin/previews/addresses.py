"""Where previews live: `<name>.<preview domain>`, and which Host headers name one.

The preview domain is CALVIN_PREVIEW_DOMAIN; on a loopback gateway without it (`up`, a
laptop) it is `preview.localhost`, which browsers resolve to this machine. Scheme and port
are the gateway's own (CALVIN_PUBLIC_URL, or `up`'s address).
"""

import re
from urllib.parse import urlsplit

from django.conf import settings

from calvin.chat.links import public_base

LOOPBACK_DOMAIN = "preview.localhost"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")
# One DNS label: lowercase letters, digits, hyphens (not first or last), 1 to 63 characters.
LABEL_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
PORT_RE = re.compile(r"[0-9]{1,5}")


def preview_domain() -> str:
    """The domain previews are served under, or "" when this gateway serves none."""
    if settings.CALVIN_PREVIEW_DOMAIN:
        return settings.CALVIN_PREVIEW_DOMAIN
    if urlsplit(public_base()).hostname in LOOPBACK_HOSTS:
        return LOOPBACK_DOMAIN
    return ""


def preview_url(name: str) -> str:
    base = urlsplit(public_base())
    port = f":{base.port}" if base.port else ""
    return f"{base.scheme}://{name}.{preview_domain()}{port}/"


def preview_origin(name: str) -> str:
    return preview_url(name).rstrip("/")


def is_preview_host(host: str) -> bool:
    """Whether a request's Host header is under the preview domain at all (then it is the
    preview app's, valid or not, and never Django's). Compared without case or a final dot,
    so that `NAME.Preview.Localhost.` cannot slip past to Calvin's views."""
    domain = preview_domain()
    if not domain:
        return False
    hostname = _without_port(host).lower().rstrip(".")
    return hostname == domain or hostname.endswith("." + domain)


def preview_name_of(host: str) -> str | None:
    """The preview named by an exact Host header `<label>.<domain>[:port]`, else None: no
    uppercase, no trailing dot, no second label, nothing but digits after a colon."""
    domain = preview_domain()
    if not domain:
        return None
    hostname, colon, port = host.rpartition(":") if ":" in host else (host, "", "")
    if colon and not PORT_RE.fullmatch(port):
        return None
    suffix = "." + domain
    if not hostname.endswith(suffix):
        return None
    label = hostname[: -len(suffix)]
    return label if LABEL_RE.fullmatch(label) else None


def _without_port(host: str) -> str:
    """Whatever follows the last colon goes: `a:80.preview.localhost:8000` is still under the
    domain (and refused there), not a name Django's own host checks see."""
    if host.startswith("["):  # [::1]:8000
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if ":" in host else host
