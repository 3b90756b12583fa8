"""Scheduled tasks' state changes: made, changed, paused, resumed, cancelled, deleted, fired, ended.

Firing claims each slot with an insert of its (task, scheduled_for) row: two beat processes,
or a beat that died after the claim and before the task's next time moved on, cannot fire a
slot twice (the loser's insert is refused by the unique constraint and it does nothing)."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from calvin.audit.services import audit_record
from calvin.schedules.cron import CronRefused, cron_check, firings_between, next_after
from calvin.schedules.models import ScheduledTask, TaskRun
from calvin.schedules.specs import TaskChange, TaskCreate
from calvin.workspaces.time_zones import time_zone_problem

CATCH_UP_ALL_AT_MOST = 24
FARTHEST_AHEAD = timedelta(days=5 * 366)
LIVE = (ScheduledTask.Status.ACTIVE, ScheduledTask.Status.PAUSED)


class TaskRefused(ValueError):
    """A change that cannot be made; the text says why, in words for the person or agent asking."""


def _zone(name: str) -> ZoneInfo:
    problem = time_zone_problem(name)
    if problem:
        raise TaskRefused(f"timezone: {problem}")
    return ZoneInfo(name)


def _when(task: ScheduledTask, *, now: datetime) -> None:
    """Checks the task's timing fields and sets next_run_at from them."""
    zone = _zone(task.time_zone)
    if bool(task.process_after) == bool(task.recurrence):
        raise TaskRefused("a task has either process_after (one run) or recurrence (a cron), not both and not neither")
    if task.recurrence:
        try:
            task.recurrence = cron_check(
                task.recurrence, min_interval_seconds=settings.CALVIN_TASK_MIN_INTERVAL_SECONDS, zone=zone, now=now
            )
            task.next_run_at = next_after(task.recurrence, zone, now)
        except CronRefused as exc:
            raise TaskRefused(str(exc)) from None
        return
    at = task.process_after
    if timezone.is_naive(at):
        at = at.replace(tzinfo=zone)
    if at > now + FARTHEST_AHEAD:
        raise TaskRefused("process_after: at most 5 years ahead")
    task.process_after = task.next_run_at = at.astimezone(UTC)


def _apply(task: ScheduledTask, change: TaskChange) -> dict:
    """The change's fields onto the task; {field: (before, after)} for the audit log."""
    fields = change.model_dump(exclude_unset=True, exclude={"name", "agent"})
    if "timezone" in fields:
        fields["time_zone"] = fields.pop("timezone")
    if fields.get("process_after") is not None and fields.get("recurrence"):
        raise TaskRefused("a task has either process_after (one run) or recurrence (a cron), not both")
    if fields.get("process_after") is not None:  # an update from recurring to once, or back
        fields["recurrence"] = ""
    elif fields.get("recurrence"):
        fields["process_after"] = None
    changes = {}
    for name, value in fields.items():
        if value is None and name not in ("process_after",):
            continue
        before = getattr(task, name)
        setattr(task, name, value)
        changes[name] = (str(before) if before is not None else None, str(value) if value is not None else None)
    return changes


@transaction.atomic
def task_create(*, agent, spec: TaskCreate, member=None, session=None, now: datetime | None = None) -> ScheduledTask:
    """A task of `agent`'s, asked for by a person (`member`) or by an agent's `session` (approved)."""
    now = now or timezone.now()
    task = ScheduledTask(
        workspace_id=agent.workspace_id,
        agent=agent,
        name=spec.name,
        prompt=spec.prompt,
        time_zone=agent.workspace.time_zone,
        created_by=member,
        created_by_session=session,
    )
    changes = _apply(task, spec)
    _when(task, now=now)
    try:
        with transaction.atomic():
            task.save()
    except IntegrityError:
        raise TaskRefused(f"agent {agent.name} already has a task named {spec.name!r}") from None
    audit_record(verb="task.create", workspace=task.workspace_id, actor=member or agent, target=task, changes=changes)
    return task


def _locked(task_id: int) -> ScheduledTask:
    task = ScheduledTask.objects.select_for_update().select_related("agent", "workspace").filter(id=task_id).first()
    if task is None:
        raise TaskRefused(f"there is no task {task_id}")
    return task


@transaction.atomic
def task_update(*, task_id: int, change: TaskChange, actor=None, now: datetime | None = None) -> ScheduledTask:
    task = _locked(task_id)
    if task.status not in LIVE:
        raise TaskRefused(f"task {task.name} is {task.status}: it cannot be changed")
    changes = _apply(task, change)
    if {"process_after", "recurrence", "time_zone"} & set(changes):  # the cron check is the costly part
        _when(task, now=now or timezone.now())
    task.save()
    audit_record(verb="task.update", workspace=task.workspace_id, actor=actor, target=task, changes=changes)
    return task


