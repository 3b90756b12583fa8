"""Where post_card's time goes: its pieces timed one by one, in-process, on calvin_bench.

    .venv/bin/python bench/profile_post_card.py [calls]

Run after bench/run.py (it leaves the calvin_bench database migrated). Needs no server or
worker: the tasks it enqueues land in the bench queue and are purged at the end.
Each line: the median and mean of one piece over `calls` repetitions.
"""

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from run import CALVIN_ENV, PER_RUNNER, REDIS_URL, card_arguments

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.update(CALVIN_ENV)

import django  # noqa: E402

django.setup()

import redis  # noqa: E402
from asgiref.sync import async_to_sync, sync_to_async  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import close_old_connections, connection, transaction  # noqa: E402
from django.template.loader import render_to_string  # noqa: E402

from calvin.dashboard.events import message_event, thread_broadcast  # noqa: E402
from calvin.workspaces.models import Member  # noqa: E402
from calvin.workspaces.services import workspace_create  # noqa: E402
from sessions.models import Message  # noqa: E402
from sessions.services import runner_start, session_start  # noqa: E402
from tools.caller import caller_for_token  # noqa: E402
from tools.card_spec.blockkit import card_blocks, card_fallback_text  # noqa: E402
from tools.card_spec.layout import card_layout  # noqa: E402
from tools.card_spec.models import CardSpec  # noqa: E402
from tools.effects import tool_call_apply  # noqa: E402
from tools.limits import runner_take_slot, tool_call_count_and_insert  # noqa: E402
from tools.models import ToolCall  # noqa: E402
from tools.services.cards import cards_post  # noqa: E402
from tools.services.common import secret_scanner_for  # noqa: E402
from tools.tasks import apply_tool_call  # noqa: E402

RESULTS: list[tuple[str, float, float]] = []


def timed(label: str, fn, n: int, before=None) -> list:
    """Times fn() n times (before(i) runs untimed); returns fn's results."""
    out, times = [], []
    for i in range(n):
        if before:
            before(i)
        t0 = time.perf_counter()
        out.append(fn())
        times.append(time.perf_counter() - t0)
    RESULTS.append((label, statistics.median(times) * 1000, statistics.mean(times) * 1000))
    return out


def make_callers(count: int):
    tag = os.urandom(4).hex()
    user = get_user_model().objects.create_user(f"profile-{tag}")
    workspace = workspace_create(name=f"Profile {tag}", slug=f"profile-{tag}", owner_user=user)
    member = Member.objects.get(workspace=workspace, user=user)
    callers, tokens = [], []
    for i in range(count):
        session = session_start(workspace=workspace, owner=member, title=f"profile {i}")
        _, token = runner_start(session=session)
        tokens.append(token)
        callers.append(caller_for_token(token))
    return callers, tokens


