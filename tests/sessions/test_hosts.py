"""Agents actually run: real host daemons over the real /ws/host/, the script provider
driving the real MCP endpoints, a real Celery worker applying the effects."""

import json
import os
import subprocess
import sys
import time

import pytest

from calvin.workspaces.models import Member
from sessions.hosts import host_revoke
from sessions.models import Host, Message, Runner, Session, Turn
from sessions.services import message_post_by_person, runner_start, session_start
from tests.conftest import Agent as TestAgent
from tests.conftest import free_port, text_of, wait_for
from tests.sessions.host_processes import (
    ROOT,
    agent_texts,
    commanded,
    host_start,
    scripted,
    system_texts,
    wait_connected,
)
from tests.support.celery_processes import subprocess_database_url
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

CARD = {
    "server": "calvin",
    "tool": "post_card",
    "arguments": {"spec": {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "from {prompt}"}}}}},
}


@pytest.fixture(autouse=True)
def quick_heartbeats(settings):
    settings.CALVIN_HOST_HEARTBEAT_SECONDS = 0.5
    settings.CALVIN_HOST_LAPSE_SECONDS = 3.0


def new_session(workspace, title="t"):
    owner = Member.objects.filter(workspace=workspace).first()
    return session_start(workspace=workspace, owner=owner, title=title)


def say(session: Session, text: str) -> Message:
    return message_post_by_person(thread=session.thread, member=session.owner, text=text)


def test_a_message_in_a_web_thread_makes_the_agent_work_and_reply(hosts, workspace, celery_worker):
    session = new_session(workspace)
    scripted(session.agent, [CARD, {"reply": "got: {prompt}"}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "hello")
    wait_for(lambda: agent_texts(session) == ["got: hello"], timeout=30)
    # The card went through the real /mcp with the runner's token, and the worker posted it.
    call = ToolCall.objects.get(session=session, tool="post_card")
    wait_for(lambda: Message.objects.filter(tool_call=call).exists(), timeout=20)
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.DONE and turn.host_id == host.host.id and turn.attempts == 1
    session.refresh_from_db()
    assert session.status == Session.Status.IDLE and session.host_id == host.host.id
    # The session directory is the host's, not the gateway's.
    assert session.directory == str(host.session_directory(session.id))
    assert (host.session_directory(session.id) / ".mcp.json").exists()


def test_twenty_turns_on_two_hosts_none_runs_twice(hosts, workspace):
    sessions = [new_session(workspace, f"s{i}") for i in range(20)]
    scripted(sessions[0].agent, [{"reply": "done {prompt}"}])
    first, second = hosts("a", capacity=3), hosts("b", capacity=3)
    for i, session in enumerate(sessions):
        say(session, f"#{i}")
    wait_connected(first, second)
    for i, session in enumerate(sessions):
        wait_for(lambda s=session, i=i: agent_texts(s) == [f"done #{i}"], timeout=90)
    turns = Turn.objects.filter(session__in=sessions)
    assert turns.count() == 20
    assert set(turns.values_list("status", flat=True)) == {Turn.Status.DONE}
    assert set(turns.values_list("attempts", flat=True)) == {1}
    # Both hosts worked, and no session had more than one runner.
    assert set(turns.values_list("host__name", flat=True)) == {"a", "b"}
    assert Runner.objects.filter(session__in=sessions).count() == 20


def test_a_host_killed_mid_turn_its_turn_completes_on_another_host_as_a_new_generation(hosts, workspace):
    session = new_session(workspace)
    scripted(session.agent, [{"sleep": 4}, {"reply": "finished {prompt}"}])
    doomed = hosts("doomed")
    wait_connected(doomed)
    say(session, "work")
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.RUNNING).exists(), timeout=20)
    first_runner = Runner.objects.get(session=session)
    doomed.kill()  # SIGKILL: no goodbye, only a heartbeat that stops
    survivor = hosts("survivor")
    wait_connected(survivor)
    wait_for(lambda: agent_texts(session) == ["finished work"], timeout=40)
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.DONE and turn.host.name == "survivor" and turn.attempts == 2
    runners = list(Runner.objects.filter(session=session).order_by("generation"))
    assert [r.generation for r in runners] == [1, 2]
    assert runners[0].id == first_runner.id and runners[0].revoked_at is not None
    assert runners[1].host.name == "survivor" and turn.runner_id == runners[1].id


