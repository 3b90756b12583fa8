"""Firing: each slot once however many beats run, what downtime does under each recurrence
policy, a run's outcome from its turn, and three failures in a row pausing the task."""

import threading
from datetime import timedelta

import pytest
from django.db import connection

from calvin.audit.models import AuditEvent
from calvin.schedules.models import ScheduledTask, TaskRun
from calvin.schedules.services import task_fire, task_resume, tasks_fire_due
from sessions.models import Message, Turn
from sessions.scheduling import turns_claim
from sessions.turns import turn_finish
from tests.schedules.conftest import START, make_task

pytestmark = pytest.mark.django_db(transaction=True)
HOUR = timedelta(hours=1)


def test_a_task_fires_its_slot_once_into_a_session_of_its_own(agent, owner):
    task = make_task(agent, owner)
    assert task.next_run_at == START + HOUR  # 09:00, the first full hour after it was made
    assert tasks_fire_due(now=START + HOUR - timedelta(seconds=1)) == 0
    assert tasks_fire_due(now=START + HOUR + timedelta(seconds=3)) == 1
    assert tasks_fire_due(now=START + HOUR + timedelta(seconds=13)) == 0  # the next tick: nothing new
    task.refresh_from_db()
    [run] = task.runs.all()
    assert (run.scheduled_for, run.trigger, run.status) == (START + HOUR, "schedule", "running")
    assert task.next_run_at == START + 2 * HOUR
    assert task.session.thread.title == "Task: daily-report" and task.session.agent_id == agent.id
    assert run.turn.session_id == task.session_id and run.turn.status == Turn.Status.QUEUED
    assert run.turn.prompt.text == "Scheduled task daily-report: write the report"
    assert AuditEvent.objects.filter(verb="task.create", target_id=str(task.id)).exists()


def test_two_beats_firing_at_once_claim_the_slot_once(agent):
    task = make_task(agent)
    now = START + HOUR + timedelta(seconds=2)
    ready, fired = threading.Barrier(2), []

    def beat():
        try:
            ready.wait(timeout=10)
            fired.append(len(task_fire(task_id=task.id, now=now)))
        finally:
            connection.close()

    beats = [threading.Thread(target=beat) for _ in range(2)]
    for thread in beats:
        thread.start()
    for thread in beats:
        thread.join(timeout=30)
    assert sorted(fired) == [0, 1]
    assert TaskRun.objects.filter(task=task).count() == 1
    assert Turn.objects.filter(session__agent=agent).count() == 1


def test_a_beat_that_still_sees_the_old_time_loses_the_claim(agent):
    task = make_task(agent)
    now = START + HOUR + timedelta(seconds=2)
    assert len(task_fire(task_id=task.id, now=now)) == 1
    # A restarted beat with a stale view (the slot's time not yet moved on) fires nothing.
    ScheduledTask.objects.filter(id=task.id).update(next_run_at=START + HOUR)
    assert task_fire(task_id=task.id, now=now) == []
    assert TaskRun.objects.filter(task=task).count() == 1
    assert ScheduledTask.objects.get(id=task.id).next_run_at == START + 2 * HOUR


def downtime(agent, policy, hours_down, **fields):
    """A task made at START, with beat down from its first slot until `hours_down` later."""
    task = make_task(agent, recurrence_policy=policy, **fields)
    now = START + HOUR + timedelta(hours=hours_down)
    runs = task_fire(task_id=task.id, now=now)
    return task, runs, now


def test_after_downtime_catch_up_latest_fires_once(agent):
    task, runs, now = downtime(agent, "catch-up-latest", 5.5)
    assert [(r.scheduled_for, r.trigger) for r in runs] == [(START + 6 * HOUR, "catch-up")]
    assert ScheduledTask.objects.get(id=task.id).next_run_at == START + 7 * HOUR


