"""An approved add_mcp_server is used: the turn carries the agent's servers, the host puts
them in the session's .mcp.json with each `vault:NAME` as `${NAME}` (never the value), and
Claude Code starts the server with the secret's value from its environment. A reference to a
secret the session lacks leaves that server out, and the agent and the thread are told."""

import hashlib
import json
import stat

import pytest

from approvals.models import PendingApproval
from approvals.services import approval_decide
from calvin.workspaces.models import Agent, Member
from secrets_vault.services import secret_set_for_workspace
from sessions.services import message_post_by_person, session_start
from tests.conftest import wait_for
from tests.sessions.host import Roots, a_turn, command, events_of, run_turn
from tests.sessions.host.test_claude_code import scratch_home  # noqa: F401 (a fixture)
from tests.sessions.host_processes import agent_texts, commanded, scripted, system_texts, wait_connected

PROBE = {
    "command": "sh",
    "args": ["-c", "env > probe-env.txt; sleep 2"],
    "env": {"PLAIN": "plain-v", "KEY": "vault:PROBE_TOKEN"},
}
SECRET = {"name": "PROBE_TOKEN", "value": "tok-5f3a9c-value", "file": False}


def test_the_real_cli_starts_the_server_with_the_secret_resolved(tmp_path, scratch_home):  # noqa: F811
    roots = Roots(tmp_path)
    runner, _ = roots.runner(3, roots.bwrap(), claude_home=scratch_home)
    turn = a_turn({"kind": "claude-code"}, session=3, secrets=[SECRET], agent_mcp_servers={"probe": PROBE})
    run_turn(runner, turn)  # not logged in: the CLI still starts its MCP servers first
    config_path = runner.directory / ".mcp.json"
    config = json.loads(config_path.read_text())
    assert config["mcpServers"]["probe"] == {
        "type": "stdio",
        "command": "sh",
        "args": PROBE["args"],
        "env": {"PLAIN": "plain-v", "KEY": "${PROBE_TOKEN}"},
    }
    assert SECRET["value"] not in config_path.read_text()
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o600
    probed = wait_for(lambda: (runner.directory / "probe-env.txt").exists() and (runner.directory / "probe-env.txt"))
    started_with = dict(line.split("=", 1) for line in probed.read_text().splitlines() if "=" in line)
    assert started_with["KEY"] == SECRET["value"] and started_with["PLAIN"] == "plain-v"


def test_a_missing_secret_leaves_the_server_out_and_says_which(tmp_path):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(4, roots.bwrap())
    servers = {"probe": PROBE, "fine": {"command": "true", "args": [], "env": {}}}
    finished = run_turn(runner, a_turn(command("cat"), session=4, prompt="go", agent_mcp_servers=servers))
    note = (
        "MCP server 'probe' was not started: it needs the secret PROBE_TOKEN, which this session does not "
        "have (add it to the vault, or ask for it with request_secret)."
    )
    assert finished["reply"] == f"[system] {note}\n\ngo"  # the agent is told
    assert {"kind": "error", "text": note} in events_of(emitted)  # and the thread
    assert set(json.loads((runner.directory / ".mcp.json").read_text())["mcpServers"]) == {"calvin", "fine"}


def test_a_secret_the_runner_replaces_is_not_resolved_to_the_runners_value(tmp_path):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(5, roots.bwrap())
    servers = {"probe": {"command": "x", "args": [], "env": {"H": "vault:HOME"}}}
    secrets = [{"name": "HOME", "value": "not-the-home", "file": False}]
    run_turn(runner, a_turn(command("cat"), session=5, secrets=secrets, agent_mcp_servers=servers))
    assert "probe" not in json.loads((runner.directory / ".mcp.json").read_text())["mcpServers"]
    assert any("needs the secret HOME" in event["text"] for event in events_of(emitted))


def test_an_expansion_in_a_plain_value_is_not_started(tmp_path):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(6, roots.bwrap())
    servers = {"probe": {"command": "x", "args": ["${PROBE_TOKEN}"], "env": {}}}
    run_turn(runner, a_turn(command("cat"), session=6, secrets=[SECRET], agent_mcp_servers=servers))
    assert "probe" not in json.loads((runner.directory / ".mcp.json").read_text())["mcpServers"]
    assert any("'${' is not allowed" in event["text"] for event in events_of(emitted))


# On a real host, after a real approval

AGENT_VIEW = (
    "import hashlib, json, os, sys; "
    "print(json.dumps({'prompt': sys.stdin.read(), "
    "'token': hashlib.sha256(os.environ.get('PROBE_TOKEN', '').encode()).hexdigest()}))"
)


def view_with(session, words: str) -> dict | None:
    """What the command agent saw in the turn whose prompt holds `words` (None: not run yet)."""
    for text in agent_texts(session):
        if text.startswith("{") and words in (view := json.loads(text))["prompt"]:
            return view
    return None


@pytest.mark.django_db(transaction=True)
def test_an_approved_server_reaches_the_next_start_on_the_host(hosts, workspace, celery_worker, vault, settings):
    settings.CALVIN_HOST_HEARTBEAT_SECONDS = 0.5
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(workspace=workspace, owner=owner, title="t")
    secret_set_for_workspace(workspace_id=workspace.id, name="PROBE_TOKEN", value=SECRET["value"])
    request = {"server": "nanoclaw", "tool": "add_mcp_server", "arguments": {"name": "probe", **PROBE}}
    scripted(session.agent, [request, {"reply": "asked"}])
    host = hosts("h1")
    wait_connected(host)
    message_post_by_person(thread=session.thread, member=owner, text="add it")
    wait_for(lambda: agent_texts(session) == ["asked"], timeout=30)
    approval = PendingApproval.objects.get(session=session, kind="add_mcp_server")
    approval_decide(approval_id=approval.id, member=owner, approve=True, via=PendingApproval.Via.WEB)
    wait_for(lambda: PendingApproval.objects.filter(id=approval.id, status="applied").exists(), timeout=20)
    agent = Agent.objects.get(id=session.agent_id)
    assert agent.mcp_servers["probe"]["env"]["KEY"] == "vault:PROBE_TOKEN"  # the gateway keeps the reference
    # A second server names a secret nobody stored.
    agent.mcp_servers = {**agent.mcp_servers, "broken": {"command": "y", "args": [], "env": {"K": "vault:NOT_THERE"}}}
    agent.save(update_fields=["mcp_servers"])

    commanded(agent, ["python", "-c", AGENT_VIEW])
    message_post_by_person(thread=session.thread, member=owner, text="use it")
    # The approval's outcome also reaches the agent's inbox: in this turn, or in one of its own.
    seen = wait_for(lambda: view_with(session, "use it"), timeout=30)
    config_path = host.session_directory(session.id) / ".mcp.json"
    servers = json.loads(config_path.read_text())["mcpServers"]
    assert servers["probe"]["env"] == {"PLAIN": "plain-v", "KEY": "${PROBE_TOKEN}"}
    assert SECRET["value"] not in config_path.read_text()
    assert seen["token"] == hashlib.sha256(SECRET["value"].encode()).hexdigest()  # what ${PROBE_TOKEN} expands from
    assert "broken" not in servers
    missing = "MCP server 'broken' was not started: it needs the secret NOT_THERE"
    assert seen["prompt"].startswith(f"[system] {missing}")
    wait_for(lambda: any(text.startswith(missing) for text in system_texts(session)), timeout=10)
