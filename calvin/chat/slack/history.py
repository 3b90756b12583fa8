"""The history of the Slack threads Calvin takes part in, so read_thread need not ask Slack.

Slack lets an app outside its Marketplace call conversations.replies about once a minute, 15
messages a call (calvin.chat.slack.read_limits). So what Calvin sees of a thread is kept as it
sees it (models SlackThreadHistory and SlackHistoryMessage), scoped to the workspace:

- every message event of a thread it keeps (a session's thread, one it posted into or read):
  new messages of any author (people, other apps, Calvin's own, people of another
  organisation), edits and deletions;
- every post it makes, from what Slack answered the outbox;
- what conversations.replies gave when it had to ask.

A history is whole when Calvin recorded the thread from its root on (a session started by a
top-level mention or a DM, a spawned thread), or when what Slack gave reaches the moment it
started recording (a thread it joined late, or read). Otherwise the part between is missing,
and read_thread asks Slack for it, oldest first, one page a call.

Slack's ts are fixed-width ("1700000000.000100" until the year 2286), so they order as strings.
"""

import time
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from calvin.chat.models import SlackHistoryMessage, SlackInstallation, SlackThreadHistory
from calvin.chat.thread_refs import TS_RE
from sessions.models import Thread

Source = SlackHistoryMessage.Source
# Message subtypes that are a message of the thread as people see it (new ones; edits and
# deletions are message_changed and message_deleted). Others (channel_join...) are not in threads.
KEPT_SUBTYPES = {"", "file_share", "thread_broadcast", "me_message", "bot_message"}
# A history started by a read records from a little before it was made: Slack's clock and ours differ.
CLOCK_MARGIN_SECONDS = 10.0


def ts_now(offset: float = 0.0) -> str:
    """This moment (plus `offset` seconds) as a Slack ts."""
    return f"{time.time() + offset:.6f}"


def read_since(root: str) -> str:
    """Where a history started by a read records from: a little before now (Slack's clock and
    ours differ), and never at its root, which it did not see come (only events prove that)."""
    return max(ts_now(-CLOCK_MARGIN_SECONDS), f"{_key(root) + Decimal('0.000001'):.6f}", key=_key)


def _key(ts: str) -> Decimal:
    try:
        return Decimal(ts)
    except (InvalidOperation, TypeError):
        return Decimal(0)


def _is_ts(value) -> bool:
    return isinstance(value, str) and TS_RE.fullmatch(value) is not None


def history_whole(history: SlackThreadHistory) -> bool:
    """Whether Calvin holds every message of the thread (recorded from the root, or fetched up to where it recorded)."""
    if _key(history.recording_since) <= _key(history.thread_ts):
        return True
    return bool(history.known_through) and _key(history.known_through) >= _key(history.recording_since)


def _histories(*, workspace_id: int, team_id: str, channel_id: str):
    return SlackThreadHistory.objects.filter(workspace_id=workspace_id, team_id=team_id, channel_id=channel_id)


def slack_history_for(*, workspace_id: int, team_id: str, channel_id: str, thread_ts: str) -> SlackThreadHistory | None:
    histories = _histories(workspace_id=workspace_id, team_id=team_id, channel_id=channel_id)
    return histories.filter(thread_ts=thread_ts).first()


def slack_history_start(
    *, workspace_id: int, team_id: str, channel_id: str, thread_ts: str, since: str
) -> SlackThreadHistory:
    """The thread's history, made recording from `since` if Calvin kept none (two at once make one)."""
    SlackThreadHistory.objects.bulk_create(
        [
            SlackThreadHistory(
                workspace_id=workspace_id,
                team_id=team_id,
                channel_id=channel_id,
                thread_ts=thread_ts,
                recording_since=since,
            )
        ],
        ignore_conflicts=True,
    )
    return _histories(workspace_id=workspace_id, team_id=team_id, channel_id=channel_id).get(thread_ts=thread_ts)


