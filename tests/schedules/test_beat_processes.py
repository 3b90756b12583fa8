"""Two real `celery beat` processes and two workers on one database: every slot of a task fires
once. Both beats send the tick; whichever worker's claim comes second finds nothing to fire."""

import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from calvin.schedules.models import TaskRun
from sessions.models import Turn
from tests.conftest import wait_for
from tests.schedules.conftest import make_task
from tests.support import celery_processes

pytestmark = pytest.mark.django_db(transaction=True)
TICK = {"CALVIN_TASK_TICK_SECONDS": "1"}
FIRED = re.compile(r"calvin\.schedules\.tasks\.fire_due_tasks\[[^\]]+\] succeeded in [0-9.e-]+s: (\d+)")


@pytest.fixture
def spawn(tmp_path):
    queue, started = f"calvin-beats-{uuid.uuid4().hex[:8]}", []

    def spawn(make, name: str):
        process = make(queue=queue, log_path=tmp_path / f"{name}.log", env=TICK)
        started.append(process)
        return process

    yield spawn
    for process in started:
        process.stop()
    celery_processes.queue_forget(queue)


def test_two_beats_and_two_workers_fire_each_missed_slot_once(agent, spawn):
    # Made five and a half hours ago, hourly, catching up every missed slot: six are due now.
    task = make_task(agent, recurrence_policy="catch-up-all", now=timezone.now() - timedelta(hours=5, minutes=30))
    due = task.next_run_at
    workers = [spawn(celery_processes.worker, f"worker-{n}") for n in (1, 2)]
    beats = [spawn(celery_processes.beat, f"beat-{n}") for n in (1, 2)]
    for process in workers:
        process.wait_for_log(" ready.")

    def fired() -> list[int]:
        return [int(count) for process in workers for count in FIRED.findall(process.log())]

    # Each beat has sent several ticks and the workers have run at least six of them.
    for beat in beats:
        wait_for(lambda beat=beat: beat.log().count("scheduled-tasks-fire") >= 3, timeout=40)
    wait_for(lambda: len(fired()) >= 6, timeout=40)

    runs = list(TaskRun.objects.filter(task=task).order_by("scheduled_for"))
    assert [run.scheduled_for for run in runs] == [due + timedelta(hours=n) for n in range(len(runs))]
    assert len(runs) in (5, 6)  # 5.5 hours: five or six hour marks, by where the clock stood
    assert Turn.objects.filter(session__agent=agent).count() == len(runs)  # no turn without its claim
    counts = fired()
    assert sum(counts) == len(runs) and counts.count(0) == len(counts) - 1, counts  # one tick fired them all
