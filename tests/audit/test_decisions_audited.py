"""Decisions write exactly one AuditEvent with who, what, where and from where; none when refused
or when nothing changed; and none when the change rolls back after the audit call."""

from datetime import timedelta

import pytest
from celery.worker import state as worker_state
from django.utils import timezone

from approvals.models import PendingApproval
from approvals.services import ApprovalRefused, approval_decide
from calvin.audit.context import audit_origin
from calvin.audit.models import AuditEvent
from calvin.chat.slack.interactions import session_permission_mode_set
from calvin.dashboard.actions import ActionRefused
from calvin.workspaces.models import Member
from sessions.models import Session, Turn
from sessions.services import session_start
from sessions.turns import session_stop
from tests.conftest import wait_for
from tools.models import Question, ToolCall
from tools.services.questions import question_answer_pressed

pytestmark = pytest.mark.django_db(transaction=True)


class Boom(Exception):
    pass


def boom(*args, **kwargs):
    raise Boom("the change fails after its audit row was written")


def member(tenants, name, workspace="acme") -> Member:
    return Member.objects.select_related("user").get(workspace=tenants[workspace], user=tenants[name])


@pytest.fixture
def session(tenants):
    return session_start(workspace=tenants["acme"], owner=member(tenants, "ann"), title="audited")


@pytest.fixture
def worker_settles(celery_worker):
    """Decisions enqueue their effects: the test's worker applies them before the tables are
    truncated (a task still writing then deadlocks the flush and leaves rows for the next test)."""
    yield
    busy = ToolCall.objects.filter(status__in=[ToolCall.Status.PENDING, ToolCall.Status.APPLYING])
    wait_for(lambda: not busy.exists() and not worker_state.active_requests, timeout=30)


@pytest.fixture
def approval(session, worker_settles):
    call = ToolCall.objects.create(
        session=session, tool="install_packages", arguments={"apt": ["jq"]}, status=ToolCall.Status.AWAITING_APPROVAL
    )
    return PendingApproval.objects.create(
        session=session,
        tool_call=call,
        kind="install_packages",
        summary="apt: jq",
        details={"apt": ["jq"]},
        expires_at=timezone.now() + timedelta(minutes=10),
    )


def only(verb: str) -> AuditEvent:
    events = list(AuditEvent.objects.filter(verb=verb))
    assert len(events) == 1, [(e.verb, e.actor_label) for e in events]
    return events[0]


# approval.approve / approval.deny


def test_an_approval_writes_one_event_and_a_second_click_none(tenants, approval):
    adam = member(tenants, "adam")
    with audit_origin(via="web", ip="198.51.100.7"):
        approval_decide(approval_id=approval.id, member=adam, approve=True, via="slack")
    event = only("approval.approve")
    assert (event.workspace_id, event.actor_kind, event.actor_user_id, event.actor_label) == (
        tenants["acme"].id,
        "person",
        tenants["adam"].id,
        "adam",
    )
    assert (event.target_type, event.target_id, event.via, event.ip) == (
        "approvals.pendingapproval",
        str(approval.id),
        "slack",  # the channel the decision came through, not the request's
        "198.51.100.7",
    )
    assert event.changes == {"status": ["pending", "approved"]}
    for approve in (True, False):
        with pytest.raises(ApprovalRefused):
            approval_decide(approval_id=approval.id, member=member(tenants, "ann"), approve=approve, via="web")
    assert AuditEvent.objects.count() == 1


def test_a_denial_writes_approval_deny(tenants, approval):
    approval_decide(approval_id=approval.id, member=member(tenants, "ann"), approve=False, via="admin")
    event = only("approval.deny")
    assert (event.via, event.changes, event.actor_label) == ("admin", {"status": ["pending", "denied"]}, "ann")


def test_a_refused_decision_writes_nothing(tenants, approval):
    gus = member(tenants, "gus", workspace="globex")
    for person in (gus, member(tenants, "mo"), None):
        with pytest.raises(ApprovalRefused):
            approval_decide(approval_id=approval.id, member=person, approve=True, via="web")
    assert not AuditEvent.objects.exists()
    assert PendingApproval.objects.get(id=approval.id).status == PendingApproval.Status.PENDING


def test_a_decision_that_rolls_back_leaves_no_event(tenants, approval, monkeypatch):
    monkeypatch.setattr("approvals.services._decided", boom)
    with pytest.raises(Boom):
        approval_decide(approval_id=approval.id, member=member(tenants, "ann"), approve=True, via="web")
    assert not AuditEvent.objects.exists()
    assert PendingApproval.objects.get(id=approval.id).status == PendingApproval.Status.PENDING


# question.answer


@pytest.fixture
def question(session):
    call = ToolCall.objects.create(session=session, tool="ask_user_question", arguments={"timeout": 60})
    options = [
        {"label": "Yes", "selectedLabel": "Yes!", "value": "y"},
        {"label": "No", "selectedLabel": "No", "value": "n"},
    ]
    return Question.objects.create(
        tool_call=call,
        title="Ship?",
        text="Ship it?",
        options=options,
        expires_at=timezone.now() + timedelta(minutes=5),
    )


