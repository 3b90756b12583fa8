"""ncl where agents run it: on the PATH inside the bwrap sandbox, with the runner's token and the
gateway's address in its environment, through the egress proxy; and its note in CLAUDE.md."""

import json

import pytest

from calvin.workspaces.models import Agent
from sessions.instructions import instructions_compose
from sessions.models import Turn
from sessions.services import runner_start, session_start
from tests.ncl.test_ncl_gateway import queued_turn
from tests.sessions.host import Roots, a_turn, run_turn, shell

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_agent_in_its_sandbox_runs_ncl_as_itself(tmp_path, gateway, workspace):
    agent = Agent.objects.create(workspace=workspace, name="helper")
    session = session_start(workspace=workspace, title="sandboxed", agent=agent)
    turn = queued_turn(session)
    _, token = runner_start(session=session)
    roots = Roots(tmp_path)
    runner, _ = roots.runner(session.id, roots.bwrap(), gateway=gateway)
    script = f'ncl me --json; echo "==me:$?=="; ncl sessions stop {session.id}; echo "==stop:$?=="; echo "$CALVIN_URL"'
    message = a_turn(
        shell(script),
        session=session.id,
        mcp_servers={"calvin": gateway + "/mcp"},
        egress={"policy": "none", "allowlist": [], "workspace": "acme"},  # the gateway only
    )
    message["runner"] = {"generation": 1, "token": token}
    finished = run_turn(runner, message)
    assert finished["status"] == "done", finished
    me, me_exit, asked, stop_exit, url = finished["reply"].split("==")
    assert (me_exit, stop_exit) == ("me:0", "stop:3"), finished["reply"]
    assert json.loads(me)["session_id"] == session.id and json.loads(me)["kind"] == "agent", me
    assert asked.strip().startswith("approval-pending: approval "), asked
    assert url.strip() == gateway
    assert Turn.objects.get(id=turn.id).status == Turn.Status.QUEUED  # until a person approves


@pytest.mark.parametrize(
    ("scope", "reach"),
    [("group", "this agent and what hangs off it"), ("global", "the whole workspace"), ("disabled", None)],
)
def test_claude_md_tells_the_agent_about_ncl_unless_its_scope_is_disabled(scope, reach):
    text = instructions_compose(agent=Agent(name="a", cli_scope=scope, tool_sets=[]), destination_names=[])
    if reach is None:
        assert "ncl" not in text
    else:
        assert "# ncl" in text and reach in text and "approval-pending (exit code 3)" in text
