"""request_secret in Slack, end to end: an agent on a Slack thread asks over MCP, the card's
button (a signed block_actions payload) opens a modal through the stand-in's views.open with
a fresh trigger, the view_submission stores the value through the vault. The value appears
nowhere else: not at the stand-in, not in any stored row, not in any log line (every logger
at DEBUG, the console handler's output too)."""

import io
import json
import logging
import time
import urllib.parse
import uuid

import pytest
from django.apps import apps

from secrets_vault.models import Secret, SecretRequest
from secrets_vault.requests import WHO_MAY_SET
from secrets_vault.services import secret_set, session_secrets
from sessions.models import Message
from tests.approvals.support import worker_drain
from tests.chat.test_slack_buttons import (
    OWNER,
    block_actions,
    button,
    card_updated,
    ephemeral_to,
    globex_team,
    owner,
    posted_button,
    slack_agent,
)
from tests.conftest import text_of, wait_for
from tests.support.slack_requests import interaction_body
from tools.models import ToolCall

__all__ = ["globex_team", "owner", "slack_agent"]  # fixtures shared with the buttons' tests

pytestmark = pytest.mark.django_db(transaction=True)

NAME = "STRIPE_API_KEY"


@pytest.fixture
def typed() -> str:
    """A value of this test's own (one another test stored is already redacted from logs here).
    URL- and JSON-safe: any copy of a request body would show it verbatim."""
    return f"xq-Secret_Value-{uuid.uuid4().hex}"


class EveryLine(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))


