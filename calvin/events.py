"""What happened, announced by the services that made it happen; the rest of Calvin subscribes.

A service calls `announce(SomethingHappened(...))` inside its transaction. Subscribers come in
two kinds:

- recorders run at once, inside the announcing transaction (the live log writes its sequenced
  row there, so an event exists exactly when the change it describes does);
- reactions run once the transaction commits (a push to open pages, a chat card refreshed, a
  task enqueued). A failing reaction is logged and never undoes or blocks the change.

So a service never imports the apps that react to it (no service calls another app's Celery
task): the arrows run one way, tools → calvin.chat's adapters → approvals → secrets_vault →
sessions → workspaces (tests/test_layering.py writes the layers down and enforces them), and
an upper app subscribes from its AppConfig.ready(): calvin/dashboard/live.py (pages),
calvin/chat/reactions.py (the Slack outbox), approvals/reactions.py (cards),
tools/reactions.py (approved effects, per-runner counters, secret-request cards),
sessions/reactions.py (a resumed agent's notices, AGENTS.md pushes).
"""

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Event:
    workspace_id: int


@dataclass(frozen=True, kw_only=True)
class ThreadEvent(Event):
    thread_id: int


@dataclass(frozen=True, kw_only=True)
class MessagePosted(ThreadEvent):
    """A message was stored in a thread (`replace`: one already shown changed: edited, reacted to, decided).

    `to_platform`: Calvin's own message (a reply, a notice, a person's words written on the thread
    page) that the thread's platform must show too: calvin.chat records it in the Slack outbox."""

    message_id: int
    replace: bool = False
    to_platform: bool = False


@dataclass(frozen=True, kw_only=True)
class SessionChanged(ThreadEvent):
    """A session's state, host or settings changed (queued, running, idle, stopped, …)."""

    session_id: int
    status: str = ""


@dataclass(frozen=True, kw_only=True)
class PreviewsChanged(ThreadEvent):
    """A session's live previews changed: one made, moved to another port, limited, or ended."""

    session_id: int


@dataclass(frozen=True, kw_only=True)
class SessionStopped(ThreadEvent):
    """A person (or a cap) stopped a session: its agent's processes end (its previews with them)."""

    session_id: int


@dataclass(frozen=True, kw_only=True)
class TurnChanged(ThreadEvent):
    """A turn was queued, claimed by a host, or finished (`status` is the turn's new status)."""

    session_id: int
    turn_id: int
    status: str


@dataclass(frozen=True, kw_only=True)
class RunnerStarted(ThreadEvent):
    """A session's runner started a new generation (a new token; per-runner counts start again)."""

    session_id: int
    runner_id: int
    generation: int


@dataclass(frozen=True, kw_only=True)
class AgentActivity(ThreadEvent):
    """What the agent does right now, from the provider's stream (not recorded: it is gone by the next step)."""

    session_id: int
    kind: str
    text: str = ""
    name: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCallChanged(ThreadEvent):
    """A tool call was recorded, or its effect applied or failed."""

    session_id: int
    tool_call_id: int
    tool: str
    status: str


@dataclass(frozen=True, kw_only=True)
class ApprovalChanged(ThreadEvent):
    """An approval was asked for, or decided, applied, failed or expired (`status`: its new one).

    `card`: what its card needs: "post" (a new approval), "refresh" (it changed), "stale" (nothing
    changed, but a card pressed was out of date: render it again)."""

    session_id: int = 0
    approval_id: int
    tool_call_id: int = 0
    status: str
    card: str = ""


@dataclass(frozen=True, kw_only=True)
class QuestionChanged(ThreadEvent):
    """An ask_user_question was asked, answered or closed (expired, its call gone)."""

    session_id: int = 0
    question_id: int
    tool_call_id: int = 0
    status: str


@dataclass(frozen=True, kw_only=True)
class SecretRequestChanged(ThreadEvent):
    """A request_secret was answered (the value set from its private form); its card is refreshed."""

    session_id: int
    request_id: int
    status: str


@dataclass(frozen=True, kw_only=True)
class HostChanged(Event):
    """A host connected, disconnected, was revoked, or its load changed (workspace_id 0: a shared host)."""

    host_id: int
    state: str = ""


