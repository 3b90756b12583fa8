"""The row is the queue (tools/dispatcher.py): new calls wake the workers by pg_notify, are
claimed in batches, each once, and nothing is lost when the notification or the connection is."""

import re
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from sessions.models import Message
from sessions.services import session_start
from tests.conftest import wait_for
from tests.support import celery_processes
from tools import dispatcher, effects, effects_batch
from tools.dispatcher import DISPATCHER, EffectDispatcher
from tools.effects import tool_calls_apply_claimed, tool_calls_claim_new, tool_calls_unclaim
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def new_calls(workspace, count: int, *, notify: bool = True) -> list[int]:
    """Pending post_card calls of a web thread, committed as a tool call commits them."""
    session = session_start(workspace=workspace, title="queue")
    calls = ToolCall.objects.bulk_create(
        ToolCall(session=session, tool="post_card", payload={"items": [], "blocks": [], "text": f"card {i}"})
        for i in range(count)
    )
    if notify:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [dispatcher.CHANNEL])
    return [call.id for call in calls]


def all_applied(ids: list[int]) -> bool:
    return ToolCall.objects.filter(id__in=ids, status=ToolCall.Status.APPLIED).count() == len(ids)


def delivered_once(ids: list[int]) -> None:
    posted = sorted(Message.objects.filter(tool_call_id__in=ids).values_list("tool_call_id", flat=True))
    assert posted == sorted(ids)
    assert set(ToolCall.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {1}


@pytest.fixture
def own_dispatchers():
    """Dispatchers of this test's own; this process's worker claims nothing meanwhile."""
    started: list[EffectDispatcher] = []

    def start(**kwargs) -> EffectDispatcher:
        one = EffectDispatcher(**kwargs)
        assert one.start()
        started.append(one)
        return one

    with DISPATCHER.held():
        yield start
        for one in started:
            one.stop()


def test_the_claim_takes_new_calls_oldest_first_and_never_one_claimed_before(workspace):
    ids = new_calls(workspace, 5, notify=False)
    ToolCall.objects.filter(id=ids[1]).update(claimed_at=timezone.now())  # the sweep queued it: the task's
    ToolCall.objects.filter(id=ids[2]).update(status=ToolCall.Status.AWAITING_APPROVAL)
    with DISPATCHER.held():
        first, stamp = tool_calls_claim_new(limit=2)
        rest, _ = tool_calls_claim_new(limit=10)
    assert first == [ids[0], ids[3]] and rest == [ids[4]]
    row = ToolCall.objects.get(id=ids[0])
    assert (row.status, row.attempts, row.claimed_at) == (ToolCall.Status.APPLYING, 1, stamp)
    assert ToolCall.objects.get(id=ids[1]).status == ToolCall.Status.PENDING


def test_a_batch_cut_short_is_given_back_unless_someone_claimed_it_since(workspace):
    ids = new_calls(workspace, 3, notify=False)
    with DISPATCHER.held():
        claimed, stamp = tool_calls_claim_new(limit=3)
        ToolCall.objects.filter(id=ids[2]).update(claimed_at=timezone.now())  # the sweep took it meanwhile
        assert tool_calls_unclaim(ids=claimed, claimed_at=stamp) == 2
        rows = dict(ToolCall.objects.filter(id__in=ids).values_list("id", "claimed_at"))
        assert rows[ids[0]] is None and rows[ids[1]] is None and rows[ids[2]] is not None
        assert tool_calls_claim_new(limit=3)[0] == ids[:2]  # new again: the next drain takes them


def test_a_claim_skips_the_rows_another_claim_holds_without_waiting_for_it(workspace):
    ids = new_calls(workspace, 6, notify=False)
    holding, release, first = threading.Event(), threading.Event(), []

    def claim_and_hold():
        with transaction.atomic():
            first.extend(tool_calls_claim_new(limit=3)[0])
            holding.set()
            release.wait(10)
        connection.close()

    other = threading.Thread(target=claim_and_hold)
    other.start()
    try:
        assert holding.wait(10)
        with DISPATCHER.held(), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '2s'")  # waiting on the other's rows fails here
            second = tool_calls_claim_new(limit=10)[0]
    finally:
        release.set()
        other.join(10)
    assert first == ids[:3] and second == ids[3:]
    assert set(ToolCall.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {1}


def test_a_call_that_fails_in_a_batch_takes_only_itself_down(workspace):
    ids = new_calls(workspace, 3, notify=False)
    ToolCall.objects.filter(id=ids[1]).update(tool="no_such_tool")
    with DISPATCHER.held():
        assert EffectDispatcher().drain() == 3
    statuses = dict(ToolCall.objects.filter(id__in=ids).values_list("id", "status"))
    assert [statuses[i] for i in ids] == ["applied", "failed", "applied"]
    posted = set(Message.objects.filter(tool_call_id__in=ids).values_list("tool_call_id", flat=True))
    assert posted == {ids[0], ids[2]}


def test_a_call_gone_between_its_claim_and_its_apply_takes_only_itself_down(workspace):
    ids = new_calls(workspace, 3, notify=False)
    with DISPATCHER.held():
        claimed, _ = tool_calls_claim_new(limit=3)
        ToolCall.objects.filter(id=ids[1]).delete()
        tool_calls_apply_claimed(ids=claimed)
    assert all_applied([ids[0], ids[2]])
    assert sorted(Message.objects.filter(tool_call_id__isnull=False).values_list("tool_call_id", flat=True)) == [
        ids[0],
        ids[2],
    ]


def test_a_database_lost_mid_batch_gives_the_rest_back_and_loses_nothing(workspace, monkeypatch):
    """Calls applied one by one (each in its own transaction): what was applied stays applied."""
    monkeypatch.setattr(effects_batch, "batchable_calls", lambda ids: {})
    ids = new_calls(workspace, 3, notify=False)
    real = effects.tool_call_apply

    def lost_at_the_second(*, tool_call_id):
        if tool_call_id == ids[1]:
            raise OperationalError("server closed the connection unexpectedly")
        return real(tool_call_id=tool_call_id)

    monkeypatch.setattr(effects, "tool_call_apply", lost_at_the_second)
    one = EffectDispatcher()
    with DISPATCHER.held():
        with pytest.raises(OperationalError):
            one.drain()
        statuses = dict(ToolCall.objects.filter(id__in=ids).values_list("id", "status"))
        assert [statuses[i] for i in ids] == ["applied", "applying", "applying"]  # each its own transaction
        monkeypatch.undo()
        assert one.drain() == 2  # the rest given back, then claimed and applied
    assert all_applied(ids)
    posted = sorted(Message.objects.filter(tool_call_id__in=ids).values_list("tool_call_id", flat=True))
    assert posted == ids


def test_a_database_lost_under_calls_applied_together_gives_them_all_back(workspace, monkeypatch):
    """Web posts applied together (tools/effects_batch.py), one transaction: none of them stays."""
    ids = new_calls(workspace, 3, notify=False)

    def lost(platform_ids):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(effects_batch, "_calls_mark_applied", lost)
    one = EffectDispatcher()
    with DISPATCHER.held():
        with pytest.raises(OperationalError):
            one.drain()
        assert not Message.objects.filter(tool_call_id__in=ids).exists()
        monkeypatch.undo()
        assert one.drain() == 3  # all given back, then claimed and applied
    assert all_applied(ids)
    posted = sorted(Message.objects.filter(tool_call_id__in=ids).values_list("tool_call_id", flat=True))
    assert posted == ids  # once each: the second attempts asked the platform first


def test_two_dispatchers_draining_at_once_apply_each_call_once(workspace, own_dispatchers):
    ids = new_calls(workspace, 120, notify=False)
    both = [EffectDispatcher(batch=7), EffectDispatcher(batch=5)]
    start = threading.Barrier(2)

    def drain(one):
        start.wait()
        one.drain()
        connection.close()

    threads = [threading.Thread(target=drain, args=(one,)) for one in both]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all_applied(ids)
    delivered_once(ids)


def test_a_committed_call_is_applied_when_its_notification_arrives(workspace, own_dispatchers):
    own_dispatchers(poll_seconds=60)  # so only the notification can have woken it
    ids = new_calls(workspace, 3)
    wait_for(lambda: all_applied(ids), timeout=10)
    delivered_once(ids)


def test_an_agents_call_wakes_the_dispatcher_by_its_own_insert(agent, own_dispatchers):
    own_dispatchers(poll_seconds=60)
    spec = {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "told"}}}}
    result = agent.call("post_card", {"spec": spec})
    assert not result.is_error
    ids = [result.structured_content["tool_call_id"]]
    wait_for(lambda: all_applied(ids), timeout=10)
    delivered_once(ids)


