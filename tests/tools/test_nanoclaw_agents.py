"""create_agent, install_packages and add_mcp_server over real MCP (/mcp/nanoclaw), through a
real approval: the card in the thread, a press by the session's owner in the web channel,
the worker applying it, and the agent told the outcome."""

import asyncio

import pytest
from mcp.client import Client

from approvals.models import PendingApproval
from calvin.workspaces.models import Agent, Destination
from secrets_vault.services import secret_set
from tests.approvals.support import (
    OWNER_PASSWORD,
    _worker_idle_afterwards,  # noqa: F401 (an autouse fixture)
    card_note,
    card_of,
    card_text,
    has_buttons,
    pressing,
    refused,
    requested,
    told,
)
from tests.conftest import text_of, wait_for
from tools.models import ToolCall
from tools.server import build_server

pytestmark = pytest.mark.django_db(transaction=True)

S = PendingApproval.Status


@pytest.fixture
def owner(gateway, agent):
    """The session's owner, logged in to the web channel, pressing buttons in its thread."""
    with pressing(gateway, "owner", OWNER_PASSWORD, agent.session.thread_id) as presser:
        yield presser


def approve(owner, approval: PendingApproval) -> None:
    card_of(approval)  # the card is there before anyone presses it
    response = owner.press(approval.id, "approve")
    assert response.status_code == 200 and response.json()["ok"], response.text


def applied(approval: PendingApproval) -> PendingApproval:
    return wait_for(lambda: PendingApproval.objects.filter(id=approval.id, status=S.APPLIED).first(), timeout=20)


def failed(approval: PendingApproval) -> PendingApproval:
    return wait_for(lambda: PendingApproval.objects.filter(id=approval.id, status=S.FAILED).first(), timeout=20)


def own_agent(agent) -> Agent:
    return Agent.objects.get(id=agent.session.agent_id)


# Offered where the seed's table says


@pytest.mark.parametrize(("mode", "offered"), [("one-machine", False), ("self-hosted", True), ("hosted", True)])
def test_offered_in_self_hosted_and_hosted_only(mode, offered):
    async def names():
        async with Client(build_server(mode, "nanoclaw")) as client:
            return {t.name for t in (await client.list_tools()).tools}

    agent_tools = {"create_agent", "install_packages", "add_mcp_server"}
    assert (agent_tools & asyncio.run(names())) == (agent_tools if offered else set())


def test_the_schemas_have_the_seeds_parameter_names(agent):
    tools = {t.name: t.input_schema for t in agent.nanoclaw.list_tools()}
    assert set(tools["create_agent"]["properties"]) == {"name", "instructions"}
    assert tools["create_agent"]["required"] == ["name"]
    assert set(tools["install_packages"]["properties"]) == {"apt", "npm", "reason"}
    assert not tools["install_packages"].get("required")
    assert set(tools["add_mcp_server"]["properties"]) == {"name", "command", "args", "env"}
    assert tools["add_mcp_server"]["required"] == ["name", "command"]


# install_packages


def test_install_packages_waits_for_approval_then_applies(agent, owner):
    before = own_agent(agent).environment_version
    approval = requested(agent, "install_packages", {"apt": ["jq", "ripgrep"], "npm": ["@scope/tool"], "reason": "x"})
    call = approval.tool_call
    assert call.status == ToolCall.Status.AWAITING_APPROVAL and call.server == "nanoclaw"
    assert call.arguments == {"apt": ["jq", "ripgrep"], "npm": ["@scope/tool"], "reason": "x"}
    assert approval.details == call.arguments  # what is approved is what runs
    assert own_agent(agent).apt_packages == []  # nothing before a decision
    card = card_of(approval)
    assert "jq" in card_text(card) and "@scope/tool" in card_text(card) and has_buttons(card)

    approve(owner, approval)
    applied(approval)
    changed = own_agent(agent)
    assert (changed.apt_packages, changed.npm_packages) == (["jq", "ripgrep"], ["@scope/tool"])
    assert changed.environment_version == before + 1
    assert ToolCall.objects.get(id=call.id).status == ToolCall.Status.APPLIED
    text = told(agent, "applied")
    assert "install_packages" in text and "approved by owner" in text
    assert card_note(approval, "Approved by owner · applied ")
    assert not has_buttons(card)


