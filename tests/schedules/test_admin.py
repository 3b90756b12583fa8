"""Scheduled tasks in the admin: a workspace's owners see, edit (through the same checks) and
pause its tasks, and no other workspace's; runs are shown with their turn."""

import pytest
from django.urls import reverse

from calvin.audit.models import AuditEvent
from calvin.schedules.models import ScheduledTask
from calvin.schedules.services import task_fire
from calvin.workspaces.models import Agent, Member
from tests.api.conftest import member_of
from tests.schedules.conftest import START, make_task

pytestmark = pytest.mark.django_db(transaction=True)
LIST = reverse("admin:schedules_scheduledtask_changelist")


def form_of(task, **changes):
    fields = {
        "prompt": task.prompt,
        "process_after": "",
        "recurrence": task.recurrence,
        "time_zone": task.time_zone,
        "recurrence_policy": task.recurrence_policy,
        "grace_window_seconds": task.grace_window_seconds,
        "script": task.script,
    }
    return {**fields, **changes}


def test_an_owner_sees_edits_and_pauses_their_workspaces_tasks_only(client, workspace, other_workspace, agent, owner):
    ours = make_task(agent, owner)
    theirs = make_task(Agent.objects.create(workspace=other_workspace, name="theirs"), name="globex-task")
    client.force_login(owner.user)
    page = client.get(LIST).content.decode()
    assert "daily-report" in page and "globex-task" not in page
    assert client.get(reverse("admin:schedules_scheduledtask_change", args=[theirs.id])).status_code in (302, 404)

    change = reverse("admin:schedules_scheduledtask_change", args=[ours.id])
    refused = client.post(change, form_of(ours, recurrence="* * * * *"))
    assert refused.status_code == 200 and "at most one run every 300 s" in refused.content.decode()
    assert ScheduledTask.objects.get(id=ours.id).recurrence == "0 * * * *"
    saved = client.post(change, form_of(ours, recurrence="15 6 * * *", time_zone="Europe/Berlin"))
    assert saved.status_code == 302, saved.content.decode()[:2000]
    ours.refresh_from_db()
    assert (ours.recurrence, ours.time_zone, ours.next_run_at.hour, ours.next_run_at.minute) == (
        "15 6 * * *", "Europe/Berlin", 5, 15)  # fmt: skip
    assert AuditEvent.objects.filter(verb="task.update", target_id=str(ours.id), via="admin").exists()

    data = {"action": "pause", "_selected_action": [ours.id, theirs.id], "confirmed": "yes"}
    client.post(LIST, data, follow=True)
    assert ScheduledTask.objects.get(id=ours.id).status == "paused"
    assert ScheduledTask.objects.get(id=theirs.id).status == "active"  # another tenant's id changes nothing


def test_runs_are_listed_with_their_turn_and_a_plain_member_sees_nothing(client, workspace, agent, owner):
    task = make_task(agent, owner)
    [run] = task_fire(task_id=task.id, now=START.replace(hour=9))
    client.force_login(owner.user)
    page = client.get(reverse("admin:schedules_taskrun_changelist")).content.decode()
    assert f"turn {run.turn_id}" in page and "daily-report" in page
    plain = member_of(workspace, "plain")
    plain.user.is_staff = True
    plain.user.save()
    client.force_login(plain.user)
    assert client.get(LIST).status_code in (302, 403)
    assert Member.objects.filter(workspace=workspace).count() == 2
