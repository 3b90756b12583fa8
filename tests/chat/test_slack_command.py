"""`/calvin` over real HTTP, signed as Slack signs slash commands: status, stop, mode and help
for the channel's latest live session of the team's workspace, answered ephemerally in the
acknowledgement; stop and mode only by the session's owner or a workspace admin."""

import time
import urllib.parse

import pytest

from calvin.chat.links import thread_url
from calvin.chat.slack.interactions import OTHER_TEAM
from calvin.workspaces.models import Member
from secrets_vault.services import secret_set
from sessions.models import Message, Session, Thread, Turn
from sessions.services import message_post_by_person, session_start
from tests.approvals.support import worker_drain
from tests.chat.test_slack_buttons import CHANNEL, OWNER, ROOT, globex_team, owner
from tests.conftest import wait_for
from tests.support.slack_requests import command_body

__all__ = ["globex_team", "owner"]  # fixtures shared with the buttons' tests

pytestmark = pytest.mark.django_db(transaction=True)

P = Session.PermissionMode


@pytest.fixture
def session(slack_team, workspace, owner):
    """The channel's latest live session: an older live one and a newer finished one around it."""
    session_start(
        workspace=workspace, channel_kind="slack", channel_id=CHANNEL, thread_ts="1690000000.000001", title="Old one"
    )
    latest = session_start(
        workspace=workspace, channel_kind="slack", channel_id=CHANNEL, thread_ts=ROOT, owner=owner, title="Release 7"
    )
    done = session_start(
        workspace=workspace, channel_kind="slack", channel_id=CHANNEL, thread_ts="1710000000.000001", title="Done"
    )
    Session.objects.filter(id=done.id).update(status=Session.Status.FINISHED)
    Session.objects.filter(id=latest.id).update(status=Session.Status.IDLE)
    latest.refresh_from_db()
    return latest


def slash(slack_sender, text: str, *, user: str = OWNER, team: str = "T0001", channel: str = CHANNEL) -> str:
    started = time.monotonic()
    response = slack_sender.command(command_body(team_id=team, channel_id=channel, user_id=user, text=text))
    assert response.status_code == 200, response.text
    assert time.monotonic() - started < 3
    answer = response.json()
    assert answer["response_type"] == "ephemeral"  # only the person who typed it sees it
    return answer["text"]


def notices(session: Session) -> list[str]:
    return list(
        Message.objects.filter(thread_id=session.thread_id, kind=Message.Kind.SYSTEM).values_list("text", flat=True)
    )


def names_the_thread(text: str, session: Session) -> bool:
    return f"<{thread_url(session.thread_id)}|Release 7>" in text


# help


@pytest.mark.parametrize("text", ["help", "", "  HELP  "])
def test_help(slack_sender, session, text):
    answer = slash(slack_sender, text)
    assert answer.startswith("*/calvin* acts on this channel's latest live Calvin session")
    for sub in ("status", "stop", "mode <default|acceptEdits|plan|bypassPermissions>", "help"):
        assert f"/calvin {sub}" in answer


def test_an_unknown_subcommand_gets_help(slack_sender, session):
    answer = slash(slack_sender, "launch the rockets")
    assert answer.startswith("Unknown subcommand `launch`.\n*/calvin* acts on")
    assert Session.objects.get(id=session.id).status == Session.Status.IDLE


# status


def test_status_names_the_thread_and_its_state_for_anyone(slack_sender, session):
    answer = slash(slack_sender, "status", user="U0PLAIN")
    assert names_the_thread(answer, session)
    assert "agent main, idle, permission mode `default`, 0 messages queued." in answer
    assert f"by <@{OWNER}>" in answer


def test_status_redacts_a_secret_the_threads_title_quotes(slack_sender, session):
    Thread.objects.filter(id=session.thread_id).update(title="Rotate s3cr3t-value-42")
    secret_set(session=session, name="DEPLOY_KEY", value="s3cr3t-value-42")
    answer = slash(slack_sender, "status")
    assert "|Rotate [redacted]>" in answer and "s3cr3t-value-42" not in answer


def test_no_live_session_in_the_channel_is_said_plainly(slack_sender, session):
    for sub in ("status", "stop", "mode plan"):
        assert slash(slack_sender, sub, channel="C0EMPTY") == (
            "There is no live Calvin session in this channel. Mention Calvin to start one."
        )