def test_calls_whose_notification_was_lost_are_found_by_the_next_look(workspace, own_dispatchers):
    own_dispatchers(poll_seconds=0.3)
    ids = new_calls(workspace, 3, notify=False)
    wait_for(lambda: all_applied(ids), timeout=10)
    delivered_once(ids)


def test_a_dispatcher_whose_connection_is_cut_listens_again_and_misses_nothing(workspace, own_dispatchers):
    one = own_dispatchers(poll_seconds=60)
    wait_for(one.listening.is_set)
    listeners = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %%'"
    with connection.cursor() as cursor:
        cursor.execute(listeners)
        pids = [row[0] for row in cursor.fetchall()]
        assert pids
        cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
    wait_for(lambda: not one.listening.is_set(), timeout=10)
    during = new_calls(workspace, 2)  # told while nobody listened: the reconnect's first drain takes them
    wait_for(one.listening.is_set, timeout=15)
    after = new_calls(workspace, 2)
    wait_for(lambda: all_applied(during + after), timeout=10)
    delivered_once(during + after)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_celery_worker_process_applies_new_calls_with_no_task_sent(workspace, tmp_path, concurrency):
    queue = f"calvin-dispatch-{uuid.uuid4().hex[:8]}"
    probe = Path(__file__).parent / "fixup_probe"
    worker = celery_processes.worker(
        queue=queue,
        log_path=tmp_path / "worker.log",
        concurrency=concurrency,
        env={"PYTHONPATH": f"{probe}:{celery_processes.ROOT}"},
    )
    try:
        with DISPATCHER.held():
            worker.wait_for_log(" ready.")
            time.sleep(0.5)  # a pool's children start listening after the worker says it is ready
            ids = new_calls(workspace, 10)
            wait_for(lambda: all_applied(ids), timeout=20)
        delivered_once(ids)
        assert "tools.tasks.apply_tool_call" not in worker.log().split(" ready.", 1)[1]
        # Each process the pool runs work in (the worker's own for solo, each child for prefork)
        # started its dispatcher only after Celery's Django fix-up closed what it inherited.
        probes = re.findall(r"dispatcher running while descriptors close: (\w+)", worker.log())
        assert len(probes) >= concurrency
        assert set(probes) == {"False"}
    finally:
        worker.stop()
        celery_processes.queue_forget(queue)