def test_packages_already_there_are_not_added_twice(agent, owner):
    Agent.objects.filter(id=agent.session.agent_id).update(apt_packages=["jq"])
    approval = requested(agent, "install_packages", {"apt": ["jq", "curl", "curl"]})
    assert approval.details["apt"] == ["jq", "curl"]
    approve(owner, approval)
    applied(approval)
    assert own_agent(agent).apt_packages == ["jq", "curl"]


BAD_NAMES = [
    ("apt", "foo; rm -rf /"),
    ("apt", "--global"),
    ("npm", "--global"),
    ("apt", "a b"),
    ("apt", "pkg=1.2"),
    ("npm", "pkg@1.2"),
    ("apt", "p\u0430ndoc"),  # a Cyrillic "а" that looks like the Latin one
    ("apt", "jq\n"),  # `$` would let this through; fullmatch does not
    ("apt", "Jq"),
    ("npm", "@scope/"),
    ("apt", ""),
]


@pytest.mark.parametrize(("kind", "name"), BAD_NAMES, ids=[ascii(n) for _, n in BAD_NAMES])
def test_install_packages_refuses_a_bad_name(agent, kind, name):
    text = refused(agent, "install_packages", {kind: ["jq", name]}, "invalid package names", ascii(name))
    assert "'jq'" not in text  # the good one is not listed as bad
    assert not ToolCall.objects.filter(session=agent.session).exists()


def test_every_bad_name_is_listed(agent):
    refused(agent, "install_packages", {"apt": ["a b", "ok"], "npm": ["x;y"]}, "apt 'a b'", "npm 'x;y'")


def test_at_most_twenty_packages_in_all(agent):
    refused(agent, "install_packages", {"apt": [f"p{i}" for i in range(11)], "npm": [f"n{i}" for i in range(10)]},
            "at most 20 packages per request (got 21)")  # fmt: skip
    requested(agent, "install_packages", {"apt": [f"p{i}" for i in range(10)], "npm": [f"n{i}" for i in range(10)]})


@pytest.mark.parametrize("arguments", [{}, {"apt": [], "npm": []}, {"reason": "because"}])
def test_at_least_one_package(agent, arguments):
    refused(agent, "install_packages", arguments, "name at least one apt or npm package")


def test_names_are_checked_again_when_applied(agent, owner):
    approval = requested(agent, "install_packages", {"apt": ["jq"]})
    # As if both stored rows (the call and what the card showed) had been changed after the
    # call: the names are checked again when applied.
    bad = {"apt": ["jq; reboot"], "npm": [], "reason": ""}
    ToolCall.objects.filter(id=approval.tool_call_id).update(arguments=bad)
    PendingApproval.objects.filter(id=approval.id).update(details=bad)
    approve(owner, approval)
    failed(approval)
    assert own_agent(agent).apt_packages == []
    text = told(agent, "failed")
    assert "invalid package names" in text and "approved by owner" in text
    assert "failed: invalid package names" in card_note(approval, "Approved by owner · failed: ")


# add_mcp_server


SERVER = {
    "name": "github",
    "command": "npx",
    "args": ["-y", "@modelcontextprotocol/server-github", " "],
    "env": {"GITHUB_TOKEN": "vault:GITHUB_TOKEN", "LOG_LEVEL": "debug"},
}


def test_add_mcp_server_card_shows_every_argument_and_env_then_applies(agent, owner):
    approval = requested(agent, "add_mcp_server", SERVER)
    assert approval.tool_call.arguments == SERVER
    text = card_text(card_of(approval))
    assert '"npx"' in text
    assert '1. "-y"' in text and '2. "@modelcontextprotocol/server-github"' in text and '3. " "' in text
    assert 'LOG_LEVEL = "debug"' in text
    assert 'GITHUB_TOKEN = the vault secret "GITHUB_TOKEN" (a reference: its value is not shown here)' in text

    approve(owner, approval)
    applied(approval)
    servers = own_agent(agent).mcp_servers
    assert servers == {"github": {"command": "npx", "args": SERVER["args"], "env": SERVER["env"]}}
    assert "vault:GITHUB_TOKEN" == servers["github"]["env"]["GITHUB_TOKEN"]  # stored as a reference
    told(agent, "add_mcp_server")