@transaction.atomic
def task_pause(*, task_id: int, actor=None, reason: str = "paused by hand") -> ScheduledTask:
    task = _locked(task_id)
    if task.status != ScheduledTask.Status.ACTIVE:
        raise TaskRefused(f"task {task.name} is {task.status}, not active")
    task.status, task.paused_reason = ScheduledTask.Status.PAUSED, reason[:300]
    task.save(update_fields=["status", "paused_reason", "updated_at"])
    audit_record(verb="task.pause", workspace=task.workspace_id, actor=actor, target=task)
    return task


@transaction.atomic
def task_resume(*, task_id: int, actor=None, now: datetime | None = None) -> ScheduledTask:
    """Active again, from now on: the runs it missed while paused are not made up."""
    task = _locked(task_id)
    if task.status != ScheduledTask.Status.PAUSED:
        raise TaskRefused(f"task {task.name} is {task.status}, not paused")
    now = now or timezone.now()
    task.status, task.paused_reason, task.consecutive_failures = ScheduledTask.Status.ACTIVE, "", 0
    if task.recurring:
        task.next_run_at = next_after(task.recurrence, ZoneInfo(task.time_zone), now)
    task.save()
    audit_record(verb="task.resume", workspace=task.workspace_id, actor=actor, target=task)
    return task


@transaction.atomic
def task_cancel(*, task_id: int, actor=None) -> ScheduledTask:
    task = _locked(task_id)
    if task.status not in LIVE:
        raise TaskRefused(f"task {task.name} is already {task.status}")
    task.status, task.next_run_at = ScheduledTask.Status.CANCELLED, None
    task.save(update_fields=["status", "next_run_at", "updated_at"])
    audit_record(verb="task.cancel", workspace=task.workspace_id, actor=actor, target=task)
    return task


@transaction.atomic
def task_delete(*, task_id: int, actor=None) -> str:
    task = _locked(task_id)
    name = task.name
    audit_record(verb="task.delete", workspace=task.workspace_id, actor=actor, target=task)
    task.delete()
    return name


@transaction.atomic
def task_run_now(*, task_id: int, actor=None, now: datetime | None = None) -> TaskRun:
    """One run at once, outside the schedule (which goes on as it was)."""
    task = _locked(task_id)
    if task.status not in LIVE:
        raise TaskRefused(f"task {task.name} is {task.status}: it does not run")
    run = _start(task, now or timezone.now(), TaskRun.Trigger.MANUAL)
    audit_record(verb="task.run", workspace=task.workspace_id, actor=actor, target=task)
    return run


def _task_session(task: ScheduledTask):
    from sessions.models import Session
    from sessions.services import session_start

    live = (Session.Status.QUEUED, Session.Status.RUNNING, Session.Status.IDLE)
    if task.session_id and Session.objects.filter(id=task.session_id, status__in=live).exists():
        return task.session
    task.session = session_start(
        workspace=task.workspace, owner=task.created_by, agent=task.agent, title=f"Task: {task.name}"
    )
    task.save(update_fields=["session", "updated_at"])
    return task.session


def _start(task: ScheduledTask, slot: datetime, trigger: str) -> TaskRun:
    """Claims the slot and queues the run's turn, in the caller's transaction; IntegrityError
    (from the savepoint) when another process claimed it first."""
    from sessions.models import Turn
    from sessions.services import inbox_post

    with transaction.atomic():
        run = TaskRun.objects.create(task=task, scheduled_for=slot, trigger=trigger)
    session = _task_session(task)
    message = inbox_post(session=session, text=f"Scheduled task {task.name}: {task.prompt}")
    run.turn = Turn.objects.filter(prompt=message).first()
    run.save(update_fields=["turn"])
    if task.script and run.turn:
        Turn.objects.filter(id=run.turn.id).update(gate_script=task.script)
    return run


def _slots(task: ScheduledTask, now: datetime) -> tuple[list[datetime], str]:
    """The slots this firing runs, by the recurrence policy, and why others were dropped ("" if none)."""
    due = task.next_run_at
    policy = task.recurrence_policy
    if not task.recurring:
        missed = [due]
    else:
        many = CATCH_UP_ALL_AT_MOST if policy == ScheduledTask.Policy.CATCH_UP_ALL else 1
        missed = firings_between(task.recurrence, ZoneInfo(task.time_zone), due, now, newest=many)
    if not missed:
        return [], ""
    if policy == ScheduledTask.Policy.SKIP_IF_MISSED:
        late = (now - missed[-1]).total_seconds()
        if late > task.grace_window_seconds:
            return [], f"missed by {int(late)} s, later than the {task.grace_window_seconds} s grace window"
        return missed[-1:], ""
    return missed, ""


