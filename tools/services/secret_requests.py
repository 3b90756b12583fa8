"""request_secret (seed 000): check the request, record it, and return at once.

The card (posted by the worker like any card) carries a "Set NAME" button that opens a
private form; the value is typed there and never passes through the agent or the thread.
The agent ends its turn and is told in its inbox when the secret is set
(secrets_vault/requests.py).
"""

from django.db import IntegrityError, transaction

from calvin.workspaces.models import Agent
from secrets_vault.crypto import vault_available
from secrets_vault.models import MAX_NAME, NAME_RE, SecretRequest
from secrets_vault.requests import agent_name_of, request_card
from secrets_vault.services import secret_name_taken
from tools.caller import Caller
from tools.errors import ToolRefused
from tools.models import ToolCall
from tools.services.card_edits import tool_call_card_replace
from tools.services.common import secret_scanner_for, tool_call_record

MIN_REASON, MAX_REASON = 3, 200
# "One line": every character Python (and so a chat client) would break a line at.
LINE_BREAKS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
NO_VAULT = (
    "this gateway has no SP_STORE_KEY, so it cannot store secrets; its operator sets one"
    " (python manage.py vault_key makes a key)"
)


def _problems(name, reason) -> list[str]:
    problems = []
    if not NAME_RE.fullmatch(name) or len(name) > MAX_NAME:
        problems.append(
            f"name: must be an environment variable name (a letter or underscore, then letters, digits or"
            f" underscores; at most {MAX_NAME} characters), e.g. STRIPE_API_KEY"
        )
    if not MIN_REASON <= len(reason) <= MAX_REASON:
        problems.append(f"reason: {MIN_REASON} to {MAX_REASON} characters (got {len(reason)})")
    elif any(mark in reason for mark in LINE_BREAKS):
        problems.append("reason: one line (no line breaks)")
    elif not reason.strip():
        problems.append("reason: must not be blank")
    return problems


@transaction.atomic
def secret_request(*, caller: Caller, name: str, reason: str, as_file: bool) -> dict:
    problems = _problems(name, reason)
    if problems:
        raise ToolRefused("invalid request: " + "; ".join(problems))
    # Seed 000: a self-hosted gateway without SP_STORE_KEY fails the call. A hosted one
    # refuses to start without a key (and `up` makes one), so this is the same check.
    if not vault_available():
        raise ToolRefused(NO_VAULT)
    if secret_name_taken(
        session_id=caller.session_id, workspace_id=caller.workspace_id, agent_id=caller.agent_id, name=name
    ):
        raise ToolRefused(
            f"a secret named {name} is already set for this session; it is in the environment of your shell commands"
        )
    already_waiting = ToolRefused(
        f"a request for {name} already waits in this thread; end your turn: you will be told when it is set"
    )
    if SecretRequest.objects.filter(
        session_id=caller.session_id, name=name, status=SecretRequest.Status.WAITING
    ).exists():
        raise already_waiting
    call = tool_call_record(
        caller=caller,
        tool="request_secret",
        arguments={"name": name, "reason": reason, "file": as_file},
        payload={},
        secrets=secret_scanner_for(caller),
    )
    try:
        with transaction.atomic():
            request = SecretRequest.objects.create(
                tool_call=call, session_id=caller.session_id, name=name, reason=reason, as_file=as_file
            )
    except IntegrityError:  # the same request made at the same moment: one waits, this one is refused
        raise already_waiting from None
    agent_name = Agent.objects.filter(id=caller.agent_id).values_list("name", flat=True).first() or "(no agent)"
    # The card names the request, whose id is the call's: stored before the worker can read it.
    ToolCall.objects.filter(id=call.id).update(payload=request_card(request, agent_name=agent_name))
    return {"tool_call_id": call.id, "status": call.status}


def secret_request_card_refresh(*, request_id: int) -> bool:
    """Store the card as the request is now and edit the posted one in place."""
    request = SecretRequest.objects.select_related("session__agent", "set_by").filter(pk=request_id).first()
    if request is None:
        return False
    card = request_card(request, agent_name=agent_name_of(request.session))
    return tool_call_card_replace(tool_call_id=request.pk, payload=card)
