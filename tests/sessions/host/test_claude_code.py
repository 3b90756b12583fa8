"""The claude-code provider: its command line from a turn, and the real CLI, not logged in, run
by a session runner inside the sandbox."""

import json
import os

import pytest

from sessions.host import providers
from sessions.host.providers import NOT_LOGGED_IN, claude_binary, provider_for
from tests.sessions.host import Roots, a_turn, events_of, run_turn, shell

MCP = {"calvin": "http://gw/mcp", "nanoclaw": "http://gw/mcp/nanoclaw"}


def argv_for(tmp_path, sandboxed=False, mcp_servers=MCP, prompt="fix the build", **spec):
    provider = provider_for(
        {"kind": "claude-code", **spec},
        prompt=prompt,
        directory=tmp_path / "session-5",
        temp_directory=tmp_path / "tmp",
        mcp_servers=mcp_servers,
        claude_home=tmp_path,
        sandboxed=sandboxed,
    )
    return provider.argv


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_the_command_line_from_a_turn(tmp_path):
    argv = argv_for(tmp_path, model="smart", permission_mode="plan", resume="5f0c2a9e-1b7d")
    assert argv[0] == str(claude_binary()) and "-p" in argv and "--verbose" in argv
    assert option(argv, "--output-format") == "stream-json"
    assert option(argv, "--mcp-config") == str(tmp_path / "session-5" / ".mcp.json")
    assert option(argv, "--permission-mode") == "plan"
    assert option(argv, "--permission-prompt-tool") == "mcp__calvin__approval_prompt"
    assert option(argv, "--resume") == "5f0c2a9e-1b7d"
    assert option(argv, "--model") == "opus"
    assert argv[-2:] == ["--", "fix the build"]


def test_defaults_leave_options_out(tmp_path):
    argv = argv_for(tmp_path, model="default", resume="", mcp_servers={"nanoclaw": MCP["nanoclaw"]})
    assert option(argv, "--permission-mode") == "default"
    for absent in ("--resume", "--model", "--permission-prompt-tool"):  # no calvin server, no approval tool
        assert absent not in argv
    assert option(argv_for(tmp_path, model="fast"), "--model") == "haiku"
    assert option(argv_for(tmp_path, model="claude-sonnet-4-5"), "--model") == "claude-sonnet-4-5"


def test_a_prompt_that_looks_like_an_option_stays_the_prompt(tmp_path):
    assert argv_for(tmp_path, prompt="--help")[-2:] == ["--", "--help"]


def test_a_host_without_the_cli_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(providers, "claude_binary", lambda: None)
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(1, roots.bwrap(), claude_home=tmp_path / "home")
    finished = run_turn(runner, a_turn({"kind": "claude-code"}))
    assert finished["status"] == "failed"
    assert finished["error"].startswith("Claude Code is not installed on this host")
    assert emitted == []


@pytest.fixture
def scratch_home(tmp_path):
    assert claude_binary(), "scripts/test installs Claude Code's CLI into var/node"
    home = tmp_path / "home"
    home.mkdir()
    return home


