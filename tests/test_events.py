"""Each service announces its event exactly when its change commits (calvin/events.py).

A reaction registered here sees the event once the service's transaction commits, not while
it is still open, and never when it rolls back; a reaction that fails is logged and undoes
nothing. Real PostgreSQL transactions (transaction=True), no worker needed.
"""

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from approvals.models import PendingApproval
from approvals.services import approval_expire
from calvin.events import (
    AgentActivity,
    ApprovalChanged,
    Event,
    HostChanged,
    MessagePosted,
    QuestionChanged,
    SessionChanged,
    ToolCallChanged,
    TurnChanged,
    _reactions,
    reacts_to,
)
from calvin.workspaces.models import Member
from sessions.hosts import host_create, host_register
from sessions.models import Host, Message, Session, Turn
from sessions.scheduling import turns_claim
from sessions.services import message_post_by_person, session_start, system_notice_post
from sessions.turns import turn_event
from tools.effects import tool_call_fail
from tools.models import Question, ToolCall
from tools.services.questions import question_expire

pytestmark = pytest.mark.django_db(transaction=True)


class RolledBack(Exception):
    pass


@pytest.fixture
def seen():
    """Every event any service announces, as reactions see them (after commit)."""
    got: list[Event] = []

    def reaction(event):
        got.append(event)

    reacts_to(Event)(reaction)
    yield got
    _reactions[Event].remove(reaction)


@pytest.fixture
def session(workspace) -> Session:
    member = Member.objects.get(workspace=workspace)
    return session_start(workspace=workspace, owner=member, title="events")


@dataclass
class Case:
    event_type: type
    change: object  # (session) -> what the service returned
    stored: object  # (session, returned) -> whether the change is in the database
    fields: dict


def _running_turn(session: Session) -> tuple[int, int]:
    """A host that registered and claimed the session's turn (no daemon: the services it calls)."""
    host, _ = host_create(name="events-host", workspace=session.workspace)
    host_register(
        host_id=host.id, channel_name="events-channel", capacity=1, version="t", sandbox="none", running=[], runners=[]
    )
    message_post_by_person(thread=session.thread, member=session.owner, text="go")
    assert turns_claim(host_id=host.id)
    return host.id, Turn.objects.get(session=session, status=Turn.Status.RUNNING).id


def _applying_call(session: Session) -> ToolCall:
    return ToolCall.objects.create(
        session=session, server="nanoclaw", tool="send_message", status=ToolCall.Status.APPLYING, attempts=1
    )


def _pending_approval(session: Session) -> PendingApproval:
    call = ToolCall.objects.create(
        session=session, server="nanoclaw", tool="install_packages", status=ToolCall.Status.AWAITING_APPROVAL
    )
    return PendingApproval.objects.create(
        session=session,
        tool_call=call,
        kind="install_packages",
        summary="install jq",
        details={},
        expires_at=timezone.now() - timedelta(seconds=1),
    )


def _open_question(session: Session) -> Question:
    call = ToolCall.objects.create(session=session, server="nanoclaw", tool="ask_user_question", payload={})
    options = [{"label": "Yes", "selectedLabel": "Yes", "value": "yes"}]
    return Question.objects.create(
        tool_call=call, title="Ship?", text="Ship it?", options=options, expires_at=timezone.now()
    )


