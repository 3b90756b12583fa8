"""A dispatcher's batch of new web posts applied together (tools/effects_batch.py): a few
statements for all of them, in the calls' order, all or nothing, one by one when that fails."""

import pytest
from django.db import OperationalError

from calvin.chat import web
from calvin.chat.web import WebChannel
from calvin.dashboard.models import LiveEvent
from sessions.models import Message
from tests.conftest import text_of
from tools import effects_batch
from tools.dispatcher import DISPATCHER
from tools.effects import tool_calls_apply_claimed, tool_calls_claim_new
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def card(title: str) -> dict:
    return {"spec": {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": title}}}}}


def post_card(agent, title: str) -> int:
    result = agent.call("post_card", card(title))
    assert not result.is_error, text_of(result)
    return result.structured_content["tool_call_id"]


def send_message(agent, text: str) -> int:
    result = agent.nanoclaw.call("send_message", {"text": text, "to": "thread"})
    assert not result.is_error, text_of(result)
    return ToolCall.objects.get(tool="send_message", arguments__text=text).id


def claim_and_apply() -> list[int]:
    ids, _ = tool_calls_claim_new(limit=16)
    tool_calls_apply_claimed(ids=ids)
    return ids


def message_of(call_id: int) -> Message:
    return Message.objects.get(tool_call_id=call_id)


def statuses(ids) -> list[str]:
    found = dict(ToolCall.objects.filter(id__in=ids).values_list("id", "status"))
    return [found[i] for i in ids]


def test_a_batch_of_web_posts_is_applied_in_a_few_statements_in_the_calls_order(agent, django_assert_max_num_queries):
    with DISPATCHER.held():
        made = []
        for n in range(4):
            made += [post_card(agent, f"card {n}"), send_message(agent, f"message {n}")]
        with django_assert_max_num_queries(10):  # one by one: six or more per call
            assert claim_and_apply() == made
    assert statuses(made) == ["applied"] * 8
    cards = made[0::2]
    card_messages = [message_of(call_id) for call_id in cards]
    assert [m.text for m in card_messages] == [f"card {n}" for n in range(4)]
    assert [m.id for m in card_messages] == sorted(m.id for m in card_messages)  # made in the calls' order
    for call_id in made:
        message = message_of(call_id)
        assert message.delivered_at is not None and message.thread_id == agent.session.thread_id
        assert ToolCall.objects.get(id=call_id).platform_ids == {"message_id": message.id}
    shown = LiveEvent.objects.filter(stream=f"thread:{agent.session.thread_id}", kind="message")
    assert sorted(e.payload["message_id"] for e in shown) == sorted(message_of(c).id for c in made)
    changed = LiveEvent.objects.filter(kind="tool_call", payload__status="applied")
    assert sorted(e.payload["tool_call_id"] for e in changed) == made
    assert {e.stream for e in changed} == {f"workspace:{agent.session.workspace_id}"}


def test_a_call_that_cannot_go_with_the_others_cuts_the_run_and_the_order_holds(agent):
    with DISPATCHER.held():
        first, retried, third, fourth = (post_card(agent, f"card {n}") for n in range(4))
        ids, _ = tool_calls_claim_new(limit=16)
        # A second attempt is applied on its own (it asks the platform first): the run is cut there.
        ToolCall.objects.filter(id=retried).update(attempts=2)
        tool_calls_apply_claimed(ids=ids)
    assert statuses(ids) == ["applied"] * 4
    posted = [message_of(call_id).id for call_id in (first, retried, third, fourth)]
    assert posted == sorted(posted)  # not the batchable ones first and the retried one after


def test_calls_of_two_workspaces_in_one_batch_each_go_to_their_own_thread_and_console(
    agent, make_agent, other_workspace
):
    other = make_agent(other_workspace)
    with DISPATCHER.held():
        ours, theirs, ours_too = post_card(agent, "ours"), post_card(other, "theirs"), post_card(agent, "ours too")
        claim_and_apply()
    assert message_of(ours).thread_id == message_of(ours_too).thread_id == agent.session.thread_id
    assert message_of(theirs).thread_id == other.session.thread_id
    streams = dict(
        LiveEvent.objects.filter(kind="tool_call", payload__status="applied").values_list(
            "payload__tool_call_id", "stream"
        )
    )
    assert streams == {
        ours: f"workspace:{agent.session.workspace_id}",
        ours_too: f"workspace:{agent.session.workspace_id}",
        theirs: f"workspace:{other_workspace.id}",
    }
    shown = dict(LiveEvent.objects.filter(kind="message").values_list("payload__message_id", "stream"))
    assert shown[message_of(theirs).id] == f"thread:{other.session.thread_id}"


def test_a_batch_that_fails_is_applied_one_by_one_and_only_the_bad_call_fails(agent, monkeypatch):
    real = web._card_fields

    def refuses_one(**fields):
        if fields["fallback_text"] == "bad":
            raise ValueError("this card cannot be stored")
        return real(**fields)

    monkeypatch.setattr(web, "_card_fields", refuses_one)
    with DISPATCHER.held():
        good, bad, good_too = post_card(agent, "good"), post_card(agent, "placeholder"), post_card(agent, "good too")
        payload = ToolCall.objects.get(id=bad).payload
        ToolCall.objects.filter(id=bad).update(payload={**payload, "text": "bad"})
        claim_and_apply()
    assert statuses([good, bad, good_too]) == ["applied", "failed", "applied"]
    assert ToolCall.objects.get(id=bad).error == "internal error"
    assert not Message.objects.filter(tool_call_id=bad).exists()
    assert Message.objects.filter(tool_call_id__in=[good, good_too]).count() == 2  # each once


def test_a_database_lost_under_a_batch_commits_none_of_it(agent, monkeypatch):
    """The messages and "applied" commit together: a worker whose database went away (or that
    died) leaves every call of the batch "applying" with no message, for the dispatcher to give
    back (or the sweep to retry)."""

    def connection_lost(platform_ids):
        raise OperationalError("the connection is closed")

    monkeypatch.setattr(effects_batch, "_calls_mark_applied", connection_lost)
    with DISPATCHER.held():
        made = [post_card(agent, f"card {n}") for n in range(3)]
        with pytest.raises(OperationalError):
            claim_and_apply()
        assert statuses(made) == ["applying"] * 3
        assert not Message.objects.filter(tool_call_id__in=made).exists()
        assert not LiveEvent.objects.filter(kind="message").exists()
        monkeypatch.undo()
        ToolCall.objects.filter(id__in=made).update(status=ToolCall.Status.PENDING, claimed_at=None, attempts=0)
        claim_and_apply()
    assert statuses(made) == ["applied"] * 3
    assert Message.objects.filter(tool_call_id__in=made).count() == 3


def test_one_call_alone_takes_the_one_by_one_path(agent, monkeypatch):
    def not_here(self, **_):
        raise AssertionError("a batch of one is applied as one call")

    monkeypatch.setattr(WebChannel, "deliver_many", not_here, raising=False)
    with DISPATCHER.held():
        call_id = post_card(agent, "alone")
        claim_and_apply()
    assert statuses([call_id]) == ["applied"]


def test_an_adapter_that_adds_to_the_web_channels_posts_is_applied_one_by_one():
    """Slack's adapter stores the message as the web channel does, then queues it for Slack: the
    web channel's deliver_many would store it and never send it."""
    from calvin.chat.slack.adapter import SlackChannel

    for method in ("post_card", "upload_file", "post_message"):
        assert effects_batch._delivers_together(WebChannel, method)
        assert not effects_batch._delivers_together(SlackChannel, method)
