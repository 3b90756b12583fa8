"""Celery tasks of the live console: thin."""

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from calvin.dashboard.live import live_events_forget


@shared_task(retry_database_errors=False)  # beat runs it again
def forget_old_live_events() -> int:
    """Beat: live events older than CALVIN_LIVE_KEEP_HOURS go."""
    return live_events_forget(before=timezone.now() - timedelta(hours=settings.CALVIN_LIVE_KEEP_HOURS))
