"""Links that agents and people are given: a web thread's page, and a thread on its own platform."""

from django.conf import settings
from django.urls import reverse

# Where a gateway without CALVIN_PUBLIC_URL is reached: `up`'s default address.
LOCAL_BASE = "http://localhost:8000"


def public_base() -> str:
    return (settings.CALVIN_PUBLIC_URL or LOCAL_BASE).rstrip("/")


def thread_url(thread_id: int) -> str:
    """<CALVIN_PUBLIC_URL>/threads/<id>/: the web thread's page."""
    return public_base() + reverse("dashboard:thread", args=[thread_id])


def slack_thread_url(*, channel: str, thread_ts: str) -> str:
    """A Slack thread's link without asking Slack (chat.getPermalink is a Web API call, and this
    goes into text a person approves before anything is sent): Slack sends the team-less
    archive address on to the reader's own workspace. A channel's top level links the channel."""
    if not thread_ts:
        return f"https://slack.com/archives/{channel}"
    return f"https://slack.com/archives/{channel}/p{thread_ts.replace('.', '')}"


def platform_thread_url(thread) -> str:
    """Where the people of a thread read it: its Slack thread for a Slack thread, else its web page."""
    if thread.channel_kind == "slack":
        return slack_thread_url(channel=thread.channel_id, thread_ts=thread.thread_ts)
    return thread_url(thread.id)
