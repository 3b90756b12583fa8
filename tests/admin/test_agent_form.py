"""The Agent's admin form: tool sets as checkboxes, packages one a line, MCP servers as rows,
destinations chosen among this workspace's threads and agents; the agent tools' own rules for
what is saved, hostile input refused with the rule, environment_version bumped when the
packages change, and one audit event per save."""

import pytest

from calvin.audit.models import AuditEvent
from calvin.workspaces.admin_forms import AgentForm, agent_config_digest
from calvin.workspaces.models import Agent, Destination, Member
from calvin.workspaces.services import agent_create
from tests.admin.conftest import flat, session_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(workspace):
    return agent_create(
        workspace=workspace,
        name="builder",
        apt_packages=["jq"],
        mcp_servers={"search": {"command": "npx", "args": ["-y", "search-mcp"], "env": {"KEY": "vault:search_key"}}},
    )


def posted(agent: Agent, **changes) -> dict:
    """What the change form posts for `agent` as it is, with `changes` on top."""
    data = {
        "name": agent.name,
        "instructions": agent.instructions,
        "cli_scope": agent.cli_scope,
        "model": agent.model,
        "provider": agent.provider,
        "provider_command": "\n".join(agent.provider_command),
        "provider_script": agent.provider_script,
        "tool_sets": list(agent.tool_sets),
        "apt_packages": "\n".join(agent.apt_packages),
        "npm_packages": "\n".join(agent.npm_packages),
        "mcp_servers-count": str(len(agent.mcp_servers)),
        "loaded_config": agent_config_digest(agent),  # the page's hidden field, as it was loaded
        "destinations-TOTAL_FORMS": "0",
        "destinations-INITIAL_FORMS": "0",
        "destinations-MIN_NUM_FORMS": "0",
        "destinations-MAX_NUM_FORMS": "1000",
        # The agent's allow rules (approvals/admin.py ApprovalRuleInline): none here.
        "approval_rules-TOTAL_FORMS": "0",
        "approval_rules-INITIAL_FORMS": "0",
        "approval_rules-MIN_NUM_FORMS": "0",
        "approval_rules-MAX_NUM_FORMS": "1000",
    }
    for index, (name, spec) in enumerate(agent.mcp_servers.items()):
        data |= {
            f"mcp_servers-{index}-name": name,
            f"mcp_servers-{index}-command": spec["command"],
            f"mcp_servers-{index}-args": "\n".join(spec["args"]),
            f"mcp_servers-{index}-env": "\n".join(f"{k}={v}" for k, v in spec["env"].items()),
        }
    return data | changes


def form_for(agent: Agent, **changes) -> AgentForm:
    data = posted(agent, **changes)
    data["workspace"] = agent.workspace_id
    return AgentForm(data=data, instance=agent)


def change_url(agent) -> str:
    return f"/admin/workspaces/agent/{agent.id}/change/"


def test_the_change_page_has_real_widgets_and_scoped_choosers(owner_client, agent, workspace, other_workspace):
    session_in(workspace, title="Release planning")
    session_in(other_workspace, title="Globex secret plan")
    agent_create(workspace=other_workspace, name="globex-bot")
    sibling = agent_create(workspace=workspace, name="reviewer")
    page = flat(owner_client.get(change_url(agent)))
    assert 'type="checkbox" name="tool_sets" value="calvin"' in page and 'value="nanoclaw"' in page
    assert '<textarea name="apt_packages"' in page and 'id="id_apt_packages"> jq</textarea>' in page
    assert 'name="mcp_servers-0-name" value="search"' in page and "KEY=vault:search_key" in page
    assert 'name="mcp_servers-2-name" value=""' in page  # blank rows for new servers
    assert 'name="destinations-0-thread"' in page and "Release planning (thread" in page
    assert f'<option value="{sibling.id}">reviewer</option>' in page
    assert "Globex secret plan" not in page and "globex-bot" not in page
    assert f'<option value="{agent.id}">builder</option>' not in page  # not its own destination
    assert 'name="environment_version"' not in page and 'name="paused_at"' not in page  # read-only


def test_saving_new_packages_bumps_the_environment_and_is_audited(owner_client, agent):
    response = owner_client.post(
        change_url(agent), posted(agent, apt_packages="jq\nripgrep\n\njq", npm_packages="@scope/tool")
    )
    assert response.status_code == 302, flat(response)[:3000]
    agent.refresh_from_db()
    assert agent.apt_packages == ["jq", "ripgrep"] and agent.npm_packages == ["@scope/tool"]
    assert agent.environment_version == 2
    event = AuditEvent.objects.get(verb="agent.change")
    assert event.actor_label == "owner" and event.target_id == str(agent.id)
    assert event.changes == {"apt_packages": [["jq"], ["jq", "ripgrep"]], "npm_packages": [[], ["@scope/tool"]]}


