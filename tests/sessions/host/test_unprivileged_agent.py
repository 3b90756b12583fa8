"""Inside bwrap the agent is an unprivileged user (the tests run as root, as a host daemon may),
its /tmp is its session's temp directory, and /proc shows only its own processes."""

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sessions.host import sandbox as sandbox_module
from sessions.host.sandbox import SANDBOX_UID, Sandbox, private_directory
from tests.sessions.host import Roots, a_turn, run_turn, shell


def test_the_agent_is_not_root_and_cannot_read_root_only_files(tmp_path):
    assert os.geteuid() == 0, "these tests check what a daemon running as root gives its agents"
    runner, _ = Roots(tmp_path).runner(1, Roots(tmp_path).bwrap())
    finished = run_turn(runner, a_turn(shell("id -u; id -g; id -G; cat /etc/shadow 2>&1; echo x > own && echo wrote")))
    uid, gid, groups, shadow, wrote = finished["reply"].splitlines()
    assert (uid, gid, groups) == ("65534", "65534", "65534")  # nobody, without root's groups
    assert "Permission denied" in shadow and wrote == "wrote"
    # What it wrote in its session directory is its own user's on the host.
    assert (runner.directory / "own").stat().st_uid == 65534
    assert runner.directory.stat().st_uid == runner.secrets_directory.stat().st_uid == 65534


def test_the_agents_secret_files_and_mcp_config_are_readable_by_it_and_by_nobody_else(tmp_path):
    runner, _ = Roots(tmp_path).runner(1, Roots(tmp_path).bwrap())
    secrets = [{"name": "DEPLOY_KEY", "value": "key-material", "file": True}]
    finished = run_turn(
        runner, a_turn(shell('cat "$DEPLOY_KEY"; echo; grep -c cvn_test-token .mcp.json'), secrets=secrets)
    )
    assert finished["reply"].splitlines() == ["key-material", "1"], finished
    for path in (runner.secrets_directory / "DEPLOY_KEY", runner.directory / ".mcp.json"):
        info = path.stat()
        assert (info.st_uid, info.st_mode & 0o777) == (65534, 0o600), path


def test_tmp_is_the_sessions_own_temp_directory(tmp_path):
    roots = Roots(tmp_path)
    sandbox = roots.bwrap()
    other, _ = roots.runner(2, sandbox)
    run_turn(other, a_turn(shell("echo other-scratch > /tmp/scratch.txt"), session=2))
    assert (other.temp_directory / "scratch.txt").read_text() == "other-scratch\n"

    name = f"calvin-made-inside-{uuid.uuid4().hex}"
    runner, _ = roots.runner(1, sandbox)
    script = (
        f"echo inside > /tmp/{name}; echo $TMPDIR; cat /tmp/scratch.txt {other.temp_directory}/scratch.txt 2>&1;"
        f" ls {roots.temp}"
    )
    reply = run_turn(runner, a_turn(shell(script)))["reply"]
    assert (runner.temp_directory / name).read_text() == "inside\n"
    assert not (Path("/tmp") / name).exists()  # the host's /tmp got nothing
    lines = reply.splitlines()
    assert lines[0] == "/tmp" and lines[-1] == "session-1", reply  # no other session's temp directory
    assert "other-scratch" not in reply, reply


def test_proc_shows_only_the_agents_own_processes(tmp_path):
    host_process = subprocess.Popen(["sleep", "60"])
    try:
        runner, _ = Roots(tmp_path).runner(1, Roots(tmp_path).bwrap())
        finished = run_turn(runner, a_turn(shell("sleep 30 & ls /proc | grep -E '^[0-9]+$'; kill %1")))
    finally:
        host_process.kill()
        host_process.wait()
    pids = {int(pid) for pid in finished["reply"].split()}
    assert host_process.pid not in pids and os.getpid() not in pids
    # bwrap's init, the shell, its sleep, ls and grep: a handful, numbered from 1.
    assert 1 in pids and len(pids) <= 6, pids


@pytest.fixture
def daemon_state():
    """A state directory an unprivileged daemon can reach (pytest's own are root's, 0700)."""
    state = Path(tempfile.mkdtemp(prefix="calvin-unprivileged-host-", dir="/tmp"))
    state.chmod(0o755)
    yield state
    shutil.rmtree(state)


