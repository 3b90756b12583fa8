"""`ncl tasks` against the gateway: a person's changes apply at once, an agent's wait for a person
and then apply exactly as shown; scope, roles, another workspace, and hostile input."""

import json

import pytest

from approvals.models import PendingApproval
from calvin.api.tokens import api_token_create
from calvin.schedules.models import ScheduledTask
from calvin.workspaces.models import Agent
from tests.api.conftest import agent_client, member_of
from tests.conftest import wait_for
from tests.ncl.conftest import as_agent, ncl
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)
HOURLY = ("--recurrence", "0 * * * *")


def test_a_person_makes_changes_runs_and_deletes_a_task(gateway, api_url, workspace, as_person, tmp_path):
    helper = agent_client(api_url, workspace, name="helper")
    gate = tmp_path / "gate.sh"
    gate.write_text("echo '{\"wakeAgent\": true}'\n")
    made = as_person("tasks", "create", "--name", "digest", "--prompt", "summarise the day", *HOURLY,
                     "--timezone", "Europe/Berlin", "--script", str(gate), "--agent", str(helper.agent.id))  # fmt: skip
    assert made.code == 0 and made.out.startswith("done: task digest made; next run "), made.out + made.err
    task = ScheduledTask.objects.get(name="digest")
    assert (task.agent_id, task.time_zone, task.script) == (helper.agent.id, "Europe/Berlin", gate.read_text())

    listed = as_person("tasks", "list")
    assert "digest" in listed.out and "0 * * * *" in listed.out and "active" in listed.out
    shown = as_person("tasks", "get", str(task.id), "--json").json()
    assert shown["next_run_at"] and shown["recurrence_policy"] == "catch-up-latest"

    changed = as_person("tasks", "update", str(task.id), "--recurrence", "30 7 * * 1-5", "--json")
    assert changed.code == 0 and changed.json()["task"]["recurrence"] == "30 7 * * 1-5"
    assert as_person("tasks", "pause", str(task.id)).out.strip() == "done: task digest is paused"
    assert as_person("tasks", "pause", str(task.id)).code == 5  # already paused: refused, with why
    assert as_person("tasks", "resume", str(task.id)).code == 0
    ran = as_person("tasks", "run", str(task.id))
    assert ran.code == 0 and "runs now" in ran.out
    runs = as_person("tasks", "runs", str(task.id), "--json").json()["items"]
    assert [(r["trigger"], r["status"]) for r in runs] == [("manual", "running")] and runs[0]["turn_id"]
    assert as_person("tasks", "delete", str(task.id)).code == 0
    assert not ScheduledTask.objects.filter(id=task.id).exists()
    assert as_person("tasks", "get", str(task.id)).code == 4


def test_an_agents_task_waits_for_a_person_then_is_made_exactly_as_shown(
    gateway, api_url, workspace, as_person, celery_worker
):
    helper = agent_client(api_url, workspace, name="helper")
    run = as_agent(gateway, helper)
    asked = run("tasks", "create", "--name", "standup", "--prompt", "post the standup", "--recurrence", "0 9 * * 1-5")
    assert asked.code == 3, asked.err
    approval = PendingApproval.objects.get(session=helper.session)
    assert approval.details["name"] == "standup" and approval.details["recurrence"] == "0 9 * * 1-5"
    assert approval.details["agent"] == helper.agent.id
    assert not ScheduledTask.objects.exists()
    assert as_person("approvals", "approve", str(approval.id)).code == 0
    wait_for(lambda: ToolCall.objects.get(id=approval.tool_call_id).status == ToolCall.Status.APPLIED, timeout=30)
    task = ScheduledTask.objects.get(name="standup")
    assert (task.prompt, task.recurrence, task.created_by_session_id) == ("post the standup", "0 9 * * 1-5",
                                                                        helper.session.id)  # fmt: skip
    assert run("tasks", "list", "--json").json()["items"][0]["id"] == task.id

    deleting = run("tasks", "delete", str(task.id), "--json")
    assert deleting.code == 3
    assert as_person("approvals", "deny", str(deleting.json()["approval"])).code == 0
    assert ScheduledTask.objects.filter(id=task.id).exists()


