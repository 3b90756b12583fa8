"""A worker's health is visible: each real `celery worker` process notes itself in Redis; /readyz
counts those heard in the last minute and `manage.py workers` lists them (exit 1 when none)."""

import time
import uuid

import pytest
import redis
from django.core.management import CommandError, call_command

from calvin import workers
from tests.conftest import wait_for
from tests.support import celery_processes

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queue(settings):
    name = f"calvin-workers-{uuid.uuid4().hex[:8]}"
    settings.CELERY_TASK_DEFAULT_QUEUE = name  # what this gateway counts: its own queue's workers
    yield name
    celery_processes.queue_forget(name)
    redis.Redis.from_url(settings.REDIS_URL).delete(f"calvin:workers:{name}")


def test_a_running_worker_is_counted_and_listed_and_a_stopped_one_is_not(queue, tmp_path, client, capsys):
    with pytest.raises(CommandError, match="no worker was heard in the last 60 s"):
        call_command("workers")
    worker = celery_processes.worker(queue=queue, log_path=tmp_path / "worker.log")
    try:
        worker.wait_for_log(" ready.")
        wait_for(lambda: workers.workers_answered(), timeout=10)
        assert client.get("/readyz").json()["workers"] == 1
        call_command("workers")
        out = capsys.readouterr().out
        assert f"{queue}-" in out and "1 worker(s) answering" in out
    finally:
        worker.stop()
    assert workers.workers_answered() == {}  # a clean stop leaves at once
    assert client.get("/readyz").json()["workers"] == 0


def test_a_killed_worker_stops_being_counted_after_a_minute(queue, tmp_path, settings):
    worker = celery_processes.worker(queue=queue, log_path=tmp_path / "worker.log")
    worker.wait_for_log(" ready.")
    (name,) = wait_for(lambda: workers.workers_answered(), timeout=10)
    worker.kill()  # no shutdown code runs: its entry stays until it is too old
    assert name in workers.workers_answered()
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.zadd(f"calvin:workers:{queue}", {name: time.time() - 61})  # a minute goes by without a beat
    assert workers.workers_answered() == {}


def test_another_deployments_workers_on_the_same_redis_are_not_counted(queue, settings):
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.zadd("calvin:workers:someone-else", {"theirs@host": time.time()})
    try:
        assert workers.workers_answered() == {}
    finally:
        client.delete("calvin:workers:someone-else")