def test_an_unprivileged_daemons_agent_is_a_non_zero_uid_in_a_user_namespace(daemon_state, monkeypatch):
    """A daemon that is not root: no drop, bwrap maps its uid to SANDBOX_UID."""
    monkeypatch.setattr(sandbox_module, "ALWAYS_SHOWN", ())  # this Python lives in root's home
    daemon_uid = 65534
    directory, temp, secrets = (daemon_state / name for name in ("session", "tmp", "secrets"))
    for path in (directory, temp, secrets):
        path.mkdir()
        os.chown(path, daemon_uid, daemon_uid)
    probed = Sandbox.probe([])
    sandbox = Sandbox(kind="bwrap", bwrap=probed.bwrap, hide=(daemon_state,))
    argv = sandbox.wrap(
        ["sh", "-c", "id -u; id -g; cat /etc/shadow 2>&1; echo t > /tmp/t && echo wrote"],
        directory=directory,
        temp_directory=temp,
        secrets_directory=secrets,
    )
    assert "--unshare-user" in argv and "setpriv" not in " ".join(argv)
    as_daemon = ["setpriv", f"--reuid={daemon_uid}", f"--regid={daemon_uid}", "--clear-groups", "--"]
    done = subprocess.run([*as_daemon, *argv], capture_output=True, text=True, timeout=30, cwd="/")
    assert done.returncode == 0, done.stderr
    uid, gid, shadow, wrote = done.stdout.splitlines()
    assert (uid, gid) == (str(SANDBOX_UID), str(SANDBOX_UID)) != ("0", "0")
    assert "Permission denied" in shadow and wrote == "wrote"
    assert (temp / "t").stat().st_uid == daemon_uid


@pytest.mark.parametrize(
    ("agent_user", "said"),
    [("0:0", "never run as root"), ("1000:0", "never run as root"), ("nobody", "UID:GID in numbers")],
)
def test_the_host_refuses_an_agent_user_that_is_root_or_not_numbers(agent_user, said, settings):
    settings.CALVIN_HOST_TOKEN = "cvh_not-used"
    with pytest.raises(CommandError, match=said):
        call_command("host", "--agent-user", agent_user)


def test_probe_refuses_root_as_the_agents_user(tmp_path):
    with pytest.raises(ValueError, match="must not be 0"):
        Sandbox.probe([tmp_path], agent_uid=0)


def test_the_hosts_logs_homes_and_runtime_directory_are_empty_inside(tmp_path):
    assert any(Path("/var/log").iterdir()), "this machine has logs to hide"
    runner, _ = Roots(tmp_path).runner(1, Roots(tmp_path).bwrap())
    places = "/var/log /home /run /var/mail /var/spool /var/tmp"
    finished = run_turn(
        runner, a_turn(shell(f"for d in {places}; do ls -A $d 2>/dev/null; done; echo ==; ls -A /root"))
    )
    shown, root = finished["reply"].split("==")
    assert shown.split() in ([], ["calvin"]), finished  # /run/calvin: the egress proxy's socket
    # Root's home holds only the way to what the sandbox shows again (this Python lives there).
    ways = {p.relative_to("/root").parts[0] for p in sandbox_module.ALWAYS_SHOWN if p.is_relative_to("/root")}
    assert set(root.split()) <= ways, finished


def test_a_directory_shown_deep_inside_a_hidden_place_is_reachable_by_the_agents_user(tmp_path):
    """bwrap makes a mount's missing parents 0700 (root's): the way to the agent's own
    directory, several levels into a hidden place, must let nobody through."""
    roots = Roots(tmp_path)
    agents = tmp_path / "agents"
    own = private_directory(agents / "agent-1" / "workspace")
    runner, _ = roots.runner(1, Sandbox.probe([*roots.hidden(), agents]))
    script = 'echo kept > "$CALVIN_AGENT_DIR/note" && cat "$CALVIN_AGENT_DIR/note"; ls -A ' + str(agents)
    finished = run_turn(runner, a_turn(shell(script)), agent_directory=own)
    assert finished["reply"].split() == ["kept", "agent-1"], finished
    assert (own / "note").stat().st_uid == 65534
