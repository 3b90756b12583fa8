"""AGENTS.md: the workspace's definition as its sessions' agents read it, written at each turn
start and rewritten in every live session when the definition changes."""

import stat
from pathlib import Path

import pytest
from django.db import transaction

from calvin.workspaces.definitions import UNPUBLISHED, agents_md_text, clone_url_shown, definition_import
from calvin.workspaces.models import Member, Repository
from calvin.workspaces.services import agent_create, workspace_create
from sessions.host_link import host_send
from sessions.hosts import host_create
from sessions.instructions import session_instructions_text
from sessions.models import Host, Session, Turn
from sessions.services import message_post_by_person, runner_start, session_start
from sessions.turn_messages import turn_message
from tests.conftest import wait_for
from tests.sessions.host_processes import agent_texts, commanded, host_process_start, wait_connected


def repo(workspace, name, **fields) -> Repository:
    values = {"full_name": f"acme/{name}", "clone_url": f"https://github.com/acme/{name}.git", **fields}
    return Repository.objects.create(workspace=workspace, name=name, **values)


def table_rows(text: str) -> list[list[str]]:
    rows = [line for line in text.splitlines() if line.startswith("| ")][2:]  # after the header and rule
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


# The text


@pytest.mark.django_db
def test_agents_md_lists_each_repository_and_marks_the_unpublished(workspace):
    repo(workspace, "api", default_branch="develop")
    repo(workspace, "web", full_name="acme/web-app", clone_url="git@github.com:acme/web.git", published=False)
    text = agents_md_text(workspace.id)
    assert "`checkout_repo` (mcp__calvin__checkout_repo)" in text and "owner/name" in text
    assert table_rows(text) == [
        ["`api`", "`acme/api`", "`develop`", "`https://github.com/acme/api.git`", "published"],
        ["`web`", "`acme/web-app`", "`main`", "`github.com:acme/web.git`", UNPUBLISHED],
    ]
    assert UNPUBLISHED == "not published yet"


@pytest.mark.django_db
def test_agents_md_never_shows_credentials_of_a_clone_url(workspace):
    repo(workspace, "api", clone_url="https://deploy:ghp_s3cretT0ken@github.com/acme/api.git?token=abc#x")
    repo(workspace, "lib", clone_url="https://x-access-token:ghs_0ther@git.example.com:8443/acme/lib.git")
    repo(workspace, "ops", clone_url="ssh://ops:pa55@git.example.com/acme/ops.git")
    text = agents_md_text(workspace.id)
    for secret in ("ghp_s3cretT0ken", "deploy", "token=abc", "ghs_0ther", "x-access-token", "pa55", "ops:"):
        assert secret not in text
    assert [row[3] for row in table_rows(text)] == [
        "`https://github.com/acme/api.git`",
        "`https://git.example.com:8443/acme/lib.git`",
        "`ssh://git.example.com/acme/ops.git`",
    ]


def test_clone_urls_are_shown_without_userinfo_query_or_fragment():
    assert clone_url_shown("https://u:t@h.example/a.git?x=1#y") == "https://h.example/a.git"
    assert clone_url_shown("git@github.com:acme/api.git") == "github.com:acme/api.git"
    assert clone_url_shown("/srv/git/api.git") == "/srv/git/api.git"
    assert clone_url_shown("git://h.example/a.git") == "git://h.example/a.git"


@pytest.mark.django_db
def test_a_workspace_without_repositories_gets_a_file_saying_so(workspace):
    text = agents_md_text(workspace.id)
    assert "has no repositories" in text and "|" not in text


@pytest.mark.django_db
def test_a_stored_value_cannot_break_the_table(workspace):
    # Saved without validation (as rows from before the rules were): still one row of five cells.
    repo(workspace, "api", clone_url="https://h.example/a|b`c\n| injected | row |.git")
    rows = table_rows(agents_md_text(workspace.id))
    assert len(rows) == 1 and len(rows[0]) == 5


@pytest.mark.django_db
def test_another_workspaces_repositories_are_not_listed(workspace):
    globex = workspace_create(name="Globex", slug="globex")
    repo(globex, "secret-project")
    assert "secret-project" not in agents_md_text(workspace.id)


# What a turn carries, and CLAUDE.md's pointer


