"""Slack interactivity listeners: card buttons and the secret modal.

A card button is acknowledged at once and pressed by the worker, which answers the presser
ephemerally. The secret button is the exception: its modal must be opened with the
payload's trigger id within ~3 s, so the check and `views.open` happen in the request.
The modal's submission is answered in the request too (Slack shows the refusal on the
input, or closes the modal)."""

import logging
import re

from calvin.celery import queue_on_commit
from calvin.chat import ChatPermanentError, ChatTemporaryError
from calvin.chat.slack.interaction_tasks import slack_button_pressed, slack_ephemeral_send
from calvin.chat.slack.interactions import (
    ACTION_ID_RE,
    LINK_ACTION_RE,
    press_from_payload,
    workspace_id_for_team,
)
from calvin.chat.slack.secret_modal import (
    BLOCK_ID,
    CALLBACK_ID,
    ModalRefused,
    request_bodies_unlogged,
    secret_modal_open,
    secret_modal_submit,
    secret_modal_view,
)

log = logging.getLogger(__name__)

# Bolt matches a pattern with search(): anchored, so "xsecret:1:0" is not the secret button.
LINK_ACTION = re.compile(rf"\A{LINK_ACTION_RE.pattern}\Z")
SECRET_ACTION = re.compile(r"\Asecret:[0-9]{1,18}:[0-9]{1,4}\Z")
CARD_ACTION = re.compile(rf"\A{ACTION_ID_RE.pattern}\Z")


def _tell(press, text: str) -> None:
    queue_on_commit(slack_ephemeral_send, press.team_id, press.channel_id, press.user_id, press.thread_ts, text)


def link_pressed(ack):
    ack()  # Slack opens the URL itself


def card_button_pressed(ack, body, action, context):
    ack()
    press = press_from_payload(body=body, action=action, team_id=context.team_id or "")
    if press is None:
        return
    queue_on_commit(
        slack_button_pressed,
        press.team_id,
        press.user_id,
        press.user_team_id,
        press.channel_id,
        press.thread_ts,
        press.action,
        press.target_id,
        press.value,
    )


def secret_button_pressed(ack, body, action, context):
    ack()
    press = press_from_payload(body=body, action=action, team_id=context.team_id or "")
    workspace_id = workspace_id_for_team(press.team_id) if press else None
    if press is None or workspace_id is None:
        return
    try:
        view = secret_modal_view(
            team_id=press.team_id,
            workspace_id=workspace_id,
            channel_id=press.channel_id,
            thread_ts=press.thread_ts,
            user_id=press.user_id,
            user_team_id=press.user_team_id,
            request_id=press.target_id,
        )
        secret_modal_open(bot_token=context.bot_token, trigger_id=body.get("trigger_id", ""), view=view)
    except ModalRefused as exc:
        _tell(press, f"Nothing changed: {exc}")
    except (ChatTemporaryError, ChatPermanentError) as exc:
        log.warning("the secret form for request %s did not open: %s", press.target_id, exc)
        _tell(press, "Slack did not open the form in time; press the button again.")


def secret_submitted(ack, body, view, context):
    user = body.get("user") or {}
    team_id = context.team_id or ""
    try:
        refusal = secret_modal_submit(
            team_id=team_id, user_id=user.get("id", ""), user_team_id=user.get("team_id") or team_id, view=view
        )
    except Exception:
        # Answered, never a 500: an error response's log record carries the request, body and all.
        log.exception("a secret form's submission failed; nothing was stored")
        refusal = "Calvin could not store it just now; nothing was stored. Try again."
    if refusal:
        ack(response_action="errors", errors={BLOCK_ID: refusal})
    else:
        ack()  # closes the modal; the card and the agent are told by the vault's service


def other_action(ack):
    ack()  # a button Calvin did not make: nothing to do, but Slack must not show an error


def register(app) -> None:
    request_bodies_unlogged()
    # Bolt runs the first listener that matches: the secret button before other card buttons.
    app.action(LINK_ACTION)(link_pressed)
    app.action(SECRET_ACTION)(secret_button_pressed)
    app.action(CARD_ACTION)(card_button_pressed)
    app.action(re.compile(".*"))(other_action)
    app.view(CALLBACK_ID)(secret_submitted)
