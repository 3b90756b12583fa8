"""Telling a workspace's owners that its spend crossed 80 % and 100 % of the monthly cap.

A reaction to UsageRecorded (after the usage committed). Each threshold is told once a month:
its SpendNotice row is the claim (a unique constraint), so two turns that cross it at the same
moment send one email to each owner and write one audit event, not two.
"""

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction

from calvin.events import UsageRecorded, reacts_to
from calvin.workspaces.models import Member, SpendNotice, Workspace
from calvin.workspaces.quotas import month_bounds, utc_today
from calvin.workspaces.spend import spend_thresholds_crossed, usd

log = logging.getLogger(__name__)


def _claimed(*, workspace_id: int, month, percent: int, cap, spent) -> SpendNotice | None:
    try:
        with transaction.atomic():  # a savepoint: losing the claim leaves the outer transaction usable
            return SpendNotice.objects.create(
                workspace_id=workspace_id, month=month, threshold=percent, cap_usd=cap, spent_usd=spent
            )
    except IntegrityError:
        return None  # told already this month


def spend_notice_text(*, workspace: Workspace, percent: int, cap, spent) -> tuple[str, str]:
    """The email's subject and body."""
    _, following = month_bounds(utc_today())
    reset = f"{following.day} {following:%B} 00:00 UTC"
    if percent >= 100:
        subject = f"Calvin: {workspace.name} reached its monthly spend cap"
        what = f"New turns are refused until the cap resets on {reset}, or until an owner or admin raises it."
    else:
        subject = f"Calvin: {workspace.name} used {percent} % of its monthly spend cap"
        what = f"At 100 % new turns are refused until the cap resets on {reset}."
    body = (
        f"{workspace.name} has spent {usd(spent)} this month, {percent} % of its monthly spend cap of "
        f"{usd(cap)}.\n\n{what}\n\nThe cap is the workspace's Quota in Calvin's admin."
    )
    return subject, body


@transaction.atomic
def spend_notices_send(*, workspace_id: int) -> list[int]:
    """Tell the owners of each threshold crossed and not yet told this month; returns the thresholds told."""
    month = month_bounds(utc_today())[0]
    told = []
    for percent, cap, spent in spend_thresholds_crossed(workspace_id=workspace_id):
        notice = _claimed(workspace_id=workspace_id, month=month, percent=percent, cap=cap, spent=spent)
        if notice is None:
            continue
        from calvin.audit.services import audit_record

        audit_record(
            verb="spend.threshold",
            workspace=workspace_id,
            target=notice,
            changes={
                "threshold_percent": (None, percent),
                "cap_usd": (None, str(cap)),
                "spent_usd": (None, str(spent)),
            },
            via="system",
        )
        workspace = Workspace.objects.get(id=workspace_id)
        subject, body = spend_notice_text(workspace=workspace, percent=percent, cap=cap, spent=spent)
        owners = Member.objects.filter(workspace_id=workspace_id, role=Member.Role.OWNER, user__isnull=False)
        emails = sorted({email for email in owners.values_list("user__email", flat=True) if email})
        for email in emails:
            transaction.on_commit(
                lambda e=email, s=subject, b=body: send_mail(s, b, settings.DEFAULT_FROM_EMAIL, [e]), robust=True
            )
        told.append(percent)
    return told


@reacts_to(UsageRecorded)
def _on_usage(event: UsageRecorded) -> None:
    spend_notices_send(workspace_id=event.workspace_id)
