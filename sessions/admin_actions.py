"""The sessions' operator actions: stop sessions, revoke runner and host tokens, replace a
host's token; each after a confirmation page, each through its service."""

from calvin.admin_actions import operator_action
from calvin.operators import OperatorRefused, operator_check, operator_for
from calvin.workspaces.models import Member
from sessions.hosts import host_revoke, host_token_reset
from sessions.models import Host, Runner, Session, Turn
from sessions.services import runner_revoke
from sessions.turns import session_stop


def _actor(request, workspace_id):
    actor = operator_for(request.user, workspace_id)
    operator_check(actor, workspace_id)
    return actor


def _stop_plan(session: Session) -> str:
    turns = Turn.objects.filter(session=session)
    running = turns.filter(status=Turn.Status.RUNNING).exists()
    queued = turns.filter(status=Turn.Status.QUEUED).count()
    parts = ["end its running agent's processes"] if running else []
    if queued:
        parts.append(f"drop {queued} queued message(s) from the queue (they stay in the thread)")
    return "; ".join(parts) if parts else "nothing: the agent is not running"


def _stop(request, session: Session) -> str:
    actor = _actor(request, session.workspace_id)
    member = actor if isinstance(actor, Member) else None
    # A superuser who is no member of the workspace is named in the thread by the phrase.
    via = "admin" if member else f"the admin by {request.user.get_username()}"
    outcome = session_stop(session_id=session.id, member=member, via=via)
    if outcome == "the agent is not running":
        raise OperatorRefused(outcome)
    return outcome


stop_sessions = operator_action(
    name="stop",
    description="Stop the selected sessions' agents",
    verb="Stop",
    plan=_stop_plan,
    perform=_stop,
)


def _host_revoke_plan(host: Host) -> str:
    if host.revoked_at:
        return f"nothing: its token was revoked at {host.revoked_at:%Y-%m-%d %H:%M} UTC"
    running = Turn.objects.filter(host=host, status=Turn.Status.RUNNING).count()
    return f"revoke its token and disconnect it; its {running} running turn(s) go back to the queue, to run elsewhere"


def _host_revoke(request, host: Host) -> str:
    if not host_revoke(host_id=host.id, actor=_actor(request, host.workspace_id)):
        raise OperatorRefused("its token was revoked already")
    return "token revoked; the host is disconnected"


revoke_hosts = operator_action(
    name="revoke",
    description="Revoke the selected hosts' tokens (disconnects them; their turns run elsewhere)",
    verb="Revoke",
    plan=_host_revoke_plan,
    perform=_host_revoke,
    warning="A revoked host stays out until someone makes it a new token.",
)


def _host_reset(request, host: Host) -> str:
    token = host_token_reset(host=host, actor=_actor(request, host.workspace_id))
    return f"new token for {host.name}, shown this once: {token} (the old one no longer works)"


reset_host_tokens = operator_action(
    name="reset_token",
    description="Make a new token for the selected hosts (the old ones stop working)",
    verb="Replace the token of",
    plan=lambda host: (
        "replace its token: the old one stops working and its connection closes; "
        "the new token is shown once, on the next page"
    ),
    perform=_host_reset,
    warning="Each new token is shown once, on the page after you confirm: copy it there.",
    shown_once=True,  # the tokens never go through the messages' cookie
)


def _runner_revoke_plan(runner: Runner) -> str:
    if runner.revoked_at:
        return f"nothing: revoked at {runner.revoked_at:%Y-%m-%d %H:%M} UTC"
    return "revoke its token: the agent holding it is refused from now on"


def _runner_revoke(request, runner: Runner) -> str:
    workspace_id = Session.objects.values_list("workspace_id", flat=True).get(id=runner.session_id)
    if not runner_revoke(runner=runner, actor=_actor(request, workspace_id)):
        raise OperatorRefused("it was revoked already")
    return "token revoked"


revoke_runners = operator_action(
    name="revoke",
    description="Revoke the selected runners' tokens",
    verb="Revoke",
    plan=_runner_revoke_plan,
    perform=_runner_revoke,
)
