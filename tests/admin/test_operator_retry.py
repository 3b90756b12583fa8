"""Retrying a failed tool call from the admin: its effect is applied once, never twice — one
conditional UPDATE failed -> pending, then the worker's own claim; two retries at once apply it
once; a call that landed before it was marked failed is not posted again; calls whose failure
is not retried (denied, expired, gated by an approval) stay as they are."""

import threading

import pytest
from django.db import connection

from calvin.audit.models import AuditEvent
from calvin.operators import OperatorRefused
from sessions.models import Message
from tests.admin.conftest import act, approval_in, flat, session_in
from tests.conftest import wait_for
from tools.models import ToolCall
from tools.retry import tool_call_retry

pytestmark = pytest.mark.django_db(transaction=True)

CARD = {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "once"}}}}


def failed_post(agent, *, landed: bool) -> ToolCall:
    """A post_card call the worker gave up on; `landed`: the platform had taken the post anyway."""
    result = agent.call("post_card", {"spec": CARD})
    assert not result.is_error
    call_id = result.structured_content["tool_call_id"]
    wait_for(lambda: ToolCall.objects.filter(id=call_id, status=ToolCall.Status.APPLIED).exists())
    if not landed:
        Message.objects.filter(tool_call_id=call_id).delete()
    ToolCall.objects.filter(id=call_id).update(
        status=ToolCall.Status.FAILED, error="gave up after 5 attempts", attempts=5
    )
    return ToolCall.objects.get(id=call_id)


def applied(call_id: int) -> ToolCall:
    return wait_for(lambda: ToolCall.objects.filter(id=call_id, status=ToolCall.Status.APPLIED).first(), timeout=20)


def test_retry_asks_first_then_applies_the_effect_once(agent, owner_client, owner):
    call = failed_post(agent, landed=False)
    page = flat(act(owner_client, "toolcall", "retry", [call.id]))
    assert "apply its post_card effect again, once (it failed: gave up after 5 attempts)" in page
    assert ToolCall.objects.get(id=call.id).status == ToolCall.Status.FAILED
    page = flat(act(owner_client, "toolcall", "retry", [call.id], confirmed=True))
    assert f"Tool call {call.id}: queued again; its effect is applied once" in page
    applied(call.id)
    assert Message.objects.filter(tool_call_id=call.id).count() == 1
    event = AuditEvent.objects.get(verb="tool_call.retry")
    assert (event.actor_label, event.target_id, event.workspace_id) == ("owner", str(call.id), owner.workspace_id)
    assert event.changes == {"status": ["failed", "pending"], "error": ["gave up after 5 attempts", ""]}
    page = flat(act(owner_client, "toolcall", "retry", [call.id], confirmed=True))
    assert "it is applied, not failed; nothing changed." in page
    assert AuditEvent.objects.filter(verb="tool_call.retry").count() == 1


def test_a_call_that_landed_before_it_was_marked_failed_is_not_posted_again(agent, owner):
    call = failed_post(agent, landed=True)
    tool_call_retry(tool_call_id=call.id, actor=owner)
    assert applied(call.id).attempts == 2  # the retry's claim asked the platform first
    assert Message.objects.filter(tool_call_id=call.id).count() == 1


def test_two_retries_at_once_apply_it_once(agent, owner):
    call = failed_post(agent, landed=False)
    barrier, outcomes = threading.Barrier(2), []

    def retry():
        try:
            barrier.wait()
            outcomes.append(tool_call_retry(tool_call_id=call.id, actor=owner))
        except OperatorRefused as refused:
            outcomes.append(refused)
        finally:
            connection.close()

    threads = [threading.Thread(target=retry) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert sorted(type(o).__name__ for o in outcomes) == ["OperatorRefused", "str"], outcomes
    applied(call.id)
    assert Message.objects.filter(tool_call_id=call.id).count() == 1
    assert AuditEvent.objects.filter(verb="tool_call.retry").count() == 1


@pytest.mark.parametrize("status", [ToolCall.Status.DENIED, ToolCall.Status.EXPIRED, ToolCall.Status.APPLIED])
def test_calls_that_did_not_fail_are_not_retried(owner, workspace, status):
    session = session_in(workspace)
    call = ToolCall.objects.create(session=session, tool="post_card", status=status)
    with pytest.raises(OperatorRefused, match=f"it is {status}, not failed"):
        tool_call_retry(tool_call_id=call.id, actor=owner)
    assert ToolCall.objects.get(id=call.id).status == status


def test_a_failed_call_an_approval_gated_is_not_retried(owner, workspace):
    approval = approval_in(session_in(workspace))
    ToolCall.objects.filter(id=approval.tool_call_id).update(status=ToolCall.Status.FAILED, error="changed")
    with pytest.raises(OperatorRefused, match="an approval gated it"):
        tool_call_retry(tool_call_id=approval.tool_call_id, actor=owner)
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.FAILED


def test_neither_a_plain_member_nor_another_workspace_retries(owner_client, plain_member, workspace, other_workspace):
    ours = ToolCall.objects.create(session=session_in(workspace), tool="post_card", status=ToolCall.Status.FAILED)
    theirs = ToolCall.objects.create(
        session=session_in(other_workspace), tool="post_card", status=ToolCall.Status.FAILED
    )
    with pytest.raises(OperatorRefused, match="only an owner or admin"):
        tool_call_retry(tool_call_id=ours.id, actor=plain_member)
    page = flat(act(owner_client, "toolcall", "retry", [theirs.id], confirmed=True))
    assert "not yours to change" in page
    assert set(ToolCall.objects.values_list("status", flat=True)) == {ToolCall.Status.FAILED}
    assert not AuditEvent.objects.filter(verb="tool_call.retry").exists()
