"""Perform a claimed tool call's effect, exactly once.

Each tool's effect is a function `effect(call) -> platform ids`, named in EFFECTS. Chat
effects go through the thread's chat adapter; agent changes (approved ones) are rows
written in the same transaction that marks the call applied.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import import_string

from approvals.services import approved_arguments
from calvin.celery import DATABASE_UNAVAILABLE
from calvin.chat import ChatPermanentError, ChatTemporaryError, chat_adapter_for
from calvin.chat.base import ThreadTarget
from tools.changes import tool_call_changed
from tools.models import ToolCall

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
TEMPORARY_RETRY_SECONDS = 1.0  # a claimed call the platform refused for now: the task's backoff follows
RECOVER_BATCH = 500


class EffectNotReady(Exception):
    """The effect must wait for another one (an edit for its message's send); it costs no attempt."""

    def __init__(self, message: str, retry_in: float = 0.2):
        super().__init__(message)
        self.retry_in = retry_in


# (server, tool) -> the effect; the servers share one where the shapes agree.
EFFECTS = {
    ("calvin", "post_card"): "tools.effects.post_card_effect",
    ("calvin", "send_file"): "tools.effects.send_file_effect",
    ("calvin", "request_secret"): "tools.effects.post_card_effect",
    ("calvin", "approval_prompt"): "tools.services.approval_prompts.approval_prompt_effect",
    ("calvin", "post_thread"): "tools.effects.post_thread_effect",
    ("nanoclaw", "send_file"): "tools.effects.send_file_effect",
    ("nanoclaw", "send_message"): "tools.services.messages.send_message_effect",
    ("nanoclaw", "edit_message"): "tools.services.messages.edit_message_effect",
    ("nanoclaw", "add_reaction"): "tools.services.messages.add_reaction_effect",
    ("nanoclaw", "send_card"): "tools.effects.post_card_effect",
    ("nanoclaw", "ask_user_question"): "tools.effects.post_card_effect",
    ("nanoclaw", "create_agent"): "tools.services.agents.create_agent_effect",
    ("nanoclaw", "install_packages"): "tools.services.agents.install_packages_effect",
    ("nanoclaw", "add_mcp_server"): "tools.services.agents.add_mcp_server_effect",
    ("ncl", "sessions.stop"): "calvin.api.effects.session_stop_effect",
    ("ncl", "tasks.create"): "calvin.api.effects.task_write_effect",
    ("ncl", "tasks.update"): "calvin.api.effects.task_write_effect",
    ("ncl", "tasks.pause"): "calvin.api.effects.task_write_effect",
    ("ncl", "tasks.resume"): "calvin.api.effects.task_write_effect",
    ("ncl", "tasks.cancel"): "calvin.api.effects.task_write_effect",
    ("ncl", "tasks.run"): "calvin.api.effects.task_write_effect",
    ("ncl", "tasks.delete"): "calvin.api.effects.task_write_effect",
}


def thread_of(call: ToolCall):
    """Where the call's effect goes: a destination thread named in the payload, or the session's own."""
    from sessions.models import Thread

    thread_id = call.payload.get("thread_id")
    return Thread.objects.get(id=thread_id) if thread_id else call.session.thread


def already_delivered(call: ToolCall, adapter, thread) -> dict | None:
    # A first attempt cannot find its effect: the claim let only this worker in. A later
    # one may follow a worker that died after the platform took the post and before
    # "applied" committed, so ask the platform before posting again.
    return adapter.delivered(thread=thread, tool_call_id=call.id) if call.attempts > 1 else None


def post_card_arguments(call: ToolCall) -> dict:
    """What post_card_effect gives the adapter's post_card besides the thread and the call's id."""
    payload = call.payload
    return {"items": payload["items"], "blocks": payload["blocks"], "fallback_text": payload["text"]}


def send_file_arguments(call: ToolCall) -> dict:
    """What send_file_effect gives the adapter's upload_file besides the thread and the call's id."""
    payload = call.payload
    return {
        "stored_name": call.file.name,
        "file_name": payload["file_name"],
        "title": payload["title"],
        "comment": payload.get("comment") or "",
        "alt_text": payload.get("alt_text") or "",
        "content_type": payload["content_type"],
    }


def post_card_effect(call: ToolCall) -> dict:
    thread = thread_of(call)
    adapter = chat_adapter_for(thread)
    return already_delivered(call, adapter, thread) or adapter.post_card(
        thread=thread, tool_call_id=call.id, **post_card_arguments(call)
    )


def send_file_effect(call: ToolCall) -> dict:
    thread = thread_of(call)
    adapter = chat_adapter_for(thread)
    return already_delivered(call, adapter, thread) or adapter.upload_file(
        thread=thread, tool_call_id=call.id, **send_file_arguments(call)
    )


def post_thread_effect(call: ToolCall) -> dict:
    """The reply where the call (and its approval card) said, with the text it showed: the
    target and the post are the arguments a person approved. Its adapter's post_reply finds a
    retry's earlier post itself, as the target is not the session's thread."""
    arguments = approved_arguments(call)
    target = ThreadTarget(**arguments["target"])
    return chat_adapter_for(target).post_reply(
        target=target, text=arguments["post"], tool_call_id=call.id, sender_agent_id=call.session.agent_id
    )


def effect_perform(call: ToolCall) -> dict:
    path = EFFECTS.get((call.server, call.tool))
    if path is None:
        raise ChatPermanentError(f"no effect for tool {call.server}.{call.tool}")
    return import_string(path)(call)


def tool_calls_claim_new(*, limit: int, now: datetime | None = None) -> tuple[list[int], datetime]:
    """pending -> applying for up to `limit` calls nobody claimed yet, oldest first, in one
    statement; rows another worker holds are skipped, so each is claimed once. Returns the ids
    in order and the claim's stamp (tool_calls_unclaim gives back only what this claim took)."""
    now = now or timezone.now()
    table = connection.ops.quote_name(ToolCall._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET status = %s, claimed_at = %s, attempts = attempts + 1 WHERE id IN"
            f" (SELECT id FROM {table} WHERE status = %s AND claimed_at IS NULL ORDER BY id LIMIT %s"
            " FOR UPDATE SKIP LOCKED) RETURNING id",
            [ToolCall.Status.APPLYING, now, ToolCall.Status.PENDING, limit],
        )
        return sorted(row[0] for row in cursor.fetchall()), now


def tool_calls_unclaim(*, ids: list[int], claimed_at: datetime) -> int:
    """Calls a claim took but never finished (the database went away mid-batch) become new
    again, unless someone claimed them since (the sweep, another worker)."""
    return ToolCall.objects.filter(
        id__in=ids, claimed_at=claimed_at, status__in=(ToolCall.Status.APPLYING, ToolCall.Status.PENDING)
    ).update(status=ToolCall.Status.PENDING, claimed_at=None)


def tool_calls_apply_claimed(*, ids: list[int]) -> None:
    """Apply the calls a dispatcher claimed (tools/dispatcher.py), in order. Consecutive new
    web-channel posts go together, a few statements and one short transaction for all of them
    (tools/effects_batch.py); every other call, or a run that failed together, goes one by one,
    each in its own transaction, as the task does: one transaction around a whole batch's
    effects saved a commit per call but held its rows' locks across the batch, and people's own
    writes then met deadlocks (the tool fuzz test's). A call that breaks in a way tool_call_apply
    does not handle takes only itself down. What must wait (an edit for its send) or be tried
    again (a platform's temporary error) goes to the Celery task, which keeps the countdown and
    the backoff. A lost database raises: the caller gives back what is left of the batch."""
    from tools.effects_batch import batch_runs, batchable_calls, tool_calls_apply_together

    batchable = {}
    if len(ids) > 1:
        try:
            batchable = batchable_calls(ids)
        except DATABASE_UNAVAILABLE:
            raise
        except Exception:  # nothing is lost: one by one
            log.warning("could not sort tool calls %s into runs; one by one", ids, exc_info=True)
    later: list[tuple[int, float]] = []
    for run in batch_runs(ids, batchable):
        if len(run) > 1:
            try:
                tool_calls_apply_together(run=[batchable[tool_call_id] for tool_call_id in run])
                continue
            except DATABASE_UNAVAILABLE:
                raise
            except Exception:
                log.warning("tool calls %s could not be applied together; one by one", run, exc_info=True)
        for tool_call_id in run:
            wait = _apply_one(tool_call_id)
            if wait is not None:
                later.append((tool_call_id, wait))
    _queue_again(later)


def _apply_one(tool_call_id: int) -> float | None:
    try:
        return tool_call_apply(tool_call_id=tool_call_id)
    except ChatTemporaryError as exc:  # it is pending again, to be tried later
        log.info("tool call %s: %s; trying again", tool_call_id, exc)
        return TEMPORARY_RETRY_SECONDS
    except DATABASE_UNAVAILABLE:
        raise
    except Exception:  # gone since its claim, say: left "applying" for the stuck sweep
        log.exception("tool call %s could not be applied", tool_call_id)
        return None


def _queue_again(calls: list[tuple[int, float]]) -> None:
    from tools.tasks import apply_tool_call

    for tool_call_id, wait in calls:
        try:
            apply_tool_call.apply_async((tool_call_id,), countdown=wait, retry=False)
        except Exception:
            log.warning("could not queue tool call %s again; the sweep will", tool_call_id, exc_info=True)


def tool_call_apply(*, tool_call_id: int) -> float | None:
    """Run by the worker after it claimed the row (pending -> applying).

    Returns a delay when the effect is not ready yet: the caller queues it again then.
    """
    from approvals.services import approval_after_apply

    # The approval (if any) in the same query: most calls have none, and each effect pays for this one.
    call = ToolCall.objects.select_related("session__thread", "approval").get(id=tool_call_id)
    gated = hasattr(call, "approval")
    try:
        # The effect and "applied" commit together: for the web channel the effect is a
        # row, so a worker that dies anywhere in here leaves the call cleanly "applying"
        # for the sweep. An external platform cannot roll back: the retry asks it first.
        with transaction.atomic():
            platform_ids = effect_perform(call)
            if ToolCall.objects.filter(id=call.id, status=ToolCall.Status.APPLYING).update(
                status=ToolCall.Status.APPLIED, platform_ids=platform_ids, finished_at=timezone.now()
            ):
                tool_call_changed(call, ToolCall.Status.APPLIED)
            if gated:
                approval_after_apply(tool_call_id=call.id, error=None)
    except EffectNotReady as exc:
        # Back to pending without spending an attempt: it waits for the effect it follows.
        ToolCall.objects.filter(id=call.id, status=ToolCall.Status.APPLYING).update(
            status=ToolCall.Status.PENDING, attempts=max(call.attempts - 1, 0)
        )
        return exc.retry_in
    except DATABASE_UNAVAILABLE:
        # The database went away under the effect (a restart): not the call's fault, so it is not
        # failed. Back to pending on a fresh connection if the server is back already; if not, the
        # row stays "applying" for the sweep. The task retries with backoff either way; a
        # dispatcher gives back the rest of its batch.
        connection.close()
        try:
            ToolCall.objects.filter(id=call.id, status=ToolCall.Status.APPLYING).update(status=ToolCall.Status.PENDING)
        except DATABASE_UNAVAILABLE:
            log.warning("tool call %s: the database is still unavailable; the sweep will take it", call.id)
        raise
    except ChatTemporaryError as exc:
        if call.attempts >= MAX_ATTEMPTS:
            tool_call_fail(tool_call_id=call.id, error=f"gave up after {call.attempts} attempts: {exc}")
            return None
        # Back to pending so the retry (or the sweep) can claim it again.
        ToolCall.objects.filter(id=call.id, status=ToolCall.Status.APPLYING).update(status=ToolCall.Status.PENDING)
        raise
    except Exception as exc:
        log.exception("tool call %s failed", call.id)
        error = str(exc) if isinstance(exc, ChatPermanentError) else "internal error"
        tool_call_fail(tool_call_id=call.id, error=error)
    return None


@transaction.atomic
def tool_call_fail(*, tool_call_id: int, error: str) -> None:
    """Mark it failed and tell the agent in its session's inbox (people see it in the thread
    too), so nobody thinks it arrived.

    The error is redacted first: a platform's answer or an exception's text may quote what
    was sent, and it is stored and posted from here (the approval's words included)."""
    from approvals.services import approval_after_apply
    from secrets_vault.services import session_text_redacted
    from sessions.services import inbox_post

    call = ToolCall.objects.select_related("session").filter(id=tool_call_id).first()
    if call is None:
        return
    error = session_text_redacted(session_id=call.session_id, workspace_id=call.session.workspace_id, text=error)
    changed = ToolCall.objects.filter(id=tool_call_id, status=ToolCall.Status.APPLYING).update(
        status=ToolCall.Status.FAILED, error=error, finished_at=timezone.now()
    )
    if not changed:
        return
    tool_call_changed(call, ToolCall.Status.FAILED)
    if approval_after_apply(tool_call_id=call.id, error=error):
        return  # the approval tells the agent, in its own words
    inbox_post(session=call.session, text=f"{call.tool} (call {call.id}) was not delivered: {error}")


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
    # Queued now, whatever the lost-pending bound: a dead worker's call has no task coming, and
    # stamped as queued so the lost-pending rule below leaves it alone for its bound.
    stuck_ids = list(stuck.values_list("id", flat=True)[:RECOVER_BATCH])
    ToolCall.objects.filter(id__in=stuck_ids, status=ToolCall.Status.APPLYING).update(
        status=ToolCall.Status.PENDING, claimed_at=now
    )
    pending = ToolCall.objects.filter(status=ToolCall.Status.PENDING, created_at__lt=now - lost_pending).filter(
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - lost_pending)
    )
    ids = list(pending.exclude(id__in=stuck_ids).values_list("id", flat=True)[:RECOVER_BATCH])
    # Stamped as queued now: behind a backlog, the next sweeps leave them alone for the bound
    # instead of queueing every waiting call again each time (duplicates that slow the workers).
    ToolCall.objects.filter(id__in=ids, status=ToolCall.Status.PENDING).update(claimed_at=now)
    return stuck_ids + ids