def slack_thread_root_known(
    *, workspace_id: int, team_id: str, channel_id: str, ts: str, thread_ts: str = ""
) -> str | None:
    """The root of the thread that `ts` (or `thread_ts`) names, when Calvin knows it without asking
    Slack: a session's thread, a thread whose history it keeps, or a message of one."""
    histories = _histories(workspace_id=workspace_id, team_id=team_id, channel_id=channel_id)
    threads = Thread.objects.filter(
        workspace_id=workspace_id, channel_kind=Thread.ChannelKind.SLACK, channel_id=channel_id
    )
    for candidate in [t for t in (thread_ts, ts) if t]:
        if histories.filter(thread_ts=candidate).exists() or threads.filter(thread_ts=candidate).exists():
            return candidate
    return (
        SlackHistoryMessage.objects.filter(history__in=histories, ts=ts)
        .values_list("history__thread_ts", flat=True)
        .first()
    )


# -- what Calvin sees


def _row(history: SlackThreadHistory, message: dict, source: str) -> SlackHistoryMessage:
    files = [
        str(f.get("name") or f.get("title") or f.get("id") or "file")[:200]
        for f in message.get("files") or []
        if isinstance(f, dict)
    ]
    bot_name = (message.get("bot_profile") or {}).get("name") or message.get("username") or ""
    return SlackHistoryMessage(
        history=history,
        ts=message["ts"],
        user_id=str(message.get("user") or "")[:32],
        bot_id=str(message.get("bot_id") or "")[:32],
        bot_name=str(bot_name)[:200],
        text=str(message.get("text") or ""),
        files=files,
        source=source,
    )


def _store(history: SlackThreadHistory, messages: list[dict], *, source: str, replace: bool = False) -> int:
    """Keep the messages; `replace`: what Slack says now wins over what was kept (edits)."""
    rows = [_row(history, m, source) for m in messages if _is_ts(m.get("ts"))]
    if not rows:
        return 0
    if replace:
        SlackHistoryMessage.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["history", "ts"],
            update_fields=["user_id", "bot_id", "bot_name", "text", "files", "stored_at"],
        )
    else:  # an event and a post of the same message, or a mention's two events: the first stays
        SlackHistoryMessage.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _kept(
    *, workspace_id: int, team_id: str, channel_id: str, root: str, start_at: str = ""
) -> SlackThreadHistory | None:
    """The history of a thread Calvin keeps; with `start_at`, one is started for a session's thread."""
    history = slack_history_for(workspace_id=workspace_id, team_id=team_id, channel_id=channel_id, thread_ts=root)
    if history is not None or not start_at:
        return history
    session_thread = Thread.objects.filter(
        workspace_id=workspace_id, channel_kind=Thread.ChannelKind.SLACK, channel_id=channel_id, thread_ts=root
    ).exists()
    if not session_thread:
        return None
    return slack_history_start(
        workspace_id=workspace_id, team_id=team_id, channel_id=channel_id, thread_ts=root, since=start_at
    )


def slack_history_take_event(*, workspace_id: int, team_id: str, event: dict) -> None:
    """A message event (new, changed or deleted) into the history of its thread, if Calvin keeps that thread.

    Run after the event's session work, in its transaction: a mention that just started a
    session is its thread's first recorded message."""
    channel = event.get("channel") or ""
    subtype = event.get("subtype") or ""
    if not channel:
        return
    scope = {"workspace_id": workspace_id, "team_id": team_id, "channel_id": channel}
    if subtype == "message_changed":
        message = event.get("message") or {}
        root = message.get("thread_ts") or message.get("ts") or ""
        history = _kept(**scope, root=root)
        if history is not None:
            _store(history, [message], source=Source.EVENT, replace=True)
    elif subtype == "message_deleted":
        deleted = event.get("deleted_ts") or (event.get("previous_message") or {}).get("ts") or ""
        SlackHistoryMessage.objects.filter(history__in=_histories(**scope), ts=deleted).delete()
    elif subtype in KEPT_SUBTYPES and _is_ts(event.get("ts")):
        root = event.get("thread_ts") or event["ts"]
        history = _kept(**scope, root=root, start_at=event["ts"])
        if history is not None:
            _store(history, [event], source=Source.EVENT)


def slack_history_take_post(*, team_id: str, channel_id: str, thread_ts: str, ts: str, text: str) -> None:
    """A message Calvin posted (Slack answered its ts): a thread it posts into is one it takes part in."""
    installation = SlackInstallation.objects.filter(team_id=team_id).values("workspace_id", "bot_user_id", "bot_id")
    installation = installation.first()
    if installation is None or not _is_ts(ts):
        return
    history = slack_history_start(
        workspace_id=installation["workspace_id"],
        team_id=team_id,
        channel_id=channel_id,
        thread_ts=thread_ts or ts,  # a top-level post (spawn_thread's) is the root of its thread
        since=ts,
    )
    message = {"ts": ts, "user": installation["bot_user_id"], "bot_id": installation["bot_id"], "text": text}
    _store(history, [message], source=Source.POST)


