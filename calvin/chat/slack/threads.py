"""Other Slack threads for read_thread and post_thread (seed 000), behind SlackChannel.

Which threads. Only those of the Slack team the session's workspace is tied to: every call
is made with that team's bot token, so Slack itself answers `channel_not_found` for another
team's channel, and that reads exactly like a thread that does not exist. Then the seed's
rule, "the bot is in it, and the session's owner and everyone who can read the session's own
conversation can see it", in Slack's terms:

- the bot must be a member of the conversation (`conversations.info` → `is_member`);
- a public channel is readable by every member of the team, so by the owner and by everyone
  who reads the session's conversation, unless that conversation is shared with another
  organisation (Slack Connect), whose people cannot see this team's channels;
- a private conversation (private channel, group DM, DM) is readable only when it is the
  session's own conversation: Calvin cannot know that everyone reading the session's thread
  is in it.

The refusal names the rule that failed.

Reading, within Slack's limit for apps outside its Marketplace (about 1 conversations.replies
call a minute per team, 15 messages a call: calvin.chat.slack.read_limits). A thread Calvin
keeps whole (calvin.chat.slack.history: recorded from its root on, from the events it receives
and the posts it makes) is read from that history, without asking Slack. Otherwise, when
Slack's limit allows a call now, Calvin asks for the part it lacks (one page, oldest first),
keeps it and starts recording the thread; what it shows then says what is missing, why, and
when the next call is allowed. The root of a link Calvin does not know costs that same one
call, made while finding the thread, and its page serves the read. Authors are named from the
workspace's members (their Slack user id) or, for others, `users.info`.

Posting: `post_reply` enqueues one reply in the channel's ordered outbox
(calvin.chat.slack.outbox.slack_post_enqueue) inside the thread (thread_ts = the root),
within the effect's transaction; a worker posts it, once and in order. Its text has its
channel-wide mentions made inert and is checked against the calling session's secrets again.
"""

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from calvin.chat.base import (
    ChatPermanentError,
    ChatTemporaryError,
    ThreadEntry,
    ThreadExcerpt,
    ThreadNotReadable,
    ThreadTarget,
)
from calvin.chat.models import SlackInstallation, SlackPost
from calvin.chat.slack.history import (
    history_whole,
    read_since,
    slack_history_for,
    slack_history_start,
    slack_history_take_fetched,
    slack_history_view,
    slack_thread_root_known,
    ts_now,
)
from calvin.chat.slack.installations import bot_for_team
from calvin.chat.slack.manifest import BOT_EVENTS
from calvin.chat.slack.read_limits import (
    REPLIES,
    SlackReadLater,
    slack_read,
    slack_read_page,
    slack_read_rule,
    slack_read_wait,
)
from calvin.chat.slack.text import mentions_neutralised
from calvin.chat.slack.web_api import slack_client, slack_error
from calvin.workspaces.models import Member
from sessions.models import Thread

SLACK = Thread.ChannelKind.SLACK
# The same words whether the thread does not exist or is another team's: a session learns
# nothing about conversations outside its own Slack workspace.
NOT_FOUND = (
    "there is no Slack thread {where} that this session can read: no conversation of this workspace's Slack"
    " has that channel and message"
)
# Slack's answers that mean "no such conversation or message, as far as this bot can tell".
MISSING = {"channel_not_found", "thread_not_found", "message_not_found", "not_in_channel", "is_archived"}


def _where(channel: str, ts: str) -> str:
    return f"{channel}/{ts}"


def _team_of(workspace_id: int) -> str | None:
    return SlackInstallation.objects.filter(workspace_id=workspace_id).values_list("team_id", flat=True).first()


def _client(team_id: str):
    bot = bot_for_team(team_id)
    if bot is None:
        return None, None
    return slack_client(bot.token), bot


def _ask(doing: str, method, *, where: str, **kwargs) -> dict:
    """A Web API read; what Slack refused, as the reason the agent gets."""
    try:
        return method(**kwargs)
    except Exception as exc:
        raise _unreadable(exc, doing=doing, where=where) from None


