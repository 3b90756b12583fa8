"""Every verb of ncl as a subprocess against the running gateway: as a person, as an agent of each
cli_scope, with a revoked token, across workspaces; an agent's write waits for a person."""

import pytest

from approvals.models import PendingApproval
from calvin.api.tokens import api_token_create, api_token_revoke
from calvin.workspaces.models import Agent, DailyUsage, Destination, Member
from calvin.workspaces.quotas import utc_today
from sessions.models import Runner, Turn
from sessions.services import message_post_by_person, runner_revoke
from tests.api.conftest import agent_client
from tests.conftest import wait_for
from tests.ncl.conftest import as_agent, ncl
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def queued_turn(session, text="do the thing") -> Turn:
    owner = Member.objects.filter(workspace_id=session.workspace_id).first()
    message_post_by_person(thread=session.thread, member=owner, text=text)
    return Turn.objects.get(session=session, status=Turn.Status.QUEUED)


def test_a_person_reads_every_resource_in_tables_and_json(gateway, api_url, workspace, as_person):
    helper = agent_client(api_url, workspace, name="helper")
    Destination.objects.create(agent=helper.agent, name="ops-room", thread=helper.session.thread)
    queued_turn(helper.session, text="summarise the release notes")

    me = as_person("me", "--json")
    assert me.code == 0, me.err
    assert (me.json()["kind"], me.json()["role"], me.json()["workspace"]["slug"]) == ("person", "owner", "acme")

    agents = as_person("agents", "list")
    assert agents.code == 0, agents.err
    header, *rows = agents.out.splitlines()
    assert header.split() == ["ID", "NAME", "CLI_SCOPE", "MODEL", "PAUSED"]
    assert any(row.split()[:3] == [str(helper.agent.id), "helper", "group"] for row in rows), agents.out
    shown = as_person("groups", "get", str(helper.agent.id), "--json")  # NanoClaw's word for an agent
    assert shown.code == 0 and shown.json()["name"] == "helper"
    assert "cli_scope" in as_person("agents", "get", str(helper.agent.id)).out

    refused = as_person("destinations", "list")
    assert refused.code == 2 and "--agent" in refused.err  # a person has no agent of their own
    destinations = as_person("destinations", "list", "--agent", str(helper.agent.id), "--json")
    assert [d["name"] for d in destinations.json()["items"]] == ["ops-room"]

    assert "owner" in as_person("members", "list").out
    sessions = as_person("sessions", "list", "--agent", str(helper.agent.id), "--json").json()["items"]
    assert [s["id"] for s in sessions] == [helper.session.id]
    assert as_person("sessions", "get", str(helper.session.id), "--json").json()["title"] == "helper's work"
    messages = as_person("sessions", "messages", str(helper.session.id))
    assert messages.code == 0 and "summarise the release notes" in messages.out
    assert as_person("approvals", "list").out.strip() == "(none)"
    for resource in ("tool-calls", "audit"):
        listed = as_person(resource, "list", "--json")
        assert listed.code == 0, listed.err
        assert set(listed.json()) == {"items", "next_cursor"}
    DailyUsage.objects.create(workspace=workspace, day=utc_today(), tool_calls=12, turns=2)
    usage = as_person("usage", "show")
    assert usage.code == 0, usage.err
    header, *rows = usage.out.splitlines()
    assert header.split() == ["KEY", "USED", "LIMIT", "UNIT", "PERCENT", "RESETS"]
    assert next(row for row in rows if row.startswith("tool_calls_today")).split()[1] == "12", usage.out
    days = as_person("usage", "days", "--days", "7", "--json")
    assert [d["tool_calls"] for d in days.json()["days"]] == [12], days.err


