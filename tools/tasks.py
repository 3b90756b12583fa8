"""Celery tasks: thin, by id, idempotent."""

from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from calvin.chat import ChatTemporaryError
from tools.effects import MAX_ATTEMPTS, tool_call_apply, tool_call_fail
from tools.models import ToolCall

STUCK_APPLYING = timedelta(seconds=60)
LOST_PENDING = timedelta(seconds=30)


@shared_task(
    acks_late=True,
    autoretry_for=(ChatTemporaryError,),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=None,  # tool_call_apply gives up after its own attempt count
)
def apply_tool_call(tool_call_id: int) -> None:
    if not ToolCall.claim(tool_call_id):
        return  # applied already, or another worker has it
    tool_call_apply(tool_call_id=tool_call_id)


@shared_task
def sweep_tool_calls() -> int:
    """Re-queue calls a dead worker left applying, and pending calls whose enqueue was lost."""
    now = timezone.now()
    stuck = ToolCall.objects.filter(status=ToolCall.Status.APPLYING, claimed_at__lt=now - STUCK_APPLYING)
    # A call that took its worker down every time it ran is failed, not retried forever.
    for tool_call_id in stuck.filter(attempts__gte=MAX_ATTEMPTS).values_list("id", flat=True):
        tool_call_fail(
            tool_call_id=tool_call_id,
            error=f"gave up after {MAX_ATTEMPTS} attempts: the worker stopped while applying it",
        )
    stuck.update(status=ToolCall.Status.PENDING)
    ids = list(
        ToolCall.objects.filter(status=ToolCall.Status.PENDING, created_at__lt=now - LOST_PENDING).values_list(
            "id", flat=True
        )[:500]
    )
    for tool_call_id in ids:
        apply_tool_call.delay(tool_call_id)
    return len(ids)