def test_messages_sent_during_a_turn_reach_the_next_turn_in_order(hosts, workspace):
    session = new_session(workspace)
    scripted(session.agent, [{"sleep": 2}, {"reply": "got: {prompt}"}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "one")
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.RUNNING).exists(), timeout=20)
    for text in ("two", "three", "four"):
        say(session, text)
    wait_for(lambda: len(agent_texts(session)) == 2, timeout=40)
    assert agent_texts(session) == ["got: one", "got: two\n\nthree\n\nfour"]
    assert Turn.objects.filter(session=session, status=Turn.Status.DONE).count() == 4


def test_send_file_comes_from_the_host_whose_session_root_the_gateway_does_not_share(
    hosts, workspace, celery_worker, settings
):
    session = new_session(workspace)
    scripted(session.agent, [{"server": "calvin", "tool": "send_file", "arguments": {"path": "{prompt}"}}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "warm-up.txt")  # the first turn makes the session directory on the host
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.DONE).exists(), timeout=30)
    directory = host.session_directory(session.id)
    (directory / "report.txt").write_bytes(b"made on the host\n")
    assert directory != settings.CALVIN_SESSIONS_DIR / f"session-{session.id}"
    assert not (settings.CALVIN_SESSIONS_DIR / f"session-{session.id}" / "report.txt").exists()
    other = new_session(workspace, "other")
    other_directory = host.session_directory(other.id)
    other_directory.mkdir(parents=True)
    (other_directory / "private.txt").write_text("not yours")

    say(session, "report.txt")
    call = wait_for(lambda: ToolCall.objects.filter(session=session, tool="send_file").first(), timeout=30)
    message = wait_for(lambda: Message.objects.filter(tool_call=call).first(), timeout=20)
    assert message.file.read() == b"made on the host\n" and message.file_name == "report.txt"

    # Another session's file on the same host, by a relative and by an absolute path: the host refuses.
    say(session, f"../session-{other.id}/private.txt")
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.DONE).count() == 3, timeout=30)
    say(session, str(other_directory / "private.txt"))
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.DONE).count() == 4, timeout=30)
    assert ToolCall.objects.filter(session=session, tool="send_file").count() == 1


def test_a_host_token_revoked_in_the_admin_disconnects_the_host(hosts, admin_client):
    host = hosts("revoked")
    wait_connected(host)
    response = admin_client.post(
        "/admin/agent_sessions/host/",
        {"action": "revoke", "_selected_action": [host.host.id], "confirmed": "yes"},  # the confirmation's POST
    )
    assert response.status_code == 302
    assert host.process.wait(timeout=20) != 0
    assert "refused" in host.output()
    assert Host.objects.get(id=host.host.id).channel_name == ""
    assert host_revoke(host_id=host.host.id) is False  # once


def test_stop_ends_a_process_tree_that_forked_children(hosts, workspace, client):
    session = new_session(workspace)
    seconds = 100_000 + time.time_ns() % 100_000  # unique: its sleeps are found by their argument
    marker = f"sleep {seconds}"
    # A shell that forks a subshell ignoring SIGTERM (with a sleep of its own), and another sleep.
    commanded(session.agent, ["sh", "-c", f'(trap "" TERM; {marker}.5) & {marker} & wait'])
    host = hosts("h1")
    wait_connected(host)
    say(session, "go")
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.RUNNING).exists(), timeout=20)
    wait_for(lambda: _pids_with(marker), timeout=10)
    client.force_login(session.owner.user)
    response = client.post(f"/threads/{session.thread_id}/stop/")
    assert response.status_code == 302
    wait_for(lambda: not _pids_with(marker), timeout=10)
    wait_for(lambda: any(t.startswith("Stopped (stopped by") for t in system_texts(session)), timeout=10)
    assert Turn.objects.get(session=session).status == Turn.Status.STOPPED


def test_stop_is_for_the_owner_or_an_admin(workspace, client, django_user_model):
    session = new_session(workspace)
    user = django_user_model.objects.create_user("member", password="pw-member-123")
    Member.objects.create(workspace=workspace, user=user, role=Member.Role.MEMBER)
    client.force_login(user)
    assert client.post(f"/threads/{session.thread_id}/stop/").status_code == 403


