"""A Slack thread seen on Calvin's thread page: a reply written there reaches the Slack thread
(posted by the bot, saying whose words they are); a message that came from Slack is not echoed."""

import re

import httpx2
import pytest

from calvin.chat.models import SlackPost
from sessions.models import Message, Turn
from sessions.services import session_start
from tests.conftest import wait_for
from tests.support.slack_requests import mention

pytestmark = pytest.mark.django_db(transaction=True)

OWNER_PASSWORD = "pw-owner-123"  # the `workspace` fixture's owner


def logged_in(gateway: str) -> httpx2.Client:
    http = httpx2.Client(base_url=gateway, follow_redirects=True)  # the caller closes it
    page = http.get("/accounts/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    http.post("/accounts/login/", data={"username": "owner", "password": OWNER_PASSWORD, "csrfmiddlewaretoken": csrf})
    return http


def test_a_reply_on_the_thread_page_reaches_the_slack_thread(gateway, workspace, slack_team, standin, celery_worker):
    owner = workspace.members.get()
    session = session_start(
        workspace=workspace, owner=owner, channel_kind="slack", channel_id="C0PAGE", thread_ts="1700000800.000100"
    )
    http = logged_in(gateway)
    try:
        page = http.get(f"/threads/{session.thread_id}/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        sent = http.post(
            f"/threads/{session.thread_id}/reply/",
            data={"text": "Use the staging DB @here", "csrfmiddlewaretoken": csrf},
        )
        assert sent.status_code == 200
    finally:
        http.close()
    (posted,) = wait_for(lambda: standin.ok_calls_of("chat.postMessage"), timeout=20)
    assert posted.params["channel"] == "C0PAGE" and posted.params["thread_ts"] == "1700000800.000100"
    assert posted.params["text"].startswith(f"*{owner}* (in Calvin): Use the staging DB ")
    assert "@here" not in posted.params["text"]  # channel-wide mentions are made inert
    message = Message.objects.get(thread=session.thread, author="person")
    assert Turn.objects.filter(prompt=message).exists()  # still the agent's next turn


def test_a_message_from_slack_is_not_posted_back(slack_sender, slack_team, standin, celery_worker):
    from tests.chat.test_slack_events import said, send

    said(standin, channel="C0ECHO", ts="1700000900.000100", user="U0ANN", text="from Slack")
    send(slack_sender, mention(user="U0ANN", channel="C0ECHO", ts="1700000900.000100", text="from Slack"))
    message = wait_for(lambda: Message.objects.filter(thread__channel_id="C0ECHO", author="person").first())
    assert message.platform_ts == "1700000900.000100"
    wait_for(lambda: standin.ok_calls_of("reactions.add"), timeout=10)
    assert not SlackPost.objects.filter(message=message).exists()
    assert not standin.calls_of("chat.postMessage")
