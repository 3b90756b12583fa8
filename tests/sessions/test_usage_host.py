"""The host's side of usage: Claude Code gets the turn's budget as --max-budget-usd (the real CLI
accepts it), its result line's usage goes back in turn.finished, and a script agent reports what
it spent so far mid-turn and in its result."""

import pytest

from sessions.host.providers import NOT_LOGGED_IN, claude_binary
from tests.sessions.host import Roots, a_turn, events_of, run_turn
from tests.sessions.host.test_claude_code import argv_for, option


def test_the_turns_budget_becomes_max_budget_usd(tmp_path):
    assert option(argv_for(tmp_path, max_budget_usd="0.5"), "--max-budget-usd") == "0.500000"
    for hostile in ("", None, "abc", "-1", "0", "1e300", "nan"):
        assert "--max-budget-usd" not in argv_for(tmp_path, max_budget_usd=hostile)
    assert argv_for(tmp_path, max_budget_usd="2")[-2:] == ["--", "fix the build"]  # still before the prompt


@pytest.fixture
def scratch_home(tmp_path):
    assert claude_binary(), "scripts/test installs Claude Code's CLI into var/node"
    home = tmp_path / "home"
    home.mkdir()
    return home


def test_the_real_cli_takes_the_budget_and_its_result_reports_usage(tmp_path, scratch_home):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(4, roots.bwrap(), claude_home=scratch_home)
    finished = run_turn(runner, a_turn({"kind": "claude-code", "max_budget_usd": "0.25"}, session=4))
    # Not logged in here: it still starts (the flag is known) and ends with a result line.
    assert finished["error"] == NOT_LOGGED_IN
    usage = finished["usage"]
    assert usage["cost_usd"] == 0 and usage["input_tokens"] == 0 and usage["output_tokens"] == 0


def test_a_script_agent_reports_its_spend_so_far_and_in_its_result(tmp_path):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(7, roots.none())
    script = '[{"usage": {"cost_usd": 0.5}}, {"usage": {"cost_usd": 0.75, "output_tokens": 30}}, {"reply": "ok"}]'
    finished = run_turn(runner, a_turn({"kind": "script", "script": script}, session=7))
    assert finished["status"] == "done" and finished["reply"] == "ok"
    assert finished["usage"] == {"cost_usd": 0.75, "output_tokens": 30}
    reported = [event["usage"] for event in events_of(emitted) if event["kind"] == "usage"]
    assert reported == [{"cost_usd": 0.5}, {"cost_usd": 0.75, "output_tokens": 30}]


def test_a_command_agent_reports_nothing(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(8, roots.none())
    finished = run_turn(runner, a_turn({"kind": "command", "command": ["/bin/echo", "hi"]}, session=8))
    assert finished["status"] == "done" and "usage" not in finished