@pytest.fixture
def every_log_line(caplog):
    """Every logger at DEBUG (slack_bolt's and slack_sdk's included); returns a function giving
    every line logged since, as handlers render them, plus what the console handler wrote."""
    caplog.set_level(logging.DEBUG)
    root = logging.getLogger()
    loggers = [root] + [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    saved = [(logger, logger.level, logger.disabled) for logger in loggers]
    handler = EveryLine()
    attached = [root] + [logger for logger in loggers if not logger.propagate]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.disabled = False
    for logger in attached:
        logger.addHandler(handler)
    console = [h for h in root.handlers if h.get_name() == "console"]
    assert console, "settings.LOGGING's console handler is on the root logger"
    stream = io.StringIO()
    streams = [(h, h.setStream(stream)) for h in console]
    try:
        yield lambda: [*handler.lines, stream.getvalue(), caplog.text]
    finally:
        for h, old in streams:
            h.setStream(old)
        for logger in attached:
            logger.removeHandler(handler)
        for logger, level, disabled in saved:
            logger.setLevel(level)
            logger.disabled = disabled


def forms_of(value: str) -> list[str]:
    return [value, urllib.parse.quote_plus(value), json.dumps(value)[1:-1]]


def stored_rows() -> str:
    """Every row of every model, as text (ciphertexts only as the bytes they are)."""
    return "\n".join(json.dumps(list(model.objects.values()), default=repr) for model in apps.get_models())


def secret_card_button(agent) -> tuple[SecretRequest, dict]:
    result = agent.call("request_secret", {"name": NAME, "reason": "To run the billing tests"})
    assert not result.is_error, text_of(result)
    request = SecretRequest.objects.get(session=agent.session, name=NAME)
    element = button(ToolCall.objects.get(id=request.pk).payload["blocks"], "set")
    assert element["action_id"] == f"secret:{request.pk}:0"
    return request, element


def opened_view(standin, count: int = 1) -> dict:
    wait_for(lambda: len(standin.views) >= count, timeout=10)
    return standin.views[count - 1]


def submission(view: dict, value: str, *, user: str = OWNER, team: str = "T0001") -> str:
    """A view_submission payload as Slack sends it: the opened view with what was typed."""
    submitted = {
        **view,
        "team_id": team,
        "app_installed_team_id": team,
        "bot_id": "B0BOT",
        "hash": "1700000002.abcd",
        "state": {"values": {"secret_value": {"value": {"type": "plain_text_input", "value": value}}}},
    }
    return interaction_body(
        {
            "type": "view_submission",
            "team": {"id": team, "domain": team.lower()},
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
            "api_app_id": "A0STANDIN",
            "token": "legacy-verification-token-unused",
            "trigger_id": "1700000002.1.standin",
            "view": submitted,
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }
    )


def nothing_stored(request: SecretRequest) -> None:
    request.refresh_from_db()
    assert request.status == SecretRequest.Status.WAITING and request.set_by is None
    assert not Secret.objects.filter(session=request.session).exists()


def test_the_owner_sets_a_secret_through_the_modal_and_it_leaks_nowhere(
    slack_agent, slack_sender, standin, owner, every_log_line, typed
):
    request, element = secret_card_button(slack_agent)
    posted, card_ts = posted_button(standin, f"secret:{request.pk}:", "set")  # the card as Slack shows it
    assert posted == element

    trigger = standin.trigger()
    started = time.monotonic()
    response = slack_sender.interaction(block_actions(element, user=OWNER, trigger_id=trigger, message_ts=card_ts))
    assert response.status_code == 200 and time.monotonic() - started < 3
    [opened] = standin.ok_calls_of("views.open")
    assert opened.params["trigger_id"] == trigger
    view = opened_view(standin)
    assert len(view["title"]["text"]) <= 24 and view["callback_id"] == "calvin_secret"
    assert json.loads(view["private_metadata"]) == {
        "request_id": request.pk,
        "thread_id": slack_agent.session.thread_id,
        "team": "T0001",
    }
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["block_id"] == "secret_value" and field["element"]["type"] == "plain_text_input"
    assert "initial_value" not in field["element"]
    shown = json.dumps(view)
    assert "encrypted" in shown and "never shows it again" in shown

    response = slack_sender.interaction(submission(view, typed))
    assert response.status_code == 200 and response.text == ""  # the modal closes

    session = slack_agent.session
    stored = session_secrets(session_id=session.id, workspace_id=session.workspace_id)
    assert [(row.name, value) for row, value in stored] == [(NAME, typed)]
    request.refresh_from_db()
    assert (request.status, request.set_by_id) == (SecretRequest.Status.SET, owner.id)
    told = wait_for(lambda: Message.objects.filter(thread=session.thread, text__contains=f"{NAME} was set by").first())
    assert "set by owner" in told.text
    card_updated(standin, card_ts, f"{NAME} was set by owner")
    worker_drain()  # the card refresh and the agent's notice have run (and logged)

    for form in forms_of(typed):
        assert form not in standin.everything_recorded()
        assert form not in stored_rows()
        assert not [line for line in every_log_line() if form in line]
    assert any("slack_bolt" in line or "slack_sdk" in line for line in every_log_line()[:-2]), "DEBUG was on"


def test_a_reason_quoting_a_secret_set_after_the_request_is_redacted_in_the_modal(
    slack_agent, slack_sender, standin, owner
):
    result = slack_agent.call("request_secret", {"name": NAME, "reason": "The old key s3cr3t-value-42 expired"})
    assert not result.is_error, text_of(result)
    request = SecretRequest.objects.get(session=slack_agent.session, name=NAME)
    element, card_ts = posted_button(standin, f"secret:{request.pk}:", "set")
    secret_set(session=slack_agent.session, name="OLD_KEY", value="s3cr3t-value-42")  # set since it was asked
    slack_sender.interaction(block_actions(element, user=OWNER, trigger_id=standin.trigger(), message_ts=card_ts))
    shown = json.dumps(opened_view(standin))
    assert "The old key [redacted] expired" in shown
    assert "s3cr3t-value-42" not in str([c.params for c in standin.calls_of("views.open")])


def test_a_plain_member_gets_no_modal(slack_agent, slack_sender, standin):
    request, element = secret_card_button(slack_agent)
    slack_sender.interaction(block_actions(element, user="U0PLAIN", trigger_id=standin.trigger()))
    assert ephemeral_to(standin, "U0PLAIN").params["text"] == f"Nothing changed: {WHO_MAY_SET}"
    assert not standin.calls_of("views.open")
    nothing_stored(request)


def test_a_refused_submitter_stores_nothing(slack_agent, slack_sender, standin, workspace, every_log_line, typed):
    from calvin.workspaces.models import Member

    request, element = secret_card_button(slack_agent)
    slack_sender.interaction(block_actions(element, user=OWNER, trigger_id=standin.trigger()))
    view = opened_view(standin)
    Member.objects.create(workspace=workspace, slack_user_id="U0PLAIN")
    for user in ("U0PLAIN", "U0NOBODY"):  # a plain member, and a Slack user Calvin never met
        response = slack_sender.interaction(submission(view, typed, user=user))
        assert response.status_code == 200
        assert response.json() == {"response_action": "errors", "errors": {"secret_value": WHO_MAY_SET}}
    nothing_stored(request)
    worker_drain()
    for form in forms_of(typed):
        assert not [line for line in every_log_line() if form in line]
        assert form not in stored_rows()


def test_a_form_of_another_team_stores_nothing(slack_agent, slack_sender, standin, globex_team, typed):
    request, element = secret_card_button(slack_agent)
    slack_sender.interaction(block_actions(element, user=OWNER, trigger_id=standin.trigger()))
    view = opened_view(standin)
    response = slack_sender.interaction(submission(view, typed, team="T0002"))
    assert response.json()["errors"]["secret_value"].startswith("this form does not belong to this Slack workspace")
    # Nor may another team's form name this workspace's thread.
    forged = {**view, "private_metadata": json.dumps({**json.loads(view["private_metadata"]), "team": "T0002"})}
    response = slack_sender.interaction(submission(forged, typed, team="T0002"))
    assert response.json()["errors"]["secret_value"].startswith("this form belongs to no Calvin thread")
    nothing_stored(request)


@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        ("x" * (64 * 1024 + 1), "the value is larger than 64 KiB; nothing was stored"),
        ("short", "the value is shorter than 6 characters"),
        ("abc\x00defgh", "the value contains a NUL character"),
        ("abc\ud800defgh", "the value is not valid Unicode text"),
    ],
)
def test_values_the_vault_refuses_store_nothing(slack_agent, slack_sender, standin, value, refusal):
    request, element = secret_card_button(slack_agent)
    slack_sender.interaction(block_actions(element, user=OWNER, trigger_id=standin.trigger()))
    response = slack_sender.interaction(submission(opened_view(standin), value))
    assert response.json()["response_action"] == "errors"
    assert response.json()["errors"]["secret_value"].startswith(refusal)
    nothing_stored(request)


