"""Consecutive new web-channel posts of a dispatcher's batch, applied together.

Applied one by one (tools.effects.tool_call_apply), a web card or message costs the worker about
7 ms here, most of it six statements, a commit and the ORM's work around each (bench/README.md,
"Issue 26, fourth sitting"). Consecutive calls of a claimed batch that are plain posts into a
thread whose adapter has `deliver_many` (the web channel's) -- a card, a file or a queued
message, first attempt, no approval -- are applied in one transaction of a few statements
instead: their messages in one INSERT (ids in the calls' order), the queued ones shown in one
UPDATE, the calls marked applied in one UPDATE, and the live events in one INSERT.

The messages and "applied" commit together, as one call's do, so each effect happens once: a
worker that dies in here leaves the calls "applying" for the sweep, whose retry (a second
attempt) goes one by one and asks the platform first. A batch that fails in any other way is
rolled back and its calls applied one by one, so one bad call takes only itself down. Locks are
held for those few statements, not across the effects' own work (the deadlock of a whole batch
in one transaction, bench/README.md's second sitting).
"""

import json
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from calvin.chat import ChatPermanentError, chat_adapter_for
from calvin.chat.base import BatchPost
from calvin.events import ToolCallChanged, announce_many
from sessions.models import Message, Thread
from tools.effects import EFFECTS, post_card_arguments, send_file_arguments
from tools.models import ToolCall

# An effect (tools.effects.EFFECTS) that is one adapter call, and which one.
BATCHED_EFFECTS = {
    "tools.effects.post_card_effect": "post_card",
    "tools.effects.send_file_effect": "upload_file",
    "tools.services.messages.send_message_effect": "post_message",
}


@dataclass(frozen=True)
class Batchable:
    call: ToolCall
    post: BatchPost
    adapter: type  # a run's calls share one adapter


def batchable_calls(ids: list[int]) -> dict[int, Batchable]:
    """Those of the claimed calls `ids` that may be applied together, read in three queries."""
    calls = [
        call
        for call in ToolCall.objects.filter(
            id__in=ids, status=ToolCall.Status.APPLYING, attempts=1, approval__isnull=True
        ).select_related("session__thread")
        if BATCHED_EFFECTS.get(EFFECTS.get((call.server, call.tool)))
    ]
    method = {call.id: BATCHED_EFFECTS[EFFECTS[(call.server, call.tool)]] for call in calls}
    queued = Message.objects.select_related("thread").filter(
        tool_call_id__in=[call.id for call in calls if method[call.id] == "post_message"]
    )
    messages = {message.tool_call_id: message for message in queued}
    named = {call.payload.get("thread_id") for call in calls if method[call.id] != "post_message"}
    threads = Thread.objects.in_bulk([thread_id for thread_id in named if isinstance(thread_id, int)])
    found = {}
    for call in calls:
        try:
            if method[call.id] == "post_message":
                message = messages[call.id]
                thread, arguments = message.thread, {"message": message}
            else:
                thread_id = call.payload.get("thread_id")
                thread = threads[thread_id] if thread_id else call.session.thread
                arguments = (post_card_arguments if method[call.id] == "post_card" else send_file_arguments)(call)
            adapter = chat_adapter_for(thread)
        except (KeyError, TypeError, AttributeError, ChatPermanentError):
            continue  # the one-by-one path fails it, in its own words
        if _delivers_together(type(adapter), method[call.id]):
            post = BatchPost(tool_call_id=call.id, thread=thread, method=method[call.id], arguments=arguments)
            found[call.id] = Batchable(call=call, post=post, adapter=type(adapter))
    return found


def _defined_by(cls: type, name: str) -> type | None:
    return next((owner for owner in cls.__mro__ if name in vars(owner)), None)


def _delivers_together(adapter: type, method: str) -> bool:
    """Whether the adapter's `deliver_many` does what its `method` would: both come from the same
    class. A subclass that adds to a post (Slack's adapter stores the message as the web
    channel does, then queues it for Slack) is applied one by one, or its posts would never leave."""
    owner = _defined_by(adapter, "deliver_many")
    return owner is not None and owner is _defined_by(adapter, method)


def batch_runs(ids: list[int], batchable: dict[int, Batchable]) -> list[list[int]]:
    """`ids` in order, cut into runs: consecutive batchable calls of one adapter together, every
    other call a run of its own, so the effects still happen in the calls' order."""
    runs: list[list[int]] = []
    for tool_call_id in ids:
        here = batchable.get(tool_call_id)
        last = runs[-1][-1] if runs else None
        if here is not None and last in batchable and batchable[last].adapter is here.adapter:
            runs[-1].append(tool_call_id)
        else:
            runs.append([tool_call_id])
    return runs


@transaction.atomic
def tool_calls_apply_together(*, run: list[Batchable]) -> None:
    """Apply one run of batchable calls (claimed, in id order) in one transaction; any error
    rolls all of it back and is raised."""
    platform_ids = run[0].adapter().deliver_many(posts=[item.post for item in run])
    applied = _calls_mark_applied(platform_ids)
    announce_many(
        [
            ToolCallChanged(
                workspace_id=item.call.session.workspace_id,
                thread_id=item.call.session.thread_id,
                session_id=item.call.session_id,
                tool_call_id=item.call.id,
                tool=item.call.tool,
                status=ToolCall.Status.APPLIED,
            )
            for item in run
            if item.call.id in applied
        ]
    )


def _calls_mark_applied(platform_ids: dict[int, dict]) -> set[int]:
    """applying -> applied with each call's platform ids, in one statement; the ids it changed."""
    table = connection.ops.quote_name(ToolCall._meta.db_table)
    values = ", ".join(["(%s::bigint, %s::jsonb)"] * len(platform_ids))
    params = [
        ToolCall.Status.APPLIED,
        timezone.now(),
        *[value for pair in platform_ids.items() for value in (pair[0], json.dumps(pair[1]))],
        ToolCall.Status.APPLYING,
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS t SET status = %s, platform_ids = v.ids, finished_at = %s"
            f" FROM (VALUES {values}) AS v (id, ids) WHERE t.id = v.id AND t.status = %s RETURNING t.id",
            params,
        )
        return {row[0] for row in cursor.fetchall()}
