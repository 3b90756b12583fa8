"""preview and unpreview (seed 000): the parameters as the seed gives them, checked here.

Seed 000's availability table: in self-hosted mode both are "offered, but the gateway refuses
the call"; in hosted mode they are served. Public preview URLs (a proxy from the gateway to
a port on the session's host, over the host's connection) are not built yet on this
gateway: until they are, a hosted gateway refuses the call too, saying so, after the same
checks, so an agent learns nothing it would have to unlearn.
"""

import re

from django.conf import settings

from tools.availability import SELF_HOSTED
from tools.caller import Caller
from tools.errors import ToolRefused

# One DNS label: lowercase letters, digits, hyphens; up to 63; no hyphen first or last.
LABEL_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
MAX_LABEL = 63

SELF_HOSTED_REFUSAL = (
    "preview is not available on a self-hosted gateway: it does not serve public preview URLs."
    " The server on port {port} still runs; reach it on the host itself"
)
NOT_SERVED_YET = (
    "this gateway does not serve preview URLs yet, so nothing was published; the server on port {port}"
    " still runs on the session's host"
)


def label_problem(name: str) -> str | None:
    if len(name) > MAX_LABEL or not LABEL_RE.fullmatch(name):
        return (
            f"name: one DNS label (lowercase letters, digits and hyphens, not first or last; at most {MAX_LABEL}"
            " characters)"
        )
    return None


def preview_open(*, caller: Caller, port: int, name: str | None) -> dict:
    problem = label_problem(name) if name is not None else None
    if problem:
        raise ToolRefused(problem)
    if settings.CALVIN_MODE == SELF_HOSTED:
        raise ToolRefused(SELF_HOSTED_REFUSAL.format(port=port))
    raise ToolRefused(NOT_SERVED_YET.format(port=port))


def preview_close(*, caller: Caller, name: str) -> dict:
    problem = label_problem(name)
    if problem:
        raise ToolRefused(problem)
    if settings.CALVIN_MODE == SELF_HOSTED:
        raise ToolRefused("unpreview is not available on a self-hosted gateway: it serves no preview URLs")
    raise ToolRefused(f"there is no preview named {name}: this gateway does not serve preview URLs yet")