@pytest.mark.parametrize("scope", [Agent.CliScope.GROUP, Agent.CliScope.GLOBAL])
def test_an_agent_sees_what_its_cli_scope_reaches(gateway, api_url, workspace, scope):
    mine = agent_client(api_url, workspace, scope=scope, name="mine")
    other = agent_client(api_url, workspace, name="other")
    run = as_agent(gateway, mine)

    me = run("me", "--json").json()
    assert (me["kind"], me["scope"], me["agent_id"], me["session_id"]) == (
        "agent",
        scope,
        mine.agent.id,
        mine.session.id,
    )
    seen = {agent["id"] for agent in run("agents", "list", "--json").json()["items"]}
    reaches_all = scope == Agent.CliScope.GLOBAL
    assert seen == ({mine.agent.id, other.agent.id} if reaches_all else {mine.agent.id})
    assert run("destinations", "list").code == 0  # its own agent's, without --agent
    for verb in (("agents", "get", str(other.agent.id)), ("sessions", "get", str(other.session.id))):
        ran = run(*verb)
        assert ran.code == (0 if reaches_all else 4), (verb, ran.err)
        if not reaches_all:
            assert "that you can see" in ran.err
    audit = run("audit", "list")
    assert audit.code == (0 if reaches_all else 5), audit.err
    usage = run("usage", "show")
    assert usage.code == (0 if reaches_all else 5), usage.err


def test_a_disabled_scope_a_revoked_token_and_a_revoked_runner_are_refused(gateway, api_url, workspace, person):
    disabled = agent_client(api_url, workspace, scope=Agent.CliScope.DISABLED, name="quiet")
    ran = as_agent(gateway, disabled)("sessions", "list")
    assert ran.code == 5 and "cli_scope is disabled" in ran.err, ran.err

    owner = Member.objects.get(workspace=workspace, user__username="owner")
    row, token = api_token_create(member=owner, name="old laptop")
    assert ncl("me", url=gateway, token=token).code == 0
    api_token_revoke(token_id=row.id, member=owner)
    ran = ncl("me", url=gateway, token=token)
    assert ran.code == 5 and "unauthenticated" in ran.err, ran.err

    helper = agent_client(api_url, workspace, name="helper")
    assert as_agent(gateway, helper)("me").code == 0
    runner_revoke(runner=Runner.objects.get(session=helper.session))
    assert as_agent(gateway, helper)("me").code == 5


def test_another_workspaces_token_never_reaches_this_one(gateway, api_url, workspace, stranger):
    helper = agent_client(api_url, workspace, name="helper")
    turn = queued_turn(helper.session)
    approval_code = as_agent(gateway, helper)("sessions", "stop", str(helper.session.id))
    approval = PendingApproval.objects.get(session=helper.session)
    theirs = lambda *args: ncl(*args, url=gateway, token=stranger.token)  # noqa: E731
    assert approval_code.code == 3
    assert helper.agent.id not in {a["id"] for a in theirs("agents", "list", "--json").json()["items"]}
    for verb in (
        ("agents", "get", str(helper.agent.id)),
        ("destinations", "list", "--agent", str(helper.agent.id)),
        ("sessions", "get", str(helper.session.id)),
        ("sessions", "messages", str(helper.session.id)),
        ("sessions", "stop", str(helper.session.id)),
        ("approvals", "get", str(approval.id)),
        ("approvals", "approve", str(approval.id)),
        ("approvals", "deny", str(approval.id)),
    ):
        ran = theirs(*verb)
        assert ran.code == 4, (verb, ran.code, ran.err)
    assert theirs("sessions", "list", "--json").json()["items"] == []
    assert PendingApproval.objects.get(id=approval.id).status == PendingApproval.Status.PENDING
    assert Turn.objects.get(id=turn.id).status == Turn.Status.QUEUED