def test_after_downtime_catch_up_all_walks_the_missed_periods_oldest_first_at_most_24(agent):
    _, runs, _ = downtime(agent, "catch-up-all", 5.5)
    assert [r.scheduled_for for r in runs] == [START + n * HOUR for n in range(1, 7)]
    prompts = Message.objects.filter(id__in=[r.turn.prompt_id for r in runs]).order_by("id")
    assert prompts.count() == 6  # six turns, queued oldest first
    other = make_task(agent, name="long-outage", recurrence_policy="catch-up-all")
    runs = task_fire(task_id=other.id, now=START + 40 * HOUR)
    assert (
        len(runs) == 24 and runs[0].scheduled_for == START + 17 * HOUR and runs[-1].scheduled_for == START + 40 * HOUR
    )


def test_after_downtime_skip_if_missed_drops_runs_later_than_the_grace_window(agent):
    task, runs, _ = downtime(agent, "skip-if-missed", 5.5, grace_window_seconds=600)
    assert runs == []
    [skipped] = TaskRun.objects.filter(task=task)
    assert skipped.status == "skipped" and "later than the 600 s grace window" in skipped.error
    assert ScheduledTask.objects.get(id=task.id).next_run_at == START + 7 * HOUR
    within = make_task(agent, name="within-grace", recurrence_policy="skip-if-missed", grace_window_seconds=600)
    runs = task_fire(task_id=within.id, now=START + 6 * HOUR + timedelta(minutes=5))
    assert [r.scheduled_for for r in runs] == [START + 6 * HOUR]


def test_a_one_off_task_fires_once_and_is_done(agent):
    task = make_task(agent, name="once", recurrence=None, process_after=(START + 2 * HOUR).isoformat())
    assert tasks_fire_due(now=START + 3 * HOUR) == 1
    assert tasks_fire_due(now=START + 4 * HOUR) == 0
    task.refresh_from_db()
    assert (task.status, task.next_run_at, task.runs.count()) == ("done", None, 1)


def finish(host, run, status, error=""):
    [claimed] = turns_claim(host_id=host.id)
    assert claimed["turn"] == run.turn_id
    assert turn_finish(host_id=host.id, turn_id=run.turn_id, status=status, error=error)
    return TaskRun.objects.get(id=run.id)


def test_a_failed_run_is_recorded_the_next_still_fires_and_three_in_a_row_pause_the_task(agent, owner, host):
    task = make_task(agent, owner)
    hour = START + HOUR
    [run] = task_fire(task_id=task.id, now=hour)
    assert finish(host, run, "done").status == "done"
    for n in range(1, 4):
        [run] = task_fire(task_id=task.id, now=hour + n * HOUR)
        ended = finish(host, run, "failed", error=f"exit status {n}")
        assert (ended.status, ended.error) == ("failed", f"exit status {n}")
        task.refresh_from_db()
        assert task.consecutive_failures == n
        assert task.status == ("paused" if n == 3 else "active")
    assert "paused after 3 failed runs in a row; the last: exit status 3" in task.paused_reason
    notice = Message.objects.filter(thread=task.session.thread, kind=Message.Kind.SYSTEM).last()
    assert "Scheduled task daily-report" in notice.text and f"ncl tasks resume {task.id}" in notice.text
    assert task_fire(task_id=task.id, now=hour + 5 * HOUR) == []  # paused: nothing fires
    resumed = task_resume(task_id=task.id, actor=owner, now=hour + 5 * HOUR + timedelta(minutes=1))
    assert (resumed.status, resumed.consecutive_failures, resumed.next_run_at) == ("active", 0, hour + 6 * HOUR)


def test_a_success_between_failures_starts_the_count_again(agent, host):
    task = make_task(agent)
    for n, status in enumerate(["failed", "failed", "done", "failed", "failed"], start=1):
        [run] = task_fire(task_id=task.id, now=START + n * HOUR)
        finish(host, run, status)
    task.refresh_from_db()
    assert (task.status, task.consecutive_failures) == ("active", 2)
