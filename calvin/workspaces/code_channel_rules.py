"""What a code channel's channel may be: a Slack channel's id, or a web space's name. Pure Python:
the model's clean(), the admin form and the services all check with these, and a web thread's
channel id is made from a space's name here (`space:<name>`) and read back here.

Both are typed by an admin, and both end up in lookups and in what an agent is told, so they are
refused, never rewritten: an admin who pastes `<#C123|general>` or a channel's name learns what to
paste instead, and a space name that is not already a plain slug (capitals, `space:`, `..`, a NUL)
is refused rather than quietly turned into another space's name.
"""

import re

from calvin.chat.thread_refs import CHANNEL_RE

SLACK, WEB = "slack", "web"
MAX_CHANNEL = 64  # the column; each kind is held to less below
MAX_SLACK_CHANNEL = 32  # CHANNEL_RE: C or G and at most 31 more
MAX_SPACE = 40
SPACE_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
# A web thread's Thread.channel_id: "web" for the web channel itself, this prefix and the space's name in a space.
SPACE_PREFIX = "space:"
SLACK_EXPECTED = (
    "a Slack channel id: C or G, then capital letters and digits (for example C0123ABCD), as Slack shows it at the"
    " bottom of the channel's details; not its name or a link"
)
SPACE_EXPECTED = (
    f"a space name: 1 to {MAX_SPACE} small letters a-z, digits and dashes (not first or last), for example web-app"
)


def _shown(value: str) -> str:
    return repr(value[:40] + ("…" if len(value) > 40 else ""))


def slack_channel_problem(channel) -> str | None:
    """Why `channel` cannot be a Slack code channel's id, or None."""
    if not isinstance(channel, str) or not channel:
        return f"the channel is required: {SLACK_EXPECTED}"
    if CHANNEL_RE.fullmatch(channel):
        return None
    if re.fullmatch(r"D[A-Z0-9]{2,31}", channel):
        return f"{_shown(channel)} is a direct message conversation: only a channel (C… or G…) can be a code channel"
    if re.fullmatch(r"[CG][A-Z0-9]*", channel):
        length = "too long" if len(channel) > MAX_SLACK_CHANNEL else "too short"
        return f"{_shown(channel)} is {length} ({len(channel)} characters) for {SLACK_EXPECTED}"
    return f"{_shown(channel)} is not {SLACK_EXPECTED}"


def space_name_problem(name) -> str | None:
    """Why `name` cannot be a web space's name, or None."""
    if not isinstance(name, str) or not name:
        return f"the space's name is required: {SPACE_EXPECTED}"
    if len(name) > MAX_SPACE:
        return f"{_shown(name)} is too long ({len(name)} characters) for {SPACE_EXPECTED}"
    if not SPACE_RE.fullmatch(name):
        return f"{_shown(name)} is not {SPACE_EXPECTED}"
    return None


def channel_problem(kind, channel) -> str | None:
    if kind == SLACK:
        return slack_channel_problem(channel)
    if kind == WEB:
        return space_name_problem(channel)
    return f"a code channel is a Slack channel ({SLACK}) or a web space ({WEB})"


def space_channel_id(name: str) -> str:
    """The Thread.channel_id of a web thread started in the space `name` (already checked)."""
    return SPACE_PREFIX + name


def space_of_channel_id(channel_id) -> str | None:
    """The space a web thread's channel id names; None for the web channel itself (or anything else)."""
    if not isinstance(channel_id, str) or not channel_id.startswith(SPACE_PREFIX):
        return None
    name = channel_id.removeprefix(SPACE_PREFIX)
    return None if space_name_problem(name) else name


def channel_label(channel: str) -> str:
    """How people and agents are shown a code channel: #web-app, #C0123ABCD."""
    return f"#{channel}"
