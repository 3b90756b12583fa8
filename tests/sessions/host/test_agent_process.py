"""What the agent's process gets: a clean environment with its secrets, its own temp directory,
PATH, limits and process group, and a prepared session directory."""

import json
import os
import stat
from pathlib import Path

import pytest

from sessions.host.egress import proxy_environment
from sessions.host.providers import REPO
from tests.sessions.host import Roots, a_turn, run_turn, shell

KINDS = ["bwrap", "none"]
SECRETS = [
    {"name": "API_KEY", "value": "sk-live-0123456789", "file": False},
    {"name": "DEPLOY_KEY", "value": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", "file": True},
]


def environment_of(reply: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in reply.split("\0") if "=" in line)
    return dict(pairs)


@pytest.mark.parametrize("kind", KINDS)
def test_the_agent_sees_its_secrets_and_nothing_of_the_hosts_environment(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("CALVIN_HOST_TOKEN", "cvn_host-token-that-must-not-leak")
    monkeypatch.setenv("DATABASE_URL", "postgres://gateway-only")
    roots = Roots(tmp_path)
    runner, _ = roots.runner(3, roots.sandbox(kind))
    finished = run_turn(runner, a_turn(shell("cat /proc/self/environ"), session=3, secrets=SECRETS))
    assert finished["status"] == "done", finished
    environment = environment_of(finished["reply"])
    # In bwrap the way out is the egress proxy (tests/sessions/host/test_egress_sandbox.py).
    proxy = set(proxy_environment()) if kind == "bwrap" else set()
    assert set(environment) - {"PWD", "OLDPWD", "SHLVL", "_"} == {
        "PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM", "API_KEY", "DEPLOY_KEY", *proxy,
        "CALVIN_MCP_URL", "CALVIN_TOKEN",
    }  # fmt: skip
    # calvin-send-file reads these, so it works from any directory (no .mcp.json above /tmp).
    assert (environment["CALVIN_MCP_URL"], environment["CALVIN_TOKEN"]) == ("http://127.0.0.1:9/mcp", "cvn_test-token")
    assert "cvn_host-token" not in finished["reply"] and "gateway-only" not in finished["reply"]
    # Under bwrap the session's temp directory is the agent's /tmp.
    assert environment["TMPDIR"] == ("/tmp" if kind == "bwrap" else str(runner.temp_directory))
    assert environment["HOME"] == str(runner.directory)  # command and script: the session directory
    assert (environment["LANG"], environment["LC_ALL"], environment["TERM"]) == ("C.UTF-8", "C.UTF-8", "dumb")
    assert environment["API_KEY"] == "sk-live-0123456789"

    key = Path(environment["DEPLOY_KEY"])
    assert key.read_text() == "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert runner.directory.resolve() not in key.resolve().parents
    assert key.parent == tmp_path / "secret-files" / "session-3"
    assert stat.S_IMODE(runner.temp_directory.stat().st_mode) == 0o700


def test_a_secret_gone_from_scope_leaves_no_file(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(3, roots.bwrap())
    run_turn(runner, a_turn(shell("true"), session=3, secrets=SECRETS))
    key = tmp_path / "secret-files" / "session-3" / "DEPLOY_KEY"
    assert key.exists()
    finished = run_turn(runner, a_turn(shell("echo ${DEPLOY_KEY:-none}"), number=2, session=3, secrets=SECRETS[:1]))
    assert finished["reply"] == "none"
    assert not key.exists() and list(key.parent.iterdir()) == []


def test_a_secret_file_is_never_written_through_a_planted_link(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(3, roots.none())
    target = tmp_path / "victim.txt"
    target.write_text("untouched")
    directory = tmp_path / "secret-files" / "session-3"
    directory.mkdir(parents=True)
    for name in ("DEPLOY_KEY", ".DEPLOY_KEY.partial"):
        (directory / name).symlink_to(target)
    finished = run_turn(runner, a_turn(shell("cat $DEPLOY_KEY"), session=3, secrets=SECRETS[1:]))
    assert finished["reply"] == SECRETS[1]["value"].strip()
    assert target.read_text() == "untouched"
    assert not (directory / "DEPLOY_KEY").is_symlink()


def test_the_session_directory_is_prepared_and_the_token_kept_for_later_turns(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(5, roots.bwrap())
    servers = {"calvin": "http://gw:8000/mcp", "nanoclaw": "http://gw:8000/mcp/nanoclaw"}
    turn = a_turn(
        shell("cat CLAUDE.md"), session=5, mcp_servers=servers, instructions="# Standing instructions\n\nBe brief.\n"
    )
    turn["runner"] = {"generation": 2, "token": "cvn_generation-two"}
    finished = run_turn(runner, turn)
    assert finished["reply"] == "# Standing instructions\n\nBe brief."
    assert runner.generation == 2
    config = runner.directory / ".mcp.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    bearer = {"Authorization": "Bearer cvn_generation-two"}
    assert json.loads(config.read_text()) == {
        "mcpServers": {
            "calvin": {"type": "http", "url": "http://gw:8000/mcp", "headers": bearer},
            "nanoclaw": {"type": "http", "url": "http://gw:8000/mcp/nanoclaw", "headers": bearer},
        }
    }

    later = a_turn(shell("true"), number=2, session=5, mcp_servers={"calvin": "http://gw:8000/mcp"})
    later["runner"] = {"generation": 2}  # the token comes only when a generation starts
    assert run_turn(runner, later)["status"] == "done"
    assert json.loads(config.read_text())["mcpServers"] == {
        "calvin": {"type": "http", "url": "http://gw:8000/mcp", "headers": bearer}
    }

    unknown = a_turn(shell("true"), number=3, session=5, runner={"generation": 3})
    finished = run_turn(runner, unknown)
    assert finished["status"] == "failed"
    assert finished["error"] == "This host holds no token for runner generation 3 of this session"


@pytest.mark.parametrize("kind", KINDS)
def test_path_limits_and_process_group(tmp_path, kind):
    roots = Roots(tmp_path)
    # An agent's package prefix, as environment builds make it, under a place the sandbox hides.
    prefix = tmp_path / "agents" / "agent-1" / "env"
    (prefix / "v7" / "bin").mkdir(parents=True)
    (prefix / "v7" / "share").mkdir()
    (prefix / "v7" / "share" / "greeting").write_text("from the agent prefix")
    (prefix / "v7" / "bin" / "agent-tool").write_text('#!/bin/sh\ncat "$(dirname "$0")/../share/greeting"\n')
    (prefix / "v7" / "bin" / "agent-tool").chmod(0o755)
    (prefix / "current").symlink_to("v7")
    sandbox = roots.sandbox(kind)
    if kind == "bwrap":
        sandbox = type(sandbox).probe([*roots.hidden(), tmp_path / "agents"])
    runner, emitted = roots.runner(8, sandbox)
    script = "agent-tool; echo; command -v calvin-send-file; cat /proc/self/limits; echo; cat /proc/$$/stat"
    bin_dir = str(prefix / "current" / "bin")
    finished = run_turn(runner, a_turn(shell(script), session=8), extra_path=[bin_dir], reveal=[prefix])
    assert finished["status"] == "done", finished
    lines = finished["reply"].splitlines()
    assert lines[0] == "from the agent prefix"
    assert lines[1] == str(REPO / "bin" / "calvin-send-file")
    limits = {line[:26].strip(): line[26:].split()[:2] for line in lines if line.startswith("Max ")}
    assert limits["Max core file size"] == ["0", "0"]
    assert limits["Max open files"] == ["4096", "4096"]
    assert limits["Max file size"] == [str(8 * 1024**3)] * 2
    if kind == "none":  # under bwrap the agent's pids are its namespace's own
        fields = lines[-1][lines[-1].rfind(")") + 2 :].split()
        pid = emitted[0]["pid"]
        assert (int(fields[2]), int(fields[3])) == (pid, pid), "the agent leads its own process group and session"
        assert os.getpgid(0) != pid
    else:  # extra_path alone is shown too, at the name PATH gives it
        finished = run_turn(runner, a_turn(shell("agent-tool"), number=2, session=8), extra_path=[bin_dir])
        assert "No such file" in finished["error"], finished  # the tool runs; the prefix's share/ is hidden


def test_a_turn_that_runs_with_new_packages_or_servers_tells_the_agent_first(tmp_path):
    # Approved in another session: this session's next turn has them, and the agent is told.
    roots = Roots(tmp_path)
    runner, _ = roots.runner(9, roots.none())
    first = {"agent_mcp_servers": {"search": {"command": "search-mcp"}}, "environment": None}
    seen = run_turn(runner, a_turn(shell("cat"), session=9, prompt="one", **first))
    assert seen["reply"] == "one"  # the runner's first turn: nothing to compare with
    equipped = {
        "agent_mcp_servers": {"search": {"command": "search-mcp"}, "github": {"command": "gh-mcp"}},
        "environment": {"agent": 1, "version": 2, "apt": ["jq"], "npm": ["prettier"]},
    }
    told = run_turn(runner, a_turn(shell("cat"), number=2, session=9, prompt="two", **equipped))["reply"]
    assert told.splitlines()[:2] == [
        "[system] Your environment was rebuilt (version 2) since your last turn: apt: jq; npm: prettier installed,"
        " usable from this turn on.",
        "[system] MCP server github was added since your last turn: its tools are yours from this turn on.",
    ]
    assert told.endswith("\n\ntwo")
    same = run_turn(runner, a_turn(shell("cat"), number=3, session=9, prompt="three", **equipped))
    assert same["reply"] == "three"  # nothing changed: nothing said
    fewer = {**equipped, "agent_mcp_servers": {"github": {"command": "gh-mcp"}}}
    removed = run_turn(runner, a_turn(shell("cat"), number=4, session=9, prompt="four", **fewer))["reply"]
    assert removed.startswith("[system] MCP server search was removed since your last turn.\n")


def test_packages_whose_build_failed_are_not_announced_until_a_turn_has_them(tmp_path):
    roots = Roots(tmp_path)
    runner, _ = roots.runner(10, roots.none())
    run_turn(runner, a_turn(shell("cat"), session=10, prompt="one", environment=None))
    wanted = {"environment": {"agent": 1, "version": 2, "apt": [], "npm": ["prettier"]}}
    failed = run_turn(
        runner, a_turn(shell("cat"), number=2, session=10, prompt="two", environment_built=False, **wanted)
    )
    assert failed["reply"] == "two"  # the daemon told it the build failed; nothing claims it is in
    built = run_turn(runner, a_turn(shell("cat"), number=3, session=10, prompt="three", **wanted))["reply"]
    assert built.startswith("[system] Your environment was rebuilt (version 2) since your last turn: npm: prettier")
