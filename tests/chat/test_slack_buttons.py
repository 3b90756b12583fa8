"""Card buttons pressed in Slack: signed block_actions payloads over real HTTP to
/slack/interactivity, the real worker pressing and answering through the Web API stand-in.

Who may decide, exactly once, the agent told, a question answered; a payload of another
Slack team touches nothing of this workspace's."""

import json

import pytest

from approvals.cards import approval_card
from approvals.models import PendingApproval
from calvin.chat.slack.installations import installation_save
from calvin.workspaces.models import Member
from calvin.workspaces.services import workspace_create
from secrets_vault.services import secret_set
from sessions.services import runner_start, session_start
from tests.approvals.support import requested, told, worker_drain
from tests.conftest import Agent, text_of, wait_for
from tests.support.slack_requests import interaction_body
from tests.tools.test_ask_user_question import ask
from tools.models import Question, ToolCall
from tools.services.questions import question_items

pytestmark = pytest.mark.django_db(transaction=True)

S = PendingApproval.Status
CHANNEL = "C0001"
ROOT = "1700000000.000001"
CARD_TS = "1700000000.000300"
OWNER = "U0OWNER"
PACKAGES = {"apt": ["jq"]}


@pytest.fixture
def owner(workspace):
    member = Member.objects.get(workspace=workspace, user__username="owner")
    Member.objects.filter(id=member.id).update(slack_user_id=OWNER)
    member.refresh_from_db()
    return member


@pytest.fixture
def slack_agent(gateway, celery_worker, slack_team, workspace, owner):
    """A session bound to the Slack thread ROOT in CHANNEL, started by OWNER; its runner's MCP token."""
    session = session_start(
        workspace=workspace, channel_kind="slack", channel_id=CHANNEL, thread_ts=ROOT, owner=owner, title="Release 7"
    )
    runner, token = runner_start(session=session)
    yield Agent(session=session, runner=runner, token=token, url=f"{gateway}/mcp")
    # Presses, answers and card posts run on: let them finish before the tables are emptied.
    worker_drain()


@pytest.fixture
def globex_team(standin, django_user_model):
    """Another tenant: Globex, installed into stand-in team T0002."""
    user = django_user_model.objects.create_user("stranger", password="pw-stranger-123")
    globex = workspace_create(name="Globex", slug="globex", owner_user=user)
    team = standin.add_team(team_id="T0002", bot_token="xoxb-standin-team-0002", bot_user_id="U0BOT2", bot_id="B0BOT2")
    installation_save(
        workspace=globex, team_id="T0002", bot_token=team.bot_token, bot_id="B0BOT2", bot_user_id="U0BOT2"
    )
    return globex


def button(blocks: list[dict], value: str) -> dict:
    """The button with that value, as the card's blocks render it for Slack."""
    for block in blocks:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if element.get("value") == value:
                return element
    raise AssertionError(f"no button with value {value!r} in {blocks}")


