"""A real runner writes the files other agents sent into the agent's own directory before the
agent runs: fetched from the real gateway with the host's token, written as inbox/<from>/<name>
without ever following a link or writing over a name the agent (or another session of it) put
there. The gateway's side: tests/tools/test_send_file_to_agent.py."""

import os
import stat
from datetime import timedelta

import pytest
from django.utils import timezone

from calvin.workspaces.models import Destination
from calvin.workspaces.services import agent_create
from sessions.host.inbox import InboxClient
from sessions.host.sandbox import private_directory
from sessions.hosts import host_create
from sessions.models import Host, Session, Turn
from sessions.services import runner_start
from sessions.turn_messages import turn_message
from tests.conftest import text_of
from tests.sessions.host import Roots, a_turn, run_turn, shell
from tools.models import InboxDelivery, InboxFile

pytestmark = pytest.mark.django_db(transaction=True)


class Target:
    """The agent files are sent to, its inbox session held by a live host, and that host's runner."""

    def __init__(self, tmp_path, gateway, nano, sandbox_kind="none"):
        self.nano = nano
        self.agent = agent_create(workspace=nano.session.workspace, name="worker")
        Destination.objects.create(agent=nano.session.agent, name="worker", target_agent=self.agent)
        self.host, token = host_create(name="h1")
        Host.objects.filter(id=self.host.id).update(channel_name="test.h1", last_heartbeat_at=timezone.now())
        self.roots = Roots(tmp_path)
        self.directory = private_directory(tmp_path / "agents" / f"agent-{self.agent.id}" / "workspace")
        self.outside = tmp_path / "outside"
        self.outside.mkdir()
        self.client = InboxClient(gateway=gateway, token=token)
        self.sandbox_kind = sandbox_kind
        self.runner = None
        self.number = 0

    def send(self, name: str, content: bytes, **arguments) -> dict:
        (self.nano.directory / name).write_bytes(content)
        result = self.nano.call("send_file", {"path": name, "to": "worker", **arguments})
        assert not result.is_error, text_of(result)
        return result.structured_content

    @property
    def inbox(self) -> os.PathLike:
        return self.directory / "inbox" / "main"

    def turn(self, script: str) -> dict:
        """One turn of the inbox session on this host, its list of files as the gateway makes it."""
        session = Session.objects.get(agent=self.agent)
        if self.runner is None:
            Session.objects.filter(id=session.id).update(host=self.host)
            self.runner, _ = self.roots.runner(session.id, self.roots.sandbox(self.sandbox_kind), inbox=self.client)
        runner, token = runner_start(session=session, host=self.host)
        turns = list(Turn.objects.filter(session=session).order_by("id")[:1])
        self.number += 1
        message = turn_message(session=Session.objects.get(id=session.id), turns=turns, runner=runner, token=token)
        turn = a_turn(shell(script), number=self.number, session=session.id, inbox=message["inbox"])
        turn["runner"] = {"generation": runner.generation, "token": token}
        return run_turn(self.runner, turn, agent_directory=self.directory)

    def delivered(self) -> set[str]:
        return {d.file.name for d in InboxDelivery.objects.filter(host=self.host).select_related("file")}


@pytest.fixture
def target(tmp_path, gateway, agent):
    return Target(tmp_path, gateway, agent.nanoclaw)


@pytest.mark.parametrize("kind", ["bwrap", "none"])
def test_the_file_is_in_the_agents_directory_before_the_agent_runs(tmp_path, gateway, agent, kind):
    target = Target(tmp_path, gateway, agent.nanoclaw, sandbox_kind=kind)
    target.send("report.txt", b"all green\n")
    finished = target.turn('cat "$CALVIN_AGENT_DIR/inbox/main/report.txt"')
    assert finished["status"] == "done" and finished["reply"] == "all green", finished
    written = target.inbox / "report.txt"
    info = written.lstat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    owner = target.runner.sandbox.agent_owner or (os.getuid(), os.getgid())
    assert (info.st_uid, info.st_gid) == owner == (target.inbox.stat().st_uid, target.inbox.stat().st_gid)
    assert sorted(os.listdir(target.inbox)) == ["report.txt"]  # no partial file left
    assert target.delivered() == {"report.txt"}
    # Delivered: the next turn lists it no more, and an agent that moved it away does not get it back.
    written.unlink()
    assert target.turn("ls -A $CALVIN_AGENT_DIR/inbox/main")["reply"] == ""


def test_a_second_file_of_the_same_name_arrives_beside_the_first_which_stays_as_the_agent_left_it(target):
    target.send("report.txt", b"first")
    target.turn('echo "edited by the agent" >> "$CALVIN_AGENT_DIR/inbox/main/report.txt"')
    assert (target.inbox / "report.txt").read_bytes() == b"firstedited by the agent\n"
    assert target.send("other.txt", b"second", filename="report.txt")["path"] == "inbox/main/report-2.txt"
    finished = target.turn('cat "$CALVIN_AGENT_DIR/inbox/main/report-2.txt"')
    assert finished["reply"] == "second"
    assert (target.inbox / "report.txt").read_bytes() == b"firstedited by the agent\n"
    assert target.delivered() == {"report.txt", "report-2.txt"}


