"""The live console: what the services announce, logged with a sequence number per stream and
pushed to the pages watching after commit.

Streams: `thread:<id>` (what a thread page shows: messages, and the header when the session, a
turn or its usage changes) and `workspace:<id>` (what the dashboard and the admin change lists
show: sessions, turns, tool calls, approvals, questions, hosts, usage). A page applies each seq
once; a push that was lost (the layer down for a moment, a worker killed after commit) is a gap
the page sees on the next push or reconnect, and it asks for exactly that from the log.
"""

import logging
from dataclasses import dataclass
from typing import NamedTuple

from django.db import connection
from django.template.loader import render_to_string

from calvin import events
from calvin.dashboard.events import group_send, group_send_quietly, message_event, thread_group
from calvin.dashboard.models import LiveEvent, LiveStream
from calvin.dashboard.numberer import StreamNumberer
from calvin.dashboard.numbering import live_streams_number
from calvin.dashboard.steps import step_words
from calvin.events import (
    AgentActivity,
    ApprovalChanged,
    Event,
    HostChanged,
    MessagePosted,
    PreviewsChanged,
    QuestionChanged,
    SessionChanged,
    ToolCallChanged,
    TurnChanged,
    UsageRecorded,
    on_commit_once,
    reacts_to,
    records,
)
from sessions.models import Message, Thread

log = logging.getLogger(__name__)

# One catch-up answer holds at most this much; a page that missed more reloads.
CATCH_UP_EVENTS = 200
CATCH_UP_MESSAGES = 100
CATCH_UP_BYTES = 512 * 1024

# Event type -> (kind in the log, on the thread's stream, on the workspace's stream).
KINDS: dict[type, tuple[str, bool, bool]] = {
    MessagePosted: ("message", True, False),
    SessionChanged: ("session", True, True),
    TurnChanged: ("turn", True, True),
    UsageRecorded: ("usage", True, True),
    ToolCallChanged: ("tool_call", False, True),
    ApprovalChanged: ("approval", False, True),
    QuestionChanged: ("question", False, True),
    HostChanged: ("host", False, True),
    # The page fetches its previews panel again: it holds forms (a CSRF token) and controls only
    # the session's owner and admins see, so it is rendered for the viewer, not pushed.
    PreviewsChanged: ("previews", True, False),
}
HEADER_KINDS = {"session", "turn", "usage"}


def thread_stream(thread_id: int) -> str:
    return f"thread:{thread_id}"


def workspace_stream(workspace_id: int) -> str:
    return f"workspace:{workspace_id}"


def workspace_group(workspace_id: int) -> str:
    return f"workspace.{workspace_id}"


def stream_group(stream: str) -> str:
    scope, _, number = stream.partition(":")
    return thread_group(int(number)) if scope == "thread" else workspace_group(int(number))


def live_stream_seq(stream: str) -> int:
    """The seq of the stream's latest committed event (0: none yet). Read it before rendering a
    page: whatever commits after the read has a higher seq, so the page catches it up."""
    return LiveStream.objects.filter(name=stream).values_list("last_seq", flat=True).first() or 0


def _payload(event: Event) -> dict:
    """Ids and statuses only: never rendered HTML, text the agent wrote, or anything secret."""
    shown = {}
    for name, value in vars(event).items():
        if name in ("workspace_id", "thread_id", "extra", "text"):
            continue
        if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 100):
            shown[name] = value
    return shown


def _streams(event: Event, on_thread: bool, on_workspace: bool) -> list[str]:
    streams = [workspace_stream(event.workspace_id)] if on_workspace else []
    thread_id = getattr(event, "thread_id", None)
    if on_thread and thread_id:
        streams.append(thread_stream(thread_id))
    return streams


class LiveRow(NamedTuple):
    stream: str
    kind: str
    payload: dict


def live_rows(event: Event) -> list[LiveRow]:
    """The log rows `event` makes, one per stream it is on."""
    kind, on_thread, on_workspace = KINDS[type(event)]
    payload = _payload(event)
    return [LiveRow(stream, kind, payload) for stream in _streams(event, on_thread, on_workspace)]


@records(*KINDS)
def live_log(event: Event) -> None:
    """Inside the announcing transaction: the event exists exactly when the change does."""
    for row in live_rows(event):
        LiveEvent.objects.create(stream=row.stream, seq=None, kind=row.kind, payload=row.payload)
        _number_and_push_on_commit(row.stream)


