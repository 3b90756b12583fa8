"""The web channel shows send_message, its edit (marked edited) and reactions live, over a real websocket."""

import contextlib
import json

import httpx2
import pytest

from sessions.models import Message
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, login_cookie, thread_seq, ws_connect
from tools.dispatcher import DISPATCHER

pytestmark = pytest.mark.django_db(transaction=True)


def next_event(ws, timeout: float = 15.0) -> dict:
    return json.loads(ws.recv(timeout=timeout))


def test_a_sent_message_its_edit_and_a_reaction_arrive_live(gateway, agent):
    nano = agent.nanoclaw
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        sent = nano.call("send_message", {"text": "Deploying <b>now</b>", "to": "thread"})
        assert not sent.is_error, text_of(sent)
        message_id = sent.structured_content["messageId"]
        shown = next_event(ws)
        assert shown["id"] == message_id and not shown["replace"]
        assert "Deploying &lt;b&gt;now&lt;/b&gt;" in shown["html"] and "edited" not in shown["html"]

        edit = nano.call("edit_message", {"messageId": message_id, "text": "Deployed"})
        assert not edit.is_error, text_of(edit)
        edited = next_event(ws)
        assert edited["id"] == message_id and edited["replace"]
        assert "<p>Deployed</p>" in edited["html"] and 'class="edited"' in edited["html"]

        reaction = nano.call("add_reaction", {"messageId": message_id, "emoji": "rocket"})
        assert not reaction.is_error, text_of(reaction)
        reacted = next_event(ws)
        assert reacted["id"] == message_id and reacted["replace"]
        assert 'data-emoji="rocket"' in reacted["html"] and "<p>Deployed</p>" in reacted["html"]
        assert ">🚀</span>" in reacted["html"]  # a person sees the emoji, not its name


def test_a_queued_send_message_is_not_in_the_transcript_until_delivered(gateway, agent):
    """A page that loads (or catches up) while a send_message waits for the worker does not show it early."""
    with contextlib.ExitStack() as page_open:
        with DISPATCHER.held():  # the effect waits until the page has connected
            sent = agent.nanoclaw.call("send_message", {"text": "not yet", "to": "thread"})
            message_id = sent.structured_content["messageId"]
            sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
            page = httpx2.get(f"{gateway}/threads/{agent.session.thread_id}/", cookies={"sessionid": sessionid})
            assert page.status_code == 200 and f"message-{message_id}" not in page.text
            ws = page_open.enter_context(ws_connect(gateway, agent.session.thread_id, sessionid=sessionid))
            ws.send(json.dumps({"since": thread_seq(agent.session.thread_id)}))
        event = next_event(ws)
        assert event["id"] == message_id  # the delivery, not the catch-up, brought it
    assert Message.objects.get(id=message_id).delivered_at is not None


def test_a_page_that_reconnects_gets_the_edits_and_reactions_it_missed(gateway, agent):
    nano = agent.nanoclaw
    sent = nano.call("send_message", {"text": "Tests running", "to": "thread"}).structured_content["messageId"]
    wait_for(lambda: Message.objects.get(id=sent).delivered_at)
    untouched = nano.call("send_message", {"text": "Unchanged", "to": "thread"}).structured_content["messageId"]
    wait_for(lambda: Message.objects.get(id=untouched).delivered_at)
    rendered_at = thread_seq(agent.session.thread_id)  # a page that had both messages, as first sent
    # While no page watches: an edit and a reaction.
    assert not nano.call("edit_message", {"messageId": sent, "text": "Tests passed"}).is_error
    assert not nano.call("add_reaction", {"messageId": sent, "emoji": "tada"}).is_error
    wait_for(lambda: Message.objects.get(id=sent).edited_at and Message.objects.get(id=sent).reactions.exists())
    wait_for(lambda: thread_seq(agent.session.thread_id) == rendered_at + 2)  # both numbered (just after commit)
    sessionid = login_cookie(gateway, "owner", OWNER_PASSWORD)
    with ws_connect(gateway, agent.session.thread_id, sessionid=sessionid) as ws:
        ws.send(json.dumps({"since": rendered_at}))
        # The edit and the reaction: two seqs, the message rendered once (as it is now), at the last.
        frames = [next_event(ws), next_event(ws)]
    assert [f["seq"] for f in frames] == [rendered_at + 1, rendered_at + 2]
    assert "html" not in frames[0]
    event = frames[1]
    assert event["id"] == sent and event["replace"]
    assert "<p>Tests passed</p>" in event["html"] and 'data-emoji="tada"' in event["html"]
    # And a page loaded now shows both, from the server.
    page = httpx2.get(f"{gateway}/threads/{agent.session.thread_id}/", cookies={"sessionid": sessionid}).text
    assert 'data-emoji="tada"' in page and "Tests passed" in page and 'class="edited"' in page
