"""A code channel's repository, checked out before a session's first turn there.

A session whose thread is in a code channel (a Slack thread in a bound channel, a web thread
started in a space) has the bound repository checked out by its runner before the agent's first
turn: the turn message carries the same `git.checkout` request checkout_repo sends
(sessions/git_requests.py), the host's runner does it with the code that answers checkout_repo
(sessions/host/runner.py), tells the agent in a `[system]` line and reports the outcome, which the
gateway records as a checkout_repo call of the session (tools/services/code_channel_checkouts.py).

Only the first turn asks, and later turns again only while no attempt succeeded: a session that
was running before its channel was bound is left to check out for itself, as before.
"""

from calvin.workspaces.code_channel_selectors import code_channel_of_thread
from sessions.git_requests import checkout_request, unpublished
from sessions.models import Session, Turn
from tools.availability import tool_offered
from tools.models import ToolCall

TOOL = "checkout_repo"
# The payload key that marks a checkout_repo call as a code channel's (Calvin's), not the agent's.
MARK = "code_channel"


def code_channel_checkouts_of(session_id: int):
    """The session's code channel checkouts, whatever became of them."""
    return ToolCall.objects.filter(session_id=session_id, tool=TOOL, payload__has_key=MARK)


def code_channel_checkout_for_turn(*, session: Session, turns: list[Turn]) -> dict | None:
    """What the batch's runner checks out before the agent runs, or None:
    {code_channel, label, repository, name} and either the `request` or the gateway's own `error`."""
    if not tool_offered(TOOL):
        return None  # a mode without checkout_repo (one-machine): no checkout, bound or not
    thread = session.thread
    binding = code_channel_of_thread(
        workspace_id=session.workspace_id, channel_kind=thread.channel_kind, channel_id=thread.channel_id
    )
    if binding is None:
        return None
    tried = code_channel_checkouts_of(session.id)
    if tried.filter(status=ToolCall.Status.APPLIED).exists():
        return None
    earlier = Turn.objects.filter(session_id=session.id, started_at__isnull=False).exclude(id__in=[t.id for t in turns])
    if earlier.exists() and not tried.exists():
        return None
    repository = binding.repository
    spec = {
        "code_channel": binding.id,
        "label": binding.label,
        "repository": repository.full_name,
        "name": repository.name,
    }
    if not repository.published:
        return spec | {"error": unpublished(repository.full_name)}
    request = checkout_request(session_id=session.id, workspace_id=session.workspace_id, repositories=[repository])
    return spec | {"request": request}