@pytest.mark.django_db
def test_the_turn_message_carries_agents_md(workspace):
    repo(workspace, "api")
    session = session_start(workspace=workspace, title="t", prompt="hello")
    runner, token = runner_start(session=session)
    message = turn_message(session=session, turns=list(session.turns.all()), runner=runner, token=token)
    assert message["agents_md"] == agents_md_text(workspace.id) and "`api`" in message["agents_md"]
    assert isinstance(message["agents_md_at"], float)
    assert "AGENTS.md" in message["instructions"]


@pytest.mark.django_db
def test_claude_md_points_to_agents_md_only_for_the_calvin_tool_set(workspace, settings):
    calvin = agent_create(workspace=workspace, name="c", tool_sets=["calvin"])
    nanoclaw = agent_create(workspace=workspace, name="n", tool_sets=["nanoclaw"])
    with_calvin = session_start(workspace=workspace, agent=calvin)
    assert "AGENTS.md" in session_instructions_text(with_calvin)
    assert "AGENTS.md" not in session_instructions_text(session_start(workspace=workspace, agent=nanoclaw))
    settings.CALVIN_MODE = "one-machine"  # no checkout_repo there: nothing to point to
    assert "AGENTS.md" not in session_instructions_text(with_calvin)


# Kept current: sessions whose directory is on the gateway, and the pushes to hosts


def pushes(callbacks) -> list:
    return [c for c in callbacks if getattr(c, "once_key", ("",))[0] == "agents_md"]