def test_another_teams_command_sees_nothing_of_this_workspace(slack_sender, session, globex_team):
    # Same channel id, same Slack user id, but typed in team T0002 (Globex): Acme's session is not there.
    for sub in ("status", "stop", "mode bypassPermissions"):
        assert slash(slack_sender, sub, team="T0002").startswith("There is no live Calvin session")
    session.refresh_from_db()
    assert (session.status, session.permission_mode) == (Session.Status.IDLE, P.DEFAULT)


def test_a_person_of_another_organisation_is_refused_and_made_no_member(slack_sender, session):
    """Slack Connect: in a channel shared with another organisation, its people can type /calvin too."""
    for sub in ("status", "stop", "mode bypassPermissions"):
        typed = command_body(team_id="T0001", channel_id=CHANNEL, user_id="U0OUT", text=sub)
        body = urllib.parse.urlencode({**dict(urllib.parse.parse_qsl(typed)), "user_team": "T0OTHER"})
        response = slack_sender.command(body)
        assert response.json() == {"response_type": "ephemeral", "text": f"Nothing changed: {OTHER_TEAM}"}
    assert not Member.objects.filter(slack_user_id="U0OUT").exists()
    session.refresh_from_db()
    assert (session.status, session.permission_mode) == (Session.Status.IDLE, P.DEFAULT)


# stop


def test_stop_by_a_plain_member_is_refused(slack_sender, session, owner):
    turn = Turn.objects.get(prompt=message_post_by_person(thread=session.thread, member=owner, text="do it"))
    answer = slash(slack_sender, "stop", user="U0PLAIN")
    assert answer.startswith("Nothing changed: Only the person who started this session or a workspace admin")
    assert names_the_thread(answer, session)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.QUEUED
    assert not [n for n in notices(session) if n.startswith("Stopped")]


@pytest.mark.parametrize("who", ["owner", "admin"])
def test_stop_by_the_owner_or_an_admin_drops_the_queue(slack_sender, session, owner, workspace, who):
    user = OWNER
    if who == "admin":
        user = "U0ADMIN"
        Member.objects.create(workspace=workspace, slack_user_id=user, role=Member.Role.ADMIN)
    turn = Turn.objects.get(prompt=message_post_by_person(thread=session.thread, member=owner, text="do it"))
    answer = slash(slack_sender, "stop", user=user)
    assert answer.startswith("Stop, the thread <") and answer.endswith(": stopped before the agent started.")
    assert names_the_thread(answer, session)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.STOPPED
    assert f"Stopped (stopped by {'owner' if who == 'owner' else 'U0ADMIN'}) before the agent started." in (
        notices(session)
    )


# mode


def test_mode_by_a_plain_member_is_refused(slack_sender, session):
    answer = slash(slack_sender, "mode bypassPermissions", user="U0PLAIN")
    assert answer == ("Nothing changed: Only the person who started this session or a workspace admin can do that.")
    assert Session.objects.get(id=session.id).permission_mode == P.DEFAULT
    assert not [n for n in notices(session) if "Permission mode" in n]


def test_mode_by_the_owner_changes_it_and_tells_the_thread(slack_sender, standin, session, celery_worker):
    answer = slash(slack_sender, "mode plan")
    assert names_the_thread(answer, session) and answer.endswith(": `default` → `plan`.")
    assert Session.objects.get(id=session.id).permission_mode == P.PLAN
    assert "Permission mode changed from default to plan by owner (/calvin in Slack)." in notices(session)[-1]
    # The notice reaches the Slack thread itself, through the outbox.
    posted = wait_for(
        lambda: [m for m in standin.messages(CHANNEL) if "Permission mode changed from default to plan" in m["text"]],
        timeout=20,
    )
    assert [m["thread_ts"] for m in posted] == [ROOT]

    assert slash(slack_sender, "mode ACCEPTEDITS").endswith(": `plan` → `acceptEdits`.")  # any case
    assert Session.objects.get(id=session.id).permission_mode == P.ACCEPT_EDITS

    again = slash(slack_sender, "mode acceptEdits")
    assert again.endswith("already is `acceptEdits`.")
    assert len([n for n in notices(session) if "Permission mode" in n]) == 2  # the same mode changes nothing
    worker_drain()


def test_mode_needs_one_known_mode(slack_sender, session):
    assert slash(slack_sender, "mode").startswith(
        "Give one mode: `default`, `acceptEdits`, `plan`, `bypassPermissions`."
    )
    assert slash(slack_sender, "mode plan please").startswith("Give one mode")
    answer = slash(slack_sender, "mode yolo")
    assert (
        answer
        == "Nothing changed: unknown permission mode 'yolo'; one of default, acceptEdits, plan, bypassPermissions"
    )
    assert Session.objects.get(id=session.id).permission_mode == P.DEFAULT
