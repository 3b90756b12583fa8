"""NanoClaw's send_file to an agent destination, over real MCP HTTP: the file is stored for the
target agent's inbox as inbox/<from>/<name> under a name nothing else sent there has, a message
in the agent's session inbox names it, and every send_file rule applies. The endpoint hosts fetch
the bytes from answers only a live host holding a session of the file's agent. (The host's side:
tests/sessions/host/test_inbox.py.)"""

import json
from datetime import timedelta

import httpx2
import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from calvin.workspaces.models import Agent as AgentConfig
from calvin.workspaces.models import Destination, Quota, StorageUsage
from calvin.workspaces.services import agent_create, workspace_create
from secrets_vault.services import secret_set
from sessions.host.inbox import safe_component
from sessions.hosts import host_create, host_revoke
from sessions.models import Host, Message, Session, Turn
from sessions.scheduling import turn_prompt
from sessions.turn_messages import inbox_files_for_turn
from tests.conftest import text_of, wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, login_cookie
from tests.hostile import STRINGS
from tests.sessions.host_processes import agent_texts, commanded, scripted, wait_connected
from tools.models import InboxDelivery, InboxFile, ToolCall
from tools.services.paths import MAX_FILE_BYTES

pytestmark = pytest.mark.django_db(transaction=True)


def ok(result) -> dict:
    assert not result.is_error, text_of(result)
    return result.structured_content


def refused(result, expected: str) -> str:
    text = text_of(result)
    assert result.is_error, text
    assert expected in text, text
    return text


@pytest.fixture
def nano(agent):
    return agent.nanoclaw


@pytest.fixture
def worker(nano, workspace):
    target = agent_create(workspace=workspace, name="worker")
    Destination.objects.create(agent=nano.session.agent, name="worker", target_agent=target)
    return target


def send(nano, **arguments):
    return nano.call("send_file", {"to": "worker", **arguments})


def assert_nothing_delivered(nano, worker) -> None:
    assert not InboxFile.objects.exists()
    assert not Session.objects.filter(agent=worker).exists()  # no inbox session, no message, no turn
    assert not ToolCall.objects.filter(session=nano.session).exists()
    stored = f"tool-files/{nano.session.id}"
    assert not default_storage.exists(stored) or default_storage.listdir(stored)[1] == []
    assert (StorageUsage.objects.filter(workspace_id=nano.session.workspace_id).first() or StorageUsage()).bytes == 0


def test_the_file_lands_as_inbox_from_name_and_a_message_in_the_agents_inbox_names_it(nano, worker):
    (nano.directory / "report.txt").write_text("all green\n")
    result = ok(send(nano, path="/workspace/agent/report.txt", text="Last night's run"))
    assert (result["path"], result["file_name"], result["to"]) == ("inbox/main/report.txt", "report.txt", "worker")

    file = InboxFile.objects.get()
    assert (file.agent_id, file.sender, file.name, file.size) == (worker.id, "main", "report.txt", 10)
    assert file.sender_agent_id == nano.session.agent_id and file.workspace_id == nano.session.workspace_id
    with file.file.open("rb") as stored:
        assert stored.read() == b"all green\n"

    inbox = Session.objects.get(agent=worker)
    message = Message.objects.get(id=result["messageId"])
    assert message.thread_id == inbox.thread_id and message.sender_agent_id == nano.session.agent_id
    assert message.text == (
        "Sent you a file: inbox/main/report.txt (10 bytes), in your agent directory"
        " ($CALVIN_AGENT_DIR/inbox/main/report.txt).\n\nLast night's run"
    )
    turn = Turn.objects.get(session=inbox, prompt=message)
    assert turn.status == Turn.Status.QUEUED
    assert turn_prompt([turn]).startswith("[from agent main] Sent you a file: inbox/main/report.txt")

    # Counted and recorded as any send_file; there is no chat effect to wait for.
    call = ToolCall.objects.get(id=result["tool_call_id"])
    assert (call.tool, call.server, call.status, call.payload["inbox_path"]) == (
        "send_file",
        "nanoclaw",
        "applied",
        "inbox/main/report.txt",
    )
    assert message.tool_call_id == call.id and file.tool_call_id == call.id
    assert nano.runner.counts.get(tool="send_file").used == 1
    assert StorageUsage.objects.get(workspace_id=nano.session.workspace_id).bytes == 10


