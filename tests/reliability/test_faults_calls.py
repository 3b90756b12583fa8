"""Tool calls from many agents while a worker, the web process, Redis or PostgreSQL dies.

Counted where the effect lands (delivered Message rows of the sessions' web threads), never
at the caller; only the process the fault killed is started again, nothing else.
"""

import random
import time

import pytest

from tests.reliability.experiments import calls_under_fault, report
from tests.reliability.processes import wait_until

pytestmark = pytest.mark.slow


def test_worker_sigkilled_five_times_during_1000_calls(stack, capsys):
    web = stack.gateway()
    workers = [stack.worker()]
    stack.beat()
    workers[0].wait_for_log("ready")

    def kill_worker_repeatedly(calls_done) -> float:
        for _ in range(5):
            time.sleep(random.uniform(1.0, 2.0))
            workers[-1].kill()  # mid-task: it claims calls as fast as they come
            workers.append(stack.worker())
            workers[-1].wait_for_log("ready", timeout=60)
        return time.monotonic()

    seen = calls_under_fault(stack, web, tool="post_card", clients=25, per_client=40, fault=kill_worker_repeatedly)
    assert len(seen.outcome.succeeded) == 1000
    report(capsys, seen.line("worker SIGKILLed 5 times"))


def test_web_process_sigkilled_and_restarted_during_calls(stack, capsys):
    web = stack.gateway()
    stack.worker()
    stack.beat()

    def kill_web_repeatedly(calls_done) -> float:
        for _ in range(3):
            time.sleep(random.uniform(1.0, 2.0))
            web.kill()  # calls in flight are cut off; their clients retry on a new session
            web.start()
        return time.monotonic()

    seen = calls_under_fault(stack, web, tool="send_message", clients=20, per_client=25, fault=kill_web_repeatedly)
    assert seen.outcome.failed, "no call was cut off: the web process was not killed during calls"
    report(capsys, seen.line("web process SIGKILLed 3 times"))


def test_redis_killed_and_started_again_during_calls(stack, capsys):
    web = stack.gateway()
    worker = stack.worker()
    stack.beat()
    worker.wait_for_log("ready")

    def kill_redis(calls_done) -> float:
        time.sleep(2.0)
        stack.redis.kill()  # the queue, unacked tasks and the channel layer's messages are gone
        time.sleep(3.0)
        stack.redis.start()
        return time.monotonic()

    seen = calls_under_fault(stack, web, tool="post_card", clients=20, per_client=25, fault=kill_redis)
    assert seen.calls_over_after_s > 2.0, "the calls were over before Redis was killed"
    report(capsys, seen.line("Redis SIGKILLed for 3 s"))


def test_postgres_stopped_immediately_and_started_again_during_calls(stack, capsys):
    # The lost-call sweep's bound beyond the recovery bound: what a restart leaves must be finished
    # by the processes themselves (reconnecting, retrying the tasks that failed), not by a sweep that
    # would cover a worker stuck on a dead connection. A call caught mid-effect with the database
    # still down stays "applying" for the stuck sweep, at its default bound, as designed. A call
    # whose COMMIT's answer was cut off is committed but was never published (its client was told
    # it failed): only the lost-pending sweep finds it, so the experiment does not wait for it.
    stack.extra_env.update(CALVIN_LOST_PENDING_SECONDS="600", CALVIN_STUCK_APPLYING_SECONDS="60")
    web = stack.gateway()
    worker = stack.worker()
    stack.beat()
    worker.wait_for_log("ready")

    def restart_postgres(calls_done) -> float:
        time.sleep(2.0)
        stack.postgres.stop_immediate()  # every connection of every process is cut
        time.sleep(2.0)
        stack.postgres.start()
        wait_until(stack.postgres.answers, timeout=30, what="PostgreSQL answers again")
        return time.monotonic()

    seen = calls_under_fault(
        stack, web, tool="send_message", clients=20, per_client=25, fault=restart_postgres, commit_answers_lost=True
    )
    # Whether the outage meets a call or a client's MCP session starting (its first request) is
    # timing: either shows the clients met it.
    assert seen.outcome.errors, "no request failed: PostgreSQL was not down during calls"
    report(capsys, seen.line("PostgreSQL stopped (-m immediate) for 2 s"))