def _unreadable(exc: Exception, *, doing: str, where: str) -> Exception:
    """ThreadNotReadable saying what Slack refused (the exception itself when it is not Slack's)."""
    error = slack_error(exc, doing=doing)
    code = _error_code(exc)
    if code in MISSING:
        return ThreadNotReadable(NOT_FOUND.format(where=where))
    if isinstance(error, ChatTemporaryError):
        return ThreadNotReadable(
            f"Slack thread {where} cannot be read now: Slack did not answer {doing} ({error}); try again later"
        )
    if code == "missing_scope":
        return ThreadNotReadable(
            f"Slack thread {where} cannot be read from this session: Calvin's Slack app lacks the permission"
            f" {doing} needs (missing_scope); a workspace admin can reinstall the app with it"
        )
    if isinstance(error, ChatPermanentError):
        return ThreadNotReadable(f"Slack thread {where} cannot be read: {error}")
    return exc


def _error_code(exc: Exception) -> str:
    data = getattr(getattr(exc, "response", None), "data", None)
    return data.get("error", "") if isinstance(data, dict) else ""


def _private(channel: dict) -> bool:
    return bool(channel.get("is_private") or channel.get("is_im") or channel.get("is_mpim") or channel.get("is_group"))


def _shared(channel: dict) -> bool:
    return bool(channel.get("is_ext_shared") or channel.get("is_pending_ext_shared"))


def _unseen_because(*, client, session, channel_id: str, info: dict, where: str) -> str | None:
    """Why the conversation's audience is not the session's (the seed's rule), or None."""
    own = session.thread
    own_conversation = own.channel_kind == SLACK and own.channel_id == channel_id
    if own_conversation:
        return None  # the same people read both
    name = f"#{info['name']}" if info.get("name") else channel_id
    if _private(info):
        return (
            f"{name} is a private conversation, and a private conversation can be read only from a session in that"
            " same conversation (people who read this session's thread may not be in it)"
        )
    if own.channel_kind == SLACK:
        mine = _ask("conversations.info", client.conversations_info, where=where, channel=own.channel_id)
        if _shared(mine.get("channel") or {}):
            return (
                "this session's own conversation is shared with another organisation (Slack Connect), whose"
                f" people cannot see {name}"
            )
    return None


def thread_target(*, ref, session) -> ThreadTarget:
    """The Slack thread `ref` names, if `session` may read it; else ThreadNotReadable saying why."""
    asked = _where(ref.channel, ref.root_ts)
    team_id = _team_of(session.workspace_id)
    if team_id is None:
        raise ThreadNotReadable(
            f"there is no Slack thread {asked} that this session can read: this workspace is not connected to Slack"
        )
    client, bot = _client(team_id)
    if client is None:
        raise ThreadNotReadable(NOT_FOUND.format(where=asked))
    info = _ask("conversations.info", client.conversations_info, where=asked, channel=ref.channel).get("channel") or {}
    if not info.get("is_member"):
        name = f"#{info['name']}" if info.get("name") else ref.channel
        raise ThreadNotReadable(
            f"Slack thread {asked} cannot be read from this session: Calvin's Slack app is not a member of {name};"
            " someone in the channel can add it (/invite, then the app's name)"
        )
    # The thread's root: known to Calvin (a session's thread, a kept history or one of its
    # messages), or asked of Slack, whose answer is the thread's first page, kept for the read.
    scope = {"workspace_id": session.workspace_id, "team_id": team_id, "channel_id": ref.channel}
    root_ts = slack_thread_root_known(**scope, ts=ref.ts, thread_ts=ref.thread_ts)
    page = None
    if root_ts is None:
        root_ts, page = _root_from_slack(client, ref=ref, scope=scope, where=asked)
    where = _where(ref.channel, root_ts)
    reason = _unseen_because(client=client, session=session, channel_id=ref.channel, info=info, where=where)
    if reason:
        raise ThreadNotReadable(f"Slack thread {where} cannot be read from this session: {reason}")
    key = {"team_id": team_id, "channel": ref.channel, "root_ts": root_ts, "recorded": _events_for(info)}
    if page is not None:
        history = slack_history_start(**scope, thread_ts=root_ts, since=read_since(root_ts))
        key["fetched"] = slack_history_take_fetched(
            history=history, messages=page.messages, has_more=page.has_more, asked_at=page.asked_at
        )  # the read that follows says what came from Slack just now
    own = session.thread
    label = f"Slack thread {where}" + (f" (#{info['name']})" if info.get("name") else "")
    return ThreadTarget(
        channel_kind=SLACK,
        url=_permalink(client, channel=ref.channel, ts=root_ts),
        label=label,
        key=key,
        own=own.channel_kind == SLACK and own.channel_id == ref.channel and own.thread_ts == root_ts,
    )


