"""request_secret in Slack: the card's "Set NAME" button opens a modal, its submission stores
the value through the vault (secrets_vault/requests.py), the same rules as the web channel's
private form (calvin/dashboard/secret_form.py).

Only the session's owner or a workspace admin gets the modal, and the submitter is checked
again. The value is write-only: the modal never holds one (Slack has no masked input, so it
says the value is stored encrypted and never shown), `private_metadata` names the request,
the thread and the team only, and the value is never sent back to Slack, queued, stored
outside the vault or logged. It is registered for log redaction the moment it arrives.
"""

import json
import logging
import re

from approvals.cards import visible
from calvin.chat.base import ChatPermanentError
from calvin.chat.slack.installations import bot_for_team
from calvin.chat.slack.lookups import member_for_slack_user, slack_thread
from calvin.chat.slack.outbox import secrets_redacted
from calvin.chat.slack.web_api import slack_client, slack_error
from secrets_vault.crypto import VaultCorrupt, VaultUnavailable
from secrets_vault.models import MAX_VALUE_BYTES, SecretRequest
from secrets_vault.redaction import remember_values
from secrets_vault.requests import WHO_MAY_SET, SecretRequestRefused, secret_request_fulfil, secret_request_may_set
from secrets_vault.services import secret_value_problem
from sessions.models import Thread

CALLBACK_ID = "calvin_secret"
BLOCK_ID = "secret_value"
ACTION_ID = "value"
TITLE = "Set a secret"  # Slack: at most 24 characters
MAX_KIB = MAX_VALUE_BYTES // 1024
# views.open must reach Slack within the trigger's 3 s; a slow Slack is a refusal, not a hang.
OPEN_TIMEOUT = 2.5
WRITE_ONLY = (
    "Slack cannot hide what you type here. Calvin stores the value encrypted and never shows it again:"
    " not in the thread, not on the card, not to you."
)


class ModalRefused(Exception):
    """No modal opens (or nothing is stored); the text says why."""


def _thread_and_request(*, workspace_id: int, channel_id: str, thread_ts: str, request_id: int):
    thread = slack_thread(workspace_id=workspace_id, channel_id=channel_id, thread_ts=thread_ts)
    if thread is None:
        raise ModalRefused("this card belongs to no Calvin thread of this workspace")
    request = (
        SecretRequest.objects.select_related("session__agent", "set_by")
        .filter(pk=request_id, session__thread_id=thread.id)
        .first()
    )
    if request is None:
        raise ModalRefused("there is no such secret request in this thread")
    return thread, request


def secret_modal_view(
    *,
    team_id: str,
    workspace_id: int,
    channel_id: str,
    thread_ts: str,
    user_id: str,
    user_team_id: str,
    request_id: int,
) -> dict:
    """The modal for a press on a secret request's button, or ModalRefused: not a person
    who may set it, already set, not this workspace's."""
    if user_team_id != team_id:
        raise ModalRefused(WHO_MAY_SET)
    thread, request = _thread_and_request(
        workspace_id=workspace_id, channel_id=channel_id, thread_ts=thread_ts, request_id=request_id
    )
    member = member_for_slack_user(workspace_id=workspace_id, slack_user_id=user_id)
    if not secret_request_may_set(member=member, session=request.session):
        raise ModalRefused(WHO_MAY_SET)
    if request.status != SecretRequest.Status.WAITING:
        raise ModalRefused(f"{request.name} was already set by {request.set_by or 'someone'}")
    agent = request.session.agent.name if request.session.agent_id else "(no agent)"
    stored_as = f"a file whose path is in ${request.name}" if request.as_file else f"${request.name}"
    # The reason is the agent's words: a secret of the session set since the request is redacted.
    try:
        asks = secrets_redacted(
            thread=thread, value=f"Agent {agent} asks for {request.name}: {visible(request.reason)}"
        )
    except ChatPermanentError:
        raise ModalRefused("Calvin cannot check this request against the session's secrets now; try again") from None
    return {
        "type": "modal",
        "callback_id": CALLBACK_ID,
        "title": {"type": "plain_text", "text": TITLE},
        "submit": {"type": "plain_text", "text": "Store it"},
        "close": {"type": "plain_text", "text": "Cancel"},
        # Which request, in which thread, for which team: never anything typed.
        "private_metadata": json.dumps({"request_id": request.pk, "thread_id": thread.id, "team": team_id}),
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "plain_text",
                    "text": asks[:3000],
                },
            },
            {
                "type": "input",
                "block_id": BLOCK_ID,
                "label": {"type": "plain_text", "text": request.name[:2000]},
                "element": {"type": "plain_text_input", "action_id": ACTION_ID, "multiline": request.as_file},
                "hint": {"type": "plain_text", "text": f"The agent gets it as {stored_as}. At most {MAX_KIB} KiB."},
            },
            {"type": "context", "elements": [{"type": "mrkdwn", "text": WRITE_ONLY}]},
        ],
    }