def test_onecli_managed_is_the_vault_secret_named_like_the_variable(agent, owner):
    # Seed 002 tells agents to write "onecli-managed" for a credential instead of asking for it.
    server = {**SERVER, "env": {"GITHUB_TOKEN": "onecli-managed", "MODE": "Onecli-managed"}}
    approval = requested(agent, "add_mcp_server", server)
    text = card_text(card_of(approval))
    assert 'GITHUB_TOKEN = the vault secret "GITHUB_TOKEN" (a reference: its value is not shown here)' in text
    assert 'MODE = "Onecli-managed"' in text  # only the placeholder itself, as the seed spells it
    approve(owner, approval)
    applied(approval)
    env = own_agent(agent).mcp_servers["github"]["env"]
    assert env == {"GITHUB_TOKEN": "vault:GITHUB_TOKEN", "MODE": "Onecli-managed"}


@pytest.mark.parametrize("name", ["calvin", "Calvin", "NANOCLAW"])
def test_calvins_own_server_names_are_reserved(agent, name):
    refused(agent, "add_mcp_server", {"name": name, "command": "npx"}, "is reserved")


@pytest.mark.parametrize("name", ["two words", "-dash", "a.b", "x" * 64, "", "ünï"])
def test_the_server_name_is_one_label(agent, name):
    refused(agent, "add_mcp_server", {"name": name, "command": "npx"}, "must be one label")


def test_the_server_name_is_unique_per_agent(agent):
    Agent.objects.filter(id=agent.session.agent_id).update(mcp_servers={"GitHub": {"command": "x"}})
    refused(agent, "add_mcp_server", {"name": "github", "command": "npx"}, "already have an MCP server named")


def test_a_name_taken_while_waiting_fails_at_apply(agent, owner):
    first = requested(agent, "add_mcp_server", {"name": "docs", "command": "one"})
    second = requested(agent, "add_mcp_server", {"name": "docs", "command": "two"})
    approve(owner, first)
    applied(first)
    approve(owner, second)
    failed(second)
    assert own_agent(agent).mcp_servers["docs"]["command"] == "one"
    assert "already have an MCP server named 'docs'" in told(agent, "failed")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"command": " "}, "command must not be empty"),
        ({"command": "npx\nrm"}, "contains a control or invisible character"),
        ({"command": "x" * 1001}, "command is at most 1,000 characters"),
        ({"args": ["a"] * 51}, "at most 50 arguments (got 51)"),
        ({"args": ["a" * 2001]}, "args: an argument is at most 2,000 characters: args[0]"),
        ({"args": ["a" * 2000] * 6}, "at most 10,000 characters in all"),
        ({"env": {"1BAD": "x", "A-B": "y", "OK": "z"}}, "env: variable names must match"),
        ({"env": {"A": "vault:"}}, "a vault reference is vault:NAME"),
        ({"env": {"A": "vault:two words"}}, "a vault reference is vault:NAME"),
        ({"env": {f"K{i}": "v" for i in range(51)}}, "at most 50 variables (got 51)"),
        ({"env": {"A": "v" * 2001}}, "a value is at most 2,000 characters"),
    ],
)
def test_add_mcp_server_refusals(agent, arguments, expected):
    refused(agent, "add_mcp_server", {"name": "srv", "command": "npx", **arguments}, expected)


def test_bad_env_names_are_all_listed(agent):
    text = refused(agent, "add_mcp_server", {"name": "srv", "command": "x", "env": {"1BAD": "", "A-B": "", "OK": ""}})
    assert "'1BAD'" in text and "'A-B'" in text and "'OK'" not in text


def test_an_env_value_equal_to_a_session_secret_is_refused(agent, vault):
    secret_set(session=agent.session, name="GITHUB_TOKEN", value="ghp_live_secret_value_123")
    text = refused(
        agent,
        "add_mcp_server",
        {"name": "gh", "command": "npx", "env": {"GITHUB_TOKEN": "ghp_live_secret_value_123"}},
        "contains the value of the secret",
    )
    assert "ghp_live_secret_value_123" not in text
    assert not ToolCall.objects.filter(session=agent.session).exists()
    # The reference to it is what the agent should send instead.
    requested(agent, "add_mcp_server", {"name": "gh", "command": "npx", "env": {"GITHUB_TOKEN": "vault:GITHUB_TOKEN"}})