def test_an_agents_stop_is_approval_pending_then_applied_once_a_person_approves(
    gateway, api_url, workspace, as_person, celery_worker
):
    helper = agent_client(api_url, workspace, name="helper")
    turn = queued_turn(helper.session)
    run = as_agent(gateway, helper)
    asked = run("sessions", "stop", str(helper.session.id))
    assert asked.code == 3, asked.err
    approval = PendingApproval.objects.get(session=helper.session)
    assert asked.out.startswith(f"approval-pending: approval {approval.id} waits for a person")
    assert Turn.objects.get(id=turn.id).status == Turn.Status.QUEUED

    assert run("approvals", "approve", str(approval.id)).code == 5  # an agent never decides
    shown = as_person("approvals", "get", str(approval.id), "--json").json()
    assert (shown["status"], shown["details"]) == ("pending", {"session": helper.session.id})
    decided = as_person("approvals", "approve", str(approval.id))
    assert decided.code == 0 and decided.out.startswith("done:"), decided.out + decided.err
    wait_for(lambda: ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.APPLIED, timeout=30)
    assert Turn.objects.get(id=turn.id).status == Turn.Status.STOPPED
    again = as_person("approvals", "approve", str(approval.id))
    assert again.code == 5 and "already" in again.err, again.err


def test_a_denied_stop_changes_nothing_and_a_persons_stop_applies_at_once(gateway, api_url, workspace, as_person):
    helper = agent_client(api_url, workspace, name="helper")
    turn = queued_turn(helper.session)
    asked = as_agent(gateway, helper)("sessions", "stop", str(helper.session.id), "--json")
    assert asked.code == 3 and asked.json()["status"] == "approval-pending"
    denied = as_person("approvals", "deny", str(asked.json()["approval"]))
    assert denied.code == 0, denied.err
    assert PendingApproval.objects.get(id=asked.json()["approval"]).status == PendingApproval.Status.DENIED
    assert Turn.objects.get(id=turn.id).status == Turn.Status.QUEUED

    stopped = as_person("sessions", "stop", str(helper.session.id))
    assert stopped.code == 0, stopped.err
    assert Turn.objects.get(id=turn.id).status == Turn.Status.STOPPED


def test_pages_follow_the_cursor_and_the_apis_refusals_keep_their_codes(gateway, api_url, workspace, as_person):
    names = {f"agent-{n}" for n in range(3)}
    for name in names:
        Agent.objects.create(workspace=workspace, name=name)
    first = as_person("agents", "list", "--limit", "1")
    assert first.code == 0 and len(first.out.splitlines()) == 2  # the header and one agent
    assert "(more: --cursor " in first.err
    cursor = first.err.split("--cursor ")[1].split(",")[0]
    second = as_person("agents", "list", "--limit", "1", "--cursor", cursor, "--json").json()
    assert second["items"][0]["name"] not in first.out
    every = as_person("agents", "list", "--limit", "1", "--all", "--json").json()
    assert {a["name"] for a in every["items"]} >= names and every["next_cursor"] is None

    bogus = as_person("sessions", "list", "--status", "bogus")
    assert bogus.code == 2 and "status" in bogus.err, bogus.err  # the API's own rule, said by the API
    assert as_person("sessions", "get", "987654321").code == 4
    assert as_person("agents", "list", "--cursor", "not-a-cursor").code == 2


def test_agent_made_text_never_reaches_the_terminal_as_control_characters(gateway, api_url, workspace, as_person):
    title = "fine\x1b]0;pwned\x07\x1b[2J\u202eevil\x9b"
    helper = agent_client(api_url, workspace, name="helper")
    helper.session.thread.title = title
    helper.session.thread.save(update_fields=["title"])
    for verb in (("sessions", "list"), ("sessions", "get", str(helper.session.id))):
        shown = as_person(*verb).out
        assert "fine\\x1b]0;pwned\\x07\\x1b[2J\\u202eevil\\x9b" in shown, shown
        assert not any(ch in shown for ch in "\x1b\x07\u202e\x9b")
    assert as_person("sessions", "get", str(helper.session.id), "--json").json()["title"] == title