def _events_for(info: dict) -> bool:
    """Whether Slack sends Calvin this conversation's messages as events (the app's subscriptions)."""
    if info.get("is_mpim"):
        subscription = "message.mpim"
    elif info.get("is_im"):
        subscription = "message.im"
    elif _private(info):
        subscription = "message.groups"
    else:
        subscription = "message.channels"
    return subscription in BOT_EVENTS


@dataclass(frozen=True)
class _Page:
    """One conversations.replies answer: the thread's messages from its root on."""

    messages: list
    has_more: bool
    asked_at: str  # when it was asked, as a ts


def _root_from_slack(client, *, ref, scope: dict, where: str) -> tuple[str, _Page | None]:
    """The root of the thread `ref` names, asked of Slack (one conversations.replies call within
    Slack's limit: a reply's ts finds its thread, whose first message is the root), or kept by a
    read that ran meanwhile. Without a call allowed, ThreadNotReadable says when one is."""
    asked_at = ts_now()
    try:
        answer = slack_read(
            team_id=scope["team_id"],
            method=REPLIES,
            call=client.conversations_replies,
            channel=ref.channel,
            ts=ref.root_ts,
            limit=slack_read_page(),
        )
    except SlackReadLater as exc:
        root_ts = slack_thread_root_known(**scope, ts=ref.ts, thread_ts=ref.thread_ts)
        if root_ts is not None:
            return root_ts, None
        raise ThreadNotReadable(
            f"Slack thread {where} cannot be read now: Calvin does not hold this thread, and {exc};"
            " read_thread again then"
        ) from None
    except Exception as exc:
        raise _unreadable(exc, doing="conversations.replies", where=where) from None
    messages = answer.get("messages") or []
    if not messages:
        raise ThreadNotReadable(NOT_FOUND.format(where=where))
    root_ts = messages[0].get("thread_ts") or messages[0]["ts"]
    return root_ts, _Page(messages=messages, has_more=bool(answer.get("has_more")), asked_at=asked_at)


def _permalink(client, *, channel: str, ts: str) -> str:
    try:
        return client.chat_getPermalink(channel=channel, message_ts=ts)["permalink"]
    except Exception:
        # Slack redirects this form to the team's own address.
        return f"https://slack.com/archives/{channel}/p{ts.replace('.', '')}"


# -- reading


@dataclass(frozen=True)
class _Fetch:
    """What one read asked of Slack: messages it gave, whether the thread came whole, or how long until a call."""

    given: int = 0
    whole: bool = False
    wait: float = 0.0


def _fetch_missing(client, history, *, recorded: bool, where: str) -> _Fetch:
    """One conversations.replies page of what Calvin lacks, if Slack's limit allows a call now: the
    messages after what it holds from the root (`known_through`), up to where it started
    recording when that is a message it holds (the rest came as events)."""
    kwargs = {"channel": history.channel_id, "ts": history.thread_ts, "limit": slack_read_page()}
    if history.known_through:
        kwargs["oldest"] = history.known_through
    latest = ""
    if recorded and history.messages.filter(ts=history.recording_since).exists():
        latest = kwargs["latest"] = history.recording_since
    asked_at = ts_now()
    try:
        answer = slack_read(team_id=history.team_id, method=REPLIES, call=client.conversations_replies, **kwargs)
    except SlackReadLater as exc:
        return _Fetch(wait=exc.retry_after or 0.0)
    except Exception as exc:
        raise _unreadable(exc, doing="conversations.replies", where=where) from None
    has_more = bool(answer.get("has_more"))
    given = slack_history_take_fetched(
        history=history, messages=answer.get("messages") or [], has_more=has_more, asked_at=asked_at, latest=latest
    )
    return _Fetch(
        given=given,
        whole=not has_more and not latest,
        wait=slack_read_wait(team_id=history.team_id, method=REPLIES),
    )


