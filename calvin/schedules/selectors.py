"""Reads of scheduled tasks for pages: each task with its latest run, in two queries however many."""

from django.db.models import OuterRef, Subquery

from calvin.schedules.models import ScheduledTask, TaskRun


def _latest(field: str):
    return Subquery(TaskRun.objects.filter(task=OuterRef("pk")).order_by("-scheduled_for").values(field)[:1])


def with_last_run_id(tasks):
    return tasks.annotate(last_run_id=_latest("id"))


def with_last_run(tasks):
    """For the admin's list: the latest run's status and time, as columns of the task's row."""
    return tasks.annotate(last_run_status=_latest("status"), last_run_at=_latest("scheduled_for"))


def tasks_with_last_runs(workspace_id: int) -> list[tuple[ScheduledTask, TaskRun | None]]:
    tasks = list(
        with_last_run_id(ScheduledTask.objects.filter(workspace_id=workspace_id))
        .select_related("agent", "created_by__user", "session")
        .order_by("status", "next_run_at", "name")
    )
    runs = TaskRun.objects.in_bulk([task.last_run_id for task in tasks if task.last_run_id])
    return [(task, runs.get(task.last_run_id)) for task in tasks]