def slack_history_take_edit(*, team_id: str, channel_id: str, ts: str, text: str) -> None:
    """A message Calvin edited (chat.update): its kept text follows."""
    SlackHistoryMessage.objects.filter(
        history__team_id=team_id,
        history__channel_id=channel_id,
        history__workspace__slack_installation__team_id=team_id,
        ts=ts,
    ).update(text=text)


def slack_history_take_fetched(
    *, history: SlackThreadHistory, messages: list[dict], has_more: bool, asked_at: str, latest: str = ""
) -> int:
    """One conversations.replies page that ran on from what Calvin held (the root, or `known_through`).

    `asked_at`: when it was asked (a ts); `latest`: the bound it was asked with, if any. Returns
    how many messages of the thread it gave."""
    root = history.thread_ts
    mine = [m for m in messages if isinstance(m, dict) and (m.get("thread_ts") or m.get("ts")) == root]
    _store(history, mine, source=Source.SLACK, replace=True)
    # Everything up to here is now held: the last message given, or, on the last page, all
    # Slack had before the bound (or before it was asked).
    reached = [m["ts"] for m in mine if _is_ts(m.get("ts"))]
    if not has_more:
        reached.append(latest or asked_at)
    if history.known_through:
        reached.append(history.known_through)
    through = max(reached, key=_key, default="")
    changes = {"known_through": through}
    first = next((m for m in mine if m.get("ts") == root), None)
    if first is not None and isinstance(first.get("reply_count"), int):
        changes.update(slack_reply_count=first["reply_count"], counted_at=asked_at)
    elif first is not None and not has_more and not history.known_through:
        changes.update(slack_reply_count=len(mine) - 1, counted_at=asked_at)  # the whole thread came
    # Compare-and-set: a concurrent page (a claim that expired mid-call) never moves it back.
    SlackThreadHistory.objects.filter(id=history.id, known_through=history.known_through).update(**changes)
    return len(mine)


# -- what read_thread shows


@dataclass(frozen=True)
class HistoryView:
    """A thread as Calvin holds it: messages as Slack-shaped dicts (ts, user, bot_id, username, text, files)."""

    first: dict | None  # the root, when held
    replies: list[tuple[dict, int]]  # the latest replies held, oldest first, each with its place among all replies
    held: int  # replies held
    missing: int | None  # replies not held (None: unknown, Slack never counted them)
    before_gap: int  # replies held before those not held (the ones Slack gave from the root on)


def _message(row: dict) -> dict:
    return {
        "ts": row["ts"],
        "user": row["user_id"],
        "bot_id": row["bot_id"],
        "username": row["bot_name"],
        "text": row["text"],
        "files": [{"name": name} for name in row["files"] or []],
    }


FIELDS = ("ts", "user_id", "bot_id", "bot_name", "text", "files")


def slack_history_view(history: SlackThreadHistory, *, latest: int, whole: bool) -> HistoryView:
    """The root and the `latest` last replies Calvin holds, and how many it lacks (0 when `whole`)."""
    messages = SlackHistoryMessage.objects.filter(history=history)
    first = messages.filter(ts=history.thread_ts).values(*FIELDS).first()
    replies = messages.exclude(ts=history.thread_ts)
    held = replies.count()
    if whole:
        missing = 0
    elif history.slack_reply_count is None:
        missing = None
    else:
        counted = replies.filter(ts__lte=history.counted_at).count()
        missing = max(history.slack_reply_count - counted, 0)
    rows = list(replies.order_by("-ts").values(*FIELDS)[:latest])[::-1] if latest > 0 else []
    # The replies it lacks come right after what Slack gave (`known_through`): those held after them move down.
    start = held - len(rows)
    placed = []
    for i, row in enumerate(rows, 1):
        place = start + i
        if missing and (not history.known_through or _key(row["ts"]) > _key(history.known_through)):
            place += missing
        placed.append((_message(row), place))
    before_gap = replies.filter(ts__lte=history.known_through).count() if history.known_through else 0
    return HistoryView(
        first=_message(first) if first else None, replies=placed, held=held, missing=missing, before_gap=before_gap
    )