def block_actions(
    element: dict,
    *,
    user: str,
    team: str = "T0001",
    user_team: str | None = None,
    channel: str = CHANNEL,
    thread_ts: str | None = ROOT,
    message_ts: str = CARD_TS,
    trigger_id: str = "1.2.standin-unknown",
) -> str:
    """A block_actions payload as Slack sends it for a press on `element` in a message."""
    message = {"type": "message", "ts": message_ts, "user": "U0BOT", "bot_id": "B0BOT", "text": "card"}
    container = {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": False}
    if thread_ts:
        message["thread_ts"] = container["thread_ts"] = thread_ts
    return interaction_body(
        {
            "type": "block_actions",
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": user_team or team},
            "api_app_id": "A0STANDIN",
            "token": "legacy-verification-token-unused",
            "container": container,
            "trigger_id": trigger_id,
            "team": {"id": team, "domain": team.lower()},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": "general"},
            "message": message,
            "state": {"values": {}},
            "response_url": "https://hooks.slack.invalid/actions/1",
            "actions": [
                {
                    "type": "button",
                    "block_id": "b1",
                    "action_id": element["action_id"],
                    "text": element.get("text", {"type": "plain_text", "text": "x"}),
                    "value": element.get("value", ""),
                    "action_ts": "1700000001.000001",
                }
            ],
        }
    )


def posted_button(standin, prefix: str, value: str) -> tuple[dict, str]:
    """The button whose action_id starts with `prefix` on a card Calvin posted to the stand-in
    (the Slack adapter's chat.postMessage), and that message's ts."""

    def find():
        for message in standin.messages(CHANNEL):
            for block in message.get("blocks") or []:
                for element in block.get("elements", []) if block.get("type") == "actions" else []:
                    if element.get("action_id", "").startswith(prefix) and element.get("value") == value:
                        return element, message["ts"]
        return None

    return wait_for(find, timeout=20)


def card_updated(standin, ts: str, shows: str) -> dict:
    """The card at `ts` once edited in place (chat.update) to show `shows`, with no buttons left."""

    def edited():
        message = next((m for m in standin.messages(CHANNEL) if m["ts"] == ts), None)
        if message and message.get("edited") and shows in json.dumps(message.get("blocks"), ensure_ascii=False):
            return message
        return None

    message = wait_for(edited, timeout=20)
    assert not [b for b in message["blocks"] if b["type"] == "actions"]
    assert [c for c in standin.ok_calls_of("chat.update") if c.params["ts"] == ts]
    return message


def ephemerals_to(standin, user: str) -> list:
    return [c for c in standin.calls_of("chat.postEphemeral") if c.params.get("user") == user]


def ephemeral_to(standin, user: str, count: int = 1):
    """The `count`-th ephemeral answer to `user`, once the worker sent it."""
    calls = wait_for(lambda: (lambda found: found if len(found) >= count else None)(ephemerals_to(standin, user)), 20)
    return calls[count - 1]


def press(slack_sender, element: dict, **kwargs):
    response = slack_sender.interaction(block_actions(element, **kwargs))
    assert response.status_code == 200, response.text
    return response


def approval_button(approval: PendingApproval, value: str) -> dict:
    return button(approval_card(PendingApproval.objects.get(id=approval.id))["blocks"], value)


def unchanged(approval: PendingApproval) -> None:
    approval.refresh_from_db()
    assert approval.status == S.PENDING and approval.decided_by is None
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.AWAITING_APPROVAL


# Approvals


def test_the_sessions_owner_approves_in_slack_and_the_agent_learns_it(slack_agent, slack_sender, standin, owner):
    approval = requested(slack_agent, "install_packages", PACKAGES)
    element, card_ts = posted_button(standin, f"approval:{approval.id}:", "approve")  # as Slack shows it
    assert element == approval_button(approval, "approve") and element["action_id"] == f"approval:{approval.id}:0"

    response = press(slack_sender, element, user=OWNER, message_ts=card_ts)
    assert response.text == ""  # acknowledged at once; the answer comes ephemerally

    answer = ephemeral_to(standin, OWNER)
    assert answer.params["channel"] == CHANNEL and answer.params["thread_ts"] == ROOT
    assert answer.params["text"].startswith("Approved: install apt: jq")
    assert answer.headers.get("Authorization") == "Bearer xoxb-standin-team-0001"
    wait_for(lambda: PendingApproval.objects.get(id=approval.id).status == S.APPLIED, timeout=20)
    approval.refresh_from_db()
    assert (approval.decided_by_id, approval.decided_via) == (owner.id, "slack")
    assert "approved by owner and applied" in told(slack_agent, "install_packages")
    card_updated(standin, card_ts, "Approved by owner · applied")  # the card says who decided, in place


def test_a_workspace_admin_approves_a_session_someone_else_started(slack_agent, slack_sender, standin, workspace):
    admin = Member.objects.create(workspace=workspace, slack_user_id="U0ADMIN", role=Member.Role.ADMIN)
    approval = requested(slack_agent, "install_packages", PACKAGES)
    element, card_ts = posted_button(standin, f"approval:{approval.id}:", "deny")
    press(slack_sender, element, user="U0ADMIN", message_ts=card_ts)
    assert ephemeral_to(standin, "U0ADMIN").params["text"].startswith("Denied: install apt: jq")
    card_updated(standin, card_ts, "Denied by U0ADMIN")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_id, approval.decided_via) == (S.DENIED, admin.id, "slack")
    assert "was denied by U0ADMIN" in told(slack_agent, "denied")