def test_saving_without_a_package_change_keeps_the_environment(owner_client, agent):
    response = owner_client.post(change_url(agent), posted(agent, instructions="Be brief.", tool_sets=["calvin"]))
    assert response.status_code == 302, flat(response)[:3000]
    agent.refresh_from_db()
    assert agent.environment_version == 1 and agent.tool_sets == ["calvin"] and agent.instructions == "Be brief."
    assert agent.mcp_servers == {
        "search": {"command": "npx", "args": ["-y", "search-mcp"], "env": {"KEY": "vault:search_key"}}
    }
    assert AuditEvent.objects.get(verb="agent.change").changes == {
        "instructions": ["0 characters", "9 characters"],
        "tool_sets": [["calvin", "nanoclaw"], ["calvin"]],
    }


def test_mcp_server_rows_are_added_and_removed(owner_client, agent):
    data = posted(
        agent,
        **{
            "mcp_servers-count": "3",
            "mcp_servers-0-delete": "on",
            "mcp_servers-1-name": "files",
            "mcp_servers-1-command": "/usr/bin/files-mcp",
            "mcp_servers-1-args": "--root\n/work",
            "mcp_servers-1-env": "TOKEN=vault:files_token\nMODE=ro\nFILES_KEY=onecli-managed",
        },
    )
    assert owner_client.post(change_url(agent), data).status_code == 302
    agent.refresh_from_db()
    assert agent.mcp_servers == {
        "files": {
            "command": "/usr/bin/files-mcp",
            "args": ["--root", "/work"],
            "env": {"TOKEN": "vault:files_token", "MODE": "ro", "FILES_KEY": "vault:FILES_KEY"},
        }
    }
    assert AuditEvent.objects.get(verb="agent.change").changes == {"mcp_servers": [["search"], ["files"]]}


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("apt_packages", "jq; rm -rf /", "not a bare apt package name"),
        ("apt_packages", "jq\n--allow-unauthenticated", "not a bare apt package name"),
        ("apt_packages", "\u0458q", "not a bare apt package name"),  # Cyrillic je, a look-alike of j
        ("apt_packages", "a" * 300, "not a bare apt package name"),
        ("apt_packages", "jq\x00", "'jq\\x00'"),  # shown escaped
        ("apt_packages", "\n".join(f"p{i}" for i in range(201)), "at most 200 apt packages"),
        ("npm_packages", "left-pad@1.0.0", "not a bare npm package name"),
        ("npm_packages", "$(curl evil)", "not a bare npm package name"),
        ("tool_sets", ["calvin", "evil"], "Select a valid choice"),
        ("provider_command", "ok\n\u202eevil", "printable text"),
        ("name", "x" * 101, "at most 100 characters"),
    ],
)
def test_hostile_fields_are_refused_with_the_rule(agent, field, value, expected):
    form = form_for(agent, **{field: value})
    assert not form.is_valid()
    assert expected in " ".join(form.errors[field]), form.errors


@pytest.mark.parametrize(
    "row, expected",
    [
        ({"name": "calvin", "command": "x"}, "reserved for Calvin's own servers"),
        ({"name": "SEARCH", "command": "x"}, "you already have an MCP server named 'SEARCH'"),
        ({"name": "bad name", "command": "x"}, "must be one label"),
        ({"name": "ok", "command": ""}, "command must not be empty"),
        ({"name": "ok", "command": "run", "args": "${HOME}/x"}, "'${' is not allowed"),
        ({"name": "ok", "command": "run", "env": "KEY=${SECRET}"}, "'${' is not allowed"),
        ({"name": "ok", "command": "run", "env": "KEY=vault:bad name"}, "a vault reference is vault:NAME"),
        ({"name": "ok", "command": "run", "env": "1BAD=x"}, "variable names must match"),
        ({"name": "ok", "command": "run", "env": "no equals sign"}, "is not NAME=value"),
        ({"name": "ok", "command": "run\x00"}, "NUL character"),
    ],
)
def test_hostile_mcp_server_rows_are_refused_with_the_rule(agent, row, expected):
    changes = {"mcp_servers-count": "2"} | {f"mcp_servers-1-{key}": value for key, value in row.items()}
    form = form_for(agent, **changes)
    assert not form.is_valid()
    assert expected in " ".join(form.errors["mcp_servers"]), form.errors
    agent.refresh_from_db()
    assert list(agent.mcp_servers) == ["search"]


