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


class Clock:
    def __init__(self, at: float):
        self.at = at

    def __call__(self) -> float:
        return self.at


def test_the_pause_lasts_until_the_minute_ends_and_says_how_long(settings, monkeypatch, workspace):
    """The counting and pausing functions on their own, with a clock the test moves."""
    from sessions.services import runner_start, session_start
    from tools import refusals
    from tools.errors import ToolRefused

    settings.CALVIN_REFUSALS_PER_MINUTE = 2
    clock = Clock(1_000_000 * 60 + 10.5)  # 10.5 s into a minute, one no other test counts in
    monkeypatch.setattr(refusals.time, "time", clock)
    runner_id = runner_start(session=session_start(workspace=workspace, title="refused"))[0].id

    def check():  # as a call does: the pause read with the caller, then checked
        refusals.refusals_check(paused_until=refusals.refusals_paused_until(runner_id=runner_id))

    for _ in range(2):
        refusals.refusal_note(runner_id=runner_id)
        check()  # at the limit: not paused yet
    refusals.refusal_note(runner_id=runner_id)
    with pytest.raises(ToolRefused, match="paused for 50 more seconds"):
        check()
    clock.at += 49.4  # 0.1 s before the minute ends
    with pytest.raises(ToolRefused, match="paused for 1 more seconds"):
        check()
    clock.at = 1_000_001 * 60  # the next minute: calls go through, and the count starts again
    check()
    refusals.refusal_note(runner_id=runner_id)
    check()


def test_calls_the_sdk_rejects_count_as_refusals(agent, five_a_minute):
    """Wrong types fail the SDK's schema check before any tool runs: counted all the same,
    and once paused the runner gets the pause message, not the schema error."""
    for _ in range(6):
        result = agent.raw_call("send_file", '{"path": 5}')
        assert result["isError"] and "Input should be a valid string" in result["content"][0]["text"]
    result = agent.raw_call("send_file", '{"path": 5}')
    assert result["isError"] and "made more than 5 refused calls in a minute" in result["content"][0]["text"]
    assert "paused for" in text_of(agent.call("post_card", {"spec": {"root": "r", "elements": {}}}))


def test_unknown_tool_names_count_as_refusals(agent, five_a_minute):
    for _ in range(6):
        result = agent.raw_call("delete_everything", "{}")
        assert result["isError"] and result["content"][0]["text"] == "Unknown tool: delete_everything"
    result = agent.raw_call("delete_everything", "{}")
    assert result["isError"] and "paused for" in result["content"][0]["text"]


def test_tools_not_offered_in_this_mode_count_as_refusals(agent, five_a_minute, settings):
    settings.CALVIN_MODE = "one-machine"  # read per call: checkout_repo is not offered
    for _ in range(6):
        result = agent.raw_call("checkout_repo", '{"repos": ["x"]}')
        assert result["isError"] and "not offered in one-machine mode" in result["content"][0]["text"]
    assert "paused for" in agent.raw_call("checkout_repo", '{"repos": ["x"]}')["content"][0]["text"]


def test_with_redis_down_calls_are_neither_paused_nor_broken(settings):
    """The pause guards the gateway: a cache that cannot be reached leaves calls unpaused, and a
    refusal still goes back to the agent (counted when the cache answers again)."""
    from tests.conftest import free_port
    from tools import refusals

    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
        }
    }
    settings.CALVIN_REFUSALS_PER_MINUTE = 1
    for _ in range(3):
        refusals.refusal_note(runner_id=1)
    assert refusals.refusals_paused_until(runner_id=1) is None
