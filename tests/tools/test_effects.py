"""The worker applies each call exactly once: retried tasks, dead workers, lost enqueues, failures."""

from datetime import timedelta

import pytest
from django.utils import timezone

from calvin import events
from calvin.chat import ChatTemporaryError
from calvin.chat.web import WebChannel
from calvin.dashboard import live
from calvin.dashboard.models import LiveEvent
from calvin.events import ToolCallChanged
from sessions.models import Message, Session, Thread
from sessions.services import session_start
from tests.conftest import wait_for
from tools import effects
from tools.dispatcher import DISPATCHER
from tools.models import ToolCall
from tools.tasks import apply_tool_call, sweep_tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

CARD = {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "once"}}}}


def applied(call_id: int) -> ToolCall:
    return wait_for(lambda: ToolCall.objects.filter(id=call_id, status=ToolCall.Status.APPLIED).first())


def post_card(agent) -> int:
    result = agent.call("post_card", {"spec": CARD})
    assert not result.is_error
    return result.structured_content["tool_call_id"]


def test_a_task_run_twice_posts_once(agent):
    call_id = post_card(agent)
    applied(call_id)
    apply_tool_call.delay(call_id)  # a duplicate delivery, through the real worker
    applied(post_card(agent))  # one solo worker, one queue: the duplicate ran before this
    apply_tool_call.apply(args=[call_id])  # and once more, in this process
    assert Message.objects.filter(tool_call_id=call_id).count() == 1
    assert ToolCall.objects.get(id=call_id).attempts == 1


def test_a_worker_killed_mid_task_is_recovered_by_the_sweep_and_posts_once(agent):
    call_id = post_card(agent)
    applied(call_id)
    # A worker that dies after its claim leaves the call "applying" and, because the
    # message and "applied" commit together, no message.
    Message.objects.filter(tool_call_id=call_id).delete()
    ToolCall.objects.filter(id=call_id).update(
        status=ToolCall.Status.APPLYING, claimed_at=timezone.now() - timedelta(minutes=5)
    )
    assert sweep_tool_calls.apply().get() == 1
    call = applied(call_id)
    assert call.attempts == 2
    assert Message.objects.filter(tool_call_id=call_id).count() == 1


def test_a_retry_that_finds_its_message_already_posted_does_not_post_again(agent):
    call_id = post_card(agent)
    message = Message.objects.get(tool_call_id=applied(call_id).id)
    # As if the platform had the post but the worker died before "applied" was recorded.
    long_ago = timezone.now() - timedelta(minutes=5)
    ToolCall.objects.filter(id=call_id).update(
        status=ToolCall.Status.APPLYING, claimed_at=long_ago, created_at=long_ago
    )
    assert sweep_tool_calls.apply().get() == 1
    call = applied(call_id)
    assert call.attempts == 2 and call.platform_ids == {"message_id": message.id}
    assert Message.objects.filter(tool_call_id=call_id).count() == 1


def test_the_message_and_applied_commit_together(agent, monkeypatch):
    real = WebChannel.post_card

    def posts_then_breaks_the_applied_update(self, **kwargs):
        real(self, **kwargs)  # the message row is written...
        return {"message_id": object()}  # ...and storing these ids fails

    monkeypatch.setattr(WebChannel, "post_card", posts_then_breaks_the_applied_update)
    call_id = post_card(agent)
    wait_for(lambda: ToolCall.objects.filter(id=call_id, status="failed").exists())
    assert not Message.objects.filter(tool_call_id=call_id).exists()  # rolled back with it
    assert Message.objects.filter(thread=agent.session.thread, kind=Message.Kind.SYSTEM).count() == 1


def test_a_call_whose_live_event_cannot_be_written_is_not_recorded(agent, monkeypatch):
    """The row and its live event are written together (one statement): a call the console
    cannot log is not left behind, pending, for a worker to apply after the agent was told
    it failed."""

    def too_long_a_stream(event):
        return [row._replace(stream="x" * 41) for row in live.live_rows(event)]  # LiveEvent.stream holds 40

    port = events.RowsPort(table=LiveEvent._meta.db_table, rows=too_long_a_stream, written=live.live_rows_written)
    monkeypatch.setattr(events, "LIVE_ROWS", port)
    result = agent.call("post_card", {"spec": CARD})
    assert result.is_error
    assert not ToolCall.objects.filter(session=agent.session).exists()
    assert not LiveEvent.objects.filter(kind="tool_call").exists()


def test_a_recorded_call_is_on_the_console_with_its_own_id(agent):
    with DISPATCHER.held():  # pending still: no worker has touched it
        call_id = post_card(agent)
        event = wait_for(lambda: LiveEvent.objects.filter(kind="tool_call", seq__isnull=False).first())
    assert event.stream == f"workspace:{agent.session.workspace_id}"
    assert event.payload == {
        "session_id": agent.session.id,
        "tool_call_id": call_id,
        "tool": "post_card",
        "status": "pending",
    }
    applied(call_id)


def test_only_the_live_log_records_a_tool_calls_change():
    """The call's statement writes its live rows in place of announcing it
    (tools/services/common.py): another recorder or reaction would be skipped there."""
    changed = ToolCallChanged(workspace_id=1, thread_id=1, session_id=1, tool_call_id=1, tool="post_card", status="x")
    assert events._matching(events._recorders, changed) == [live.live_log]
    assert events._matching(events._reactions, changed) == []