@pytest.mark.django_db
def test_a_gateway_session_gets_agents_md_at_start_and_when_the_definition_changes(
    workspace, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # as if committed: the next change pushes again
        repo(workspace, "api")
    session = session_start(workspace=workspace, title="t")
    written = Path(session.directory) / "AGENTS.md"
    assert written.read_text() == agents_md_text(workspace.id)
    assert stat.S_IMODE(written.stat().st_mode) == 0o644

    victim = Path(session.directory).parent / f"victim-{session.id}"
    victim.write_text("untouched")
    written.unlink()
    written.symlink_to(victim)  # planted by the agent
    with django_capture_on_commit_callbacks(execute=True):
        repo(workspace, "web", published=False)
    assert not written.is_symlink() and victim.read_text() == "untouched"
    assert "`web`" in written.read_text() and UNPUBLISHED in written.read_text()

    Session.objects.filter(id=session.id).update(status=Session.Status.FINISHED)
    with django_capture_on_commit_callbacks(execute=True):
        Repository.objects.filter(name="web").delete()
    assert "`web`" in written.read_text()  # a finished session is left as it was


@pytest.mark.django_db
def test_sessions_on_hosts_get_one_message_per_host_and_only_live_ones(
    workspace, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr("sessions.host_link.host_send", lambda host_id, message: sent.append((host_id, message)))
    first, _ = host_create(name="h1")
    second, _ = host_create(name="h2")
    sessions = [session_start(workspace=workspace, title=f"s{i}") for i in range(4)]
    Session.objects.filter(id__in=[sessions[0].id, sessions[1].id]).update(host=first)
    Session.objects.filter(id=sessions[2].id).update(host=second, status=Session.Status.IDLE)
    Session.objects.filter(id=sessions[3].id).update(host=second, status=Session.Status.FINISHED)
    globex = workspace_create(name="Globex", slug="globex")
    Session.objects.filter(id=session_start(workspace=globex).id).update(host=first)

    with django_capture_on_commit_callbacks(execute=True):
        repo(workspace, "api")
    text = agents_md_text(workspace.id)
    by_host = {host_id: message for host_id, message in sent}
    assert len(sent) == 2 and set(by_host) == {first.id, second.id}
    assert sorted(by_host[first.id]["sessions"]) == [sessions[0].id, sessions[1].id]
    assert by_host[second.id]["sessions"] == [sessions[2].id]
    assert all(m["type"] == "session.agents_md" and m["text"] == text for m in by_host.values())


@pytest.mark.django_db
def test_one_push_per_workspace_per_transaction_and_none_lost_to_a_rollback(
    workspace, django_capture_on_commit_callbacks
):
    text = "".join(
        f'[[repository]]\nname = "r{n}"\nfull_name = "acme/r{n}"\nclone_url = "https://h.example/r{n}.git"\n'
        for n in range(20)
    )
    with django_capture_on_commit_callbacks() as callbacks:
        definition_import(workspace=workspace, text=text, format="toml")
    assert len(pushes(callbacks)) == 1

    globex = workspace_create(name="Globex", slug="globex")
    with django_capture_on_commit_callbacks() as callbacks:
        try:
            with transaction.atomic():
                repo(globex, "doomed")
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        repo(globex, "kept")
    assert len(pushes(callbacks)) == 1  # the rolled-back savepoint's push went with it; this one is new


# A real host


# What the agent read first, then (once `web` is in it) what it reads after the push; then it
# plants a link where AGENTS.md was.
WAIT_FOR_WEB = (
    "cat AGENTS.md > .first; mv .first first.md; i=0;"
    " while ! grep -q web AGENTS.md && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done;"
    " cat first.md; echo =====; cat AGENTS.md; ln -sf {victim} AGENTS.md"
)


@pytest.mark.django_db(transaction=True)
def test_a_host_writes_agents_md_at_turn_start_and_rewrites_it_when_the_definition_changes(hosts, workspace, tmp_path):
    repo(workspace, "api")
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(workspace=workspace, owner=owner, title="t")
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    commanded(session.agent, ["sh", "-c", WAIT_FOR_WEB.format(victim=victim)])
    host = hosts("h1")
    wait_connected(host)
    written = host.session_directory(session.id) / "AGENTS.md"

    message_post_by_person(thread=session.thread, member=owner, text="go")
    wait_for(lambda: Turn.objects.filter(session=session, status=Turn.Status.RUNNING).exists(), timeout=30)
    wait_for(lambda: (written.parent / "first.md").exists(), timeout=20)
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
    assert "AGENTS.md" in (host.session_directory(session.id) / "CLAUDE.md").read_text()

    repo(workspace, "web", published=False)  # mid-turn: the agent sees it without a new turn
    wait_for(lambda: agent_texts(session), timeout=60)
    before, after = agent_texts(session)[0].split("=====")
    assert "`api`" in before and "`web`" not in before
    assert "`web`" in after and UNPUBLISHED in after
    assert after.strip() == agents_md_text(workspace.id).strip()

    # The agent left a link to a file of the host's: the next push replaces the link, not the file.
    wait_for(lambda: Session.objects.get(id=session.id).status == Session.Status.IDLE, timeout=30)
    assert written.is_symlink()
    Repository.objects.filter(name="web").delete()
    wait_for(lambda: not written.is_symlink() and "`web`" not in written.read_text(), timeout=20)
    assert written.read_text() == agents_md_text(workspace.id)
    assert victim.read_text() == "untouched"

    # Sessions the host does not have, and malformed ids, are ignored.
    host_send(host.host.id, {"type": "session.agents_md", "sessions": [987654, "x", True], "text": "forged"})
    repo(workspace, "docs")
    wait_for(lambda: "`docs`" in written.read_text(), timeout=20)
    assert not (host.directory / "sessions" / "session-987654").exists()
    assert host.process.poll() is None


@pytest.mark.django_db(transaction=True)
def test_a_host_that_missed_a_push_gets_the_current_text_with_the_next_turn(gateway, workspace, tmp_path, settings):
    settings.CALVIN_HOST_HEARTBEAT_SECONDS = 0.5
    repo(workspace, "api")
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(workspace=workspace, owner=owner, title="t")
    commanded(session.agent, ["cat", "AGENTS.md"])
    row, token = host_create(name="h1")
    host = host_process_start(gateway=gateway, host=row, token=token, directory=tmp_path / "h1")
    try:
        wait_connected(host)
        message_post_by_person(thread=session.thread, member=owner, text="one")
        wait_for(lambda: len(agent_texts(session)) == 1, timeout=60)
        host.stop()  # away: the push below reaches nobody
        wait_for(lambda: not Host.objects.get(id=row.id).channel_name, timeout=10)
        repo(workspace, "web")
        written = host.session_directory(session.id) / "AGENTS.md"
        assert "`web`" not in written.read_text()
        host = host_process_start(gateway=gateway, host=row, token=token, directory=tmp_path / "h1")
        wait_connected(host)
        message_post_by_person(thread=session.thread, member=owner, text="two")
        wait_for(lambda: len(agent_texts(session)) == 2, timeout=60)
        assert agent_texts(session)[1].strip() == agents_md_text(workspace.id).strip()
        assert written.read_text() == agents_md_text(workspace.id)
    finally:
        host.stop()
