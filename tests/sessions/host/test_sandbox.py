"""bwrap: an agent reads and writes its own session, and cannot see another's or the host's state."""

import sys
import uuid
from pathlib import Path

from sessions.host import sandbox as sandbox_module
from sessions.host.sandbox import Sandbox
from tests.sessions.host import Roots, a_turn, run_turn, shell


def test_bwrap_works_on_this_host(tmp_path):
    sandbox = Sandbox.probe([tmp_path])
    assert (sandbox.kind, sandbox.why) == ("bwrap", ""), "scripts/test installs bubblewrap: it must work here"


def prying(roots: Roots, other: Path, other_secret: Path, host_state: Path) -> str:
    """Commands that look at another session and at the host's state; `;` so each one runs."""
    return (
        f"cat {other}/notes.txt ../session-1/notes.txt {roots.temp}/session-1/scratch.txt {other_secret}"
        f" {host_state}/host-token; echo '== sessions'; ls -a {roots.sessions}; echo '== others';"
        f" ls {roots.temp} {roots.secrets}; echo '== own'; echo mine > own.txt && cat own.txt; echo $TMPDIR;"
        f" echo t > $TMPDIR/t && cat $TMPDIR/t; echo x > {roots.sessions.parent}/outside.txt"
    )


def section(reply: str, name: str) -> list[str]:
    return reply.split(f"== {name}\n", 1)[1].split("==", 1)[0].split()


def test_an_agent_cannot_read_another_sessions_directory(tmp_path):
    roots = Roots(tmp_path)
    host_state = tmp_path / "host-state"
    host_state.mkdir()
    (host_state / "host-token").write_text("cvn_host-secret")
    sandbox = Sandbox.probe([*roots.hidden(), host_state])
    assert sandbox.kind == "bwrap", sandbox.why

    first, _ = roots.runner(1, sandbox)
    secrets = [{"name": "FIRST_KEY", "value": "first-session-key", "file": True}]
    finished = run_turn(first, a_turn(shell("echo first-notes > notes.txt; cat notes.txt"), secrets=secrets))
    assert (finished["status"], finished["reply"]) == ("done", "first-notes")  # its own: read and write
    (first.temp_directory / "scratch.txt").write_text("first-scratch")
    other_secret = first.secrets_directory / "FIRST_KEY"
    assert other_secret.read_text() == "first-session-key"

    second, _ = roots.runner(2, sandbox)
    finished = run_turn(second, a_turn(shell(prying(roots, first.directory, other_secret, host_state)), session=2))
    reply = finished["reply"]
    for leaked in ("first-notes", "first-scratch", "first-session-key", "cvn_host-secret", "session-1"):
        assert leaked not in reply, reply
    assert section(reply, "sessions") == [".", "..", "session-2"]
    assert section(reply, "own") == ["mine", "/tmp", "t"]  # its temp directory is its /tmp
    assert (second.directory / "own.txt").read_text() == "mine\n"
    assert not (tmp_path / "outside.txt").exists()  # the rest of the system is read-only

    # The same agent without the sandbox sees it all: the test above is about bwrap, not luck.
    unconfined, _ = roots.runner(2, roots.none())
    bare = run_turn(unconfined, a_turn(shell(prying(roots, first.directory, other_secret, host_state)), session=2))
    for leaked in ("first-notes", "first-scratch", "first-session-key", "cvn_host-secret", "session-1"):
        assert leaked in bare["reply"]


def test_the_agent_has_a_private_tmp(tmp_path):
    roots = Roots(tmp_path)
    hosts_file = Path("/tmp") / f"calvin-host-file-{uuid.uuid4().hex}"
    hosts_file.write_text("the host's own")
    try:
        runner, _ = roots.runner(1, roots.bwrap())
        script = f"cat {hosts_file}; ls -A /tmp /var/tmp; echo agent > /tmp/agent-file && cat /tmp/agent-file"
        finished = run_turn(runner, a_turn(shell(script)))
    finally:
        hosts_file.unlink()
    words = finished["reply"].split()
    assert words[0] == "/tmp:" and words[-2:] == ["/var/tmp:", "agent"], finished
    # Empty but for the way to what the sandbox shows again (a clone of Calvin living in /tmp, say).
    shown_again = {Path(p).resolve() for p in (sandbox_module.REPO, sys.executable, sys.prefix)}
    ways = {p.relative_to("/tmp").parts[0] for p in shown_again if p.is_relative_to("/tmp")}
    assert set(words[1:-2]) <= ways, finished
    assert not Path("/tmp/agent-file").exists()


def test_the_host_users_home_and_the_gateways_settings_file_are_hidden(tmp_path, monkeypatch):
    home, code = tmp_path / "host-home", tmp_path / "code"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("host-private-key")
    code.mkdir()
    (code / ".env").write_text("SP_STORE_KEY=vault-key")
    (code / "README").write_text("readable code")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sandbox_module, "REPO", code)
    monkeypatch.setattr(sandbox_module, "ALWAYS_SHOWN", (code, *sandbox_module.ALWAYS_SHOWN[1:]))
    roots = Roots(tmp_path)
    runner, _ = roots.runner(1, roots.bwrap())
    script = f"cat {home}/.ssh/id_ed25519 {code}/.env {code}/README; python3 -c 'print(2 + 2)'"
    finished = run_turn(runner, a_turn(shell(script)))
    assert finished["reply"] == "readable code4", finished  # the code and its Python stay visible


def test_wrap_without_bwrap_leaves_the_command_as_it_is(tmp_path):
    sandbox = Sandbox.none("no bwrap here")
    argv = ["sh", "-c", "true"]
    wrapped = sandbox.wrap(argv, directory=tmp_path, temp_directory=tmp_path, secrets_directory=tmp_path)
    assert wrapped == argv and sandbox.why == "no bwrap here"
