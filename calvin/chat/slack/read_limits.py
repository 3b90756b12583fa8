"""Slack's limit on reading conversations, kept by every Calvin process together.

For apps outside the Slack Marketplace, `conversations.replies` and `conversations.history`
answer about one call a minute per team and method, 15 messages a call; more answers 429.
Every web process and worker shares one claim per (team, method) in the cache (Redis when
REDIS_URL is set): `cache.add` sets it only if absent, atomically, with the interval as its
expiry, so however many processes want to call, one does and the others are told when they
may. A 429 that Slack answers anyway (another copy of the app, a changed limit) moves the
claim to Slack's Retry-After.

CALVIN_SLACK_READ_INTERVAL_SECONDS and CALVIN_SLACK_READ_PAGE hold the limit (a Marketplace
app may raise both); an interval of 0 claims nothing.
"""

import math
import time

from django.conf import settings
from django.core.cache import cache
from slack_sdk.errors import SlackApiError

from calvin.chat.base import ChatTemporaryError

KEY = "slack-read:{team_id}:{method}"
REPLIES, HISTORY = "conversations.replies", "conversations.history"


class SlackReadLater(ChatTemporaryError):
    """Slack's limit allows no call of this method for this team now; `retry_after` says when."""


def slack_read_page() -> int:
    return max(1, settings.CALVIN_SLACK_READ_PAGE)


def slack_read_rule(method: str = REPLIES) -> str:
    """The limit in words, for the agent and for people."""
    interval = settings.CALVIN_SLACK_READ_INTERVAL_SECONDS
    every = "a minute" if interval == 60 else f"every {interval:g} s"
    return f"Slack allows this app 1 {method} call {every} and {slack_read_page()} messages per call"


def _key(team_id: str, method: str) -> str:
    return KEY.format(team_id=team_id, method=method)


def slack_read_claim(*, team_id: str, method: str) -> float:
    """0 when the caller may make one call now (the claim is its), else the seconds until one may."""
    interval = settings.CALVIN_SLACK_READ_INTERVAL_SECONDS
    if interval <= 0:
        return 0.0
    for _ in range(2):  # a claim that expires between add and get: try once more
        until = time.time() + interval
        if cache.add(_key(team_id, method), until, timeout=math.ceil(interval)):
            return 0.0
        held = cache.get(_key(team_id, method))
        if held is not None:
            return max(float(held) - time.time(), 0.1)
    return 1.0


def slack_read_wait(*, team_id: str, method: str) -> float:
    """Seconds until a call may be made (0 when one may now); claims nothing."""
    held = cache.get(_key(team_id, method))
    return max(float(held) - time.time(), 0.0) if held is not None else 0.0


def slack_read_held_off(*, team_id: str, method: str, seconds: float) -> None:
    """Slack answered 429: nobody calls before its Retry-After."""
    seconds = max(seconds, 1.0)
    cache.set(_key(team_id, method), time.time() + seconds, timeout=math.ceil(seconds))


def slack_read(*, team_id: str, method: str, call, **kwargs) -> dict:
    """One call of `method` (the client's bound method `call`) within the limit, or SlackReadLater.

    Other errors are Slack's, raised as the client raised them."""
    wait = slack_read_claim(team_id=team_id, method=method)
    if wait:
        raise SlackReadLater(f"{slack_read_rule(method)}; the next call is allowed in {math.ceil(wait)} s", wait)
    try:
        return call(**kwargs)
    except SlackApiError as exc:
        if getattr(exc.response, "status_code", 200) != 429:
            raise
        from calvin.chat.slack.web_api import slack_error

        retry_after = slack_error(exc, doing=method).retry_after or settings.CALVIN_SLACK_READ_INTERVAL_SECONDS
        slack_read_held_off(team_id=team_id, method=method, seconds=retry_after)
        raise SlackReadLater(
            f"Slack rate-limited {method} ({slack_read_rule(method)}); the next call is allowed in"
            f" {math.ceil(retry_after)} s",
            retry_after,
        ) from None
