"""The thread page in people's words: mrkdwn in messages and cards (with names from this workspace
only), yes / no / — in tables, statuses as words, one time format, notices meant for the agent
told to people, and a send_card choice marked after a reload. Real MCP, worker and services."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.template import Context, Template

from approvals.models import PendingApproval
from approvals.services import approval_decide, approval_expire_now
from calvin.dashboard.templatetags.words import STATUS_WORDS, calvin_time, cell, status_words
from calvin.workspaces.models import Member
from secrets_vault.crypto import new_key
from secrets_vault.models import SecretRequest
from secrets_vault.requests import secret_request_fulfil
from sessions.models import Message, Session, Turn
from sessions.services import message_post_by_person
from sessions.turns import session_stop
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import MEMBER_PASSWORD, OWNER_PASSWORD, logged_in
from tests.tools.test_ask_user_question import tap
from tools.models import Question, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def page_of(client, member, thread_id: int) -> str:
    client.force_login(member.user)
    response = client.get(f"/threads/{thread_id}/")
    assert response.status_code == 200
    return response.content.decode()


# ---------------------------------------------------------------- words


@pytest.mark.parametrize(
    ("kind", "choices"),
    [
        ("session", Session.Status),
        ("turn", Turn.Status),
        ("tool_call", ToolCall.Status),
        ("approval", PendingApproval.Status),
        ("question", Question.Status),
        ("secret_request", SecretRequest.Status),
    ],
)
def test_every_status_a_page_shows_has_words_of_its_own(kind, choices):
    for value in choices.values:
        assert value in STATUS_WORDS[kind], f"{kind} {value} has no words"
        assert "_" not in status_words(value, kind)
        assert "_" not in status_words(choices(value))  # the enum member itself, and without a kind


def test_statuses_read_as_people_say_them():
    assert status_words("awaiting_approval") == "waiting for approval"
    assert status_words("pending", "approval") == "waiting for a decision"
    assert status_words("pending", "tool_call") == "queued to run"
    assert status_words("idle", "session") == "waiting for a message"
    assert status_words("revoked", "host") == "token revoked"
    assert status_words("some_new_state") == "some new state"  # never the raw identifier


def test_cells_read_as_people_write_them():
    assert [cell(v) for v in (True, False, None, "", 3.0, 2.5, 412, "True")] == [
        "yes",
        "no",
        "—",
        "—",
        "3",
        "2.5",
        "412",
        "True",  # a string the agent wrote stays as written
    ]


def test_one_time_format_that_time_js_rewrites():
    tokyo = timezone(timedelta(hours=9))
    moment = datetime(2026, 12, 2, 23, 2, 30, tzinfo=tokyo)  # 14:02:30 UTC
    assert calvin_time(moment) == '<time datetime="2026-12-02T14:02:30Z">2026-12-02 14:02 UTC</time>'
    assert calvin_time(datetime(2026, 12, 2, 14, 2)) == calvin_time(datetime(2026, 12, 2, 14, 2, tzinfo=UTC))
    assert calvin_time(None) == "—"
    rendered = Template("{% load words %}{{ t|calvin_time }}").render(Context({"t": moment}))
    assert rendered == calvin_time(moment)  # not escaped a second time


# ---------------------------------------------------------------- the thread page


TABLE_CARD = {
    "root": "card",
    "elements": {
        "card": {"type": "Card", "props": {"title": "Checks"}, "children": ["intro", "table", "owner"]},
        "intro": {"type": "Text", "props": {"text": "*All* green, see <https://ci.example.com/r/1|the run>"}},
        "table": {
            "type": "Table",
            "props": {
                "columns": ["check", "passed", "flaky", "note"],
                "rows": [["lint", True, False, None], ["test", False, None, "`retry` it"]],
            },
        },
        "owner": {"type": "Field", "props": {"label": "Owner", "value": "*<@U0ADA>*"}},
    },
}


def test_a_cards_booleans_and_nulls_read_yes_no_dash_on_the_web_and_in_slack(agent, client, owner_member):
    result = agent.call("post_card", {"spec": TABLE_CARD})
    assert not result.is_error, text_of(result)
    message = wait_for(lambda: Message.objects.filter(tool_call_id=result.structured_content["tool_call_id"]).first())
    table = next(item for item in message.card if item["kind"] == "table")
    assert table["rows"] == [["lint", "yes", "no", "—"], ["test", "no", "—", "`retry` it"]]
    slack_rows = next(b for b in message.blocks if b["type"] == "table")["rows"]
    assert [c["text"] for c in slack_rows[1]] == ["lint", "yes", "no", "—"]

    Member.objects.filter(id=owner_member.id).update(slack_user_id="U0ADA", display_name="Ada")
    page = page_of(client, owner_member, agent.session.thread_id)
    assert "<td>lint</td><td>yes</td><td>no</td><td>—</td>" in page
    assert "<td><code>retry</code> it</td>" in page
    link = '<a href="https://ci.example.com/r/1" rel="noopener noreferrer">the run</a>'
    assert f"<p><strong>All</strong> green, see {link}</p>" in page
    assert '<strong>Owner</strong><br><strong><span class="mention">@Ada</span></strong>' in page


def test_mentions_show_names_of_the_threads_own_workspace_only(
    client, workspace, owner_member, other_workspace, stranger_member
):
    from sessions.services import session_start

    session = session_start(workspace=workspace, owner=owner_member, title="names")
    Member.objects.filter(id=owner_member.id).update(slack_user_id="U0ADA", display_name="Ada")
    # Globex has a member with the same Slack id and one Acme never had: neither name may show in Acme.
    Member.objects.filter(id=stranger_member.id).update(slack_user_id="U0GARY", display_name="Globex Gary")
    Member.objects.create(workspace=other_workspace, slack_user_id="U0ADA", display_name="Globex Ada")
    Message.objects.create(
        thread=session.thread, author=Message.Author.AGENT, text="thanks <@U0ADA>, ask <@U0GARY> in <#C1|ops>"
    )
    page = page_of(client, owner_member, session.thread_id)
    assert '<span class="mention">@Ada</span>' in page and '<span class="mention">@U0GARY</span>' in page
    assert '<span class="mention">#ops</span>' in page
    assert "Globex" not in page


def test_message_times_are_one_format_in_utc_before_the_script(agent, client, owner_member):
    message = Message.objects.create(thread=agent.session.thread, author=Message.Author.AGENT, text="hi")
    Message.objects.filter(id=message.id).update(created_at=datetime(2026, 12, 2, 14, 2, 59, tzinfo=UTC))
    page = page_of(client, owner_member, agent.session.thread_id)
    assert 'agent · <time datetime="2026-12-02T14:02:59Z">2026-12-02 14:02 UTC</time>' in page
    assert '<script src="/static/dashboard/time.js" defer></script>' in page


# ---------------------------------------------------------------- notices


def test_approval_outcomes_meant_for_the_agent_read_in_peoples_words(agent, client, owner_member):
    denied = _requested(agent, {"apt": ["jq"]})
    approval_decide(approval_id=denied.id, member=owner_member, approve=False, via="web")
    expired = _requested(agent, {"apt": ["ripgrep"]})
    approval_expire_now(approval_id=expired.id, actor=owner_member)
    told = wait_for(lambda: Message.objects.filter(thread=agent.session.thread, kind="system").count() == 2)
    assert told

    page = page_of(client, owner_member, agent.session.thread_id)
    assert (
        '<div class="system-notice" data-notice="denied"><p>owner denied the agent&#x27;s request'
        " “install apt: jq”. Nothing was changed.</p></div>"
    ) in page
    assert '<div class="system-notice" data-notice="expired"><p>The agent&#x27;s request “install apt: ripgrep”' in page
    # What the agent was told is still there, word for word, a click away.
    assert page.count('<details class="for-agent"><summary>What the agent was told</summary>') == 2
    assert "<p>Your request install_packages (approval" in page and "was denied by owner. Nothing was changed." in page
    agent_words = Message.objects.get(thread=agent.session.thread, text__contains="denied by owner").text
    assert agent_words.startswith("Your request install_packages (approval ")  # unchanged for the agent


def _requested(agent, packages: dict) -> PendingApproval:
    result = agent.nanoclaw.call("install_packages", packages)
    assert not result.is_error, text_of(result)
    return PendingApproval.objects.get(id=result.structured_content["approval_id"])


def test_a_secret_set_and_a_stop_read_in_peoples_words(agent, client, owner_member, settings):
    settings.SP_STORE_KEY = [new_key()]
    result = agent.call("request_secret", {"name": "STRIPE_API_KEY", "reason": "billing tests"})
    assert not result.is_error, text_of(result)
    request = wait_for(lambda: SecretRequest.objects.filter(session=agent.session).first())
    secret_request_fulfil(
        request_id=request.pk, thread_id=agent.session.thread_id, member=owner_member, value="sk_test_xyz"
    )
    message_post_by_person(thread=agent.session.thread, member=owner_member, text="and then?")
    session_stop(session_id=agent.session.id, member=owner_member, via="web")

    page = page_of(client, owner_member, agent.session.thread_id)
    assert '<div class="system-notice" data-notice="secret"><p>owner set the secret STRIPE_API_KEY;' in page
    assert '<div class="system-notice" data-notice="stopped"><p>Stopped by owner before the agent started.</p>' in page
    assert "sk_test_xyz" not in page


# ---------------------------------------------------------------- send_card choices


CHOICE_CARD = {
    "title": "Release 7.1",
    "description": "Roll it out?",
    "actions": [{"label": "Deploy", "value": "deploy-prod"}, {"label": "Hold", "value": "hold"}],
}


def _button(page: str, label: str) -> str:
    start = page.index(f">{label}</button>")
    return page[page.rindex("<button", 0, start) : start]


def test_a_chosen_send_card_button_stays_marked_for_its_chooser_and_others_see_who_chose(
    agent, gateway, client, owner_member, plain_member
):
    result = agent.nanoclaw.call("send_card", {"card": CHOICE_CARD})
    assert not result.is_error, text_of(result)
    call_id = result.structured_content["tool_call_id"]
    message = wait_for(lambda: Message.objects.filter(tool_call_id=call_id, delivered_at__isnull=False).first())
    with logged_in(gateway, "owner", OWNER_PASSWORD) as http:
        assert tap(http, message.thread_id, call_id, 0, action="choice").status_code == 200

    mine = page_of(client, owner_member, message.thread_id)  # the reload
    assert 'class=" chosen picked" aria-pressed="true" disabled' in _button(mine, "Deploy")
    assert "chosen" not in _button(mine, "Hold") and "disabled" in _button(mine, "Hold")
    assert '<p class="note choices">Chosen: Deploy by you.</p>' in mine

    theirs = page_of(client, plain_member, message.thread_id)
    assert 'class=" picked"' in _button(theirs, "Deploy") and "disabled" not in _button(theirs, "Deploy")
    assert "aria-pressed" not in theirs
    assert '<p class="note choices">Chosen: Deploy by owner.</p>' in theirs

    with logged_in(gateway, "member", MEMBER_PASSWORD) as http:
        assert tap(http, message.thread_id, call_id, 1, action="choice").status_code == 200
    assert '<p class="note choices">Chosen: Deploy by you; Hold by member.</p>' in page_of(
        client, owner_member, message.thread_id
    )
