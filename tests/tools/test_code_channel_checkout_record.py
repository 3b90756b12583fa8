"""The gateway's record of a code channel's checkout, as a host reports it (turn.checkout): believed
only from the host running that turn, about the binding its thread is in, once per turn; what the
host says is bounded before it is stored, and the thread's people are told."""

import pytest
from django.utils import timezone

from calvin.workspaces.models import CodeChannel, Member, Repository
from secrets_vault.services import secret_put
from sessions.hosts import host_create
from sessions.models import Message, Turn
from sessions.services import runner_start, session_start
from tools.models import ToolCall
from tools.services.code_channel_checkouts import code_channel_checkout_record

pytestmark = pytest.mark.django_db

ENTRY = {"name": "web", "full_name": "acme/web", "path": "/srv/s/web", "branch": "calvin/session-1", "commit": "a" * 40}


@pytest.fixture
def bound(workspace):
    web = Repository.objects.create(
        workspace=workspace, name="web", full_name="acme/web", clone_url="https://example.com/web.git"
    )
    return CodeChannel.objects.create(workspace=workspace, kind="web", channel="web", repository=web)


@pytest.fixture
def running(workspace, bound):
    """A session in the space whose first turn runs on host h1."""
    host, _ = host_create(name="h1")
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(workspace=workspace, owner=owner, prompt="go", channel_id="space:web")
    runner, _ = runner_start(session=session, host=host)
    turn = session.turns.get()
    Turn.objects.filter(id=turn.id).update(
        status=Turn.Status.RUNNING, host=host, runner=runner, batch=turn, started_at=timezone.now()
    )
    turn.refresh_from_db()
    return session, turn, host


def report(bound, **fields) -> dict:
    return {"type": "turn.checkout", "code_channel": bound.id, "ok": True, "repos": [dict(ENTRY)], **fields}


def notices(session) -> list[str]:
    return list(Message.objects.filter(thread_id=session.thread_id, kind="system").values_list("text", flat=True))


def test_a_report_from_the_turns_host_is_recorded_once(running, bound):
    session, turn, host = running
    call = code_channel_checkout_record(host_id=host.id, turn_id=turn.id, report=report(bound))
    assert call.session_id == session.id and call.tool == "checkout_repo" and call.status == "applied"
    assert call.arguments == {"repos": ["web"]} and call.payload == {
        "code_channel": bound.id,
        "channel": "#web",
        "turn": turn.id,
    }
    assert call.result == {"repos": [{**ENTRY, "status": None, "note": None}]} and call.runner_id == turn.runner_id
    assert notices(session)[-1] == (
        "Checked out acme/web on branch calvin/session-1 before the agent's first turn: this thread is in the code"
        " channel #web."
    )
    assert code_channel_checkout_record(host_id=host.id, turn_id=turn.id, report=report(bound)) is None
    assert ToolCall.objects.count() == 1 and len(notices(session)) == 1


def test_no_other_host_and_no_other_binding_is_believed(running, bound, workspace):
    session, turn, host = running
    other, _ = host_create(name="h2")
    assert code_channel_checkout_record(host_id=other.id, turn_id=turn.id, report=report(bound)) is None
    elsewhere = CodeChannel.objects.create(workspace=workspace, kind="web", channel="api", repository=bound.repository)
    for wrong in (elsewhere.id, None, str(bound.id), "x"):
        assert (
            code_channel_checkout_record(host_id=host.id, turn_id=turn.id, report=report(bound, code_channel=wrong))
            is None
        )
    Turn.objects.filter(id=turn.id).update(status=Turn.Status.DONE)  # the turn ended: too late
    assert code_channel_checkout_record(host_id=host.id, turn_id=turn.id, report=report(bound)) is None
    assert not ToolCall.objects.exists() and not notices(session)


def test_a_binding_removed_meanwhile_records_nothing(running, bound):
    session, turn, host = running
    bound.delete()
    assert code_channel_checkout_record(host_id=host.id, turn_id=turn.id, report=report(bound)) is None
    assert not ToolCall.objects.exists()


def test_what_a_host_says_is_bounded_and_a_failure_is_recorded_and_told(running, bound, vault):
    session, turn, host = running
    secret_put(workspace_id=session.workspace_id, name="DEPLOY_TOKEN", value="s3cr3t-deploy-token-value")
    said = report(
        bound,
        ok=False,
        repos=[{**ENTRY, "path": "p" * 5000, "extra": "dropped", "commit": 42}, dict(ENTRY)],
        error="could not check out acme/web: fatal: auth failed for s3cr3t-deploy-token-value " + "x" * 5000,
    )
    call = code_channel_checkout_record(host_id=host.id, turn_id=turn.id, report=said)
    assert call.status == "failed" and call.result is None
    assert "s3cr3t-deploy-token-value" not in call.error and len(call.error) <= 2100
    assert notices(session)[-1].startswith("Could not check out acme/web for the code channel #web: could not check")
    assert notices(session)[-1].endswith("The agent was told, and works without it.")
    assert "s3cr3t-deploy-token-value" not in notices(session)[-1]


def test_a_success_without_any_repository_is_no_success(running, bound):
    session, turn, host = running
    call = code_channel_checkout_record(host_id=host.id, turn_id=turn.id, report=report(bound, repos=["web", 3]))
    assert call.status == "failed" and call.error == "the host gave no reason"
