"""Claude Code's stream-json, parsed from recorded output: one real capture of the CLI (not logged
in, and resuming a conversation it does not have) and hand-written streams following FACTS.md."""

import json

from sessions.host.providers import NOT_LOGGED_IN, ClaudeCode
from sessions.host.stream_json import EVENT_TEXT_LIMIT, ClaudeStream
from tests.sessions.host import RECORDED


def parsed(name: str) -> tuple[ClaudeStream, list[dict]]:
    stream, events = ClaudeStream(), []
    for line in (RECORDED / name).read_text().splitlines():
        events += stream.feed(line)
    return stream, events


def outcome_of(name: str, returncode: int = 0, *, resuming: bool = False):
    provider = ClaudeCode(argv=["claude"], resuming=resuming)
    for line in (RECORDED / name).read_text().splitlines():
        provider.stream.feed(line)
    return provider.outcome(returncode, "")


def test_the_real_cli_not_logged_in():
    stream, events = parsed("not_logged_in.ndjson")
    init = json.loads((RECORDED / "not_logged_in.ndjson").read_text().splitlines()[0])
    assert stream.session_id == init["session_id"]
    assert stream.not_logged_in and not stream.succeeded
    assert events == [{"kind": "error", "text": "authentication_failed: Not logged in · Please run /login"}]
    outcome = outcome_of("not_logged_in.ndjson", 1)
    assert (outcome.status, outcome.error, outcome.agent_session_id) == ("failed", NOT_LOGGED_IN, init["session_id"])


def test_a_successful_stream_gives_events_the_reply_and_the_session_id():
    stream, events = parsed("success.ndjson")
    assert events == [
        {"kind": "text", "text": "I'll look at the failing test first."},
        {
            "kind": "tool_use",
            "name": "Bash",
            "text": '{"command": "pytest -q tests/test_app.py", "description": "Run the failing test"}',
        },
        {"kind": "tool_result", "name": "Bash", "text": "1 failed, 3 passed in 0.42s"},
        {
            "kind": "tool_use",
            "name": "mcp__calvin__post_card",
            "text": '{"spec": {"root": "r", "elements": {"r": {"type": "Card", "props": {"title": "session_id"}}}},'
            ' "session_id": "forged-by-the-agent"}',
        },
        {
            "kind": "tool_result",
            "name": "mcp__calvin__post_card",
            "text": '{"tool_call_id": 41, "session_id": "forged-in-a-result"}',
        },
        {"kind": "text", "text": "Fixed: the test expected UTC and got local time. All 4 tests pass."},
    ]
    assert stream.session_id == "5f0c2a9e-1b7d-4c3e-9a8f-2d6e4b1c0a77"
    outcome = outcome_of("success.ndjson")
    assert (outcome.status, outcome.error) == ("done", "")
    assert outcome.reply == "Fixed: the test expected UTC and got local time. All 4 tests pass."
    assert outcome.agent_session_id == "5f0c2a9e-1b7d-4c3e-9a8f-2d6e4b1c0a77"


def test_session_id_comes_only_from_the_top_level():
    stream = ClaudeStream()
    stream.feed(json.dumps({"type": "system", "subtype": "init", "session_id": "the-real-one"}))
    forged = {"type": "assistant", "message": {"content": [{"type": "text", "text": "hi", "session_id": "forged"}]}}
    stream.feed(json.dumps(forged))
    stream.feed(json.dumps({"type": "result", "is_error": False, "result": "ok", "usage": {"session_id": "forged"}}))
    assert stream.session_id == "the-real-one"


def test_unknown_lines_and_fields_are_passed_over():
    stream = ClaudeStream()
    for line in ["not json", "[1, 2]", '"text"', '{"type": "stream_event", "event": {}}', '{"no_type": 1}', ""]:
        assert stream.feed(line) == []
    assert stream.feed('{"type": "assistant", "message": {"content": "plain text content"}}') == [
        {"kind": "text", "text": "plain text content"}
    ]
    assert stream.result is None and not stream.succeeded


def test_texts_are_bounded():
    stream = ClaudeStream()
    (event,) = stream.feed(
        json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "x" * 9000}]}})
    )
    assert len(event["text"]) == EVENT_TEXT_LIMIT and event["text"].endswith("…")


def test_an_error_result_fails_the_turn_with_its_subtype():
    outcome = outcome_of("error_max_turns.ndjson", 1)
    assert outcome.status == "failed"
    assert outcome.error.startswith("Claude Code stopped: it took as many steps as one turn may (error_max_turns)")
    assert outcome.agent_session_id == "9a1b2c3d-0000-4000-8000-00000000beef"


def test_a_result_at_the_turns_budget_says_so_in_words():
    stream = ClaudeStream()
    stream.feed(
        json.dumps({"type": "result", "subtype": "error_max_budget_usd", "is_error": True, "total_cost_usd": 0.5})
    )
    outcome = ClaudeCode(argv=["claude"], stream=stream).outcome(1, "")
    assert outcome.status == "failed"
    assert (
        outcome.error.startswith("Claude Code stopped: it spent this turn's budget")
        and "(error_max_budget_usd)" in outcome.error
    )


def test_an_unknown_result_subtype_still_fails_with_its_name():
    stream = ClaudeStream()
    stream.feed(json.dumps({"type": "result", "subtype": "error_new_kind", "is_error": True}))
    assert (
        ClaudeCode(argv=["claude"], stream=stream)
        .outcome(1, "")
        .error.startswith("Claude Code failed (error_new_kind)")
    )


def test_a_conversation_missing_on_this_host_asks_for_a_fresh_start_only_when_resuming():
    resumed = outcome_of("resume_not_found.ndjson", 1, resuming=True)
    assert resumed.retry_fresh and resumed.status == "failed"
    assert "No conversation found with session ID" in resumed.error
    assert not outcome_of("resume_not_found.ndjson", 1).retry_fresh


def test_no_result_at_all_says_how_the_cli_ended():
    provider = ClaudeCode(argv=["claude"])
    outcome = provider.outcome(1, "--dangerously-skip-permissions cannot be used with root/sudo privileges")
    assert outcome.status == "failed"
    assert outcome.error == (
        "Claude Code exited with status 1 without a result: "
        "--dangerously-skip-permissions cannot be used with root/sudo privileges"
    )
