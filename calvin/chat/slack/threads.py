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

Reading: `conversations.replies` of the thread's root (a reply's ts finds its root), the first
message, the latest replies and how many there are; authors named from the workspace's members
(their Slack user id) or, for others, `users.info`.

Posting: `post_reply` enqueues one reply in the channel's ordered outbox
(calvin.chat.slack.outbox.slack_post_enqueue) inside the thread (thread_ts = the root),
within the effect's transaction; a worker posts it, once and in order. Its text has its
channel-wide mentions made inert and is checked against the calling session's secrets again.
"""

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
from calvin.chat.slack.installations import bot_for_team
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
# Replies fetched per page, and pages at most (a thread this long is counted by its root's reply_count).
PAGE = 200
MAX_PAGES = 25


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
        error = slack_error(exc, doing=doing)
        code = _error_code(exc)
        if code in MISSING:
            raise ThreadNotReadable(NOT_FOUND.format(where=where)) from None
        if isinstance(error, ChatTemporaryError):
            raise ThreadNotReadable(
                f"Slack thread {where} cannot be read now: Slack did not answer {doing} ({error}); try again later"
            ) from None
        if code == "missing_scope":
            raise ThreadNotReadable(
                f"Slack thread {where} cannot be read from this session: Calvin's Slack app lacks the permission"
                f" {doing} needs (missing_scope); a workspace admin can reinstall the app with it"
            ) from None
        if isinstance(error, ChatPermanentError):
            raise ThreadNotReadable(f"Slack thread {where} cannot be read: {error}") from None
        raise


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
    # The thread's root: a reply's ts finds its thread, whose first message is the root.
    found = _ask(
        "conversations.replies", client.conversations_replies, where=asked, channel=ref.channel, ts=ref.root_ts, limit=1
    )
    messages = found.get("messages") or []
    if not messages:
        raise ThreadNotReadable(NOT_FOUND.format(where=asked))
    root_ts = messages[0].get("thread_ts") or messages[0]["ts"]
    where = _where(ref.channel, root_ts)
    reason = _unseen_because(client=client, session=session, channel_id=ref.channel, info=info, where=where)
    if reason:
        raise ThreadNotReadable(f"Slack thread {where} cannot be read from this session: {reason}")
    own = session.thread
    label = f"Slack thread {where}" + (f" (#{info['name']})" if info.get("name") else "")
    return ThreadTarget(
        channel_kind=SLACK,
        url=_permalink(client, channel=ref.channel, ts=root_ts),
        label=label,
        key={"team_id": team_id, "channel": ref.channel, "root_ts": root_ts},
        own=own.channel_kind == SLACK and own.channel_id == ref.channel and own.thread_ts == root_ts,
    )


def _permalink(client, *, channel: str, ts: str) -> str:
    try:
        return client.chat_getPermalink(channel=channel, message_ts=ts)["permalink"]
    except Exception:
        # Slack redirects this form to the team's own address.
        return f"https://slack.com/archives/{channel}/p{ts.replace('.', '')}"


# -- reading


def _thread_messages(client, *, channel: str, root_ts: str, where: str) -> tuple[list[dict], int | None]:
    """Every message of the thread, oldest first (bounded), and the root's reply_count if Slack gave it."""
    messages: list[dict] = []
    cursor = None
    for _ in range(MAX_PAGES):
        kwargs = {"channel": channel, "ts": root_ts, "limit": PAGE}
        if cursor:
            kwargs["cursor"] = cursor
        answer = _ask("conversations.replies", client.conversations_replies, where=where, **kwargs)
        page = answer.get("messages") or []
        # Slack repeats the root at the top of every page.
        messages += [m for m in page if not (messages and m.get("ts") == root_ts)]
        cursor = (answer.get("response_metadata") or {}).get("next_cursor")
        if not cursor or not answer.get("has_more", True):
            break
    reply_count = messages[0].get("reply_count") if messages else None
    return messages, reply_count if isinstance(reply_count, int) else None


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


def _entry(message: dict, authors: _Authors) -> ThreadEntry:
    text = message.get("text") or ""
    files = [f.get("name") or f.get("title") or f.get("id") for f in message.get("files") or []]
    if files:
        text = " ".join(f"[file {name}]" for name in files) + (f" {text}" if text else "")
    at = datetime.fromtimestamp(float(message["ts"]), UTC)
    return ThreadEntry(id=message["ts"], author=authors.of(message), at=at, text=text)


def read_thread(*, target: ThreadTarget, latest: int) -> ThreadExcerpt:
    """The root message, the `latest` last replies (oldest first) and how many replies there are."""
    key = target.key
    where = _where(key["channel"], key["root_ts"])
    client, bot = _client(key["team_id"])
    if client is None:
        raise ThreadNotReadable(NOT_FOUND.format(where=where))
    messages, reply_count = _thread_messages(client, channel=key["channel"], root_ts=key["root_ts"], where=where)
    if not messages:
        return ThreadExcerpt(first=None, replies=[], replies_total=0)
    first, replies = messages[0], messages[1:]
    total = max(reply_count or 0, len(replies))
    shown = replies[-latest:] if latest > 0 else []
    authors = _Authors(client=client, workspace_id=bot.workspace_id, bot=bot)
    authors.prime({m["user"] for m in [first, *shown] if m.get("user")})
    return ThreadExcerpt(first=_entry(first, authors), replies=[_entry(m, authors) for m in shown], replies_total=total)


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