def test_a_second_submission_and_a_second_press_change_nothing(slack_agent, slack_sender, standin, typed):
    request, element = secret_card_button(slack_agent)
    slack_sender.interaction(block_actions(element, user=OWNER, trigger_id=standin.trigger()))
    view = opened_view(standin)
    assert slack_sender.interaction(submission(view, typed)).text == ""
    again = slack_sender.interaction(submission(view, "another-value-entirely"))
    assert again.json()["errors"]["secret_value"] == f"{NAME} was already set by owner"
    slack_sender.interaction(block_actions(element, user=OWNER, trigger_id=standin.trigger()))
    assert ephemeral_to(standin, OWNER).params["text"] == f"Nothing changed: {NAME} was already set by owner"
    assert len(standin.calls_of("views.open")) == 1
    session = slack_agent.session
    stored = session_secrets(session_id=session.id, workspace_id=session.workspace_id)
    assert [value for _, value in stored] == [typed]


def test_an_expired_trigger_is_told_to_the_presser(slack_agent, slack_sender, standin):
    request, element = secret_card_button(slack_agent)
    slack_sender.interaction(block_actions(element, user=OWNER, trigger_id="1.2.not-issued-by-slack"))
    assert [c.answer["error"] for c in standin.calls_of("views.open")] == ["invalid_trigger_id"]
    text = ephemeral_to(standin, OWNER).params["text"]
    assert text == "Slack did not open the form in time; press the button again."
    nothing_stored(request)


def test_a_stale_submission_is_refused_and_its_body_logged_nowhere(
    slack_agent, slack_sender, standin, every_log_line, typed
):
    request, element = secret_card_button(slack_agent)
    slack_sender.interaction(block_actions(element, user=OWNER, trigger_id=standin.trigger()))
    view = opened_view(standin)
    # Delivered late (or replayed): refused and logged as refused, never with the body.
    response = slack_sender.interaction(submission(view, typed), timestamp=int(time.time()) - 6 * 60)
    assert response.status_code == 401
    nothing_stored(request)
    lines = every_log_line()
    assert any("invalid Slack signature or timestamp" in line for line in lines)
    for form in forms_of(typed):
        assert not [line for line in lines if form in line]