def main(n: int) -> None:
    spec = CardSpec.model_validate(card_arguments("bmprofile")["spec"])
    callers, tokens = make_callers(5 * (n // PER_RUNNER + 1))
    pools = iter(range(len(callers)))
    current = {"caller": callers[next(pools)], "used": 0}

    def rotate(_i):  # a fresh runner when this one's 50 cards are used
        if current["used"] >= PER_RUNNER:
            current["caller"], current["used"] = callers[next(pools)], 0
        current["used"] += 1

    cursor = connection.cursor()
    timed("PostgreSQL round trip (SELECT 1)", lambda: cursor.execute("SELECT 1"), n)
    timed("close_old_connections()", close_old_connections, n)
    timed("token lookup: caller_for_token (sha256 + 1 query)", lambda: caller_for_token(tokens[0]), n)
    timed(
        "CardSpec.model_validate (the SDK's argument parsing)",
        lambda: CardSpec.model_validate(card_arguments("bmprofile")["spec"]),
        n,
    )

    def render():
        items, _ = card_layout(spec)
        return card_blocks(items), card_fallback_text(items)

    timed("card_layout + card_blocks + fallback text", render, n)
    timed("spec.model_dump(mode='json')", lambda: spec.model_dump(mode="json"), n)
    timed("secret_scanner_for (1 query)", lambda: secret_scanner_for(callers[0]), n)

    items, _ = card_layout(spec)
    payload = {"items": items, "blocks": card_blocks(items), "text": card_fallback_text(items)}
    arguments = spec.model_dump(mode="json")

    def slot_only():
        with transaction.atomic():
            runner_take_slot(runner_id=current["caller"].runner_id, tool="post_card")

    timed("transaction: runner_take_slot alone (UPDATE, commit)", slot_only, n, before=rotate)

    def insert_only():
        caller = current["caller"]
        with transaction.atomic():
            return ToolCall.objects.create(
                session_id=caller.session_id,
                runner_id=caller.runner_id,
                tool="post_card",
                arguments=arguments,
                payload=payload,
            ).id

    ids = timed("transaction: ToolCall INSERT alone (commit)", insert_only, n)

    def txn_no_enqueue():
        caller = current["caller"]
        with transaction.atomic():
            runner_take_slot(runner_id=caller.runner_id, tool="post_card")
            ToolCall.objects.create(
                session_id=caller.session_id,
                runner_id=caller.runner_id,
                tool="post_card",
                arguments=arguments,
                payload=payload,
            )

    timed("transaction: slot UPDATE + INSERT + commit (no enqueue)", txn_no_enqueue, n, before=rotate)

    def one_statement():
        caller = current["caller"]
        row = ToolCall(
            session_id=caller.session_id,
            runner_id=caller.runner_id,
            tool="post_card",
            arguments=arguments,
            payload=payload,
        )
        tool_call_count_and_insert(
            row=row, workspace_id=caller.workspace_id, runner_id=caller.runner_id, tool="post_card"
        )

    timed("what Calvin runs: slot + day UPDATEs + INSERT in one statement", one_statement, n, before=rotate)
    timed("Celery enqueue: apply_async(retry=False)", lambda: apply_tool_call.apply_async((ids[0],), retry=False), n)
    timed("cards_post, the whole service", lambda: cards_post(caller=current["caller"], spec=spec), n, before=rotate)

    async def hops():
        noop = sync_to_async(lambda: None, thread_sensitive=False)
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            await noop()
            times.append(time.perf_counter() - t0)
        label = "sync_to_async hop (thread_sensitive=False), no-op"
        RESULTS.append((label, statistics.median(times) * 1000, statistics.mean(times) * 1000))

    asyncio.run(hops())

    # The effect (worker side): pieces of tool_call_apply for a post_card.
    message = Message.objects.filter(kind=Message.Kind.CARD).select_related("member", "tool_call").last()
    if message is None:
        # No card delivered yet in this database: make one.
        call_id = cards_post(caller=callers[-1], spec=spec)["tool_call_id"]
        ToolCall.claim(call_id)
        tool_call_apply(tool_call_id=call_id)
        message = Message.objects.filter(kind=Message.Kind.CARD).select_related("member", "tool_call").last()
    timed("effect: render chat/_message.html", lambda: render_to_string("chat/_message.html", {"message": message}), n)
    layer = get_channel_layer()
    event = message_event(message)
    timed(
        "effect: async_to_sync(group_send) to channels-redis",
        lambda: async_to_sync(layer.group_send)("thread.0", event),
        n,
    )
    timed("effect: thread_broadcast (query + render + group_send)", lambda: thread_broadcast(message), n)

    pending = {}

    def record_one(i):  # untimed: a fresh pending post_card to apply
        rotate(i)
        pending["id"] = cards_post(caller=current["caller"], spec=spec)["tool_call_id"]

    def task_body():
        if ToolCall.claim(pending["id"]):
            tool_call_apply(tool_call_id=pending["id"])

    timed("effect: the task body (claim UPDATE + tool_call_apply)", task_body, n, before=record_one)

    redis.Redis.from_url(REDIS_URL).flushdb()  # the tasks enqueued above, nobody consumes them
    width = max(len(label) for label, _, _ in RESULTS)
    print(f"{'piece':<{width}}  {'median ms':>9}  {'mean ms':>8}   (n={n})")
    for label, median, mean in RESULTS:
        print(f"{label:<{width}}  {median:>9.3f}  {mean:>8.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
