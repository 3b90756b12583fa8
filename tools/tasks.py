"""Celery tasks: thin, by id, idempotent."""

from celery import shared_task
from django.utils import timezone

from calvin.chat import ChatTemporaryError
from tools.effects import tool_call_apply, tool_calls_recover
from tools.models import ToolCall
from tools.services.secret_requests import secret_request_card_refresh


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
    wait = tool_call_apply(tool_call_id=tool_call_id)
    if wait is not None:  # it follows another effect that is not applied yet
        apply_tool_call.apply_async((tool_call_id,), countdown=wait)


@shared_task(retry_database_errors=False)  # beat runs it again
def sweep_tool_calls() -> int:
    """Re-queue calls a dead worker left applying, and pending calls whose enqueue was lost;
    close questions whose waiting call is gone."""
    from tools.services.questions import questions_close_overdue

    questions_close_overdue(now=timezone.now())
    ids = tool_calls_recover(now=timezone.now())
    for tool_call_id in ids:
        apply_tool_call.delay(tool_call_id)
    return len(ids)


@shared_task(
    acks_late=True, autoretry_for=(ChatTemporaryError,), retry_backoff=True, retry_backoff_max=60, max_retries=8
)
def refresh_secret_request_card(request_id: int) -> None:
    secret_request_card_refresh(request_id=request_id)
