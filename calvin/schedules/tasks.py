"""Beat's tick for scheduled tasks (CELERY_BEAT_SCHEDULE: scheduled-tasks-fire); thin: the services decide."""

from celery import shared_task

from calvin.schedules.services import tasks_fire_due


@shared_task(name="calvin.schedules.tasks.fire_due_tasks", retry_database_errors=False)  # beat runs it again
def fire_due_tasks() -> int:
    return tasks_fire_due()