def test_a_second_file_of_the_same_name_gets_another_name_and_the_first_is_untouched(nano, worker):
    (nano.directory / "report.txt").write_text("first")
    (nano.directory / "other.txt").write_text("second, longer")
    (nano.directory / "third.txt").write_text("third")
    paths = [
        ok(send(nano, path="report.txt"))["path"],
        ok(send(nano, path="other.txt", filename="report.txt"))["path"],
        ok(send(nano, path="third.txt", filename="report.txt"))["path"],
    ]
    assert paths == ["inbox/main/report.txt", "inbox/main/report-2.txt", "inbox/main/report-3.txt"]
    files = list(InboxFile.objects.order_by("id"))
    contents = []
    for file in files:
        with file.file.open("rb") as stored:
            contents.append(stored.read())
    assert contents == [b"first", b"second, longer", b"third"]
    assert [f.size for f in files] == [5, 14, 5]


def test_two_senders_each_have_their_own_from_directory(nano, worker, make_agent, workspace):
    (nano.directory / "report.txt").write_text("from main")
    planner = agent_create(workspace=workspace, name="planner")
    other = make_agent()
    Session.objects.filter(id=other.session.id).update(agent=planner)
    Destination.objects.create(agent=planner, name="worker", target_agent=worker)
    (other.directory / "report.txt").write_text("from planner")
    assert ok(send(nano, path="report.txt"))["path"] == "inbox/main/report.txt"
    assert ok(send(other.nanoclaw, path="report.txt"))["path"] == "inbox/planner/report.txt"


@pytest.mark.parametrize("rule", ["secret", "size", "count", "storage"])
def test_every_send_file_rule_applies_and_a_refused_file_reaches_no_inbox(nano, worker, vault, rule):
    content = "harmless"
    if rule == "secret":
        secret_set(session=nano.session, name="DEPLOY_TOKEN", value="s3cr3t-deploy-value-42")
        content = "token=s3cr3t-deploy-value-42\n"
    (nano.directory / "report.txt").write_text(content)
    if rule == "size":
        with open(nano.directory / "report.txt", "r+b") as handle:
            handle.truncate(MAX_FILE_BYTES + 1)  # sparse
    if rule == "count":
        nano.runner.counts.filter(tool="send_file").update(used=50)
    if rule == "storage":
        Quota.objects.filter(workspace_id=nano.session.workspace_id).update(storage_mib=0)
    expected = {
        "secret": "contains the value of the secret DEPLOY_TOKEN",
        "size": "larger than 100 MiB, the limit",
        "count": "limit of 50 files per runner reached",
        "storage": "MiB of stored files",
    }[rule]
    refused(send(nano, path="report.txt"), expected)
    assert_nothing_delivered(nano, worker)


def test_a_secret_in_the_accompanying_text_is_refused_too(nano, worker, vault):
    secret_set(session=nano.session, name="DEPLOY_TOKEN", value="s3cr3t-deploy-value-42")
    (nano.directory / "report.txt").write_text("harmless")
    text = refused(send(nano, path="report.txt", text="use s3cr3t-deploy-value-42"), "DEPLOY_TOKEN")
    assert "s3cr3t-deploy-value-42" not in text
    assert_nothing_delivered(nano, worker)


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("../evil", "filename is a display name"),
        ("a/b.txt", "filename is a display name"),
        ("..", "filename is a display name"),
        ("ok\x00.txt", "contains a NUL character"),
    ],
)
def test_a_filename_with_a_slash_dotdot_or_nul_is_refused(nano, worker, filename, expected):
    (nano.directory / "report.txt").write_text("fine")
    refused(send(nano, path="report.txt", filename=filename), expected)
    assert_nothing_delivered(nano, worker)


@pytest.mark.parametrize(
    ("filename", "own_name", "expected"),
    [
        (".bashrc", "report.txt", "bashrc"),  # no hidden file, no leading dot at all
        ("...", "report.txt", "file"),
        ("line\nbreak.txt", "report.txt", "line_break.txt"),
        ("\u202egnp.exe", "report.txt", "_gnp.exe"),  # a right-to-left override shown as what it is
        (None, "evil\nname.txt", "evil_name.txt"),  # the file's own name is made safe the same way
        (None, ".env", "env"),
        (None, "..data", "data"),
        ("é" * 200 + ".txt", "report.txt", "é" * 98 + ".txt"),  # at most 200 bytes of UTF-8
    ],
)
def test_a_name_is_made_one_safe_path_component(nano, worker, filename, own_name, expected):
    (nano.directory / own_name).write_text("fine")
    arguments = {"path": own_name, **({"filename": filename} if filename is not None else {})}
    assert ok(send(nano, **arguments))["path"] == f"inbox/main/{expected}"
    assert InboxFile.objects.get().name == expected