def test_a_refused_row_is_shown_again_as_typed(owner_client, agent):
    data = posted(agent, **{"mcp_servers-count": "2", "mcp_servers-1-name": "calvin", "mcp_servers-1-command": "evil"})
    page = flat(owner_client.post(change_url(agent), data))
    assert "reserved for Calvin" in page and 'name="mcp_servers-1-name" value="calvin"' in page
    assert not AuditEvent.objects.filter(verb="agent.change").exists()


def test_a_destination_to_another_workspaces_thread_or_agent_is_refused(owner_client, agent, other_workspace):
    theirs = session_in(other_workspace, title="Globex")
    their_agent = agent_create(workspace=other_workspace, name="globex-bot")
    for key, value in (("thread", theirs.thread_id), ("target_agent", their_agent.id)):
        data = posted(
            agent, **{"destinations-TOTAL_FORMS": "1", "destinations-0-name": "out", f"destinations-0-{key}": value}
        )
        page = flat(owner_client.post(change_url(agent), data))
        assert "Select a valid choice" in page
    assert not Destination.objects.filter(agent=agent).exists()


def test_a_destination_chosen_among_this_workspaces_threads_is_saved(owner_client, agent, workspace):
    ours = session_in(workspace, title="Ops")
    data = posted(
        agent,
        **{"destinations-TOTAL_FORMS": "1", "destinations-0-name": "Ops Room", "destinations-0-thread": ours.thread_id},
    )
    assert owner_client.post(change_url(agent), data).status_code == 302
    assert list(Destination.objects.filter(agent=agent).values_list("name", "thread_id")) == [
        ("ops-room", ours.thread_id)
    ]


def test_an_agent_added_here_gets_its_directory(owner_client, workspace):
    data = posted(Agent(workspace=workspace, name="fresh"), workspace=workspace.id)
    response = owner_client.post("/admin/workspaces/agent/add/", data)
    assert response.status_code == 302, flat(response)[:3000]
    fresh = Agent.objects.get(name="fresh")
    assert fresh.directory == f"agents/agent-{fresh.id}/workspace"
    assert AuditEvent.objects.filter(verb="agent.create", target_id=str(fresh.id)).count() == 1


def test_a_person_who_runs_two_workspaces_chooses_only_among_the_agents_own(
    owner_client, owner, agent, other_workspace
):
    Member.objects.create(workspace=other_workspace, user=owner.user, role=Member.Role.ADMIN)
    session_in(other_workspace, title="Globex secret plan")
    agent_create(workspace=other_workspace, name="globex-bot")
    page = flat(owner_client.get(change_url(agent)))
    assert "Globex secret plan" not in page and "globex-bot" not in page


def test_the_inline_keeps_destination_rules(owner_client, agent, workspace):
    ours = session_in(workspace, title="Ops")
    data = posted(
        agent,
        **{"destinations-TOTAL_FORMS": "1", "destinations-0-name": "Thread", "destinations-0-thread": ours.thread_id},
    )
    page = flat(owner_client.post(change_url(agent), data))
    assert "thread is reserved" in page
    both = {
        "destinations-0-thread": ours.thread_id,
        "destinations-0-target_agent": agent_create(workspace=workspace, name="x").id,
    }
    page = flat(
        owner_client.post(
            change_url(agent), posted(agent, **{"destinations-TOTAL_FORMS": "1", "destinations-0-name": "out"} | both)
        )
    )
    assert "choose either a thread or an agent" in page
    assert not Destination.objects.filter(agent=agent).exists()


def test_the_destination_list_chooses_by_search_not_by_typed_ids(owner_client, agent):
    page = flat(owner_client.get("/admin/workspaces/destination/add/"))
    assert 'class="admin-autocomplete' in page and "vForeignKeyRawIdAdminField" not in page


def test_a_page_loaded_before_an_approved_install_does_not_undo_it(owner_client, agent):
    data = posted(agent, instructions="Be brief.")  # the page as loaded
    Agent.objects.filter(id=agent.id).update(apt_packages=["jq", "ffmpeg"], environment_version=2)  # approved meanwhile
    page = flat(owner_client.post(change_url(agent), data))
    assert "changed since this page was loaded" in page
    agent.refresh_from_db()
    assert agent.apt_packages == ["jq", "ffmpeg"] and agent.instructions == ""
    assert not AuditEvent.objects.filter(verb="agent.change").exists()


def test_the_audit_names_no_argument_nor_env_value(owner_client, agent):
    data = posted(agent, provider_command="run\n--token=abc123secret", **{"mcp_servers-0-env": "KEY=plain-secret-9"})
    assert owner_client.post(change_url(agent), data).status_code == 302
    changes = AuditEvent.objects.get(verb="agent.change").changes
    assert changes == {"provider_command": ["0 arguments", "2 arguments"], "mcp_servers": [["search"], ["search"]]}
    assert "abc123secret" not in str(changes) and "plain-secret-9" not in str(changes)
