"""The per-runner count when its row is missing (a runner made before the tool existed)."""

import pytest

from sessions.models import RunnerCount
from tests.conftest import text_of

pytestmark = pytest.mark.django_db(transaction=True)

CARD = {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "n"}}}}


def test_a_missing_counter_row_is_created_on_first_use(agent):
    RunnerCount.objects.filter(runner=agent.runner).delete()
    result = agent.call("post_card", {"spec": CARD})
    assert not result.is_error, text_of(result)
    assert RunnerCount.objects.get(runner=agent.runner, tool="post_card").used == 1


def test_a_full_counter_refuses_without_recreating_it(agent):
    RunnerCount.objects.filter(runner=agent.runner, tool="post_card").update(used=50)
    result = agent.call("post_card", {"spec": CARD})
    assert result.is_error and "limit of 50 cards per runner reached" in text_of(result)
    assert RunnerCount.objects.filter(runner=agent.runner, tool="post_card").count() == 1
