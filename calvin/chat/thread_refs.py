"""Which thread an agent means: a link (`url`), or a Slack `channel` with a message's `ts`.

read_thread and post_thread (seed 000) take either form. A link is a web thread's page,
`<CALVIN_PUBLIC_URL>/threads/<id>/`, or a Slack permalink,
`https://<team>.slack.com/archives/<C…|G…>/p<16 digits>[?thread_ts=<ts>]`. Parsing says
nothing about whether the thread exists or may be read: the thread's chat adapter decides
that (calvin/chat/base.py). Every malformed input is refused with what was expected.
"""

import json
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from calvin.chat.links import LOCAL_BASE, public_base

WEB, SLACK = "web", "slack"

# ASCII only: \d would take any script's digits.
CHANNEL_RE = re.compile(r"[CG][A-Z0-9]{2,31}")
TS_RE = re.compile(r"[0-9]{10}\.[0-9]{6}")
PERMALINK_TS_RE = re.compile(r"p([0-9]{10})([0-9]{6})")
WEB_PATH_RE = re.compile(r"/threads/([0-9]{1,18})/?")
SLACK_HOST_RE = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]{0,62})\.)+slack\.com")
# Slack adds these to a reply's permalink; anything else in the query is not a Slack link's.
SLACK_QUERY_KEYS = {"thread_ts", "cid"}
MAX_SHOWN = 120

CHANNEL_EXPECTED = "a Slack channel id: C or G, then capital letters and digits (for example C0123ABCD)"
TS_EXPECTED = "a Slack message timestamp: 10 digits, a dot, 6 digits (for example 1700000000.000100)"
SLACK_LINK = "https://<team>.slack.com/archives/<C…|G…>/p<16 digits>, optionally with ?thread_ts=<ts>"


class ThreadRefInvalid(ValueError):
    """The reference is malformed; the text says what was expected."""


@dataclass(frozen=True)
class ThreadRef:
    """A parsed reference. `channel_kind` is the platform (so calvin.chat.chat_adapter_for takes it).

    Web: `thread_id`. Slack: `channel`, `ts` (the message named) and `thread_ts` (the
    thread's root, when the link said so).
    """

    channel_kind: str
    thread_id: int | None = None
    channel: str = ""
    ts: str = ""
    thread_ts: str = ""

    @property
    def root_ts(self) -> str:
        """The thread's root as far as the reference knows: a reply's link names its root in thread_ts."""
        return self.thread_ts or self.ts

    def __str__(self) -> str:
        if self.channel_kind == WEB:
            return f"web thread {self.thread_id}"
        return f"Slack thread {self.channel}/{self.root_ts}"


def _shown(value: str) -> str:
    """The agent's input quoted in a refusal, cut short: it may be huge."""
    if len(value) <= MAX_SHOWN:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value[:MAX_SHOWN], ensure_ascii=False) + f"… ({len(value):,} characters)"


def web_thread_link_example() -> str:
    return f"{public_base()}/threads/<id>/"


def _url_expected() -> str:
    return f"a thread's link: a web thread {web_thread_link_example()} or a Slack link {SLACK_LINK}"


def _is_web_origin(scheme: str, netloc: str) -> bool:
    """This gateway's own pages: CALVIN_PUBLIC_URL's origin; without it, `up`'s default address
    and any http(s) host the gateway answers to (ALLOWED_HOSTS)."""
    origin = f"{scheme}://{netloc}"
    if settings.CALVIN_PUBLIC_URL:
        public = urlsplit(public_base())
        return origin == f"{public.scheme}://{public.netloc.lower()}"
    if origin == LOCAL_BASE:
        return True
    domain, _port = split_domain_port(netloc)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


def _web_ref(url: str, parts) -> ThreadRef:
    prefix = urlsplit(public_base()).path.rstrip("/") if settings.CALVIN_PUBLIC_URL else ""
    path = parts.path
    match = WEB_PATH_RE.fullmatch(path[len(prefix) :]) if path.startswith(prefix) else None
    if match is None or parts.query:
        raise ThreadRefInvalid(f"url: a web thread's link is {web_thread_link_example()}; got {_shown(url)}")
    return ThreadRef(channel_kind=WEB, thread_id=int(match.group(1)))


def _slack_ref(url: str, parts) -> ThreadRef:
    bad = ThreadRefInvalid(f"url: a Slack link to a thread is {SLACK_LINK}; got {_shown(url)}")
    segments = parts.path.split("/")
    if parts.scheme != "https" or len(segments) != 4 or segments[:2] != ["", "archives"]:
        raise bad
    channel, message = segments[2], segments[3]
    stamp = PERMALINK_TS_RE.fullmatch(message)
    if not CHANNEL_RE.fullmatch(channel) or stamp is None:
        raise bad
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise bad from None
    if set(query) - SLACK_QUERY_KEYS or any(len(values) != 1 for values in query.values()):
        raise bad
    thread_ts = query.get("thread_ts", [""])[0]
    if "thread_ts" in query and not TS_RE.fullmatch(thread_ts):
        raise ThreadRefInvalid(f"url: thread_ts must be {TS_EXPECTED}; got {_shown(thread_ts)}")
    return ThreadRef(channel_kind=SLACK, channel=channel, ts=f"{stamp[1]}.{stamp[2]}", thread_ts=thread_ts)


def thread_ref_from_url(url: str) -> ThreadRef:
    stripped = url.strip()
    try:
        parts = urlsplit(stripped)
        netloc = parts.netloc.lower()
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise ThreadRefInvalid(f"url: expected {_url_expected()}; got {_shown(url)}") from None
    if parts.scheme not in ("http", "https") or not netloc or "@" in netloc or any(c.isspace() for c in stripped):
        raise ThreadRefInvalid(f"url: expected {_url_expected()}; got {_shown(url)}")
    if SLACK_HOST_RE.fullmatch(netloc):
        return _slack_ref(url, parts)
    if _is_web_origin(parts.scheme, netloc):
        return _web_ref(url, parts)
    raise ThreadRefInvalid(f"url: expected {_url_expected()}; got {_shown(url)}")


def thread_ref_parse(*, url: str | None = None, channel: str | None = None, ts: str | None = None) -> ThreadRef:
    """Exactly one of `url`, or `channel` with `ts`. Raises ThreadRefInvalid naming every problem."""
    if url is not None:
        if channel is not None or ts is not None:
            raise ThreadRefInvalid("give the thread either as url, or as channel with ts; not both")
        return thread_ref_from_url(url)
    if channel is None and ts is None:
        raise ThreadRefInvalid("give the thread: url (the thread's link), or channel with ts")
    problems = []
    if channel is None:
        problems.append(f"channel is needed with ts: {CHANNEL_EXPECTED}")
    elif not CHANNEL_RE.fullmatch(channel):
        problems.append(f"channel: expected {CHANNEL_EXPECTED}; got {_shown(channel)}")
    if ts is None:
        problems.append(f"ts is needed with channel: {TS_EXPECTED}")
    elif not TS_RE.fullmatch(ts):
        problems.append(f"ts: expected {TS_EXPECTED}; got {_shown(ts)}")
    if problems:
        raise ThreadRefInvalid("; ".join(problems))
    return ThreadRef(channel_kind=SLACK, channel=channel, ts=ts)