@dataclass(frozen=True, kw_only=True)
class AgentChanged(Event):
    """An operator paused or resumed an agent (`by`: who, as the thread is told). On a resume,
    `told_thread_ids`: the threads that were told it was paused; `turns_waiting`: it has queued turns."""

    agent_id: int
    change: str
    by: str = ""
    told_thread_ids: tuple[int, ...] = ()
    turns_waiting: bool = False


@dataclass(frozen=True, kw_only=True)
class UsageRecorded(ThreadEvent):
    """A finished turn's usage (tokens, cost, agent seconds) was recorded."""

    session_id: int
    turn_id: int
    cost_usd: float = 0.0
    extra: dict = field(default_factory=dict)


Subscriber = Callable[[Event], None]
_recorders: dict[type, list[Subscriber]] = defaultdict(list)
_reactions: dict[type, list[Subscriber]] = defaultdict(list)


@dataclass(frozen=True)
class RowsPort:
    """The live log's rows for an event, for an announcer whose own statement writes them with
    its change (a tool call's insert, tools/limits.py: one round trip, one commit), and what
    follows once they are written. The console (calvin/dashboard/live.py) fills it as it loads."""

    table: str  # where they go: (stream, seq, kind, payload, created_at), seq NULL until numbered
    rows: Callable[[Event], list]  # (stream, kind, payload) each
    written: Callable[[list], None]


LIVE_ROWS: RowsPort | None = None


def _subscribe(table: dict, event_types: tuple[type, ...]):
    def register(function: Subscriber) -> Subscriber:
        for event_type in event_types:
            if function not in table[event_type]:
                table[event_type].append(function)
        return function

    return register


def records(*event_types: type):
    """Decorator: run inside the announcing transaction (may write; an error rolls the change back)."""
    return _subscribe(_recorders, event_types)


def reacts_to(*event_types: type):
    """Decorator: run after the announcing transaction commits (an error is logged, nothing more)."""
    return _subscribe(_reactions, event_types)


def _matching(table: dict, event: Event) -> list[Subscriber]:
    found = []
    for event_type in type(event).__mro__:
        found.extend(table.get(event_type, ()))
    return found


def _react(function: Subscriber, event: Event) -> None:
    try:
        function(event)
    except Exception:
        log.warning("%s failed on %s", function.__qualname__, type(event).__name__, exc_info=True)


def announce(event: Event) -> None:
    for recorder in _matching(_recorders, event):
        recorder(event)
    for reaction in _matching(_reactions, event):
        transaction.on_commit(lambda reaction=reaction: _react(reaction, event))


def announce_many(events: list[Event]) -> None:
    """announce() each of `events` (one transaction's changes), giving a recorder that has a
    batch form (`recorder.many`, called with the recorder's events in order) all of them at
    once: the live log writes a batch's rows in one statement (tools/effects_batch.py)."""
    batches: dict[Subscriber, list[Event]] = {}
    for event in events:
        for recorder in _matching(_recorders, event):
            batches.setdefault(recorder, []).append(event)
    for recorder, batch in batches.items():
        many = getattr(recorder, "many", None)
        if many is not None:
            many(batch)
        else:
            for event in batch:
                recorder(event)
    for event in events:
        for reaction in _matching(_reactions, event):
            transaction.on_commit(lambda reaction=reaction, event=event: _react(reaction, event))


def on_commit_once(key: tuple, callback: Callable[[], None]) -> None:
    """`callback` after this transaction commits, once however often it is asked for with `key`
    (a repository import of 500 rows pushes AGENTS.md once; a stream's events are numbered once).
    Django drops the callbacks of a rolled-back savepoint, so one found queued here will run."""
    connection = transaction.get_connection()
    if connection.in_atomic_block:
        for _, queued, *_ in connection.run_on_commit:
            if getattr(queued, "once_key", None) == key and not queued.ran:
                return

    def run():
        run.ran = True  # tests run callbacks inside the transaction: a later request needs its own
        callback()

    run.once_key, run.ran = key, False
    transaction.on_commit(run)