def live_log_many(events: list[Event]) -> None:
    """live_log for a batch of events: their rows in one statement."""
    rows = [row for event in events for row in live_rows(event)]
    LiveEvent.objects.bulk_create(
        [LiveEvent(stream=row.stream, seq=None, kind=row.kind, payload=row.payload) for row in rows]
    )
    live_rows_written(rows)


live_log.many = live_log_many


def live_rows_written(rows: list[LiveRow]) -> None:
    """Rows of live_rows that a statement of the caller's wrote itself (a tool call's, with its
    row: tools/limits.py): numbered and pushed once that commits, as live_log's are."""
    for stream in dict.fromkeys(row.stream for row in rows):
        _number_and_push_on_commit(stream)


events.LIVE_ROWS = events.RowsPort(table=LiveEvent._meta.db_table, rows=live_rows, written=live_rows_written)


def _number_and_push_on_commit(stream: str) -> None:
    """Once per stream per transaction, however many events it announced there: on PostgreSQL by
    the process's numbering thread, so the caller does not wait for it (calvin/dashboard/numberer.py);
    on SQLite (embedded `up`, one writer at a time) by the caller."""
    if connection.vendor == "postgresql":
        on_commit_once(("live", stream), lambda: NUMBERER.request(stream))
        return

    def number_and_push():
        try:
            _number_and_push([stream])
        except Exception:  # the change is committed; the next caller for the stream numbers it
            log.warning("live events of a %s stream could not be numbered", stream.split(":")[0], exc_info=True)

    on_commit_once(("live", stream), number_and_push)


def _number_and_push(streams: list[str]) -> None:
    frames = live_streams_number(streams)
    messages = _frames_messages(frames)
    for frame in frames:
        _push(frame, messages)


NUMBERER = StreamNumberer(_number_and_push)


def _push(frame: dict, messages: dict | None = None) -> None:
    """After numbering. A failed push loses nothing: the page sees the gap and catches up from the log."""
    try:
        group_send(stream_group(frame["stream"]), {"type": "live.event", "frame": page_frame(frame, messages)})
    except Exception:
        log.warning("live push of %s #%s failed", frame["stream"].split(":")[0], frame["seq"], exc_info=True)


def live_stream_settle(stream: str) -> int:
    """Number (and push) what an announcer left unnumbered, then the stream's latest seq."""
    if LiveEvent.objects.filter(stream=stream, seq__isnull=True).exists():  # seldom: no lock, no write
        _number_and_push([stream])
    return live_stream_seq(stream)


def header_html(thread: Thread) -> str:
    try:
        from calvin.dashboard.selectors import thread_header_context
    except ImportError:  # the thread page's part brings it; until then the thread alone
        context = {"thread": thread}
    else:
        context = thread_header_context(thread)
    return render_to_string("chat/_thread_header.html", {**context, "live": True})


def _frames_messages(frames: list[dict]) -> dict[int, Message]:
    """The messages a pass's thread frames show, in two queries however many: a new message has
    no reactions to read (a reaction's own event, later, shows it re-rendered)."""
    wanted = {True: [], False: []}
    for frame in frames:
        if frame["kind"] == "message" and frame["stream"].startswith("thread:"):
            wanted[bool(frame["payload"].get("replace"))].append(frame["payload"].get("message_id"))
    found = {}
    for replace in (False, True):  # one new and edited in the same pass: read with its reactions
        if wanted[replace]:
            found.update(_shown_messages(wanted[replace], reactions=replace))
    return found


def page_frame(frame: dict, messages: dict | None = None) -> dict:
    """What a page gets for one logged event, rendered now from the database (`messages`: those
    read for the frame already)."""
    stream, seq, kind, payload = frame["stream"], frame["seq"], frame["kind"], frame["payload"]
    if stream.startswith("workspace:"):
        return {"stream": stream, "seq": seq, "event": kind, **payload}
    if kind == "message":
        replace = bool(payload.get("replace"))
        if messages is None:
            messages = _frames_messages([frame])
        message = messages.get(payload.get("message_id"))
        if message is None:
            return {"seq": seq, "event": kind}  # not shown (yet): a queued send_message
        shown = message_event(message, replace, list(message.reactions.all()) if replace else [])
        shown.pop("type")
        return {**shown, "seq": seq, "event": kind}
    if kind in HEADER_KINDS:
        thread = Thread.objects.select_related("workspace", "session").filter(id=_number(stream)).first()
        return {"seq": seq, "event": kind, "header": header_html(thread) if thread else ""}
    return {"seq": seq, "event": kind}


