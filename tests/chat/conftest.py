"""Slack tests: the Web API stand-in on a loopback port, a signing secret, and the test
workspace installed into a stand-in Slack team."""

import httpx2
import pytest
from django.core.cache import cache

from calvin.chat.slack.installations import installation_save
from tests.support.slack_requests import FORM, JSON, signed_headers
from tests.support.slack_standin import SlackStandIn

SIGNING_SECRET = "standin-signing-secret-0123456789abcdef"


def read_claims_forgotten() -> None:
    """Calvin's claims on Slack's read limit live in the shared cache (Redis), per team: a new
    stand-in (a new Slack) starts with none. Only these keys: never clear() the shared cache."""
    client = cache._cache.get_client()
    for pattern in ("slack-read:*", "slack-post-search:*"):
        stale = list(client.scan_iter(match=cache.make_key(pattern)))
        if stale:
            client.delete(*stale)


@pytest.fixture
def standin(settings):
    """The Slack Web API stand-in, with SLACK_API_URL pointing at it; no pacing delays. It keeps
    Slack's read limit (1 conversations.replies a minute per team, 15 messages a call)."""
    read_claims_forgotten()
    server = SlackStandIn().start()
    settings.SLACK_API_URL = server.api_url
    settings.SLACK_SIGNING_SECRET = SIGNING_SECRET
    settings.SLACK_BOT_TOKEN = ""
    settings.CALVIN_SLACK_CHANNEL_PACE_SECONDS = 0.0
    yield server
    server.stop()


@pytest.fixture
def slack_team(standin, vault, workspace):
    """The test workspace (acme) installed into stand-in team T0001 (bot U0BOT)."""
    team = standin.add_team(team_id="T0001", bot_token="xoxb-standin-team-0001", bot_user_id="U0BOT", bot_id="B0BOT")
    installation_save(
        workspace=workspace,
        team_id=team.team_id,
        bot_token=team.bot_token,
        team_name=team.team_name,
        bot_id=team.bot_id,
        bot_user_id=team.bot_user_id,
    )
    return team


class SlackSender:
    """Sends signed requests to the gateway's Slack endpoints as Slack would."""

    def __init__(self, gateway: str, secret: str = SIGNING_SECRET):
        self.gateway = gateway
        self.secret = secret

    def post(self, path: str, body: str, *, content_type: str, timestamp=None, secret=None, headers=None):
        signed = signed_headers(body, secret or self.secret, timestamp=timestamp, content_type=content_type)
        return httpx2.post(
            f"{self.gateway}{path}", content=body.encode(), headers={**signed, **(headers or {})}, timeout=10
        )

    def event(self, body: str, **kwargs):
        return self.post("/slack/events", body, content_type=JSON, **kwargs)

    def interaction(self, body: str, **kwargs):
        return self.post("/slack/interactivity", body, content_type=FORM, **kwargs)

    def command(self, body: str, **kwargs):
        return self.post("/slack/commands", body, content_type=FORM, **kwargs)


@pytest.fixture
def slack_sender(gateway, standin) -> SlackSender:
    return SlackSender(gateway)
