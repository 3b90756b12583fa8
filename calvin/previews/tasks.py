"""Periodic work of previews (thin: the services decide)."""

from celery import shared_task

from calvin.previews.lifecycle import previews_expired_end


@shared_task(name="calvin.previews.tasks.sweep_previews", retry_database_errors=False)  # beat runs it again
def sweep_previews() -> int:
    return previews_expired_end()