def test_a_plain_member_is_refused_ephemerally_and_nothing_changes(slack_agent, slack_sender, standin, workspace):
    approval = requested(slack_agent, "install_packages", PACKAGES)
    _, card_ts = posted_button(standin, f"approval:{approval.id}:", "approve")
    for count, value in enumerate(("approve", "deny"), start=1):
        press(slack_sender, approval_button(approval, value), user="U0PLAIN", message_ts=card_ts)
        answer = ephemeral_to(standin, "U0PLAIN", count)
        assert answer.params["text"].startswith("Nothing changed: only the workspace's owners and admins can decide")
    unchanged(approval)
    worker_drain()
    assert not [c for c in standin.calls_of("chat.update") if c.params["ts"] == card_ts]  # the card still asks
    # Met on first contact: a plain member of this workspace, nothing more.
    assert Member.objects.get(workspace=workspace, slack_user_id="U0PLAIN").role == Member.Role.MEMBER


def test_a_payload_of_another_slack_team_touches_nothing_here(slack_agent, slack_sender, standin, globex_team):
    approval = requested(slack_agent, "install_packages", PACKAGES)
    acme_members = set(Member.objects.filter(workspace=slack_agent.session.workspace).values_list("id", flat=True))
    # The same channel and thread ids, the session owner's Slack id, but from team T0002.
    press(slack_sender, approval_button(approval, "approve"), user=OWNER, team="T0002")
    answer = ephemeral_to(standin, OWNER)
    assert answer.headers.get("Authorization") == "Bearer xoxb-standin-team-0002"  # answered by Globex's bot
    assert answer.params["text"] == "Nothing changed: this card belongs to no Calvin thread of this workspace"
    unchanged(approval)
    assert set(Member.objects.filter(workspace=slack_agent.session.workspace).values_list("id", flat=True)) == (
        acme_members
    )


def test_a_user_of_another_team_in_a_shared_channel_is_refused(slack_agent, slack_sender, standin):
    approval = requested(slack_agent, "install_packages", PACKAGES)
    # Slack Connect: the payload comes through T0001's app, the user belongs to another organisation.
    press(slack_sender, approval_button(approval, "approve"), user=OWNER, user_team="T0OTHER")
    text = ephemeral_to(standin, OWNER).params["text"]
    assert text == "Nothing changed: Only people of the Slack workspace Calvin is installed in can do that here."
    unchanged(approval)


def test_a_second_click_changes_nothing_and_says_so(slack_agent, slack_sender, standin, owner):
    approval = requested(slack_agent, "install_packages", PACKAGES)
    deny, approve = approval_button(approval, "deny"), approval_button(approval, "approve")
    press(slack_sender, deny, user=OWNER)
    assert ephemeral_to(standin, OWNER).params["text"].startswith("Denied")
    press(slack_sender, approve, user=OWNER)  # the card as it was before the first click
    assert ephemeral_to(standin, OWNER, 2).params["text"] == "Nothing changed: already denied by owner"
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_id) == (S.DENIED, owner.id)
    assert ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.DENIED


def test_a_press_on_a_card_of_another_thread_changes_nothing(slack_agent, slack_sender, standin, workspace, owner):
    approval = requested(slack_agent, "install_packages", PACKAGES)
    session_start(workspace=workspace, channel_kind="slack", channel_id=CHANNEL, thread_ts="1700000000.000099")
    press(slack_sender, approval_button(approval, "approve"), user=OWNER, thread_ts="1700000000.000099")
    assert ephemeral_to(standin, OWNER).params["text"] == "Nothing changed: there is no such approval in this thread"
    unchanged(approval)


def test_a_card_that_is_the_threads_root_is_found_by_its_own_ts(slack_agent, slack_sender, standin, owner):
    approval = requested(slack_agent, "install_packages", PACKAGES)
    press(slack_sender, approval_button(approval, "deny"), user=OWNER, thread_ts=None, message_ts=ROOT)
    assert ephemeral_to(standin, OWNER).params["text"].startswith("Denied")
    assert PendingApproval.objects.get(id=approval.id).status == S.DENIED


def test_link_buttons_and_foreign_buttons_are_just_acknowledged(slack_agent, slack_sender, standin):
    for action_id in ("link-0", "somebody_elses_button", "approval:1:x"):
        press(slack_sender, {"action_id": action_id, "value": "approve"}, user=OWNER)
    worker_drain()
    assert not standin.calls_of("chat.postEphemeral")


