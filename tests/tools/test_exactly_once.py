"""Exactly once with real worker processes and a chat platform that has no database guard.

The web channel's unique Message.tool_call would absorb a duplicate; an external platform
has no such thing. Here the recording adapter posts to a recorder over HTTP and counts
what arrives, so only ToolCall.claim and the adapter's `delivered` lookup keep it at one.
"""

import uuid

import pytest

from sessions.models import Message
from sessions.services import session_start
from tests.conftest import wait_for
from tests.support import celery_processes
from tests.support.recorder import Recorder
from tests.support.recording_chat import KIND
from tools.dispatcher import DISPATCHER
from tools.models import ToolCall
from tools.tasks import apply_tool_call

pytestmark = pytest.mark.django_db(transaction=True)

# The sweep, and what it counts as stuck or lost, in seconds instead of minutes.
FAST_SWEEP = {"CALVIN_SWEEP_SECONDS": "1", "CALVIN_STUCK_APPLYING_SECONDS": "2", "CALVIN_LOST_PENDING_SECONDS": "2"}


@pytest.fixture(autouse=True)
def _only_the_spawned_workers():
    """This process's own dispatcher (its test worker's) leaves the calls to the workers spawned
    here: it has no recording chat adapter, and they are what is tested."""
    with DISPATCHER.held():
        yield


@pytest.fixture
def queue():
    name = f"calvin-once-{uuid.uuid4().hex[:8]}"
    yield name
    celery_processes.queue_forget(name)


@pytest.fixture
def spawn(tmp_path, queue):
    """Start a celery worker or beat on this test's queue; all are stopped before the database is flushed."""
    started = []

    def spawn(make, name: str, **kwargs):
        process = make(queue=queue, log_path=tmp_path / f"{name}.log", **kwargs)
        started.append(process)
        return process

    yield spawn
    for process in started:
        process.stop()


def recorded_call(workspace, recorder: Recorder, tool: str = "post_card") -> ToolCall:
    session = session_start(workspace=workspace, channel_kind=KIND, channel_id=recorder.url, title="once")
    if tool == "send_message":  # nanoclaw's: its message row exists from the call on, undelivered
        call = ToolCall.objects.create(session=session, server="nanoclaw", tool=tool, arguments={"text": "once"})
        Message.objects.create(
            thread=session.thread, kind="text", author="agent", text="once", tool_call=call, delivered_at=None
        )
        return call
    return ToolCall.objects.create(
        session=session, tool="post_card", arguments={}, payload={"items": [], "blocks": [], "text": "once"}
    )


def test_one_call_enqueued_many_times_to_concurrent_workers_is_delivered_once(workspace, spawn, queue):
    copies = 8
    with Recorder(delay=1.0) as recorder:  # slow deliveries: copies that got past the claim would overlap
        call = recorded_call(workspace, recorder)
        worker = spawn(celery_processes.worker, "worker", concurrency=4)
        worker.wait_for_log(" ready.")
        for _ in range(copies):
            apply_tool_call.apply_async(args=[call.id], queue=queue)
        # Every copy has run to its end, not only the first; and the four children's dispatchers
        # (the call is new: theirs to claim too) have had their go.
        wait_for(lambda: worker.log().count("tools.tasks.apply_tool_call[") >= 2 * copies, timeout=30)
        assert worker.log().count("succeeded in") == copies, worker.log()
        wait_for(lambda: ToolCall.objects.filter(id=call.id, status=ToolCall.Status.APPLIED).exists(), timeout=30)

        assert recorder.deliveries(call.id) == 1
    call.refresh_from_db()
    assert call.status == ToolCall.Status.APPLIED and call.attempts == 1
    assert call.platform_ids == {"delivery_id": f"d-{call.id}-1"}


@pytest.mark.parametrize("tool", ["post_card", "send_message"])
def test_a_worker_killed_mid_effect_is_recovered_by_beat_and_a_new_worker_delivering_once(
    workspace, spawn, queue, tool
):
    with Recorder(hold_first=True) as recorder:
        call = recorded_call(workspace, recorder, tool)
        first = spawn(celery_processes.worker, "first-worker", env=FAST_SWEEP)
        apply_tool_call.apply_async(args=[call.id], queue=queue)
        # The platform has counted the post; the worker has not heard back, let alone committed.
        assert recorder.first_held.wait(timeout=30), first.log()
        first.kill()
        assert ToolCall.objects.get(id=call.id).status == ToolCall.Status.APPLYING

        # Recovery is the real thing: beat schedules the sweep, a new worker runs it and the call.
        spawn(celery_processes.beat, "beat", env=FAST_SWEEP)
        second = spawn(celery_processes.worker, "second-worker", env=FAST_SWEEP)
        finished = [ToolCall.Status.APPLIED, ToolCall.Status.FAILED]
        recovered = wait_for(lambda: ToolCall.objects.filter(id=call.id, status__in=finished).first(), timeout=40)
        assert recovered.status == ToolCall.Status.APPLIED, (recovered.error, second.log())
        assert recorder.deliveries(call.id) == 1
        assert recorder.lookups[call.id] == 1  # the retry asked the platform instead of posting again
    assert recovered.attempts == 2
    assert recovered.platform_ids == {"delivery_id": f"d-{call.id}-1"}
    assert "sweep_tool_calls" in second.log()  # recovered by the sweep beat scheduled, not by a redelivery
