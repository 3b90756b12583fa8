"""What a task may not be: hostile and mistaken input is refused with the rule, and nothing is made."""

import pytest
from pydantic import ValidationError

from calvin.schedules.models import ScheduledTask
from calvin.schedules.services import TaskRefused, task_cancel, task_pause, task_update
from calvin.schedules.specs import MAX_PROMPT, TaskChange, TaskCreate
from tests.schedules.conftest import START, make_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"recurrence": "* * * * *"}, "at most one run every 300 s"),
        ({"recurrence": "0 0 31 2 *"}, "never fires"),
        ({"timezone": "Europe/Berln"}, "did you mean Europe/Berlin"),
        ({"timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"recurrence": None}, "either process_after (one run) or recurrence"),
        ({"process_after": "2027-02-01T09:00:00Z"}, "not both"),
        ({"recurrence": None, "process_after": "2035-01-01T00:00:00Z"}, "at most 5 years ahead"),
    ],
)
def test_refused_timings_make_nothing(agent, fields, says):
    with pytest.raises(TaskRefused) as refused:
        make_task(agent, **fields)
    assert says in str(refused.value)
    assert not ScheduledTask.objects.exists()


@pytest.mark.parametrize(
    "fields",
    [
        {"prompt": "x" * (MAX_PROMPT + 1)},
        {"prompt": "nul\x00byte"},
        {"prompt": ""},
        {"name": "Not A Label"},
        {"name": "-edge"},
        {"name": "x" * 65},
        {"script": "echo\x00"},
        {"grace_window_seconds": -1},
        {"recurrence_policy": "whenever"},
        {"surprise": 1},
    ],
)
def test_the_spec_refuses_hostile_fields(fields):
    with pytest.raises(ValidationError):
        TaskCreate(**{"name": "ok", "prompt": "p", "recurrence": "0 * * * *", **fields})


def test_a_name_is_one_per_agent_and_a_naive_time_is_read_in_the_tasks_zone(agent, workspace):
    make_task(agent)
    with pytest.raises(TaskRefused, match="already has a task named 'daily-report'"):
        make_task(agent)
    once = make_task(
        agent, name="berlin-once", recurrence=None, process_after="2027-03-01T09:00:00", timezone="Europe/Berlin"
    )
    assert once.next_run_at.isoformat() == "2027-03-01T08:00:00+00:00"  # 09:00 CET
    workspace.time_zone = "America/New_York"
    workspace.save()
    agent.refresh_from_db()
    assert make_task(agent, name="workspace-zone", recurrence="0 9 * * *").time_zone == "America/New_York"


def test_updates_re_time_the_task_and_ended_tasks_stay_ended(agent, owner):
    task = make_task(agent, owner)
    changed = task_update(task_id=task.id, change=TaskChange(recurrence="30 6 * * *"), actor=owner, now=START)
    assert changed.next_run_at.isoformat() == "2027-01-05T06:30:00+00:00"
    with pytest.raises(TaskRefused, match="at most one run every"):
        task_update(task_id=task.id, change=TaskChange(recurrence="*/2 * * * *"), actor=owner, now=START)
    assert ScheduledTask.objects.get(id=task.id).recurrence == "30 6 * * *"
    task_pause(task_id=task.id, actor=owner)
    with pytest.raises(TaskRefused, match="not active"):
        task_pause(task_id=task.id, actor=owner)
    task_cancel(task_id=task.id, actor=owner)
    with pytest.raises(TaskRefused, match="cancelled: it cannot be changed"):
        task_update(task_id=task.id, change=TaskChange(prompt="again"), actor=owner)
