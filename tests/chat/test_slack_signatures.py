"""Slack's endpoints take only requests signed with the signing secret, within 5 minutes."""

import json
import time

import pytest

from calvin.chat.models import SlackEvent
from tests.support.slack_requests import event_body, mention

pytestmark = pytest.mark.django_db(transaction=True)


def test_url_verification_is_answered_when_signed(slack_sender):
    body = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "x"})
    response = slack_sender.event(body)
    assert response.status_code == 200
    assert "c-123" in response.text


@pytest.mark.parametrize(
    "how",
    ["wrong secret", "stale timestamp", "future timestamp"],
)
def test_bad_signature_or_timestamp_is_refused_and_nothing_recorded(slack_sender, slack_team, how):
    body = event_body(team_id="T0001", event=mention(user="U1", channel="C1", ts="1.000100", text="hi"))
    kwargs = {
        "wrong secret": {"secret": "not-the-secret"},
        "stale timestamp": {"timestamp": int(time.time()) - 6 * 60},
        "future timestamp": {"timestamp": int(time.time()) + 6 * 60},
    }[how]
    response = slack_sender.event(body, **kwargs)
    assert response.status_code == 401
    assert not SlackEvent.objects.exists()


def test_unsigned_request_is_refused(slack_sender, slack_team):
    import httpx2

    body = event_body(team_id="T0001", event=mention(user="U1", channel="C1", ts="1.000100", text="hi"))
    response = httpx2.post(
        f"{slack_sender.gateway}/slack/events", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 401
    assert not SlackEvent.objects.exists()


def test_endpoints_are_absent_without_a_signing_secret(slack_sender, settings):
    settings.SLACK_SIGNING_SECRET = ""
    response = slack_sender.event(json.dumps({"type": "url_verification", "challenge": "c"}))
    assert response.status_code == 404