def test_the_real_cli_not_logged_in_fails_with_a_plain_error(tmp_path, scratch_home):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(4, roots.bwrap(), claude_home=scratch_home)
    finished = run_turn(runner, a_turn({"kind": "claude-code", "permission_mode": "acceptEdits"}, session=4))
    assert finished["status"] == "failed"
    assert (
        finished["error"]
        == NOT_LOGGED_IN
        == ("Claude Code on this host is not logged in: run `claude` once on the host and log in")
    )
    assert emitted[0]["type"] == "turn.started"
    assert {"kind": "error", "text": "authentication_failed: Not logged in · Please run /login"} in events_of(emitted)
    # The agent runs as its own user: the CLI kept its transcript in the session's private
    # home (shown read-write), not in the operator's, which it cannot read.
    session_id = finished["agent_session_id"]
    assert list((runner.home_directory / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
    assert not (scratch_home / ".claude" / "projects").exists()
    # It read the session's .mcp.json: the token it was given is in there.
    config = json.loads((runner.directory / ".mcp.json").read_text())
    assert config["mcpServers"]["calvin"]["headers"] == {"Authorization": "Bearer cvn_test-token"}

    # Resumed on the same host, the conversation is found: no fresh start.
    resumed = a_turn({"kind": "claude-code", "resume": session_id}, number=2, session=4, runner={"generation": 1})
    emitted.clear()
    finished = run_turn(runner, resumed)
    assert finished["error"] == NOT_LOGGED_IN
    assert [m["type"] for m in emitted].count("turn.started") == 1


def test_an_unprivileged_agent_gets_a_copy_of_the_operators_login_in_a_home_of_its_session(tmp_path, scratch_home):
    (scratch_home / ".claude").mkdir(mode=0o700)
    (scratch_home / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": "operator-login"}')
    (scratch_home / ".claude.json").write_text('{"userID": "operator"}')
    for path in (scratch_home / ".claude" / ".credentials.json", scratch_home / ".claude.json"):
        path.chmod(0o600)
    roots = Roots(tmp_path)
    sandbox = roots.bwrap()
    runner, _ = roots.runner(9, sandbox, claude_home=scratch_home)
    # The CLI may read it (the login is not valid, so it still says it is not logged in).
    run_turn(runner, a_turn({"kind": "claude-code"}, session=9))
    copy = runner.home_directory / ".claude" / ".credentials.json"
    assert copy.read_text() == '{"claudeAiOauth": "operator-login"}'
    info = copy.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (sandbox.agent_uid, sandbox.agent_gid, 0o600)
    assert (runner.home_directory / ".claude.json").exists()
    # Another session's home is its own, and hidden from this one (the homes root is hidden).
    other, _ = roots.runner(10, sandbox, claude_home=scratch_home)
    assert other.home_directory != runner.home_directory
    peek = run_turn(other, a_turn(shell(f"ls {runner.home_directory} 2>&1; ls {roots.homes}"), session=10))
    assert "No such file or directory" in peek["reply"] and ".claude" not in peek["reply"]


def test_a_conversation_from_another_host_starts_fresh_and_says_so(tmp_path, scratch_home):
    roots = Roots(tmp_path)
    runner, emitted = roots.runner(6, roots.bwrap(), claude_home=scratch_home)
    turn = a_turn({"kind": "claude-code", "resume": "0b8a8d7e-5a0b-4a34-9f6c-1e2f3a4b5c6d"}, session=6)
    finished = run_turn(runner, turn)
    assert finished["error"] == NOT_LOGGED_IN  # the fresh start ran, and met the missing login
    assert finished["agent_session_id"] not in ("", "0b8a8d7e-5a0b-4a34-9f6c-1e2f3a4b5c6d")
    note = "The earlier Claude Code conversation is not on this host; starting a new one."
    assert {"kind": "error", "text": note} in events_of(emitted)
    assert [m["type"] for m in emitted].count("turn.started") == 2


def test_bypass_permissions_runs_as_root_only_inside_bwrap(tmp_path, scratch_home):
    """The CLI refuses bypassPermissions as root unless it runs in a sandbox; bwrap is one."""
    roots = Roots(tmp_path)
    turn = a_turn({"kind": "claude-code", "permission_mode": "bypassPermissions"}, session=7)
    sandboxed, _ = roots.runner(7, roots.bwrap(), claude_home=scratch_home)
    assert run_turn(sandboxed, turn)["error"] == NOT_LOGGED_IN
    if os.geteuid() == 0:
        bare, _ = roots.runner(7, roots.none(), claude_home=scratch_home)
        finished = run_turn(bare, turn)
        assert finished["status"] == "failed"
        assert "cannot be used with root/sudo privileges" in finished["error"], finished


def test_the_cli_waits_for_tool_calls_as_long_as_the_gateway_waits_for_a_person(tmp_path):
    provider = provider_for(
        {"kind": "claude-code", "tool_timeout_seconds": 660},
        prompt="p",
        directory=tmp_path / "session-5",
        temp_directory=tmp_path / "tmp",
        mcp_servers=MCP,
        claude_home=tmp_path,
        sandboxed=False,
    )
    assert provider.env["MCP_TOOL_TIMEOUT"] == "660000"
