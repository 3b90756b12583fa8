"""Reads of the audit log. Who sees which events is the admin's scope (calvin/admin_scope.py)."""

from datetime import date, datetime, time, timedelta

from django.utils import timezone


def audit_events_between(queryset, *, since: date | None, until: date | None):
    """Events from the start of `since` to the end of `until` (whole days in the site's time
    zone, both included)."""
    zone = timezone.get_current_timezone()
    if since is not None:
        queryset = queryset.filter(at__gte=datetime.combine(since, time.min, tzinfo=zone))
    if until is not None:
        queryset = queryset.filter(at__lt=datetime.combine(until + timedelta(days=1), time.min, tzinfo=zone))
    return queryset