def test_a_turns_quota_refuses_with_its_message(hosts, workspace):
    workspace.quota.turns_per_day = 0
    workspace.quota.save()
    session = new_session(workspace)
    scripted(session.agent, [{"reply": "should not run"}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "hi")
    wait_for(lambda: any("turns per day" in t for t in system_texts(session)), timeout=20)
    assert agent_texts(session) == []
    assert Turn.objects.get(session=session).status == Turn.Status.FAILED


def _pids_with(marker: str) -> list[int]:
    import os

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if marker.encode() in handle.read().replace(b"\0", b" "):
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_approved_packages_are_built_on_the_host_before_the_agent_starts(hosts, workspace):
    session = new_session(workspace)
    agent = commanded(session.agent, ["sh", "-c", "semver 1.2.3; cat"])
    agent.npm_packages = ["semver"]
    agent.save(update_fields=["npm_packages"])
    host = hosts("h1")
    wait_connected(host)
    say(session, "first")
    wait_for(lambda: agent_texts(session), timeout=120)
    assert agent_texts(session) == ["1.2.3\nfirst"]  # semver came from the agent's own prefix
    # A build that fails keeps the previous environment, and the agent is told why.
    agent.npm_packages = ["semver", "calvin-no-such-package-x9"]
    agent.environment_version += 1
    agent.save(update_fields=["npm_packages", "environment_version"])
    say(session, "second")
    wait_for(lambda: len(agent_texts(session)) == 2, timeout=120)
    reply = agent_texts(session)[1]
    assert reply.startswith("1.2.3\n[system] The agent's packages could not be built") and reply.endswith("second")
    assert "calvin-no-such-package-x9" in reply
    # The thread is told too, and keeps it.
    assert any(t.startswith("The agent's packages could not be built") for t in system_texts(session))


def test_a_host_on_another_web_process_answers_through_the_channel_layer(workspace, celery_worker, tmp_path, gateway):
    """The host is connected to web process B; the agent's send_file reaches process A (this
    test's gateway), which asks the host through Redis and gets the bytes back the same way."""
    port = free_port()
    web_b = subprocess.Popen(
        [sys.executable, "-m", "calvin.http_server", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": subprocess_database_url()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: _answers(port), timeout=30)
        handle = host_start(gateway=f"http://127.0.0.1:{port}", name="on-b", directory=tmp_path / "on-b")
        try:
            wait_connected(handle)
            session = new_session(workspace)
            scripted(session.agent, [{"reply": "ready"}])
            say(session, "warm up")  # the session's directory is made on its host
            wait_for(lambda: agent_texts(session) == ["ready"], timeout=30)
            (handle.session_directory(session.id) / "b.txt").write_bytes(b"from the host behind B")
            session.refresh_from_db()
            _, token = runner_start(session=session, host=session.host)
            agent = TestAgent(session=session, runner=None, token=token, url=f"{gateway}/mcp")  # process A
            result = agent.call("send_file", {"path": "b.txt"})
            assert not result.is_error, text_of(result)
            call = ToolCall.objects.get(session=session, tool="send_file")
            message = wait_for(lambda: Message.objects.filter(tool_call=call).first(), timeout=20)
            assert message.file.read() == b"from the host behind B"
        finally:
            handle.stop()
    finally:
        web_b.terminate()
        web_b.wait(timeout=15)


def test_a_turn_that_runs_too_long_is_stopped_and_the_session_is_not_left_running(hosts, workspace, settings):
    settings.CALVIN_TURN_TIMEOUT_SECONDS = 1.5
    session = new_session(workspace)
    scripted(session.agent, [{"sleep": 30}, {"reply": "never"}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "go")
    wait_for(lambda: any("ran longer than 1.5 s" in t for t in system_texts(session)), timeout=30)
    session.refresh_from_db()
    assert session.status == Session.Status.IDLE
    assert Turn.objects.get(session=session).status == Turn.Status.FAILED


def test_a_turn_whose_hosts_keep_dying_is_given_up_after_three_attempts(workspace):
    from django.utils import timezone

    from sessions.hosts import host_create, hosts_sweep

    session = new_session(workspace)
    say(session, "crashy")
    for attempt in range(1, 4):
        host, _ = host_create(name=f"dies-{attempt}")
        Host.objects.filter(id=host.id).update(channel_name=f"c{attempt}", capacity=1, last_heartbeat_at=timezone.now())
        from sessions.scheduling import turns_claim

        assert len(turns_claim(host_id=host.id)) == 1
        Host.objects.filter(id=host.id).update(last_heartbeat_at=timezone.now() - timezone.timedelta(minutes=5))
        hosts_sweep()
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.FAILED and turn.attempts == 3
    assert any("interrupted 3 times" in t for t in system_texts(session))
    session.refresh_from_db()
    assert session.status == Session.Status.IDLE and session.host_id is None


def _answers(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_what_the_agent_does_is_shown_live_on_the_thread_page(hosts, workspace, gateway, celery_worker):
    from tests.dashboard.conftest import OWNER_PASSWORD, login_cookie, ws_connect

    session = new_session(workspace)
    scripted(session.agent, [CARD, {"reply": "done"}])
    host = hosts("h1")
    wait_connected(host)
    seen = []
    with ws_connect(gateway, session.thread_id, sessionid=login_cookie(gateway, "owner", OWNER_PASSWORD)) as ws:
        say(session, "show me")
        while not any(a.get("kind") == "finished" for a in seen):
            event = json.loads(ws.recv(timeout=30))
            if "activity" in event:
                seen.append(event["activity"])
    kinds = [a["kind"] for a in seen]
    assert kinds[0] == "started" and kinds[-1] == "finished", kinds
    assert {"kind": "tool_use", "name": "post_card"}.items() <= next(a for a in seen if a["kind"] == "tool_use").items()
    assert any(a["kind"] == "tool_result" for a in seen)


def test_sessions_beyond_the_concurrent_quota_wait_with_a_message_then_run(hosts, workspace):
    workspace.quota.concurrent_sessions = 1
    workspace.quota.save()
    first, second = new_session(workspace, "first"), new_session(workspace, "second")
    scripted(first.agent, [{"sleep": 2}, {"reply": "done {prompt}"}])
    host = hosts("h1", capacity=4)
    wait_connected(host)
    say(first, "one")
    wait_for(lambda: Turn.objects.filter(session=first, status=Turn.Status.RUNNING).exists(), timeout=20)
    say(second, "two")
    waiting = wait_for(lambda: system_texts(second), timeout=20)
    assert waiting[0].startswith("Waiting: workspace quota reached: 1 sessions at once"), waiting
    wait_for(lambda: agent_texts(second) == ["done two"], timeout=40)
    assert agent_texts(first) == ["done one"]
    assert len(system_texts(second)) == 1  # said once, not on every claim


def test_a_host_restarted_mid_turn_runs_the_turn_again_as_a_new_generation(hosts, workspace, gateway, tmp_path):
    from sessions.hosts import host_token_reset
    from tests.sessions.host_processes import host_process_start

    session = new_session(workspace)
    scripted(session.agent, [{"sleep": 3}, {"reply": "finished {prompt}"}])
    first = hosts("phoenix")
    wait_connected(first)
    say(session, "work")
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.RUNNING).exists(), timeout=20)
    first.kill()
    # Back within the lapse, with the same name: it holds no runner and no turn any more.
    token = host_token_reset(host=first.host)
    again = host_process_start(gateway=gateway, host=first.host, token=token, directory=tmp_path / "phoenix")
    try:
        wait_for(lambda: agent_texts(session) == ["finished work"], timeout=40)
        turn = Turn.objects.get(session=session)
        assert turn.status == Turn.Status.DONE and turn.attempts == 2 and turn.host.name == "phoenix"
        runners = Runner.objects.filter(session=session).order_by("generation")
        assert [(r.generation, r.revoked_at is None) for r in runners] == [(1, False), (2, True)]
    finally:
        again.stop()


def test_a_session_sticks_to_its_host_while_that_host_lives(hosts, workspace):
    session = new_session(workspace)
    scripted(session.agent, [{"reply": "ok {prompt}"}])
    first, second = hosts("first", capacity=2), hosts("second", capacity=2)
    wait_connected(first, second)
    for i in range(4):
        say(session, f"#{i}")
        wait_for(lambda i=i: len(agent_texts(session)) == i + 1, timeout=30)
    assert len(set(Turn.objects.filter(session=session).values_list("host_id", flat=True))) == 1
    assert Runner.objects.filter(session=session).count() == 1  # one generation throughout


def test_no_host_runs_an_agent_a_person_runs_themselves(hosts, workspace):
    from calvin.workspaces.models import Agent

    session = new_session(workspace)
    session.agent.provider = Agent.Provider.EXTERNAL
    session.agent.save(update_fields=["provider"])
    _, token = runner_start(session=session)
    host = hosts("h1")
    wait_connected(host)
    say(session, "for the agent I run myself")
    time.sleep(2)  # several claims happen meanwhile (the message wakes the host, heartbeats every 0.5 s)
    assert Turn.objects.get(session=session).status == Turn.Status.QUEUED
    assert Runner.objects.get(session=session).revoked_at is None  # its token still works


def test_the_agents_reply_never_shows_a_secret_value(hosts, workspace, vault):
    from secrets_vault.services import secret_set

    session = new_session(workspace)
    secret_set(session=session, name="API_KEY", value="sk-live-0123456789abcdef")
    scripted(session.agent, [{"reply": "the key is {prompt}"}])
    host = hosts("h1")
    wait_connected(host)
    say(session, "sk-live-0123456789abcdef")
    wait_for(lambda: agent_texts(session), timeout=30)
    assert "sk-live-0123456789abcdef" not in agent_texts(session)[0]
    assert agent_texts(session)[0].startswith("the key is [redacted")


def test_another_host_does_not_claim_a_session_whose_host_lives(workspace):
    from django.utils import timezone

    from sessions.hosts import host_create
    from sessions.scheduling import turns_claim

    live = []
    for name in ("home", "other"):
        host, _ = host_create(name=name)
        Host.objects.filter(id=host.id).update(channel_name=name, capacity=2, last_heartbeat_at=timezone.now())
        live.append(host)
    home, other = live
    session = new_session(workspace)
    say(session, "first")
    assert [t["session"] for t in turns_claim(host_id=home.id)] == [session.id]
    Turn.objects.filter(session=session).update(status=Turn.Status.DONE)
    say(session, "second")
    assert turns_claim(host_id=other.id) == []
    assert [t["session"] for t in turns_claim(host_id=home.id)] == [session.id]


def test_a_host_restarted_while_its_session_is_idle_starts_a_new_generation_for_it(hosts, workspace, gateway, tmp_path):
    from sessions.hosts import host_token_reset
    from tests.sessions.host_processes import host_process_start

    session = new_session(workspace)
    scripted(session.agent, [{"reply": "ok {prompt}"}])
    first = hosts("phoenix")
    wait_connected(first)
    say(session, "one")
    wait_for(lambda: agent_texts(session) == ["ok one"], timeout=30)
    first.kill()
    token = host_token_reset(host=first.host)
    again = host_process_start(gateway=gateway, host=first.host, token=token, directory=tmp_path / "phoenix-2")
    try:
        wait_connected(again)
        # The restarted daemon holds no token for the session: its old runner is revoked at once.
        assert Runner.objects.get(session=session, generation=1).revoked_at is not None
        say(session, "two")
        wait_for(lambda: agent_texts(session) == ["ok one", "ok two"], timeout=30)
        assert Runner.objects.get(session=session, generation=2).revoked_at is None
    finally:
        again.stop()


def test_the_agent_gets_its_sessions_secrets_in_its_environment(hosts, workspace, vault):
    import hashlib

    from secrets_vault.services import secret_set

    session = new_session(workspace)
    secret_set(session=session, name="API_KEY", value="sk-live-0123456789abcdef")
    commanded(session.agent, ["sh", "-c", 'printf %s "$API_KEY" | sha256sum'])
    host = hosts("h1")
    wait_connected(host)
    say(session, "go")
    wait_for(lambda: agent_texts(session), timeout=30)
    assert agent_texts(session)[0].split()[0] == hashlib.sha256(b"sk-live-0123456789abcdef").hexdigest()


def test_a_host_whose_heartbeat_lapsed_claims_nothing(workspace):
    from django.utils import timezone

    from sessions.hosts import host_create
    from sessions.scheduling import turns_claim

    host, _ = host_create(name="silent")
    stale = timezone.now() - timezone.timedelta(minutes=5)
    Host.objects.filter(id=host.id).update(channel_name="c", capacity=2, last_heartbeat_at=stale)
    session = new_session(workspace)
    say(session, "anyone?")
    assert turns_claim(host_id=host.id) == []
    Host.objects.filter(id=host.id).update(last_heartbeat_at=timezone.now())
    assert [t["session"] for t in turns_claim(host_id=host.id)] == [session.id]


def test_stop_from_the_admin_ends_what_is_queued_and_says_so(workspace, admin_client):
    session = new_session(workspace)
    say(session, "never run")
    response = admin_client.post(
        "/admin/agent_sessions/session/",
        {"action": "stop", "_selected_action": [session.id], "confirmed": "yes"},  # the confirmation's POST
        follow=True,
    )
    assert "stopped before the agent started" in response.content.decode()
    assert Turn.objects.get(session=session).status == Turn.Status.STOPPED
    assert system_texts(session) == ["Stopped (stopped from the admin by admin) before the agent started."]
