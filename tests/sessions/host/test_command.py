"""The command provider: the prompt on stdin, stdout as the reply, a failure with stderr's tail."""

from sessions.host.providers import REPLY_LIMIT
from tests.sessions.host import Roots, a_turn, command, run_turn, shell


def test_prompt_on_stdin_and_stdout_as_the_reply(tmp_path):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(1, roots.bwrap())
    finished = run_turn(runner, a_turn(command("tr", "a-z", "A-Z"), number=17, prompt="first message\nsecond"))
    assert finished == {
        "type": "turn.finished",
        "turn": 17,
        "status": "done",
        "reply": "FIRST MESSAGE\nSECOND",
        "error": "",
        "agent_session_id": "",
    }
    (started,) = emitted
    assert started == {
        "type": "turn.started",
        "turn": 17,
        "session": 1,
        "pid": started["pid"],
        "directory": str(runner.directory.resolve()),
        "temp_directory": str(runner.temp_directory.resolve()),
    }
    assert isinstance(started["pid"], int) and started["pid"] > 1


def test_a_nonzero_exit_fails_with_the_tail_of_stderr(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap())
    script = 'echo half done; head -c 5000 /dev/zero | tr "\\0" x >&2; echo "boom: no such branch" >&2; exit 3'
    finished = run_turn(runner, a_turn(shell(script)))
    assert finished["status"] == "failed"
    assert finished["error"].startswith("The agent's command exited with status 3: x")
    assert finished["error"].endswith("boom: no such branch")
    assert len(finished["error"]) < 2100  # the tail, not the whole of stderr


def test_a_long_output_is_read_to_the_end_and_the_reply_bounded(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap())
    finished = run_turn(runner, a_turn(shell('head -c 1000000 /dev/zero | tr "\\0" a; echo done >&2')))
    assert finished["status"] == "done"
    assert finished["reply"] == "a" * REPLY_LIMIT


def test_a_command_is_a_list_of_arguments_never_a_shell_line(tmp_path):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(1, roots.bwrap())
    finished = run_turn(runner, a_turn({"kind": "command", "command": "echo hi; rm -rf /"}))
    assert finished["status"] == "failed"
    assert "must be a non-empty list of strings" in finished["error"]
    assert emitted == []


def test_a_missing_executable_fails_plainly(tmp_path):
    roots = Roots(tmp_path)
    for sandbox in (roots.bwrap(), roots.none()):
        runner, _ = roots.runner(1, sandbox)
        finished = run_turn(runner, a_turn(command("no-such-agent-binary")))
        assert finished["status"] == "failed"
        assert "no-such-agent-binary" in finished["error"], finished
