"""An agent's own directory (NanoClaw's group folder) lives on the host, under its state: each
session of the agent gets it read-write as $CALVIN_AGENT_DIR (and named in its instructions),
a later session of the same agent finds what an earlier one left there, and another agent's
session neither gets it nor sees it."""

import pytest

from calvin.workspaces.models import Member
from calvin.workspaces.services import agent_create
from sessions.services import message_post_by_person, session_start
from tests.conftest import wait_for
from tests.sessions.host_processes import agent_texts, commanded, wait_connected

pytestmark = pytest.mark.django_db(transaction=True)


def run(session, owner, argv: list[str]) -> str:
    commanded(session.agent, argv)
    before = len(agent_texts(session))
    message_post_by_person(thread=session.thread, member=owner, text="go")
    wait_for(lambda: len(agent_texts(session)) > before, timeout=30)
    return agent_texts(session)[-1]


def test_a_later_session_of_the_agent_finds_its_files_and_another_agent_does_not(hosts, workspace, celery_worker):
    owner = Member.objects.filter(workspace=workspace).first()
    first = session_start(workspace=workspace, owner=owner, title="one")
    other_agent = agent_create(workspace=workspace, name="other")
    host = hosts("h1")
    wait_connected(host)
    own = host.directory / "agents" / f"agent-{first.agent_id}" / "workspace"

    written = run(first, owner, ["sh", "-c", 'echo kept > "$CALVIN_AGENT_DIR/note"; echo "$CALVIN_AGENT_DIR"'])
    assert written == str(own) and (own / "note").read_text() == "kept\n"
    assert str(own) in (host.session_directory(first.id) / "CLAUDE.md").read_text()

    later = session_start(workspace=workspace, owner=owner, title="two", agent=first.agent)
    assert run(later, owner, ["sh", "-c", 'cat "$CALVIN_AGENT_DIR/note"']) == "kept"

    stranger = session_start(workspace=workspace, owner=owner, title="three", agent=other_agent)
    look = f'echo "$CALVIN_AGENT_DIR"; cat "$CALVIN_AGENT_DIR/note" {own}/note 2>/dev/null || echo unseen'
    seen = run(stranger, owner, ["sh", "-c", look])
    assert seen == f"{host.directory / 'agents' / f'agent-{other_agent.id}' / 'workspace'}\nunseen"
