"""A worker whose database connection dies (a PostgreSQL restart, a failover) reconnects on its
own and finishes what it was given; tasks retry database errors instead of dropping them.

The worker is a real `celery -A calvin worker` process; its connection is ended from PostgreSQL's
side with pg_terminate_backend, which is what a restart does to every open connection.
"""

import uuid

import pytest
from django.db import OperationalError, connection

from tests.conftest import wait_for
from tests.support import celery_processes
from tests.support.recorder import Recorder
from tests.tools.test_exactly_once import recorded_call
from tools import effects
from tools.dispatcher import DISPATCHER
from tools.models import ToolCall
from tools.tasks import apply_tool_call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _only_the_spawned_worker():
    """This process's own dispatcher (its test worker's, session-wide once any earlier test here
    used it) leaves the calls to the worker spawned here: it has no recording chat adapter, and
    would fail them (CI saw it)."""
    with DISPATCHER.held():
        yield


@pytest.fixture
def queue():
    name = f"calvin-db-{uuid.uuid4().hex[:8]}"
    yield name
    celery_processes.queue_forget(name)


def terminate_backends(application_name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            [application_name],
        )
        return cursor.fetchone()[0]


def applied(call_id: int):
    return ToolCall.objects.filter(id=call_id, status=ToolCall.Status.APPLIED).first()


def test_a_worker_whose_connection_was_ended_reconnects_and_applies_the_next_calls(workspace, queue, tmp_path):
    name = f"worker-{uuid.uuid4().hex[:8]}"
    url = f"{celery_processes.subprocess_database_url()}?application_name={name}"
    worker = celery_processes.worker(queue=queue, log_path=tmp_path / "worker.log", env={"DATABASE_URL": url})
    try:
        with Recorder() as recorder:
            worker.wait_for_log(" ready.")
            first = recorded_call(workspace, recorder)
            apply_tool_call.apply_async(args=[first.id], queue=queue)
            wait_for(lambda: applied(first.id), timeout=30)

            # The worker keeps its connection between tasks (CELERY_DB_REUSE_MAX): end it under it.
            assert wait_for(lambda: terminate_backends(name), timeout=10) >= 1

            calls = [recorded_call(workspace, recorder) for _ in range(3)]
            for call in calls:
                apply_tool_call.apply_async(args=[call.id], queue=queue)
            for call in calls:
                assert wait_for(lambda call=call: applied(call.id), timeout=30), worker.log()
                assert recorder.deliveries(call.id) == 1
    finally:
        worker.stop()
    assert ToolCall.objects.filter(status=ToolCall.Status.FAILED).count() == 0


def test_a_database_error_under_an_effect_puts_the_call_back_to_pending_not_failed(workspace, monkeypatch):
    with Recorder() as recorder:
        call = recorded_call(workspace, recorder)
        assert ToolCall.claim(call.id)

        def connection_lost(_call):
            raise OperationalError("the connection is closed")

        monkeypatch.setattr(effects, "effect_perform", connection_lost)
        with pytest.raises(OperationalError):
            effects.tool_call_apply(tool_call_id=call.id)
    call.refresh_from_db()
    assert call.status == ToolCall.Status.PENDING  # the retry or the sweep takes it; nobody told it failed
    assert call.error == ""


def test_tasks_retry_database_errors_and_sweeps_leave_them_to_the_next_tick():
    from calvin.celery import app

    app.loader.import_default_modules()
    sweeps = {name for name in app.tasks if ".sweep_" in name or ".forget_" in name}
    assert len(sweeps) >= 7
    for name in sweeps:
        assert app.tasks[name].retry_database_errors is False, name
    assert app.tasks["tools.tasks.apply_tool_call"].retry_database_errors is True
    assert app.tasks["approvals.tasks.post_approval_card"].retry_database_errors is True
