"""What the web pages show people, in people's words: statuses, table cells, times, mrkdwn, notices.

{% load words %}
{{ session.status|status_words }}            queued → "waiting to start"
{{ call.status|status_words:"tool_call" }}   pending → "queued to run" (a kind where words differ)
{{ cell|cell }}                              True → yes, False → no, None → —
{{ message.created_at|calvin_time }}         <time datetime="…Z">2026-12-02 14:02 UTC</time>
{{ message.text|mrkdwn:message }}            Slack mrkdwn as safe HTML, names of the message's workspace
{{ value|cell|mrkdwn_inline:message }}       the same for a cell or a field: no <p> around plain text
{% with notice=message.text|notice %}        a system message as people read it (calvin.chat.people_words)
{{ reaction.emoji|emoji }}                   tada → 🎉 (a name no standard emoji has: ":name:")
"""

from datetime import UTC, date, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from calvin.chat.emoji import emoji_char
from calvin.chat.mrkdwn import mentioned_users, mrkdwn_html
from calvin.chat.people_words import Notice, cell_words, notice_for_people

register = template.Library()

# By the kind of thing, where the same word means different things; then for every kind.
STATUS_WORDS = {
    "session": {
        "queued": "waiting to start",
        "running": "running",
        "idle": "waiting for a message",
        "finished": "finished",
        "failed": "failed",
        "external": "waiting for your agent",
    },
    "turn": {
        "queued": "waiting to start",
        "running": "running",
        "done": "done",
        "failed": "failed",
        "stopped": "stopped",
    },
    "tool_call": {
        "awaiting_approval": "waiting for approval",
        "pending": "queued to run",
        "applying": "being carried out",
        "applied": "done",
        "failed": "failed",
        "denied": "denied",
        "expired": "expired",
    },
    "approval": {
        "pending": "waiting for a decision",
        "approved": "approved, being applied",
        "denied": "denied",
        "expired": "expired undecided",
        "applied": "approved and applied",
        "failed": "approved, but failed",
    },
    "question": {"open": "waiting for an answer", "answered": "answered", "expired": "expired unanswered"},
    "secret_request": {"waiting": "waiting for the secret", "set": "set"},
    "host": {
        "online": "online",
        "connected": "online",
        "offline": "offline",
        "disconnected": "offline",
        "late": "heartbeat late",
        "stale": "heartbeat late",
        "revoked": "token revoked",
        "never": "never connected",
        "busy": "busy",
        "full": "at capacity",
    },
    "slack_post": {"queued": "queued", "sending": "sending", "sent": "sent", "failed": "failed"},
}
ANY_KIND = {
    "awaiting_approval": "waiting for approval",
    "queued": "waiting to start",
    "idle": "waiting for a message",
    "pending": "waiting for a decision",
    "applying": "being carried out",
    "open": "waiting for an answer",
    "waiting": "waiting",
    "external": "waiting for your agent",
}


@register.filter
def status_words(value, kind: str = "") -> str:
    """A status as people say it; an unknown one with its underscores as spaces, never raw."""
    key = str(getattr(value, "value", value) or "")
    words = STATUS_WORDS.get(kind, {}).get(key) or ANY_KIND.get(key)
    return words or key.replace("_", " ")


@register.filter
def cell(value) -> str:
    return cell_words(value)


def time_text(value: datetime) -> str:
    """The one format for a moment, in UTC: what a page shows before time.js (or without it)."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


@register.filter
def calvin_time(value) -> SafeString | str:
    """A <time> that static/dashboard/time.js rewrites into the reader's time zone (UTC until then)."""
    if not isinstance(value, datetime):
        return value.isoformat() if isinstance(value, date) else "—" if value in (None, "") else str(value)
    if timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    moment = value.astimezone(UTC)
    iso = moment.isoformat(timespec="seconds").replace("+00:00", "Z")
    return format_html('<time datetime="{}">{}</time>', iso, time_text(moment))


def _names(where, ids: set[str]) -> dict[str, str]:
    """Slack user ids to the names Calvin knows them by, in the workspace of `where` (a message,
    a thread, or a workspace id): that workspace's members, and its Slack app as "Calvin"."""
    from calvin.chat.models import SlackInstallation
    from calvin.workspaces.models import Member

    if isinstance(where, int):
        scope = {"workspace_id": where}
    elif hasattr(where, "thread_id"):
        scope = {"workspace__threads__id": where.thread_id}
    elif hasattr(where, "workspace_id"):
        scope = {"workspace_id": where.workspace_id}
    else:
        return {}
    names = {
        m.slack_user_id: str(m) for m in Member.objects.filter(slack_user_id__in=ids, **scope).select_related("user")
    }
    bots = SlackInstallation.objects.filter(bot_user_id__in=ids - set(names), **scope).values_list(
        "bot_user_id", flat=True
    )
    names.update({bot: "Calvin" for bot in bots})
    return names


def _mrkdwn(text, where, inline: bool) -> SafeString:
    text = "" if text is None else str(text)
    ids = mentioned_users(text) if where is not None else set()
    return mark_safe(mrkdwn_html(text, _names(where, ids) if ids else {}, inline=inline))  # built escaped


@register.filter
def emoji(name: str) -> str:
    return emoji_char(name) or f":{name}:"


@register.filter
def mrkdwn(text, where=None) -> SafeString:
    """Slack mrkdwn as safe HTML (calvin.chat.mrkdwn). `where`: whose names mentions show (a message,
    a thread or a workspace id); looked up only when the text mentions someone."""
    return _mrkdwn(text, where, inline=False)


@register.filter
def mrkdwn_inline(text, where=None) -> SafeString:
    """mrkdwn for a table cell, a field or a note: no <p> around plain text."""
    return _mrkdwn(text, where, inline=True)


@register.filter
def notice(text) -> Notice:
    return notice_for_people("" if text is None else str(text))