@pytest.mark.parametrize("planted", ["inbox", "inbox/main"])
def test_a_link_the_agent_planted_in_the_inbox_is_never_followed(target, planted):
    link = target.directory / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target.outside, target_is_directory=True)
    target.send("report.txt", b"not for outside")
    finished = target.turn("cat")  # the agent's prompt
    assert list(target.outside.iterdir()) == []
    assert f"[system] {planted} is not a directory of its own" in finished["reply"]
    assert "tried again at your next turn" in finished["reply"] and target.delivered() == set()
    # The agent removes its link: the file arrives at its next turn.
    link.unlink()
    assert target.turn('cat "$CALVIN_AGENT_DIR/inbox/main/report.txt"')["reply"] == "not for outside"
    assert list(target.outside.iterdir()) == [] and target.delivered() == {"report.txt"}


def test_a_link_or_file_at_the_name_is_left_alone_and_the_agent_is_told(target):
    victim = target.outside / "victim.txt"
    victim.write_text("untouched")
    target.inbox.mkdir(parents=True)
    (target.inbox / "report.txt").symlink_to(victim)
    (target.inbox / "notes.txt").write_text("the agent's own notes")
    target.send("report.txt", b"sent")
    target.send("notes.txt", b"sent notes")
    finished = target.turn("cat")
    assert victim.read_text() == "untouched" and (target.inbox / "report.txt").is_symlink()
    assert (target.inbox / "notes.txt").read_text() == "the agent's own notes"
    assert "[system] inbox/main/report.txt already holds something else" in finished["reply"]
    assert "inbox/main/notes.txt already holds something else" in finished["reply"]
    assert target.delivered() == set()


def test_a_hard_link_planted_at_the_partial_name_is_not_written_through(target):
    victim = target.outside / "victim.txt"
    victim.write_text("untouched")
    sent = target.send("report.txt", b"the real report")
    file_id = InboxFile.objects.get(tool_call_id=sent["tool_call_id"]).id
    target.inbox.mkdir(parents=True)
    os.link(victim, target.inbox / f".calvin-inbox-{file_id}.partial")
    finished = target.turn('cat "$CALVIN_AGENT_DIR/inbox/main/report.txt"')
    assert finished["reply"] == "the real report"
    assert victim.read_text() == "untouched" and victim.stat().st_nlink == 1
    assert sorted(os.listdir(target.inbox)) == ["report.txt"]


def test_a_copy_already_in_place_counts_as_delivered_without_a_word(target):
    """A host that wrote the file but could not tell the gateway (it went away) finds it next time."""
    target.send("report.txt", b"same bytes")
    target.inbox.mkdir(parents=True)
    (target.inbox / "report.txt").write_bytes(b"same bytes")
    finished = target.turn("cat")
    assert "[system]" not in finished["reply"] and target.delivered() == {"report.txt"}


def test_a_file_the_gateway_does_not_give_this_host_is_not_written(target):
    target.send("report.txt", b"sent")
    Host.objects.filter(id=target.host.id).update(last_heartbeat_at=timezone.now() - timedelta(hours=1))
    finished = target.turn("cat")
    assert "inbox/main/report.txt could not be fetched from the gateway (HTTP 404)" in finished["reply"]
    assert os.listdir(target.inbox) == [] and target.delivered() == set()


def test_a_malformed_list_is_skipped_and_writes_nothing_anywhere(target, tmp_path):
    target.send("report.txt", b"sent")
    session = Session.objects.get(agent=target.agent)
    Session.objects.filter(id=session.id).update(host=target.host)
    runner, _ = target.roots.runner(session.id, target.roots.none(), inbox=target.client)
    file_id = InboxFile.objects.get().id
    hostile = [
        {"id": file_id, "from": "..", "name": "report.txt", "size": 4},
        {"id": file_id, "from": "main", "name": "../../escape", "size": 4},
        {"id": file_id, "from": "main", "name": ".bashrc", "size": 4},
        {"id": file_id, "from": "main", "name": "a\nb", "size": 4},
        {"id": True, "from": "main", "name": "report.txt", "size": 4},
        {"id": file_id, "from": "main", "name": "report.txt", "size": 10**12},
        "not a file",
    ]
    finished = run_turn(
        runner, a_turn(shell("cat"), session=session.id, inbox=hostile), agent_directory=target.directory
    )
    assert "unusable name or size" in finished["reply"]
    assert list(target.directory.iterdir()) == [] and not (tmp_path / "escape").exists()