def test_every_hostile_name_is_refused_or_made_a_safe_component(nano, worker):
    (nano.directory / "report.txt").write_text("fine")
    for raw in STRINGS:
        result = send(nano, path="report.txt", filename=json.loads(raw))
        if not result.is_error:
            name = result.structured_content["file_name"]
            assert safe_component(name) and name == name.strip(), repr(name)
            assert result.structured_content["path"] == f"inbox/main/{name}"
    assert all(safe_component(f.name) for f in InboxFile.objects.all())


def test_a_hostile_sender_name_becomes_a_safe_from_directory(nano, worker):
    AgentConfig.objects.filter(id=nano.session.agent_id).update(name="../../etc/cron.d")
    (nano.directory / "report.txt").write_text("fine")
    path = ok(send(nano, path="report.txt"))["path"]
    assert path == "inbox/_.._etc_cron.d/report.txt"
    assert safe_component(InboxFile.objects.get().sender)


def test_an_external_agent_has_no_directory_to_put_a_file_in(nano, worker):
    AgentConfig.objects.filter(id=worker.id).update(provider=AgentConfig.Provider.EXTERNAL)
    (nano.directory / "report.txt").write_text("fine")
    refused(send(nano, path="report.txt"), "runs outside Calvin")
    assert_nothing_delivered(nano, worker)


# The endpoint hosts fetch the bytes from.


def live_host(name: str, workspace=None) -> tuple[Host, str]:
    host, token = host_create(name=name, workspace=workspace)
    Host.objects.filter(id=host.id).update(channel_name=f"test.{name}", last_heartbeat_at=timezone.now())
    return Host.objects.get(id=host.id), token


def holding(host: Host, agent) -> Session:
    """A session of `agent` that `host` holds (as the scheduler leaves it after a claim)."""
    session = Session.objects.filter(agent=agent, host__isnull=True).first()
    if session is None:
        from sessions.services import session_start

        session = session_start(workspace=agent.workspace, agent=agent, title=f"{agent.name} on {host.name}")
    Session.objects.filter(id=session.id).update(host=host)
    return session


def fetch(gateway: str, file_id: int, token: str | None = None, **options) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.get(f"{gateway}/hosts/inbox-files/{file_id}/", headers=headers, timeout=30, **options)


def acknowledge(gateway: str, file_id: int, token: str | None = None) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.post(f"{gateway}/hosts/inbox-files/{file_id}/delivered/", headers=headers, timeout=30)


def test_the_host_holding_a_session_of_the_agent_gets_the_bytes(gateway, nano, worker):
    (nano.directory / "report.txt").write_bytes(b"\x00binary\xff" * 1000)
    file_id = InboxFile.objects.get(tool_call_id=ok(send(nano, path="report.txt"))["tool_call_id"]).id
    host, token = live_host("h1")
    holding(host, worker)
    response = fetch(gateway, file_id, token)
    assert response.status_code == 200
    assert response.content == b"\x00binary\xff" * 1000 and response.headers["content-length"] == "8000"


def test_the_endpoint_refuses_every_other_asker(gateway, nano, worker, make_agent):
    (nano.directory / "report.txt").write_text("for the worker only")
    file_id = InboxFile.objects.get(tool_call_id=ok(send(nano, path="report.txt"))["tool_call_id"]).id
    holder, holder_token = live_host("holder")
    holding(holder, worker)
    assert fetch(gateway, file_id, holder_token).status_code == 200

    # A live host of the workspace that holds no session of this agent (one of another agent).
    other, other_token = live_host("other")
    holding(other, nano.session.agent)
    # A host that held the agent's session, then was revoked; one whose heartbeat lapsed.
    revoked, revoked_token = live_host("revoked")
    holding(revoked, worker)
    host_revoke(host_id=revoked.id)
    lapsed, lapsed_token = live_host("lapsed")
    holding(lapsed, worker)
    Host.objects.filter(id=lapsed.id).update(last_heartbeat_at=timezone.now() - timedelta(hours=1))
    cookie = login_cookie(gateway, "owner", OWNER_PASSWORD)  # a workspace owner, logged in

    for token in (other_token, revoked_token, lapsed_token, nano.token, "cvn_host_made-up", None):
        assert fetch(gateway, file_id, token).status_code == 404, token
        assert acknowledge(gateway, file_id, token).status_code == 404, token
    assert fetch(gateway, file_id, cookies={"sessionid": cookie}).status_code == 404
    assert not InboxDelivery.objects.exists()