def test_a_waiting_call_is_queued_again_once_per_bound_not_on_every_sweep(agent, settings):
    from tools.effects import tool_calls_recover

    call = ToolCall.objects.create(session=agent.session, runner=agent.runner, tool="post_card", arguments={})
    ToolCall.objects.filter(id=call.id).update(created_at=timezone.now() - timedelta(minutes=1))
    now = timezone.now()
    assert tool_calls_recover(now=now) == [call.id]
    assert tool_calls_recover(now=now + timedelta(seconds=1)) == []  # queued already: a backlog is not doubled
    later = now + timedelta(seconds=settings.CALVIN_LOST_PENDING_SECONDS + 1)
    assert tool_calls_recover(now=later) == [call.id]  # still pending a bound later: its task was lost too
    ToolCall.objects.filter(id=call.id).update(status=ToolCall.Status.FAILED)  # nothing queued it: end it here


def test_a_call_left_applying_is_queued_at_once_however_long_the_lost_pending_bound(agent, settings):
    # A task that found its call still "applying" (the database was down when it went back to
    # pending) ends, so nothing else will queue it: the stuck rule must, not the lost-pending one.
    from tools.effects import tool_calls_recover

    settings.CALVIN_LOST_PENDING_SECONDS = 600
    call = ToolCall.objects.create(session=agent.session, runner=agent.runner, tool="post_card", arguments={})
    now = timezone.now()
    claimed = now - timedelta(seconds=settings.CALVIN_STUCK_APPLYING_SECONDS + 1)
    ToolCall.objects.filter(id=call.id).update(status=ToolCall.Status.APPLYING, claimed_at=claimed, attempts=1)
    assert tool_calls_recover(now=now) == [call.id]
    assert ToolCall.objects.get(id=call.id).status == ToolCall.Status.PENDING
    assert tool_calls_recover(now=now + timedelta(seconds=1)) == []  # queued: not again on the next sweep
    ToolCall.objects.filter(id=call.id).update(status=ToolCall.Status.FAILED)  # nothing queued it: end it here


def test_a_lost_enqueue_is_picked_up_by_the_sweep(agent):
    call = ToolCall.objects.create(
        session=agent.session,
        runner=agent.runner,
        tool="post_card",
        arguments={"spec": CARD},
        payload={"items": [{"kind": "header", "text": "late"}], "blocks": [], "text": "late"},
    )
    ToolCall.objects.filter(id=call.id).update(created_at=timezone.now() - timedelta(minutes=1))
    assert sweep_tool_calls.apply().get() == 1
    applied(call.id)
    assert Message.objects.get(tool_call_id=call.id).text == "late"


def test_a_temporary_chat_failure_is_retried_and_posted_once(agent, monkeypatch):
    real = WebChannel.post_card
    failures = []

    def flaky(self, **kwargs):
        if not failures:
            failures.append(1)
            raise ChatTemporaryError("429 Too Many Requests", retry_after=1)
        return real(self, **kwargs)

    monkeypatch.setattr(WebChannel, "post_card", flaky)
    call_id = post_card(agent)
    call = wait_for(lambda: ToolCall.objects.filter(id=call_id, status="applied").first(), timeout=20)
    assert call.attempts == 2 and failures == [1]
    assert Message.objects.filter(tool_call_id=call_id).count() == 1


def test_giving_up_marks_failed_and_says_so_in_the_thread(agent, monkeypatch):
    def always_busy(self, **kwargs):
        raise ChatTemporaryError("429 Too Many Requests")

    monkeypatch.setattr(WebChannel, "post_card", always_busy)
    monkeypatch.setattr(effects, "MAX_ATTEMPTS", 1)
    call_id = post_card(agent)
    call = wait_for(lambda: ToolCall.objects.filter(id=call_id, status="failed").first())
    assert "gave up after 1 attempts: 429 Too Many Requests" in call.error
    notice = Message.objects.get(thread=agent.session.thread, kind=Message.Kind.SYSTEM)
    assert f"post_card (call {call_id}) was not delivered" in notice.text


def test_a_slack_thread_of_a_workspace_without_slack_fails_visibly(agent, workspace):
    session: Session = session_start(
        workspace=workspace, channel_kind=Thread.ChannelKind.SLACK, channel_id="C123", thread_ts="1700000000.000100"
    )
    call = ToolCall.objects.create(
        session=session, tool="post_card", payload={"items": [], "blocks": [], "text": "x"}, arguments={}
    )
    apply_tool_call.delay(call.id)
    failed = wait_for(lambda: ToolCall.objects.filter(id=call.id, status="failed").first())
    assert "Calvin is not installed in this workspace's Slack" in failed.error
    assert Message.objects.filter(thread=session.thread, kind=Message.Kind.SYSTEM).exists()


def test_a_broker_outage_at_call_time_delays_nothing(agent, monkeypatch):
    """No Celery message per call: the insert's notification wakes the workers' dispatchers."""

    def broker_down(*args, **kwargs):
        raise ConnectionError("Redis is restarting")

    monkeypatch.setattr(apply_tool_call, "apply_async", broker_down)
    call_id = post_card(agent)
    applied(call_id)
    assert Message.objects.filter(tool_call_id=call_id).count() == 1


def test_a_call_that_keeps_killing_its_worker_is_failed_not_retried_forever(agent):
    call_id = post_card(agent)
    applied(call_id)
    Message.objects.filter(tool_call_id=call_id).delete()
    ToolCall.objects.filter(id=call_id).update(
        status=ToolCall.Status.APPLYING, attempts=effects.MAX_ATTEMPTS, claimed_at=timezone.now() - timedelta(minutes=5)
    )
    sweep_tool_calls.apply()
    call = ToolCall.objects.get(id=call_id)
    assert call.status == ToolCall.Status.FAILED
    assert "the worker stopped while applying it" in call.error
    assert Message.objects.filter(thread=agent.session.thread, kind=Message.Kind.SYSTEM).count() == 1
