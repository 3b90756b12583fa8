"""request_secret after the call: its card, and the private form's submission.

The card is a pure function of the request, so the worker's first post and every later
edit show the same thing. Its "Set NAME" button opens the private form (the web channel
links to it; Slack opens a modal): the value never travels through the thread. Setting is
a compare-and-swap on the waiting request, so two submissions store one value.
"""

from django.db import transaction
from django.utils import timezone

from calvin.events import SecretRequestChanged, announce
from secrets_vault.models import SecretRequest
from secrets_vault.services import secret_put, secret_value_problem
from tools.card_spec.blockkit import card_blocks
from tools.card_spec.text import clock, visible

W = SecretRequest.Status
MAX_BUTTON_LABEL = 75  # Slack: a button's text
WHO_MAY_SET = "Only the person who started this session or a workspace admin can set it."


class SecretRequestRefused(Exception):
    """The submission stores nothing; the text says why."""


def secret_request_may_set(*, member, session) -> bool:
    """The session's owner, or an owner or admin of its workspace."""
    return session.may_be_decided_by(member)


def _button_label(name: str) -> str:
    label = f"Set {name}"
    return label if len(label) <= MAX_BUTTON_LABEL else label[: MAX_BUTTON_LABEL - 1] + "…"


def _stored_as(request: SecretRequest) -> str:
    return f"a file; ${request.name} holds its path" if request.as_file else f"the environment variable ${request.name}"


def request_items(request: SecretRequest, *, agent_name: str) -> list[dict]:
    items = [
        {"kind": "header", "text": f"Secret requested: {request.name}"},
        {"kind": "text", "text": f"Agent {agent_name} asks for {request.name}: {visible(request.reason)}"},
        {"kind": "fields", "items": [{"label": "Stored as", "value": _stored_as(request)}]},
    ]
    if request.status == W.WAITING:
        items.append(
            {
                "kind": "actions",
                "action": "secret",
                "target_id": request.pk,
                "items": [{"label": _button_label(request.name), "value": "set", "style": "primary"}],
            }
        )
        items.append({"kind": "note", "text": f"{WHO_MAY_SET} The value is typed into a private form, never here."})
    else:
        who = str(request.set_by) if request.set_by else "someone"
        items.append({"kind": "note", "text": f"{request.name} was set by {who} · {clock(request.set_at)}"})
    return items


def request_card(request: SecretRequest, *, agent_name: str) -> dict:
    """{items, blocks, text}: what the card's tool call posts and later edits."""
    items = request_items(request, agent_name=agent_name)
    waiting = request.status == W.WAITING
    text = f"Secret requested: {request.name}" if waiting else f"{request.name} was set"
    return {"items": items, "blocks": card_blocks(items), "text": text}


def agent_name_of(session) -> str:
    return session.agent.name if session.agent_id else "(no agent)"


@transaction.atomic
def secret_request_fulfil(*, request_id: int, thread_id: int, member, value: str) -> SecretRequest:
    """Store the value a person typed, mark the request set, tell the agent, refresh the card."""
    from sessions.services import inbox_post

    in_thread = SecretRequest.objects.filter(pk=request_id, session__thread_id=thread_id)
    request = in_thread.select_related("session__agent").first()
    if request is None:
        raise SecretRequestRefused("there is no such secret request in this thread")
    if not secret_request_may_set(member=member, session=request.session):
        raise SecretRequestRefused(WHO_MAY_SET)
    problem = secret_value_problem(value)
    if problem:
        raise SecretRequestRefused(f"{problem}; nothing was stored")
    now = timezone.now()
    claimed = SecretRequest.objects.filter(pk=request.pk, status=W.WAITING).update(
        status=W.SET, set_by=member, set_at=now
    )
    if claimed != 1:
        request.refresh_from_db()
        raise SecretRequestRefused(f"{request.name} was already set by {request.set_by or 'someone'}")
    session = request.session
    secret_put(
        workspace_id=session.workspace_id,
        session_id=session.id,
        name=request.name,
        value=value,
        as_file=request.as_file,
        member=member,
    )
    inbox_post(
        session=session,
        text=f"The secret {request.name} was set by {member}. It is in the environment of your next shell"
        f" commands as {_stored_as(request)}.",
    )
    request.status, request.set_by, request.set_at = W.SET, member, now
    # tools/reactions.py refreshes the card once this commits (a lost refresh leaves the button
    # on the card; pressing it says who set the secret).
    announce(
        SecretRequestChanged(
            workspace_id=session.workspace_id,
            thread_id=session.thread_id,
            session_id=session.id,
            request_id=request.pk,
            status=W.SET,
        )
    )
    return request
