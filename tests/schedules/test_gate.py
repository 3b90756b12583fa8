"""A task's --script: the host runs it first in the sandbox, and the agent wakes only when it
prints {"wakeAgent": true} (a zero-token guard); a failing script fails the run."""

import pytest

from calvin.schedules.models import TaskRun
from calvin.schedules.services import task_fire
from sessions.scheduling import turns_claim
from sessions.turns import turn_finish
from tests.schedules.conftest import START, make_task
from tests.sessions.host import Roots, a_turn, run_turn, shell

AGENT = shell("touch agent-woke; echo the agent ran")


@pytest.mark.parametrize("kind", ["bwrap", "none"])
def test_the_agent_wakes_only_when_the_script_says_so(tmp_path, kind):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(4, roots.sandbox(kind))
    woke = run_turn(runner, a_turn(AGENT, session=4, gate="echo checking; echo '{\"wakeAgent\": true}'"))
    assert (woke["status"], woke["reply"]) == ("done", "the agent ran")
    (runner.directory / "agent-woke").unlink()

    for number, script in enumerate(
        ("echo '{\"wakeAgent\": false}'", "echo nothing new", "true", 'echo \'{"wakeAgent": "yes"}\''), 2
    ):
        slept = run_turn(runner, a_turn(AGENT, number=number, session=4, gate=script))
        assert slept["status"] == "done" and "the agent was not woken" in slept["reply"], (script, slept)
        assert not (runner.directory / "agent-woke").exists(), script


def test_a_failing_script_fails_the_run_and_the_agent_never_starts(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(4, roots.bwrap())
    failed = run_turn(runner, a_turn(AGENT, session=4, gate="echo broken >&2; exit 3"))
    assert failed["status"] == "failed" and failed["error"].startswith("the task's script failed"), failed
    assert "broken" in failed["error"]
    assert not (runner.directory / "agent-woke").exists()


@pytest.mark.django_db(transaction=True)
def test_a_task_run_carries_its_script_to_the_host_and_a_failing_one_counts_as_a_failure(agent, host):
    task = make_task(agent, script="exit 1")
    [run] = task_fire(task_id=task.id, now=START.replace(hour=9))
    [claimed] = turns_claim(host_id=host.id)
    assert claimed["gate"] == "exit 1"
    turn_finish(host_id=host.id, turn_id=claimed["turn"], status="failed", error="the task's script failed: exit 1")
    ended = TaskRun.objects.get(id=run.id)
    assert (ended.status, ended.error) == ("failed", "the task's script failed: exit 1")
    task.refresh_from_db()
    assert task.consecutive_failures == 1
