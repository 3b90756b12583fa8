"""A runner that keeps being refused is paused, with a clear message; others are not."""

import time

import pytest

from tests.conftest import text_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def five_a_minute(settings):
    settings.CALVIN_REFUSALS_PER_MINUTE = 5
    if time.time() % 60 > 50:  # refusals are counted per clock minute: start early in one
        time.sleep(61 - time.time() % 60)


def test_a_runner_past_its_refusals_is_paused_and_others_are_not(agent, make_agent, five_a_minute):
    (agent.directory / "ok.txt").write_text("fine")
    for _ in range(6):
        result = agent.call("send_file", {"path": "missing.txt"})
        assert result.is_error and "no file at missing.txt" in text_of(result)
    # Past the limit: even a good call is paused, without being looked at.
    result = agent.call("send_file", {"path": "ok.txt"})
    text = text_of(result)
    assert result.is_error
    assert "made more than 5 refused calls in a minute" in text and "paused for" in text, text
    paused = agent.call("post_card", {"spec": {"root": "r", "elements": {}}})
    assert paused.is_error and "paused for" in text_of(paused)

    other = make_agent()
    (other.directory / "ok.txt").write_text("fine")
    assert not other.call("send_file", {"path": "ok.txt"}).is_error


def test_argument_problems_count_as_refusals(agent, five_a_minute):
    for _ in range(6):
        assert "contains a NUL character" in text_of(agent.call("send_file", {"path": "a\x00"}))
    assert "paused for" in text_of(agent.call("send_file", {"path": "x"}))