def test_an_agents_refused_change_is_said_at_once_and_asks_nobody(gateway, api_url, workspace):
    helper = agent_client(api_url, workspace, name="helper")
    run = as_agent(gateway, helper)
    for flags, says in (
        (("--recurrence", "* * * * *"), "at most one run every 300 s"),
        (("--recurrence", "0 0 30 2 *"), "never fires"),
        ((*HOURLY, "--timezone", "Europe/Berln"), "did you mean Europe/Berlin"),
        (("--process-after", "tomorrow"), "process_after"),
        ((), "either process_after"),
    ):
        refused = run("tasks", "create", "--name", "bad", "--prompt", "p", *flags)
        assert refused.code == 2 and says in refused.err, (flags, refused.err)
    assert run("tasks", "create", "--name", "bad", "--prompt", "x" * 20_000, *HOURLY).code == 2
    assert run("tasks", "create", "--name", "Bad Name", "--prompt", "p", *HOURLY).code == 2
    assert run("tasks", "create", "--prompt", "p", *HOURLY).code == 2  # --name is required
    assert not PendingApproval.objects.exists() and not ScheduledTask.objects.exists()


def test_tasks_are_scoped_by_agent_role_and_workspace(gateway, api_url, workspace, as_person, stranger):
    mine = agent_client(api_url, workspace, name="mine")
    other = agent_client(api_url, workspace, scope=Agent.CliScope.GLOBAL, name="other")
    made = as_person(
        "tasks", "create", "--name", "t", "--prompt", "p", *HOURLY, "--agent", str(mine.agent.id), "--json"
    )
    task_id = made.json()["task"]["id"]
    group = agent_client(api_url, workspace, name="third")
    assert as_agent(gateway, group)("tasks", "get", str(task_id)).code == 4  # another agent's
    assert as_agent(gateway, group)("tasks", "create", "--name", "x", "--prompt", "p", *HOURLY,
                                    "--agent", str(mine.agent.id)).code == 4  # fmt: skip
    assert as_agent(gateway, other)("tasks", "get", str(task_id)).code == 0  # global sees the workspace

    plain = member_of(workspace, "plain")
    _, token = api_token_create(member=plain, name="plain's")
    refused = ncl("tasks", "pause", str(task_id), url=gateway, token=token)
    assert refused.code == 5 and "made this task" in refused.err

    theirs = lambda *args: ncl(*args, url=gateway, token=stranger.token)  # noqa: E731
    assert theirs("tasks", "list", "--json").json()["items"] == []
    for verb in ("get", "runs", "pause", "resume", "cancel", "run", "delete"):
        assert theirs("tasks", verb, str(task_id)).code == 4, verb
    assert theirs("tasks", "update", str(task_id), "--prompt", "mine now").code == 4
    assert theirs("tasks", "create", "--name", "x", "--prompt", "p", *HOURLY, "--agent", str(mine.agent.id)).code == 4
    assert ScheduledTask.objects.get(id=task_id).status == "active" and ScheduledTask.objects.count() == 1


def test_the_api_refuses_nul_and_a_reused_idempotency_key(gateway, api_url, workspace, person):
    helper = agent_client(api_url, workspace, name="helper")
    body = {"name": "nul", "prompt": "a\x00b", "recurrence": "0 * * * *", "agent": helper.agent.id}
    answer = person.post("/tasks", json=body)
    assert answer.status_code == 422 and "NUL" in answer.json()["detail"]
    good = {**body, "prompt": "fine"}
    first = person.post("/tasks", json=good, headers={"Idempotency-Key": "k1"})
    again = person.post("/tasks", json=good, headers={"Idempotency-Key": "k1"})
    assert first.status_code == again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    other = person.post("/tasks", json={**good, "name": "other"}, headers={"Idempotency-Key": "k1"})
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
    assert ScheduledTask.objects.count() == 1
    assert json.loads(first.content)["task"]["name"] == "nul"
