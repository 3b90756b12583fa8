"""Perform a claimed tool call's effect through the thread's chat adapter, exactly once."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from calvin.chat import ChatPermanentError, ChatTemporaryError, chat_adapter_for
from tools.models import ToolCall

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
RECOVER_BATCH = 500


def _perform(call: ToolCall) -> dict:
    thread = call.session.thread
    adapter = chat_adapter_for(thread)
    if call.attempts > 1:
        # A first attempt cannot find its effect: the claim let only this worker in. A
        # later one may follow a worker that died after the platform took the post and
        # before "applied" committed, so ask the platform before posting again.
        found = adapter.delivered(thread=thread, tool_call_id=call.id)
        if found is not None:
            return found
    payload = call.payload
    if call.tool == "post_card":
        return adapter.post_card(
            thread=thread,
            items=payload["items"],
            blocks=payload["blocks"],
            fallback_text=payload["text"],
            tool_call_id=call.id,
        )
    if call.tool == "send_file":
        args = call.arguments
        return adapter.upload_file(
            thread=thread,
            stored_name=call.file.name,
            file_name=payload["file_name"],
            title=payload["title"],
            comment=args.get("comment") or "",
            alt_text=args.get("alt_text") or "",
            content_type=payload["content_type"],
            tool_call_id=call.id,
        )
    raise ChatPermanentError(f"no effect for tool {call.tool}")


def tool_call_apply(*, tool_call_id: int) -> None:
    """Run by the worker after it claimed the row (pending -> applying)."""
    call = ToolCall.objects.select_related("session__thread").get(id=tool_call_id)
    try:
        # The effect and "applied" commit together: for the web channel the effect is a
        # row, so a worker that dies anywhere in here leaves the call cleanly "applying"
        # for the sweep. An external platform cannot roll back: the retry asks it first.
        with transaction.atomic():
            platform_ids = _perform(call)
            ToolCall.objects.filter(id=call.id, status=ToolCall.Status.APPLYING).update(
                status=ToolCall.Status.APPLIED, platform_ids=platform_ids, finished_at=timezone.now()
            )
    except ChatTemporaryError as exc:
        if call.attempts >= MAX_ATTEMPTS:
            tool_call_fail(tool_call_id=call.id, error=f"gave up after {call.attempts} attempts: {exc}")
            return
        # Back to pending so the retry (or the sweep) can claim it again.
        ToolCall.objects.filter(id=call.id, status=ToolCall.Status.APPLYING).update(status=ToolCall.Status.PENDING)
        raise
    except Exception as exc:
        log.exception("tool call %s failed", call.id)
        error = str(exc) if isinstance(exc, ChatPermanentError) else "internal error"
        tool_call_fail(tool_call_id=call.id, error=error)


@transaction.atomic
def tool_call_fail(*, tool_call_id: int, error: str) -> None:
    """Mark it failed and say so in the thread, so neither the people nor the agent think it arrived."""
    from sessions.models import Message

    changed = ToolCall.objects.filter(id=tool_call_id, status=ToolCall.Status.APPLYING).update(
        status=ToolCall.Status.FAILED, error=error, finished_at=timezone.now()
    )
    if changed:
        call = ToolCall.objects.select_related("session").get(id=tool_call_id)
        message = Message.objects.create(
            thread_id=call.session.thread_id,
            kind=Message.Kind.SYSTEM,
            author=Message.Author.SYSTEM,
            text=f"{call.tool} (call {call.id}) was not delivered: {error}",
        )
        from calvin.dashboard.events import thread_push_on_commit

        thread_push_on_commit(message)


def tool_calls_recover(*, now: datetime) -> list[int]:
    """Calls that need queueing again: left "applying" by a dead worker, or never published.

    A call that took its worker down on every attempt is failed instead of retried forever.
    """
    stuck_applying = timedelta(seconds=settings.CALVIN_STUCK_APPLYING_SECONDS)
    lost_pending = timedelta(seconds=settings.CALVIN_LOST_PENDING_SECONDS)
    stuck = ToolCall.objects.filter(status=ToolCall.Status.APPLYING, claimed_at__lt=now - stuck_applying)
    for tool_call_id in stuck.filter(attempts__gte=MAX_ATTEMPTS).values_list("id", flat=True):
        tool_call_fail(
            tool_call_id=tool_call_id,
            error=f"gave up after {MAX_ATTEMPTS} attempts: the worker stopped while applying it",
        )
    stuck.update(status=ToolCall.Status.PENDING)
    pending = ToolCall.objects.filter(status=ToolCall.Status.PENDING, created_at__lt=now - lost_pending)
    return list(pending.values_list("id", flat=True)[:RECOVER_BATCH])
