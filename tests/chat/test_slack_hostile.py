"""Hostile or broken requests on Slack's endpoints, correctly signed: each gets a defined
answer (never a 500, which Slack would retry), and nothing half-made is left behind."""

import json

import pytest

from calvin.chat.models import SlackEvent
from sessions.models import Message, Session
from tests.conftest import wait_for
from tests.support.slack_requests import command_body, event_body, interaction_body, mention

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        "[]",
        '"a string"',
        json.dumps({"type": "event_callback"}),  # no event, no event_id
        json.dumps({"type": "event_callback", "event_id": "Ev1", "event": "not an object", "team_id": "T0001"}),
        json.dumps({"type": "event_callback", "event_id": ["Ev1"], "event": {"type": "app_mention"}}),
        json.dumps({"type": "event_callback", "event_id": "Ev2", "team_id": "T0001", "event": {"type": None}}),
    ],
)
def test_a_malformed_event_body_is_answered_and_records_nothing(slack_sender, slack_team, body):
    response = slack_sender.event(body)
    assert response.status_code < 500, response.text
    assert not Session.objects.exists()


def test_nul_characters_in_an_event_are_dropped_not_a_500(slack_sender, slack_team, celery_worker):
    event = mention(user="U1", channel="C1", ts="1700000400.000100", text="hi\x00there")
    event["blocks"] = [{"type": "rich_text", "text": "\x00"}]
    response = slack_sender.event(event_body(team_id="T0001", event=event))
    assert response.status_code == 200, response.text
    message = wait_for(lambda: Message.objects.filter(thread__channel_id="C1").first())
    assert message.text == "hithere"
    assert "\x00" not in json.dumps(SlackEvent.objects.get().payload)


def test_a_body_over_django_s_limit_is_refused(slack_sender, slack_team, settings):
    big = mention(user="U1", channel="C1", ts="1700000400.000200", text="x" * (3 * 1024 * 1024))
    response = slack_sender.event(event_body(team_id="T0001", event=big))
    assert response.status_code == 400
    assert not SlackEvent.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        "payload=%7Bnot+json",
        "nothing=here",
        interaction_body({"type": "block_actions", "team": {"id": "T0001"}, "actions": "nope"}),
        interaction_body(
            {
                "type": "block_actions",
                "team": {"id": "T0001"},
                "user": {"id": "U1", "team_id": "T0001"},
                "container": {"channel_id": "C1", "message_ts": "1.2"},
                "actions": [{"action_id": "approval:99999999999999999999999:0", "value": "approve\x00"}],
            }
        ),
        interaction_body({"type": "view_submission", "team": {"id": "T0001"}, "view": {"callback_id": "x"}}),
    ],
)
def test_a_malformed_interaction_is_answered_without_a_500(slack_sender, slack_team, body):
    response = slack_sender.interaction(body)
    assert response.status_code < 500, response.text


@pytest.mark.parametrize("text", ["", "status\x00", "mode " + "x" * 5000, "stop stop stop", "\u202e status"])
def test_odd_slash_command_text_is_answered(slack_sender, slack_team, text):
    body = command_body(team_id="T0001", channel_id="C1", user_id="U1", text=text)
    response = slack_sender.command(body)
    assert response.status_code == 200, response.text
