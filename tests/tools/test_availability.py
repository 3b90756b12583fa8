"""Seed 000's availability table over real MCP HTTP: tools/list per CALVIN_MODE, cell for cell,
and what the cells with conditions do ("when the host has a workspace definition", "offered,
but the gateway refuses the call")."""

import pytest

from calvin.workspaces.models import Agent as AgentConfig
from calvin.workspaces.models import Repository
from sessions.hosts import host_create
from sessions.models import Session
from tests.conftest import text_of
from tests.support.refusals import refusal
from tools.services.previews import NO_HOST

pytestmark = pytest.mark.django_db(transaction=True)

# The seed's table, copied by hand (one-machine, self-hosted, hosted); "host" marks the
# self-hosted cell "when the host has a workspace definition".
TABLE = {
    "send_file": ("yes", "yes", "yes"),
    "post_card": ("yes", "yes", "yes"),
    "checkout_repo": ("no", "host", "yes"),
    "spawn_thread": ("no", "yes", "yes"),
    "read_thread": ("no", "yes", "yes"),
    "post_thread": ("no", "yes", "yes"),
    "request_secret": ("no", "yes", "yes"),
    "preview": ("no", "yes", "yes"),
    "unpreview": ("no", "yes", "yes"),
}
MODES = ("one-machine", "self-hosted", "hosted")


def column(mode: str, *, host_has_definition: bool) -> set[str]:
    cell = MODES.index(mode)
    return {
        name for name, cells in TABLE.items() if cells[cell] == "yes" or (cells[cell] == "host" and host_has_definition)
    }


def runs(agent, provider: str) -> None:
    AgentConfig.objects.filter(id=agent.session.agent_id).update(provider=provider)


def listed(agent) -> set[str]:
    return {tool.name for tool in agent.list_tools()}


def on_a_host(agent) -> None:
    host, _ = host_create(name=f"h{agent.session.id}")
    Session.objects.filter(id=agent.session.id).update(host=host)


def define(agent) -> None:
    Repository.objects.create(
        workspace=agent.session.workspace, name="api", full_name="acme/api", clone_url="https://example.com/api.git"
    )


@pytest.mark.parametrize("mode", MODES)
def test_tools_list_is_the_seeds_column(agent, settings, mode):
    settings.CALVIN_MODE = mode
    runs(agent, AgentConfig.Provider.SCRIPT)
    on_a_host(agent)
    define(agent)
    assert listed(agent) == column(mode, host_has_definition=True)


@pytest.mark.parametrize("mode", MODES)
def test_claude_code_runners_also_get_approval_prompt(agent, settings, mode):
    settings.CALVIN_MODE = mode
    runs(agent, AgentConfig.Provider.CLAUDE_CODE)
    on_a_host(agent)
    define(agent)
    assert listed(agent) == column(mode, host_has_definition=True) | {"approval_prompt"}


def test_self_hosted_lists_checkout_repo_only_where_the_host_has_a_definition(agent, settings):
    settings.CALVIN_MODE = "self-hosted"
    runs(agent, AgentConfig.Provider.COMMAND)
    assert "checkout_repo" not in listed(agent)  # no host, no definition
    define(agent)
    assert "checkout_repo" not in listed(agent)  # a definition, but the session has no host
    on_a_host(agent)
    assert listed(agent) == column("self-hosted", host_has_definition=True)
    Repository.objects.all().delete()
    assert listed(agent) == column("self-hosted", host_has_definition=False)


def test_self_hosted_refuses_checkout_repo_without_a_definition_on_the_host(agent, settings):
    settings.CALVIN_MODE = "self-hosted"
    on_a_host(agent)
    result = agent.call("checkout_repo", {"repos": ["api"]})
    assert result.is_error and "this session's host has none" in text_of(result)


def test_hosted_lists_checkout_repo_without_a_definition(agent, settings):
    settings.CALVIN_MODE = "hosted"
    assert "checkout_repo" in listed(agent)
    result = agent.call("checkout_repo", {"repos": ["api"]})
    assert refusal(result) == "no repository api in this workspace; the list is in AGENTS.md"


@pytest.mark.parametrize("tool", ["checkout_repo", "spawn_thread", "read_thread", "post_thread", "preview"])
def test_one_machine_refuses_what_it_does_not_list(agent, settings, tool):
    settings.CALVIN_MODE = "one-machine"
    result = agent.call(tool, {})
    assert result.is_error and f"{tool} is not offered in one-machine mode" in text_of(result)


def test_self_hosted_offers_preview_but_refuses_the_call(agent, settings):
    settings.CALVIN_MODE = "self-hosted"
    assert {"preview", "unpreview"} <= listed(agent)
    result = agent.call("preview", {"port": 8080})
    assert result.is_error and "not available on a self-hosted gateway" in text_of(result)
    result = agent.call("unpreview", {"name": "app"})
    assert result.is_error and "not available on a self-hosted gateway" in text_of(result)


def test_hosted_serves_preview_from_a_host_and_says_why_not_without_one(agent, settings):
    # Served: past the seed's rules to the session's host (tests/previews/test_tools.py goes on from there).
    settings.CALVIN_MODE = "hosted"
    result = agent.call("preview", {"port": 8080, "name": "my-app"})
    assert result.is_error and refusal(result) == NO_HOST


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"port": 0}, "greater than or equal to 1"),
        ({"port": 65536}, "less than or equal to 65535"),
        ({"port": "8080"}, "valid integer"),
        ({"port": True}, "valid integer"),
        ({"port": 8080, "name": "Has_Upper"}, "one DNS label"),
        ({"port": 8080, "name": "-lead"}, "one DNS label"),
        ({"port": 8080, "name": "a" * 64}, "at most 63"),
    ],
)
def test_preview_parameters_are_the_seeds(agent, arguments, problem):
    assert problem in refusal(agent.call("preview", arguments))
