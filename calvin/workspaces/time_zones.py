"""IANA time zones by name: a workspace's, and a scheduled task's (its cron is read there)."""

import difflib
import zoneinfo
from functools import cache

from django.core.exceptions import ValidationError


@cache
def _known() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def time_zone_problem(name: str) -> str:
    """Why `name` is not a time zone ("" when it is one), with close names when there are some."""
    if name in _known():
        return ""
    close = difflib.get_close_matches(str(name)[:64], sorted(_known()), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else " (an IANA name such as Europe/Berlin or UTC)"
    return f"unknown time zone {str(name)[:64]!r}{hint}"


def validate_time_zone(value):
    problem = time_zone_problem(value)
    if problem:
        raise ValidationError(problem)
