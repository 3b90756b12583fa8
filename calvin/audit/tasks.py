"""Celery tasks for the audit log: thin."""

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from calvin.audit.services import audit_events_forget


@shared_task(retry_database_errors=False)  # beat runs it again
def forget_old_audit_events() -> int:
    """Beat: events older than CALVIN_AUDIT_KEEP_DAYS go, in batches."""
    return audit_events_forget(now=timezone.now(), keep_days=settings.CALVIN_AUDIT_KEEP_DAYS)