def test_an_answer_writes_one_event_and_a_second_tap_none(tenants, session, question):
    thread = session.thread
    question_answer_pressed(
        thread=thread, member=member(tenants, "adam"), target_id=question.tool_call_id, value="1", via="slack"
    )
    event = only("question.answer")
    assert (event.workspace_id, event.actor_label, event.via, event.target_type) == (
        tenants["acme"].id,
        "adam",
        "slack",
        "tools.question",
    )
    assert event.changes == {"status": ["open", "answered"], "answer": [None, "No"]}
    with pytest.raises(ActionRefused, match="already answered"):
        question_answer_pressed(
            thread=thread, member=member(tenants, "ann"), target_id=question.tool_call_id, value="0", via="web"
        )
    with pytest.raises(ActionRefused):
        question_answer_pressed(
            thread=thread, member=member(tenants, "mo"), target_id=question.tool_call_id, value="0", via="web"
        )
    assert AuditEvent.objects.count() == 1


def test_an_answer_that_rolls_back_leaves_no_event(tenants, session, question, monkeypatch):
    monkeypatch.setattr("tools.services.questions._card_show", boom)
    with pytest.raises(Boom):
        question_answer_pressed(
            thread=session.thread, member=member(tenants, "ann"), target_id=question.tool_call_id, value="0", via="web"
        )
    assert not AuditEvent.objects.exists()
    assert Question.objects.get(id=question.id).status == Question.Status.OPEN


# session.stop


def queued(session) -> Turn:
    return Turn.objects.create(session=session, status=Turn.Status.QUEUED)


def test_a_stop_writes_one_event_and_stopping_an_idle_session_none(tenants, session):
    queued(session)
    Session.objects.filter(id=session.id).update(status=Session.Status.QUEUED)
    assert (
        session_stop(session_id=session.id, member=member(tenants, "adam"), via="web")
        == "stopped before the agent started"
    )
    event = only("session.stop")
    assert (event.workspace_id, event.actor_label, event.via, event.target_type, event.target_id) == (
        tenants["acme"].id,
        "adam",
        "web",
        "agent_sessions.session",
        str(session.id),
    )
    assert event.changes == {"status": ["queued", "idle"], "queued_turns": [1, 0]}
    assert session_stop(session_id=session.id, member=member(tenants, "ann"), via="web") == "the agent is not running"
    assert AuditEvent.objects.count() == 1


def test_stopping_a_running_turn_writes_one_event(tenants, session):
    Turn.objects.create(session=session, status=Turn.Status.RUNNING, started_at=timezone.now())
    Session.objects.filter(id=session.id).update(status=Session.Status.RUNNING)
    outcome = session_stop(session_id=session.id, member=member(tenants, "ann"), via="web")
    assert outcome == "stopped (its host could not be reached)"
    event = only("session.stop")
    assert (event.actor_label, event.changes) == ("ann", {"status": ["running", "stopping"]})
    assert session_stop(session_id=session.id, member=member(tenants, "ann"), via="web") == "the agent is not running"
    # Besides the stop, the ended turn's usage (its minutes) is on the record: once each.
    assert sorted(AuditEvent.objects.values_list("verb", flat=True)) == ["session.stop", "turn.usage"]


def test_a_stop_from_the_admin_by_phrase_or_the_slack_command_names_its_channel(tenants, session):
    queued(session)
    session_stop(session_id=session.id, via="the admin by root")
    queued(session)
    session_stop(session_id=session.id, member=member(tenants, "ann"), via="calvin-command")
    assert list(AuditEvent.objects.order_by("id").values_list("via", "actor_kind")) == [
        ("admin", "system"),
        ("calvin-command", "person"),
    ]


def test_a_stop_that_rolls_back_leaves_no_event(tenants, session, monkeypatch):
    queued(session)
    monkeypatch.setattr("sessions.services.system_notice_post", boom)
    with pytest.raises(Boom):
        session_stop(session_id=session.id, member=member(tenants, "ann"), via="web")
    assert not AuditEvent.objects.exists()
    assert Turn.objects.get(session=session).status == Turn.Status.QUEUED


# session.mode (/calvin mode)


def test_a_mode_change_writes_one_event_and_the_same_mode_none(tenants, session):
    session_permission_mode_set(session_id=session.id, member=member(tenants, "adam"), mode="plan")
    event = only("session.mode")
    assert (event.via, event.actor_label, event.changes) == (
        "calvin-command",
        "adam",
        {"permission_mode": ["default", "plan"]},
    )
    session_permission_mode_set(session_id=session.id, member=member(tenants, "ann"), mode="plan")
    for person, mode in ((member(tenants, "mo"), "acceptEdits"), (member(tenants, "gus", "globex"), "acceptEdits")):
        with pytest.raises(ActionRefused):
            session_permission_mode_set(session_id=session.id, member=person, mode=mode)
    with pytest.raises(ActionRefused):
        session_permission_mode_set(session_id=session.id, member=member(tenants, "ann"), mode="plan\x00")
    assert AuditEvent.objects.count() == 1


def test_a_mode_change_that_rolls_back_leaves_no_event(tenants, session, monkeypatch):
    monkeypatch.setattr("sessions.services.system_notice_post", boom)
    with pytest.raises(Boom):
        session_permission_mode_set(session_id=session.id, member=member(tenants, "ann"), mode="plan")
    assert not AuditEvent.objects.exists()
    assert Session.objects.get(id=session.id).permission_mode == "default"
