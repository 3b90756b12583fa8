"""Quota edits by people: superusers set any limit; a workspace's owners and admins set theirs
up to the platform's ceiling (settings.CALVIN_QUOTA_CEILING, the model's defaults where it
names none), so a tenant never raises its own quota past its plan. Lowering is always allowed."""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from calvin.audit.services import audit_record
from calvin.operators import operator_check, operator_user
from calvin.workspaces.models import Quota

COUNTS = ("concurrent_sessions", "turns_per_day", "agent_minutes_per_month", "tool_calls_per_day", "storage_mib")
COUNTS += ("spawn_depth_max", "spawn_live_descendants_max")  # spawn_thread's trees (tools/services/spawns.py)
# USD; empty is no cap. A tenant sets its own caps freely unless CALVIN_QUOTA_CEILING names one,
# which then bounds the cap (and an empty cap, being no bound, is past it).
SPEND_CAPS = ("monthly_spend_cap_usd", "session_spend_cap_usd")
LIMITS = COUNTS + SPEND_CAPS


def quota_ceilings() -> dict:
    configured = settings.CALVIN_QUOTA_CEILING or {}
    unknown = set(configured) - set(LIMITS)
    if unknown:
        raise ValueError(f"CALVIN_QUOTA_CEILING names no quota limit: {', '.join(sorted(unknown))}")
    ceilings = {name: int(configured.get(name, Quota._meta.get_field(name).default)) for name in COUNTS}
    for name in SPEND_CAPS:
        ceilings[name] = Decimal(str(configured[name])) if configured.get(name) is not None else None
    return ceilings


def _above(value, bound) -> bool:
    """value > bound, where None is no bound (infinite)."""
    if bound is None:
        return False
    return value is None or value > bound


def quota_limit_problem(*, actor, name: str, before, after) -> str | None:
    """Why `actor` may not set this limit to `after` (None: they may)."""
    user = operator_user(actor)
    if user is not None and user.is_active and user.is_superuser:
        return None
    ceiling = quota_ceilings()[name]
    if name in SPEND_CAPS:
        if _above(after, ceiling) and _above(after, before):
            shown = f"${ceiling:,.2f}"
            return f"at most {shown} (the platform's ceiling for your plan); ask the platform's operators for more"
        return None
    if after > ceiling and after > before:
        return f"at most {ceiling:,} (the platform's ceiling for your plan); ask the platform's operators for more"
    return None


@transaction.atomic
def quota_change(*, quota_id: int, limits: dict[str, int], actor) -> dict:
    """Set the quota's limits; returns {limit: (before, after)} of what changed, recorded as one
    quota.change event. Raises ValidationError (per limit) when a limit is not theirs to set."""
    quota = Quota.objects.select_for_update().get(id=quota_id)
    operator_check(actor, quota.workspace_id)
    unknown = set(limits) - set(LIMITS)
    if unknown:
        raise ValueError(f"not quota limits: {', '.join(sorted(unknown))}")
    changes, problems = {}, {}
    for name, after in limits.items():
        before = getattr(quota, name)
        if after == before:
            continue
        problem = quota_limit_problem(actor=actor, name=name, before=before, after=after)
        if problem:
            problems[name] = problem
        changes[name] = (before, after)
    if problems:
        raise ValidationError(problems)
    if changes:
        Quota.objects.filter(id=quota.id).update(**{name: after for name, (_, after) in changes.items()})
        shown = {name: tuple(str(v) if isinstance(v, Decimal) else v for v in pair) for name, pair in changes.items()}
        audit_record(verb="quota.change", workspace=quota.workspace_id, actor=actor, target=quota, changes=shown)
    return changes