class _Authors:
    """Slack ids to names: the workspace's members first, then users.info (once per id)."""

    def __init__(self, *, client, workspace_id: int, bot):
        self.client = client
        self.workspace_id = workspace_id
        self.bot = bot
        self.known: dict[str, str] = {}

    def prime(self, user_ids: set[str]) -> None:
        members = Member.objects.filter(workspace_id=self.workspace_id, slack_user_id__in=user_ids).select_related(
            "user"
        )
        for member in members:
            if member.display_name:
                self.known[member.slack_user_id] = member.display_name

    def _user(self, user_id: str) -> str:
        if user_id not in self.known:
            try:
                user = self.client.users_info(user=user_id)["user"]
                profile = user.get("profile") or {}
                name = profile.get("display_name") or profile.get("real_name") or user.get("real_name")
                self.known[user_id] = name or user.get("name") or user_id
            except Exception:
                member = Member.objects.filter(workspace_id=self.workspace_id, slack_user_id=user_id).first()
                self.known[user_id] = (member.user.get_username() if member and member.user else "") or user_id
        return self.known[user_id]

    def of(self, message: dict) -> str:
        if self.bot and (message.get("bot_id") == self.bot.bot_id or message.get("user") == self.bot.bot_user_id):
            return "Calvin's app (agent)"
        if message.get("bot_id") or message.get("subtype") == "bot_message":
            name = (message.get("bot_profile") or {}).get("name") or message.get("username") or message.get("bot_id")
            return f"{name} (app)"
        user = message.get("user")
        return f"{self._user(user)} (person)" if user else "someone"


def _entry(message: dict, authors: _Authors, position: int | None = None) -> ThreadEntry:
    text = message.get("text") or ""
    files = [f.get("name") or f.get("title") or f.get("id") for f in message.get("files") or []]
    if files:
        text = " ".join(f"[file {name}]" for name in files) + (f" {text}" if text else "")
    at = datetime.fromtimestamp(float(message["ts"]), UTC)
    return ThreadEntry(id=message["ts"], author=authors.of(message), at=at, text=text, position=position)


def read_thread(*, target: ThreadTarget, latest: int) -> ThreadExcerpt:
    """The root message, the `latest` last replies (oldest first) and how many replies there are:
    from the history Calvin keeps, and from Slack only for what it lacks, within Slack's limit."""
    key = target.key
    where = _where(key["channel"], key["root_ts"])
    client, bot = _client(key["team_id"])
    if client is None:
        raise ThreadNotReadable(NOT_FOUND.format(where=where))
    scope = {"workspace_id": bot.workspace_id, "team_id": key["team_id"], "channel_id": key["channel"]}
    recorded = key.get("recorded", True)  # conversations whose messages Slack sends Calvin as events
    history = slack_history_for(**scope, thread_ts=key["root_ts"])
    whole = history is not None and recorded and history_whole(history)
    fetch = None
    if not whole:
        if history is None:  # from now on, this thread's events are kept too
            history = slack_history_start(**scope, thread_ts=key["root_ts"], since=read_since(key["root_ts"]))
        fetch = _fetch_missing(client, history, recorded=recorded, where=where)
        history.refresh_from_db()
        whole = fetch.whole or (recorded and history_whole(history))
    view = slack_history_view(history, latest=latest, whole=whole)
    fetched = key.get("fetched", 0) + (fetch.given if fetch is not None else 0)
    authors = _Authors(client=client, workspace_id=bot.workspace_id, bot=bot)
    shown = [m for m in [view.first, *(m for m, _ in view.replies)] if m]
    authors.prime({m["user"] for m in shown if m.get("user")})
    gap = view.missing != 0
    return ThreadExcerpt(
        first=_entry(view.first, authors) if view.first else None,
        replies=[_entry(m, authors, position=place if gap else None) for m, place in view.replies],
        replies_total=view.held + (view.missing or 0),
        partial="" if whole and view.first else _partial_note(view, fetch, fetched=fetched, team_id=key["team_id"]),
    )