# create_agent


def test_create_agent_is_gated_for_group_scope_and_wires_both_destinations(agent, owner):
    creator = own_agent(agent)
    assert creator.cli_scope == Agent.CliScope.GROUP  # the default
    approval = requested(agent, "create_agent", {"name": "Research Bot", "instructions": "You dig.\nDeeply."})
    assert approval.details == {"name": "research-bot", "instructions": "You dig.\nDeeply."}
    assert not Agent.objects.filter(name="research-bot").exists()
    text = card_text(card_of(approval))
    assert "research-bot" in text and "You dig.\nDeeply." in text

    approve(owner, approval)
    applied(approval)
    child = Agent.objects.get(workspace=creator.workspace, name="research-bot")
    assert child.created_by_id == creator.id and child.instructions == "You dig.\nDeeply."
    assert child.directory == f"agents/agent-{child.id}/workspace" != creator.directory  # on its hosts
    assert Destination.objects.get(agent=creator, name="research-bot").target_agent_id == child.id
    assert Destination.objects.get(agent=child, name="parent").target_agent_id == creator.id
    assert "'research-bot'" in told(agent, "applied")


def test_create_agent_is_direct_for_global_scope(agent):
    Agent.objects.filter(id=agent.session.agent_id).update(cli_scope=Agent.CliScope.GLOBAL)
    result = agent.nanoclaw.call("create_agent", {"name": "helper"})
    assert not result.is_error, text_of(result)
    assert result.structured_content == {"status": "created", "agent": "helper", "destination": "helper"}
    creator = own_agent(agent)
    child = Agent.objects.get(workspace=creator.workspace, name="helper")  # there when the call returns
    assert child.created_by_id == creator.id and child.instructions == ""
    assert Destination.objects.get(agent=creator, name="helper").target_agent_id == child.id
    assert Destination.objects.get(agent=child, name="parent").target_agent_id == creator.id
    assert not PendingApproval.objects.exists()
    assert ToolCall.objects.get(session=agent.session, tool="create_agent").status == ToolCall.Status.APPLIED


def test_create_agent_is_gated_for_disabled_scope(agent):
    Agent.objects.filter(id=agent.session.agent_id).update(cli_scope=Agent.CliScope.DISABLED)
    requested(agent, "create_agent", {"name": "helper"})
    assert not Agent.objects.filter(name="helper").exists()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("main", "an agent named 'main' already exists"),  # the session's own agent
        ("  MAIN ", "an agent named 'main' already exists"),
        ("!!!", "needs at least one letter or digit"),
        ("x" * 65, "65 characters after normalising; at most 64"),
        ("thread", "'thread' is reserved"),
        ("Parent", "'parent' is reserved"),
    ],
)
def test_create_agent_name_refusals(agent, name, expected):
    refused(agent, "create_agent", {"name": name}, "create_agent refused", expected)


def test_create_agent_refuses_a_name_already_among_the_callers_destinations(agent, make_agent):
    other = make_agent()
    Destination.objects.create(agent=own_agent(agent), name="reviewer", thread_id=other.session.thread_id)
    refused(agent, "create_agent", {"name": "Reviewer"}, "'reviewer' is already one of your destinations")


def test_create_agent_instructions_are_bounded(agent):
    refused(agent, "create_agent", {"name": "big", "instructions": "x" * 20_001}, "at most 20,000")
    requested(agent, "create_agent", {"name": "big", "instructions": "x" * 20_000})


def test_create_agent_checks_the_name_again_when_applied(agent, owner):
    first = requested(agent, "create_agent", {"name": "twin"})
    second = requested(agent, "create_agent", {"name": "twin"})
    approve(owner, first)
    applied(first)
    approve(owner, second)
    failed(second)
    assert Agent.objects.filter(name="twin").count() == 1
    assert "an agent named 'twin' already exists" in told(agent, "failed")
