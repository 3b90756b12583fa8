"""Removing Calvin from a Slack team (app_uninstalled, or its bot token revoked): the
installation goes, the team's Slack sessions stop with a notice, posts still waiting for
Slack fail with the reason, and the team's later events change nothing."""

import pytest

from calvin.chat.models import SlackEvent, SlackInstallation, SlackLane, SlackPost
from calvin.chat.slack.installations import installation_save
from calvin.workspaces.models import Member, Workspace
from calvin.workspaces.services import workspace_create
from sessions.models import Message, Session, Thread, Turn
from sessions.services import session_start
from tests.conftest import wait_for
from tests.support.slack_requests import event_body, mention, message

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = "1700000100.000100"
UNINSTALLED = "Calvin was uninstalled from this Slack workspace"


def send(slack_sender, event: dict, *, team: str = "T0001") -> None:
    response = slack_sender.event(event_body(team_id=team, event=event))
    assert response.status_code == 200, response.text


def settled():
    wait_for(lambda: not SlackEvent.objects.filter(status=SlackEvent.Status.RECEIVED).exists(), timeout=20)


def reacted(standin, count: int) -> None:
    """The worker sent the 👀 reactions of what it took (none is left to run after the test)."""
    wait_for(lambda: len(standin.calls_of("reactions.add")) >= count, timeout=15)


def waiting_posts(team_id: str, channel: str) -> dict:
    lane = SlackLane.objects.create(team_id=team_id, channel_id=channel)
    return {
        status: SlackPost.objects.create(
            lane=lane, kind=SlackPost.Kind.MESSAGE, status=status, payload={"text": status}
        )
        for status in ("queued", "sending", "sent")
    }


@pytest.fixture
def second_team(standin, vault):
    """Globex, installed into team T0002: another tenant the uninstall must not touch."""
    other = workspace_create(name="Globex", slug="globex")
    team = standin.add_team(team_id="T0002", bot_token="xoxb-standin-team-0002", bot_user_id="U0BOT2", bot_id="B0BOT2")
    installation_save(workspace=other, team_id="T0002", bot_token=team.bot_token, bot_user_id="U0BOT2")
    return other


def test_app_uninstalled_removes_the_team_and_stops_its_sessions(
    slack_sender, slack_team, workspace, second_team, standin, celery_worker
):
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="first job"))
    send(slack_sender, mention(user="U1", channel="C2", ts=ROOT, text="second job"))
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="globex job", bot_user="U0BOT2"), team="T0002")
    settled()
    reacted(standin, 3)
    slack_sessions = list(Session.objects.filter(workspace=workspace, thread__channel_kind="slack"))
    assert len(slack_sessions) == 2
    web = session_start(workspace=workspace, owner=Member.objects.filter(workspace=workspace).first(), prompt="web job")
    posts = waiting_posts("T0001", "C1")
    waiting_posts("T0002", "C1")

    send(slack_sender, {"type": "app_uninstalled"})
    settled()

    assert not SlackInstallation.objects.filter(team_id="T0001").exists()
    assert Workspace.objects.get(id=workspace.id).slack_team_id == ""
    for session in slack_sessions:
        # Its queued turn will not run, and the thread says why.
        assert list(session.turns.values_list("status", flat=True)) == [Turn.Status.STOPPED]
        notices = Message.objects.filter(thread=session.thread, author=Message.Author.SYSTEM)
        assert any(UNINSTALLED in n.text for n in notices)
    for name, status in {"queued": "failed", "sending": "failed", "sent": "sent"}.items():
        posts[name].refresh_from_db()
        assert posts[name].status == status
    assert posts["queued"].error == UNINSTALLED
    # The web thread of the same workspace and the other team are untouched.
    assert list(web.turns.values_list("status", flat=True)) == [Turn.Status.QUEUED]
    globex = Session.objects.get(workspace=second_team)
    assert list(globex.turns.values_list("status", flat=True)) == [Turn.Status.QUEUED]
    assert SlackInstallation.objects.filter(team_id="T0002").exists()
    assert {p.status for p in SlackPost.objects.filter(lane__team_id="T0002")} == {"queued", "sending", "sent"}
    assert SlackEvent.objects.get(event_type="app_uninstalled").status == SlackEvent.Status.HANDLED

    # Later events from the team change nothing: no session, no message, no member.
    members = Member.objects.count()
    send(slack_sender, mention(user="U9", channel="C3", ts=ROOT, text="anyone?"))
    send(slack_sender, message(user="U1", channel="C1", ts="1700000100.000200", text="hello?", thread_ts=ROOT))
    send(slack_sender, message(user="U9", channel="D1", ts=ROOT, text="hi", channel_type="im"))
    settled()
    assert Session.objects.filter(workspace=workspace, thread__channel_kind="slack").count() == 2
    assert not Message.objects.filter(text__in=["anyone?", "hello?", "hi"]).exists()
    assert Member.objects.count() == members


def test_a_revoked_bot_token_uninstalls_and_the_second_notice_changes_nothing(
    slack_sender, slack_team, workspace, standin, celery_worker
):
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="job"))
    settled()
    reacted(standin, 1)
    # Slack sends both when the app is removed; whichever comes second finds nothing left.
    send(slack_sender, {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["U0BOT"]}})
    send(slack_sender, {"type": "app_uninstalled"})
    settled()
    assert not SlackInstallation.objects.exists()
    statuses = dict(SlackEvent.objects.values_list("event_type", "status"))
    assert statuses["tokens_revoked"] == "handled" and statuses["app_uninstalled"] == "ignored"
    session = Session.objects.get(thread__channel_kind=Thread.ChannelKind.SLACK)
    notices = [m.text for m in Message.objects.filter(thread=session.thread, author=Message.Author.SYSTEM)]
    assert len([n for n in notices if UNINSTALLED in n]) == 1


def test_revoking_only_user_tokens_keeps_the_installation(slack_sender, slack_team, standin, celery_worker):
    send(slack_sender, mention(user="U1", channel="C1", ts=ROOT, text="job"))
    settled()
    send(slack_sender, {"type": "tokens_revoked", "tokens": {"oauth": ["U1"], "bot": []}})
    settled()
    assert SlackInstallation.objects.filter(team_id="T0001").exists()
    assert list(Turn.objects.values_list("status", flat=True)) == [Turn.Status.QUEUED]
    send(slack_sender, message(user="U1", channel="C1", ts="1700000100.000200", text="still here", thread_ts=ROOT))
    settled()
    assert Message.objects.filter(text="still here").exists()
    reacted(standin, 2)