def task_fire(*, task_id: int, now: datetime | None = None) -> list[TaskRun]:
    """The runs of one due task (none if another process fired it, or it is not due)."""
    now = now or timezone.now()
    with transaction.atomic():
        task = (
            ScheduledTask.objects.select_related("agent", "workspace")
            .filter(id=task_id, status=ScheduledTask.Status.ACTIVE, next_run_at__lte=now)
            .first()
        )
        if task is None:
            return []
        due = task.next_run_at
        slots, dropped = _slots(task, now)
        runs = []
        late_after = now - timedelta(seconds=settings.CALVIN_TASK_TICK_SECONDS * 3)
        for slot in slots:
            trigger = TaskRun.Trigger.CATCH_UP if slot < late_after else TaskRun.Trigger.SCHEDULE
            try:
                runs.append(_start(task, slot, trigger))
            except IntegrityError:
                continue  # claimed by another beat: it fires this slot
        if dropped:
            with transaction.atomic():
                try:
                    TaskRun.objects.create(
                        task=task, scheduled_for=due, status=TaskRun.Status.SKIPPED, error=dropped, finished_at=now
                    )
                except IntegrityError:
                    pass
        if task.recurring:
            following = next_after(task.recurrence, ZoneInfo(task.time_zone), max(now, slots[-1] if slots else now))
            ScheduledTask.objects.filter(id=task.id, next_run_at=due).update(next_run_at=following, updated_at=now)
        else:
            ScheduledTask.objects.filter(id=task.id, next_run_at=due).update(
                status=ScheduledTask.Status.DONE, next_run_at=None, updated_at=now
            )
        return runs


def tasks_fire_due(*, now: datetime | None = None, batch: int = 200) -> int:
    """Fires every due task (beat's tick): each in its own transaction, so one bad task stops no other."""
    now = now or timezone.now()
    due = ScheduledTask.objects.filter(status=ScheduledTask.Status.ACTIVE, next_run_at__lte=now)
    fired = 0
    for task_id in due.order_by("next_run_at").values_list("id", flat=True)[:batch]:
        fired += len(task_fire(task_id=task_id, now=now))
    return fired


@transaction.atomic
def task_run_finished(*, turn_id: int, status: str, error: str = "") -> TaskRun | None:
    """A run's outcome from its turn; a third failure in a row pauses the task and says so."""
    from sessions.models import Session
    from sessions.services import system_notice_post

    run = TaskRun.objects.select_for_update().filter(turn_id=turn_id, status=TaskRun.Status.RUNNING).first()
    if run is None:
        return None
    failed = status != "done"
    run.status = TaskRun.Status.FAILED if failed else TaskRun.Status.DONE
    run.error = (error or (f"the turn ended {status}" if failed else ""))[:2000]
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    tasks = ScheduledTask.objects.filter(id=run.task_id)
    if not failed:
        tasks.update(consecutive_failures=0)
        return run
    tasks.update(consecutive_failures=F("consecutive_failures") + 1)
    task = tasks.select_related("agent").first()
    limit = settings.CALVIN_TASK_PAUSE_AFTER_FAILURES
    if task.consecutive_failures >= limit and task.status == ScheduledTask.Status.ACTIVE:
        reason = f"paused after {task.consecutive_failures} failed runs in a row; the last: {run.error[:200]}"
        task.status, task.paused_reason = ScheduledTask.Status.PAUSED, reason[:300]
        task.save(update_fields=["status", "paused_reason", "updated_at"])
        audit_record(verb="task.pause", workspace=task.workspace_id, target=task, changes={"reason": ("", reason)})
        notice = (
            f"Scheduled task {task.name} (agent {task.agent.name}) is {reason}. "
            f"Resume it with `ncl tasks resume {task.id}`."
        )
        for session_id in {task.session_id, task.created_by_session_id} - {None}:
            thread_id = Session.objects.filter(id=session_id).values_list("thread_id", flat=True).first()
            if thread_id:
                system_notice_post(thread_id=thread_id, text=notice)
    return run


# A task's one-word changes by name (ncl tasks <verb>, the API, the dashboard, an approved write).
TASK_VERBS = {
    "pause": task_pause,
    "resume": task_resume,
    "cancel": task_cancel,
    "run": task_run_now,
    "delete": task_delete,
}
