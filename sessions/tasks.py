"""Periodic work of the sessions app (thin: the services decide)."""

from celery import shared_task

from sessions.hosts import hosts_sweep


@shared_task(name="sessions.tasks.sweep_hosts", retry_database_errors=False)  # beat runs it again
def sweep_hosts() -> int:
    return len(hosts_sweep())
