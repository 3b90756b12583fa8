"""The sandbox as a real `manage.py host` gives it: what the agent sees of the machine, its
/tmp through send_file, and a host without bwrap that refuses unless its operator allows it."""

import time
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

from calvin.workspaces.models import Member
from sessions.models import Host, Message
from sessions.services import message_post_by_person, session_start
from tests.conftest import wait_for
from tests.sessions.host_processes import agent_texts, commanded, wait_connected
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def run(session, argv: list[str]) -> str:
    owner = Member.objects.filter(workspace=session.workspace).first()
    commanded(session.agent, argv)
    before = len(agent_texts(session))
    message_post_by_person(thread=session.thread, member=owner, text="go")
    wait_for(lambda: len(agent_texts(session)) > before, timeout=30)
    return agent_texts(session)[-1]


def a_session(workspace, title="one"):
    return session_start(workspace=workspace, owner=Member.objects.filter(workspace=workspace).first(), title=title)


def section(reply: str, name: str) -> list[str]:
    return reply.split(f"== {name}\n", 1)[1].split("==", 1)[0].split()


def test_the_agent_sees_nothing_of_the_gateways_or_the_hosts_files(hosts, workspace, celery_worker, settings):
    # The gateway's var/ (what `up` logs there holds the runner token it printed) and the host's state.
    (settings.VAR_DIR / "gateway-test.log").write_text("runner token cvn_printed-by-up\n")
    host = hosts("h1")
    wait_connected(host)
    (host.directory / "host-state.txt").write_text("the host's own")
    session = a_session(workspace)
    script = (
        f"id -u; cat /etc/shadow {settings.VAR_DIR}/gateway-test.log {host.directory}/host-state.txt {host.log}"
        f" 2>/dev/null; echo '== var'; ls -A {settings.VAR_DIR}; echo '== state'; ls -A {host.directory};"
        f" echo '== sessions'; ls -A {host.directory}/sessions {host.directory}/tmp {host.directory}/secrets;"
        " echo '== system'; ls -A /var/log /root /home /run | grep -v ':$'; echo '== end'"
    )
    reply = run(session, ["sh", "-c", script])
    assert reply.split()[0] not in ("", "0"), reply
    for leaked in ("root:", "cvn_printed-by-up", "the host's own", "registered", "gateway"):
        assert leaked not in reply, reply
    # Only the ways to its own places show: its session's directories, the agent's own, the
    # workspace's git mirrors, the egress proxy's socket (/run/calvin) and Python (in /root here).
    assert section(reply, "var") in ([], ["tmp"]), reply
    assert set(section(reply, "state")) <= {"sessions", "tmp", "secrets", "agents", "git"}, reply
    own = f"session-{session.id}"
    assert [word for word in section(reply, "sessions") if not word.endswith(":")] == [own, own, own], reply
    assert set(section(reply, "system")) <= {"calvin", ".pyenv"}, reply


def test_send_file_of_tmp_from_the_sandboxed_agent_comes_from_its_temp_directory(hosts, workspace, celery_worker):
    host = hosts("h1")
    wait_connected(host)
    other = a_session(workspace, "other")
    run(other, ["sh", "-c", "printf other-session > /tmp/private.txt; echo ready"])
    other_temp = host.directory / "tmp" / f"session-{other.id}"
    assert (other_temp / "private.txt").read_text() == "other-session"

    session = a_session(workspace)
    sent = run(session, ["sh", "-c", "printf 'made in /tmp' > /tmp/shot.png && calvin-send-file /tmp/shot.png shot"])
    call = wait_for(lambda: ToolCall.objects.filter(session=session, tool="send_file").first(), timeout=30)
    message = wait_for(lambda: Message.objects.filter(tool_call=call).first(), timeout=20)
    assert (message.file.read(), message.file_name, message.text) == (b"made in /tmp", "shot.png", "shot"), sent
    assert (host.directory / "tmp" / f"session-{session.id}" / "shot.png").exists()

    # Another session's temp directory, by its host name and through /tmp/..: refused.
    for path in (f"{other_temp}/private.txt", f"/tmp/../session-{other.id}/private.txt"):
        refused = run(session, ["sh", "-c", f"calvin-send-file {path} 2>&1; true"])
        # "no file at": the host keeps its state under its /tmp, where the name is the agent's own /tmp.
        assert any(text in refused for text in ("outside the session directory", "No such file", "no file at")), refused
    assert ToolCall.objects.filter(session=session, tool="send_file").count() == 1


def without_bwrap(tmp_path):
    """A PATH on which bwrap is not found, as on a host where it is not installed."""
    empty = tmp_path / "no-bwrap-bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty)}


def test_a_host_without_a_sandbox_refuses_to_run_agents_unless_allowed(hosts, tmp_path, admin_client):
    refusing = hosts("bare", environment={**without_bwrap(tmp_path), "CALVIN_ALLOW_UNSANDBOXED": None})
    deadline = time.monotonic() + 30
    while refusing.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert refusing.process.returncode not in (None, 0), refusing.output()
    said = refusing.output()
    assert "does not run agents: no working sandbox on this host (bubblewrap (bwrap) is not installed)" in said
    assert "CALVIN_ALLOW_UNSANDBOXED=1" in said
    assert not Host.objects.get(id=refusing.host.id).channel_name  # it never registered for work

    allowed = hosts("allowed", environment={**without_bwrap(tmp_path), "CALVIN_ALLOW_UNSANDBOXED": "1"})
    wait_connected(allowed)
    assert Host.objects.get(id=allowed.host.id).sandbox == "none"
    assert "agents run with process isolation only (CALVIN_ALLOW_UNSANDBOXED=1)" in allowed.output()

    # The admin shows it in red, in the list and on its page; a sandboxed host plainly.
    sandboxed = hosts("sandboxed")
    wait_connected(sandboxed)
    red = '<strong class="no-sandbox">no sandbox</strong>'
    listing = admin_client.get(reverse("admin:agent_sessions_host_changelist")).content.decode()
    assert listing.count(red) == 1 and "bwrap" in listing and "sessions/hosts-admin.css" in listing
    assert ".no-sandbox {\n  color: #ba2121;" in Path(finders.find("sessions/hosts-admin.css")).read_text()
    page = admin_client.get(reverse("admin:agent_sessions_host_change", args=[allowed.host.id])).content.decode()
    assert red in page
    page = admin_client.get(reverse("admin:agent_sessions_host_change", args=[sandboxed.host.id])).content.decode()
    assert "no sandbox" not in page