def test_another_workspaces_file_id_is_not_found(gateway, nano, worker, make_agent):
    tenant = workspace_create(name="Globex", slug="globex")
    theirs = make_agent(tenant)
    their_worker = agent_create(workspace=tenant, name="worker")
    Destination.objects.create(agent=theirs.session.agent, name="worker", target_agent=their_worker)
    (theirs.directory / "plans.txt").write_text("globex plans")
    their_file = InboxFile.objects.get(
        tool_call_id=ok(theirs.nanoclaw.call("send_file", {"path": "plans.txt", "to": "worker"}))["tool_call_id"]
    )
    (nano.directory / "report.txt").write_text("acme report")
    ours = InboxFile.objects.get(tool_call_id=ok(send(nano, path="report.txt"))["tool_call_id"])

    # Acme's host holds Acme's worker: Globex's file id is not its own, nor is Acme's for Globex's host.
    acme_host, acme_token = live_host("acme-host", workspace=nano.session.workspace)
    holding(acme_host, worker)
    globex_host, globex_token = live_host("globex-host", workspace=tenant)
    holding(globex_host, their_worker)
    assert fetch(gateway, their_file.id, acme_token).status_code == 404
    assert fetch(gateway, ours.id, globex_token).status_code == 404
    assert acknowledge(gateway, their_file.id, acme_token).status_code == 404
    assert fetch(gateway, ours.id, acme_token).content == b"acme report"
    assert fetch(gateway, their_file.id, globex_token).content == b"globex plans"
    assert not InboxDelivery.objects.exists()


def test_a_delivered_file_is_not_listed_for_that_host_again_but_is_for_another(gateway, nano, worker):
    (nano.directory / "report.txt").write_text("once per host")
    file_id = InboxFile.objects.get(tool_call_id=ok(send(nano, path="report.txt"))["tool_call_id"]).id
    first, first_token = live_host("first")
    holding(first, worker)
    second, _ = live_host("second")
    listed = {"id": file_id, "from": "main", "name": "report.txt", "size": 13}
    for host in (first, second):
        assert inbox_files_for_turn(agent_id=worker.id, workspace_id=worker.workspace_id, host_id=host.id) == [listed]
    assert acknowledge(gateway, file_id, first_token).status_code == 204
    assert acknowledge(gateway, file_id, first_token).status_code == 204  # again: still once
    assert InboxDelivery.objects.filter(file_id=file_id, host=first).count() == 1
    assert inbox_files_for_turn(agent_id=worker.id, workspace_id=worker.workspace_id, host_id=first.id) == []
    assert inbox_files_for_turn(agent_id=worker.id, workspace_id=worker.workspace_id, host_id=second.id) == [listed]


# End to end: two agents on a real host daemon.


def test_an_agent_on_a_real_host_reads_the_file_another_agent_sent_it(hosts, workspace, celery_worker):
    from tests.sessions.test_hosts import new_session

    sender = new_session(workspace)
    target = agent_create(workspace=workspace, name="worker")
    Destination.objects.create(agent=sender.agent, name="worker", target_agent=target)
    step = {"server": "nanoclaw", "tool": "send_file", "arguments": {"path": "report.txt", "to": "worker"}}
    scripted(sender.agent, [step, {"reply": "sent"}])
    commanded(target, ["sh", "-c", 'cat "$CALVIN_AGENT_DIR/inbox/main/report.txt"; ls "$CALVIN_AGENT_DIR/inbox/main"'])
    host = hosts("h1")
    wait_connected(host)
    directory = host.session_directory(sender.id)
    directory.mkdir(parents=True)
    (directory / "report.txt").write_text("all green\n")

    from tests.sessions.test_hosts import say

    say(sender, "send the report")
    wait_for(lambda: agent_texts(sender) == ["sent"], timeout=60)
    inbox = wait_for(lambda: Session.objects.filter(agent=target).first(), timeout=10)
    told = Message.objects.get(thread=inbox.thread, sender_agent=sender.agent)
    assert told.text.startswith("Sent you a file: inbox/main/report.txt (10 bytes)")

    def replies():  # the worker's own words, not the message main put in its inbox
        return [text for text in agent_texts(inbox) if text != told.text]

    wait_for(replies, timeout=60)
    assert replies() == ["all green\nreport.txt"], host.output()
    written = host.directory / "agents" / f"agent-{target.id}" / "workspace" / "inbox" / "main" / "report.txt"
    assert written.read_text() == "all green\n"
    assert InboxDelivery.objects.filter(file__agent=target, host=host.host).count() == 1