CASES = {
    "message posted": Case(
        MessagePosted,
        lambda s, ready: system_notice_post(thread_id=s.thread_id, text="a notice"),
        lambda s, message: Message.objects.filter(id=message.id).exists(),
        {"to_platform": True},
    ),
    "session changed": Case(
        SessionChanged,
        lambda s, ready: session_start(workspace=s.workspace, owner=s.owner, title="another"),
        lambda s, new: Session.objects.filter(id=new.id).exists(),
        {"status": "queued"},
    ),
    "turn changed": Case(
        TurnChanged,
        lambda s, ready: message_post_by_person(thread=s.thread, member=s.owner, text="hello"),
        lambda s, message: Turn.objects.filter(prompt_id=message.id, status="queued").exists(),
        {"status": "queued"},
    ),
    "agent activity": Case(
        AgentActivity,
        lambda s, ready: turn_event(host_id=ready[0], turn_id=ready[1], event={"kind": "error", "text": "it broke"}),
        lambda s, _: Message.objects.filter(thread_id=s.thread_id, text="it broke").exists(),
        {"kind": "error", "text": "it broke"},
    ),
    "tool call changed": Case(
        ToolCallChanged,
        lambda s, call: tool_call_fail(tool_call_id=call.id, error="the platform said no"),
        lambda s, _: ToolCall.objects.filter(session=s, status="failed").exists(),
        {"status": "failed", "tool": "send_message"},
    ),
    "approval changed": Case(
        ApprovalChanged,
        lambda s, approval: approval_expire(approval_id=approval.id),
        lambda s, _: PendingApproval.objects.filter(session=s, status="expired").exists(),
        {"status": "expired", "card": "refresh"},
    ),
    "question changed": Case(
        QuestionChanged,
        lambda s, question: question_expire(question_id=question.id, note="closed"),
        lambda s, _: Question.objects.filter(tool_call__session=s, status="expired").exists(),
        {"status": "expired"},
    ),
    "host changed": Case(
        HostChanged,
        lambda s, ready: host_create(name="new-host", workspace=s.workspace),
        lambda s, made: Host.objects.filter(id=made[0].id).exists(),
        {"state": "created"},
    ),
}
READY = {
    "agent activity": _running_turn,
    "tool call changed": _applying_call,
    "approval changed": _pending_approval,
    "question changed": _open_question,
}


def _prepared(name: str, session: Session):
    return READY[name](session) if name in READY else None


def _of(case: Case, events: list[Event]) -> list[Event]:
    return [e for e in events if type(e) is case.event_type and all(getattr(e, k) == v for k, v in case.fields.items())]


@pytest.mark.parametrize("name", CASES)
def test_announced_once_the_change_commits(name, session, seen):
    case = CASES[name]
    ready = _prepared(name, session)
    seen.clear()
    with transaction.atomic():
        returned = case.change(session, ready)
        assert not _of(case, seen), "a reaction ran before the change committed"
    assert case.stored(session, returned)
    events = _of(case, seen)
    assert events, f"no {case.event_type.__name__} after commit; seen: {seen}"
    assert all(e.workspace_id == session.workspace_id for e in events)
    if hasattr(events[0], "thread_id") and name not in ("session changed", "host changed"):
        assert all(e.thread_id == session.thread_id for e in events)


@pytest.mark.parametrize("name", CASES)
def test_not_announced_when_the_change_rolls_back(name, session, seen):
    case = CASES[name]
    ready = _prepared(name, session)
    seen.clear()
    returned = None
    with pytest.raises(RolledBack), transaction.atomic():
        returned = case.change(session, ready)
        raise RolledBack
    assert not _of(case, seen), f"a rolled-back change was announced: {seen}"
    assert returned is None or not case.stored(session, returned)


@pytest.mark.parametrize("name", CASES)
def test_a_failing_reaction_undoes_nothing(name, session, seen, caplog):
    case = CASES[name]
    ready = _prepared(name, session)

    @reacts_to(case.event_type)
    def broken(event):
        raise RuntimeError("this reaction is broken")

    try:
        seen.clear()
        with transaction.atomic():
            returned = case.change(session, ready)
    finally:
        _reactions[case.event_type].remove(broken)
    assert case.stored(session, returned), "the change was undone by a failing reaction"
    assert _of(case, seen), "the other reactions still ran"
    assert "broken failed on" in caplog.text


def test_the_slack_outbox_records_inside_the_transaction(session, seen):
    """calvin.chat's recorder runs at the announcement: a web thread gets nothing queued, and
    a message that is not Calvin's own (a Slack message's copy) is not sent back."""
    from calvin.chat.models import SlackPost

    message_post_by_person(thread=session.thread, member=session.owner, text="from Slack", platform_ts="1.2")
    posted = [e for e in seen if isinstance(e, MessagePosted)]
    assert posted and posted[-1].to_platform is False
    assert not SlackPost.objects.exists()


def test_on_commit_once_runs_a_key_once_per_transaction_and_again_after_a_rolled_back_savepoint():
    from calvin.events import on_commit_once

    ran = []
    with transaction.atomic():
        on_commit_once(("k", 1), lambda: ran.append(1))
        on_commit_once(("k", 1), lambda: ran.append("again"))
        on_commit_once(("k", 2), lambda: ran.append(2))
        try:
            with transaction.atomic():
                on_commit_once(("k", 3), lambda: ran.append("rolled back"))
                raise RuntimeError
        except RuntimeError:
            pass
        on_commit_once(("k", 3), lambda: ran.append(3))  # its savepoint's callback was dropped: queued anew
    assert ran == [1, 2, 3]