def _partial_note(view, fetch: _Fetch | None, *, fetched: int, team_id: str) -> str:
    """Why what is shown is not the whole thread, and when Slack may be asked for more."""
    total = view.held + (view.missing or 0)
    holds = f"Calvin holds {'the first message and ' if view.first else ''}{view.held} of"
    holds += f" the thread's {total} replies" if view.missing is not None else " its replies"
    if fetched:
        holds += f" ({fetched} {'message' if fetched == 1 else 'messages'} fetched from Slack just now)"
    lacking = []  # (what, how many)
    if view.first is None:
        lacking.append(("the first message", 1))
    if view.missing:
        start = view.before_gap + 1
        span = f"reply {start}" if view.missing == 1 else f"replies {start} to {start + view.missing - 1}"
        lacking.append((span, view.missing))
    elif view.missing is None:
        lacking.append(("replies before those it holds (Slack has not said how many there are)", 2))
    if lacking:
        plural = len(lacking) > 1 or lacking[0][1] > 1
        missing = f"{' and '.join(what for what, _ in lacking)} {'are' if plural else 'is'} not held, so not shown"
    else:
        missing = "replies posted since Calvin last asked Slack may not be shown"
    wait = fetch.wait if fetch is not None else slack_read_wait(team_id=team_id, method=REPLIES)
    when = f"in {math.ceil(wait)} s" if wait > 0 else "now"
    return (
        f"{slack_read_rule(REPLIES)}: {holds}; {missing}. The next call to Slack is allowed {when}:"
        f" read_thread then fetches the next {slack_read_page()}."
    )


# -- posting


def _secret_in(text: str, *, tool_call_id: int) -> str | None:
    """The name of a secret of the calling session that `text` holds, or None (fails closed)."""
    from calvin.chat.slack.outbox import content_scanner

    scanner = content_scanner(thread=None, tool_call_id=tool_call_id)
    return scanner.find_in([text]) if scanner else None


def post_reply(*, target: ThreadTarget, text: str, tool_call_id: int, sender_agent_id: int | None) -> dict:
    """One reply inside the thread, queued in its channel's outbox; a retry finds its first one.
    Returns {"message_id", "url"}: the queued post and the thread's link."""
    from calvin.chat.slack.outbox import slack_post_enqueue
    from tools.models import ToolCall

    key = target.key
    post = SlackPost.objects.filter(tool_call_id=tool_call_id, kind=SlackPost.Kind.MESSAGE).order_by("id").first()
    if post is None:
        workspace_id = ToolCall.objects.filter(id=tool_call_id).values_list("session__workspace_id", flat=True).first()
        if not SlackInstallation.objects.filter(team_id=key["team_id"], workspace_id=workspace_id).exists():
            raise ChatPermanentError(
                "Calvin's Slack app is no longer installed in that Slack workspace for this Calvin workspace;"
                " nothing was posted"
            )
        text = mentions_neutralised(text)
        name = _secret_in(text, tool_call_id=tool_call_id)
        if name is not None:
            raise ChatPermanentError(
                f"the text contains the value of the secret {name} (plain or encoded); nothing was posted"
            )
        post = slack_post_enqueue(
            team_id=key["team_id"],
            channel_id=key["channel"],
            kind=SlackPost.Kind.MESSAGE,
            payload={"text": text},
            thread_ts=key["root_ts"],
            tool_call=tool_call_id,
        )
    # The reply is posted when Slack gives it a ts; post_thread waits for that (slack_post_id).
    return {"message_id": f"slack-post-{post.id}", "url": target.url, "slack_post_id": post.id}


def reply_permalink(*, thread_url: str, ts: str) -> str:
    """A reply's link, from its thread's permalink (…/archives/<channel>/p<root>?…) and its ts."""
    parsed = urlsplit(thread_url)
    parts = parsed.path.split("/")
    if len(parts) < 4 or parts[-3] != "archives" or not parts[-1].startswith("p"):
        return thread_url
    channel, root = parts[-2], parts[-1][1:]
    root_ts = parse_qs(parsed.query).get("thread_ts", [f"{root[:-6]}.{root[-6:]}"])[0]
    path = "/".join([*parts[:-1], "p" + ts.replace(".", "")])
    return urlunsplit((parsed.scheme, parsed.netloc, path, urlencode({"thread_ts": root_ts, "cid": channel}), ""))
