"""Connecting an external agent (provider `external`) to its session from the thread page.

Runner tokens are stored as digests, so Calvin can show one only when it makes it: a person who
may steer the session makes a new runner generation here (earlier tokens of the session are
revoked, as `manage.py issue_token` does) and sees its .mcp.json once, on a page not cached.
"""

from django.db import transaction

from calvin.workspaces.models import Agent
from sessions.management.commands.issue_token import mcp_json_for
from sessions.models import Session
from sessions.services import runner_start


class ConnectRefused(Exception):
    """Why no token was made, in the words the person reads."""


@transaction.atomic
def external_runner_issue(*, session: Session, member, base_url: str) -> tuple[object, dict]:
    """A new runner token for an external agent's session; returns the runner and its .mcp.json."""
    from calvin.audit.services import audit_record

    session = Session.objects.select_related("agent").get(id=session.id)  # runner_start locks it
    if session.agent is None or session.agent.provider != Agent.Provider.EXTERNAL:
        raise ConnectRefused("Calvin runs this session's agent itself: there is no token to hand out.")
    if not session.may_be_decided_by(member):
        raise ConnectRefused("Only the person who started this session or a workspace admin can make its token.")
    runner, token = runner_start(session=session)  # no host's: none of them may end it
    audit_record(
        verb="runner.token_issue",
        workspace=session.workspace_id,
        actor=member,
        target=runner,
        changes={"generation": (None, runner.generation), "token_hint": (None, runner.token_hint)},
    )
    return runner, mcp_json_for(url=base_url, token=token, tool_sets=session.agent.tool_sets)