def secret_modal_open(*, bot_token: str, trigger_id: str, view: dict) -> None:
    """views.open, inside the request that carried the trigger (it expires after ~3 s)."""
    client = slack_client(bot_token)
    client.timeout = OPEN_TIMEOUT
    try:
        client.views_open(trigger_id=trigger_id, view=view)
    except Exception as exc:
        raise slack_error(exc, doing="views.open") from exc


def _submitted_value(view: dict) -> str:
    state = ((view.get("state") or {}).get("values") or {}).get(BLOCK_ID) or {}
    value = (state.get(ACTION_ID) or {}).get("value")
    return value if isinstance(value, str) else ""


def _metadata(view: dict) -> dict:
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except ValueError:
        return {}
    return metadata if isinstance(metadata, dict) else {}


def secret_modal_submit(*, team_id: str, user_id: str, user_team_id: str, view: dict) -> str | None:
    """Store what was typed into the modal. None when stored; else the refusal to show on
    the input (nothing stored)."""
    value = _submitted_value(view)
    try:
        _submit(team_id=team_id, user_id=user_id, user_team_id=user_team_id, view=view, value=value)
    except (ModalRefused, SecretRequestRefused) as exc:
        return str(exc)
    except (VaultUnavailable, VaultCorrupt):
        return "this Calvin cannot store secrets now (its vault key is missing); nothing was stored"
    return None


def _submit(*, team_id: str, user_id: str, user_team_id: str, view: dict, value: str) -> None:
    metadata = _metadata(view)
    request_id, thread_id = metadata.get("request_id"), metadata.get("thread_id")
    if metadata.get("team") != team_id or not isinstance(request_id, int) or not isinstance(thread_id, int):
        raise ModalRefused("this form does not belong to this Slack workspace; nothing was stored")
    if user_team_id != team_id:
        raise ModalRefused(WHO_MAY_SET)
    bot = bot_for_team(team_id)
    if bot is None:
        raise ModalRefused("Calvin is not installed in this Slack workspace; nothing was stored")
    thread = Thread.objects.filter(
        id=thread_id, workspace_id=bot.workspace_id, channel_kind=Thread.ChannelKind.SLACK
    ).first()
    if thread is None:
        raise ModalRefused("this form belongs to no Calvin thread of this workspace; nothing was stored")
    # Checked again here: the person submitting must be one who may set it, now.
    member = member_for_slack_user(workspace_id=bot.workspace_id, slack_user_id=user_id, create=False)
    request = (
        SecretRequest.objects.select_related("session").filter(pk=request_id, session__thread_id=thread.id).first()
    )
    if request is None:
        raise ModalRefused("there is no such secret request in this thread; nothing was stored")
    if not secret_request_may_set(member=member, session=request.session):
        raise ModalRefused(WHO_MAY_SET)
    if secret_value_problem(value) is None:
        # Before the vault and the agent's notice run: any later log line of this process
        # redacts it. Only a permitted person's value: others could crowd out real ones.
        remember_values([value])
    from calvin.audit.context import audit_origin

    with audit_origin(via="slack"):  # the audit row's channel: Slack's modal, not the web request carrying it
        secret_request_fulfil(request_id=request_id, thread_id=thread.id, member=member, value=value)


# Bolt logs a refused request's whole body (a submission with a stale timestamp carries a
# value nobody registered for redaction) at INFO on this logger, whatever the levels are.
BOLT_VERIFICATION_LOGGER = "slack_bolt.RequestVerification"
_BODY_RE = re.compile(r"body: .*", re.DOTALL)


class RequestBodyUnlogged(logging.Filter):
    """Keeps the line, drops the request body from it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        if "body:" in message:
            record.msg, record.args = _BODY_RE.sub("body: (not logged: it may hold a secret))", message), None
        return True


def request_bodies_unlogged() -> None:
    """Attach the filter to Bolt's verification logger, once per process."""
    logger = logging.getLogger(BOLT_VERIFICATION_LOGGER)
    if not any(isinstance(f, RequestBodyUnlogged) for f in logger.filters):
        logger.addFilter(RequestBodyUnlogged())
