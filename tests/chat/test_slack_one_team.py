"""One-team mode: SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET, and no OAuth install. The token's
Slack team belongs to CALVIN_SLACK_WORKSPACE (by default the demo workspace `up` makes); the
installation is made from the environment, through auth.test at the stand-in, on first use."""

import logging
import re
from types import SimpleNamespace

import pytest

from calvin.chat.models import SlackInstallation
from calvin.chat.slack.bolt_app import bolt_app
from calvin.chat.slack.installations import installation_token, slack_setup_lines
from calvin.workspaces.models import Workspace
from calvin.workspaces.services import DEMO_SLUG, workspace_create
from sessions.management.commands.up import Command as Up
from tests.support.slack_requests import event_body, mention

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "xoxb-one-team-token-31337"
NO_LONGER_AVAILABLE = "your installation with this app is no longer available"


@pytest.fixture
def one_team(settings, standin, vault):
    """The token's team at the stand-in, the gateway in one-team mode; no OAuth credentials."""
    team = standin.add_team(team_id="T0SOLO", bot_token=TOKEN, bot_user_id="U0SOLO", bot_id="B0SOLO")
    settings.SLACK_BOT_TOKEN = TOKEN
    settings.SLACK_CLIENT_ID = settings.SLACK_CLIENT_SECRET = ""
    return team


@pytest.fixture
def authorized():
    """What Bolt's authorization let through, as a listener would see it (a middleware after it)."""
    seen = []

    def record(context, next):
        seen.append(
            {"team_id": context.team_id, "bot_user_id": context.bot_user_id, "token_ok": context.bot_token == TOKEN}
        )
        next()

    bolt_app().use(record)
    return seen


def test_an_event_of_the_tokens_team_is_authorized_and_belongs_to_the_demo_workspace(
    one_team, slack_sender, standin, authorized, settings, caplog
):
    caplog.set_level(logging.DEBUG)
    assert DEMO_SLUG == "demo" and settings.CALVIN_SLACK_WORKSPACE == DEMO_SLUG  # the default
    demo = workspace_create(name="Demo", slug=DEMO_SLUG)
    workspace_create(name="Acme", slug="acme")  # another workspace: not the one configured

    body = event_body(team_id="T0SOLO", event=mention(user="U1", channel="C1", ts="1700000001.000100", text="hi"))
    response = slack_sender.event(body)

    assert NO_LONGER_AVAILABLE not in response.text
    assert authorized == [{"team_id": "T0SOLO", "bot_user_id": "U0SOLO", "token_ok": True}]
    installation = SlackInstallation.objects.get(team_id="T0SOLO")
    assert installation.workspace_id == demo.id
    assert installation.from_environment is True
    assert (installation.bot_user_id, installation.bot_id) == ("U0SOLO", "B0SOLO")
    assert TOKEN.encode() not in bytes(installation.bot_token_sealed)
    assert installation_token(installation) == TOKEN
    assert Workspace.objects.get(id=demo.id).slack_team_id == "T0SOLO"
    assert len(standin.ok_calls_of("auth.test")) == 1

    # A second event: the installation is there; Slack is not asked again.
    slack_sender.event(
        event_body(team_id="T0SOLO", event=mention(user="U1", channel="C1", ts="1700000002.000100", text="again"))
    )
    assert len(authorized) == 2 and len(standin.ok_calls_of("auth.test")) == 1
    lines = "\n".join(r.getMessage() for r in caplog.records)
    assert TOKEN.removeprefix("xoxb-") not in lines and not re.search(r"xoxb-(?!\[redacted\])", lines)


def test_the_configured_workspace_is_the_one_tied(one_team, slack_sender, authorized, settings):
    settings.CALVIN_SLACK_WORKSPACE = "acme"
    workspace_create(name="Demo", slug=DEMO_SLUG)
    acme = workspace_create(name="Acme", slug="acme")
    slack_sender.event(
        event_body(team_id="T0SOLO", event=mention(user="U1", channel="C1", ts="1700000001.000100", text="hi"))
    )
    assert [seen["team_id"] for seen in authorized] == ["T0SOLO"]
    assert SlackInstallation.objects.get(team_id="T0SOLO").workspace_id == acme.id


def test_an_event_of_another_team_is_not_authorized(one_team, slack_sender, authorized):
    workspace_create(name="Demo", slug=DEMO_SLUG)
    response = slack_sender.event(
        event_body(team_id="T0OTHER", event=mention(user="U1", channel="C1", ts="1700000001.000100", text="hi"))
    )
    assert NO_LONGER_AVAILABLE in response.text
    assert authorized == []
    # Only the token's team is ever installed from the environment (another test's late commit
    # of T0SOLO's row, on the same parallel worker, is not this rule's business).
    assert not SlackInstallation.objects.filter(team_id="T0OTHER").exists()


def test_without_the_token_there_is_no_one_team_installation(standin, vault, slack_sender, authorized, settings):
    standin.add_team(team_id="T0SOLO", bot_token=TOKEN)
    settings.SLACK_BOT_TOKEN = ""
    workspace_create(name="Demo", slug=DEMO_SLUG)
    response = slack_sender.event(
        event_body(team_id="T0SOLO", event=mention(user="U1", channel="C1", ts="1700000001.000100", text="hi"))
    )
    assert NO_LONGER_AVAILABLE in response.text
    assert authorized == [] and not SlackInstallation.objects.exists()


def up_block(base: str) -> str:
    """The block `manage.py up` prints once it listens (sessions/management/commands/up.py)."""
    demo = SimpleNamespace(
        admin_username="admin", admin_password="", admin_has_password=True, session=SimpleNamespace(thread_id=1)
    )
    return Up()._block(demo=demo, base=base, snippet={}, talk=SimpleNamespace(thread_id=2), claude_code=False)


def test_up_prints_the_slack_request_urls_when_slack_is_configured(settings):
    settings.SLACK_BOT_TOKEN, settings.SLACK_SIGNING_SECRET = TOKEN, "secret-0123"
    settings.SLACK_CLIENT_ID = settings.SLACK_CLIENT_SECRET = ""
    block = up_block("http://127.0.0.1:8000")
    for path in ("/slack/events", "/slack/interactivity", "/slack/commands"):
        assert f": http://127.0.0.1:8000{path}\n" in block
    assert "one team" in block and "'demo'" in block
    assert "/slack/install" not in block and TOKEN not in block and "secret-0123" not in block

    settings.SLACK_BOT_TOKEN = ""
    settings.SLACK_CLIENT_ID, settings.SLACK_CLIENT_SECRET = "1.2", "client-secret"
    lines = slack_setup_lines("https://calvin.example/")
    assert "  OAuth & Permissions, Redirect URL: https://calvin.example/slack/oauth_redirect" in lines
    assert "  Install into a workspace you administer: https://calvin.example/slack/install" in lines
    assert "client-secret" not in "\n".join(lines)


def test_up_prints_nothing_about_slack_when_it_is_not_configured(settings):
    settings.SLACK_BOT_TOKEN = settings.SLACK_SIGNING_SECRET = ""
    settings.SLACK_CLIENT_ID = settings.SLACK_CLIENT_SECRET = ""
    assert "slack" not in up_block("http://127.0.0.1:8000").lower()