def _number(stream: str) -> int:
    return int(stream.partition(":")[2])


def _shown_messages(ids, *, reactions: bool = True) -> dict[int, Message]:
    query = Message.transcript().filter(id__in=[i for i in ids if isinstance(i, int)])
    query = query.select_related("member", "sender_agent")
    return {m.id: m for m in (query.prefetch_related("reactions") if reactions else query)}


@dataclass
class CatchUp:
    frames: list[dict]
    reload: bool = False


def live_catch_up(stream: str, since: int, until: int | None = None) -> CatchUp:
    """The events after `since` (up to `until`), or reload when they were forgotten or are too many.

    A thread's message renders once, at its last event in the range (as it is now); earlier
    events of it, and all but the last header change, go as bare seqs the page just counts.
    """
    live_stream_settle(stream)
    query = LiveEvent.objects.filter(stream=stream, seq__gt=since).order_by("seq")
    if until is not None:
        query = query.filter(seq__lte=until)
    events = list(query.values("seq", "kind", "payload")[: CATCH_UP_EVENTS + 1])
    last = live_stream_seq(stream)
    expected = (min(until, last) if until is not None else last) - since
    if len(events) > CATCH_UP_EVENTS or (expected > 0 and (not events or events[0]["seq"] != since + 1)):
        return CatchUp([], reload=True)  # too many, or forgotten by the retention sweep
    if stream.startswith("workspace:"):
        return CatchUp([{"stream": stream, "seq": e["seq"], "event": e["kind"], **e["payload"]} for e in events])
    return _thread_catch_up(stream, events)


def _thread_catch_up(stream: str, events: list[dict]) -> CatchUp:
    message_ids = [e["payload"].get("message_id") for e in events if e["kind"] == "message"]
    if len(set(message_ids)) > CATCH_UP_MESSAGES:
        return CatchUp([], reload=True)
    messages = _shown_messages(message_ids)
    last_of = {}  # ("message", id) or "header" -> the seq that carries it
    for event in events:
        if event["kind"] == "message":
            last_of[("message", event["payload"].get("message_id"))] = event["seq"]
        elif event["kind"] in HEADER_KINDS:
            last_of["header"] = event["seq"]
    # A message the range also posted may be new to the page: "replace" only when changed since.
    replaced = {e["payload"].get("message_id") for e in events if e["payload"].get("replace")}
    frames, size, header = [], 0, None
    for event in events:
        seq, kind = event["seq"], event["kind"]
        frame = {"seq": seq, "event": kind}
        message = messages.get(event["payload"].get("message_id")) if kind == "message" else None
        if message is not None and last_of[("message", message.id)] == seq:
            frame.update(message_event(message, message.id in replaced, list(message.reactions.all())), seq=seq)
            size += len(frame["html"].encode())
        elif kind in HEADER_KINDS and last_of["header"] == seq:
            if header is None:
                thread = Thread.objects.select_related("workspace", "session").get(id=_number(stream))
                header = header_html(thread)
            frame["header"] = header
            size += len(header.encode())
        frame.pop("type", None)
        frames.append(frame)
        if size > CATCH_UP_BYTES:
            return CatchUp([], reload=True)
    return CatchUp(frames)


def live_events_forget(*, before) -> int:
    """The retention sweep: events older than `before` go (the counters stay, so seqs never restart)."""
    deleted, _ = LiveEvent.objects.filter(created_at__lt=before).delete()
    return deleted


@reacts_to(AgentActivity)
def activity_push(event: AgentActivity) -> None:
    """What the agent does right now: pushed, not logged (it is stale by the next step, and the
    header, which is logged, says whether a turn runs)."""
    group_send_quietly(
        thread_group(event.thread_id),
        {
            "type": "thread.activity",
            "kind": event.kind,
            "text": event.text,
            "name": event.name,
            "step": step_words(event.kind, event.name, event.text),
        },
    )