# Questions


def test_a_question_is_answered_from_slack(slack_agent, slack_sender, standin, owner, workspace):
    admin = Member.objects.create(workspace=workspace, slack_user_id="U0ADMIN", role=Member.Role.ADMIN)
    options = ["Yes", {"label": "Ship it", "selectedLabel": "Shipped", "value": "ship-7"}, "Wait"]
    future = ask(slack_agent, title="Release 7", question="Ship release 7 now?", options=options, timeout=60)
    question = wait_for(lambda: Question.objects.filter(tool_call__session=slack_agent.session).first(), timeout=20)
    element = button(
        [{"type": "actions", "elements": _elements(question_items(question))}], "1"
    )  # the card's "Ship it"
    assert element["action_id"] == f"question:{question.tool_call_id}:1"
    posted, card_ts = posted_button(standin, f"question:{question.tool_call_id}:", "1")
    assert posted == element
    press(slack_sender, element, user="U0ADMIN", message_ts=card_ts)  # a workspace admin, not its starter
    result = future.result(timeout=20)
    assert not result.is_error, text_of(result)
    assert text_of(result) == "ship-7"
    assert ephemeral_to(standin, "U0ADMIN").params["text"] == "Answered: Shipped"
    question.refresh_from_db()
    assert (question.status, question.answer_index, question.answered_by_id) == ("answered", 1, admin.id)
    card_updated(standin, card_ts, "Answered by U0ADMIN")

    press(slack_sender, element, user=OWNER)
    assert ephemeral_to(standin, OWNER).params["text"] == "Nothing changed: already answered by U0ADMIN: Ship it"


def test_a_plain_member_or_another_team_is_refused_ephemerally_and_the_question_stays_open(
    slack_agent, slack_sender, standin, owner, globex_team
):
    future = ask(slack_agent, title="Release 7", question="Ship?", options=["Yes", "No"], timeout=60)
    question = wait_for(lambda: Question.objects.filter(tool_call__session=slack_agent.session).first(), timeout=20)
    element, card_ts = posted_button(standin, f"question:{question.tool_call_id}:", "0")
    press(slack_sender, element, user="U0PLAIN", message_ts=card_ts)
    assert ephemeral_to(standin, "U0PLAIN").params["text"] == (
        "Nothing changed: only the person who started this session or an owner or admin of its workspace can answer"
    )
    # Globex's owner, through Globex's team: no thread of theirs holds this card.
    press(slack_sender, element, user="U0GLOBEX", team="T0002", message_ts=card_ts)
    text = ephemeral_to(standin, "U0GLOBEX").params["text"]
    assert text == "Nothing changed: this card belongs to no Calvin thread of this workspace"
    worker_drain()
    question.refresh_from_db()
    assert (question.status, question.answered_by) == ("open", None) and not future.done()
    assert not [c for c in standin.calls_of("chat.update") if c.params["ts"] == card_ts]  # the card still asks
    press(slack_sender, element, user=OWNER, message_ts=card_ts)
    assert text_of(future.result(timeout=20)) == "Yes"


def test_an_answer_quoting_a_secret_set_after_the_question_is_redacted(slack_agent, slack_sender, standin, owner):
    future = ask(slack_agent, title="Deploy", question="Which key?", options=["Old", "s3cr3t-value-42"], timeout=60)
    question = wait_for(lambda: Question.objects.filter(tool_call__session=slack_agent.session).first(), timeout=20)
    element, card_ts = posted_button(standin, f"question:{question.tool_call_id}:", "1")
    secret_set(session=slack_agent.session, name="DEPLOY_KEY", value="s3cr3t-value-42")  # set since it was asked
    press(slack_sender, element, user=OWNER, message_ts=card_ts)
    future.result(timeout=20)
    assert ephemeral_to(standin, OWNER).params["text"] == "Answered: [redacted]"
    worker_drain()
    assert "s3cr3t-value-42" not in str([c.params for c in standin.calls_of("chat.postEphemeral")])


def _elements(items: list[dict]) -> list[dict]:
    from tools.card_spec.blockkit import card_blocks

    return [e for block in card_blocks(items) if block["type"] == "actions" for e in block["elements"]]
