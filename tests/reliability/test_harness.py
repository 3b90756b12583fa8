"""The fault tests' harness works: own PostgreSQL and Redis, a gateway, a worker and beat."""

import pytest

from tests.reliability.calls import drive, landed_markers, unfinished_calls
from tests.reliability.processes import sessions_make, wait_until

pytestmark = pytest.mark.slow


def test_a_card_lands_through_the_stack_own_processes(stack):
    runners = sessions_make(stack, 2)
    web = stack.gateway()
    stack.worker()
    stack.beat().wait_for_log("beat: Starting")
    outcome = drive(base_url=web.url, runners=runners, tool="post_card", per_client=3)
    assert len(outcome.succeeded) == 6, outcome.errors
    wait_until(lambda: unfinished_calls(stack) == 0, timeout=30, what="calls applied")
    outcome.check_exactly_once(landed_markers(stack, outcome.pattern))
    # The shared services are not these: the cluster has its own port and the card is in it.
    assert stack.postgres.port != 5432 and stack.redis.port != 6379
