"""/ws/host/ spoken by hand: tokens, garbage, and a host that lies about turns not its own."""

import asyncio
import json
import time

import pytest
from django.utils import timezone
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from calvin.workspaces.models import Member
from sessions.hosts import host_create
from sessions.models import Host, Message, Runner, Session, Turn
from sessions.services import message_post_by_person, runner_start, session_start
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def ws_url(gateway: str) -> str:
    return gateway.replace("http://", "ws://") + "/ws/host/"


async def _session(gateway: str, token: str, script):
    """Connect with `token`, run `script(ws)`, return what it returns (or the close code)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with connect(ws_url(gateway), additional_headers=headers) as ws:
        try:
            return await script(ws)
        except ConnectionClosed:
            return ("closed", ws.close_code)


def run(gateway, token, script):
    return asyncio.run(_session(gateway, token, script))


async def registered(ws, capacity=1):
    await ws.send(json.dumps({"type": "register", "name": "x", "capacity": capacity, "version": "t", "running": []}))
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if message["type"] == "registered":
            return message


async def next_of(ws, kind, timeout=10):
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        if message["type"] == kind:
            return message


@pytest.mark.parametrize("token", ["", "cvh_not-a-real-token", "cvn_a-runner-token-is-not-a-host-token"])
def test_unknown_tokens_are_closed_with_4401(gateway, token):
    async def script(ws):
        await ws.recv()

    assert run(gateway, token, script) == ("closed", 4401)


def test_garbage_gets_a_clear_error_and_the_connection_stays(gateway):
    _, token = host_create(name="garbage")

    async def script(ws):
        answers = []
        for frame in ("not json", "[1, 2]", '{"no": "type"}', '{"type": "heartbeat"}'):
            await ws.send(frame)
            answers.append(json.loads(await asyncio.wait_for(ws.recv(), 10))["error"])
        await registered(ws, capacity=10**9)
        await ws.send(json.dumps({"type": "turn.finished", "turn": "NaN", "status": "done"}))
        await ws.send(json.dumps({"type": "launch", "x": 1}))
        answers.append(json.loads(await asyncio.wait_for(ws.recv(), 10))["error"])
        return answers

    answers = run(gateway, token, script)
    assert answers[:3] == ["each message is a JSON object with a type"] * 3
    assert answers[3] == "register first"
    assert answers[4] == "unknown message type 'launch'"
    assert Host.objects.get(name="garbage").capacity == 1000  # bounded


def test_a_host_cannot_report_on_turns_it_was_not_given(gateway, workspace):
    """Host B says host A's turn finished, with a reply: nothing changes, nothing is posted."""
    _, token_a = host_create(name="a")
    _, token_b = host_create(name="b")
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(workspace=workspace, owner=owner, title="t")
    message_post_by_person(thread=session.thread, member=owner, text="hello")

    async def both():
        headers_a = {"Authorization": f"Bearer {token_a}"}
        async with connect(ws_url(gateway), additional_headers=headers_a) as a:
            await registered(a)
            turn = await next_of(a, "turn")
            async with connect(ws_url(gateway), additional_headers={"Authorization": f"Bearer {token_b}"}) as b:
                await registered(b)
                for kind in ("turn.started", "turn.event", "turn.finished"):
                    await b.send(
                        json.dumps(
                            {
                                "type": kind,
                                "turn": turn["turn"],
                                "status": "done",
                                "reply": "forged",
                                "directory": "/etc",
                                "event": {"kind": "text", "text": "forged"},
                            }
                        )
                    )
                await b.send(json.dumps({"type": "heartbeat"}))
                await asyncio.sleep(1)
            return turn

    turn = asyncio.run(both())
    assert turn["session"] == session.id and "token" in turn["runner"]
    assert Turn.objects.get(id=turn["turn"]).status == Turn.Status.RUNNING
    assert not Message.objects.filter(thread=session.thread, text="forged").exists()
    assert Session.objects.get(id=session.id).directory != "/etc"


def test_a_host_of_one_workspace_is_never_given_anothers_sessions(gateway, workspace, other_workspace):
    _, token = host_create(name="acme-only", workspace=workspace)
    stranger = Member.objects.filter(workspace=other_workspace).first()
    theirs = session_start(workspace=other_workspace, owner=stranger, title="theirs")
    message_post_by_person(thread=theirs.thread, member=stranger, text="for another host")
    owner = Member.objects.filter(workspace=workspace).first()
    ours = session_start(workspace=workspace, owner=owner, title="ours")
    message_post_by_person(thread=ours.thread, member=owner, text="for this host")

    async def script(ws):
        await registered(ws, capacity=5)
        turns = [await next_of(ws, "turn")]
        try:
            turns.append(await next_of(ws, "turn", timeout=2))
        except TimeoutError:
            pass
        return turns

    turns = run(gateway, token, script)
    assert [t["session"] for t in turns] == [ours.id]
    assert Turn.objects.get(session=theirs).status == Turn.Status.QUEUED


def test_a_file_reply_goes_only_to_a_request_the_host_was_sent(gateway):
    """A host naming a channel it was not asked on (another request's, say) reaches nothing."""
    from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

    _, token = host_create(name="forger")
    layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)  # its own: the gateway's receives in its loop

    async def script(ws):
        victim = await layer.new_channel("hostreply")
        await registered(ws)
        await ws.send(json.dumps({"type": "reply.chunk", "request": victim, "data": "eA=="}))
        await ws.send(json.dumps({"type": "reply", "request": victim, "ok": True, "name": "x"}))
        try:
            return await asyncio.wait_for(layer.receive(victim), 2)
        except TimeoutError:
            return "nothing arrived"

    assert run(gateway, token, script) == "nothing arrived"


def test_a_host_back_with_a_turn_that_now_runs_elsewhere_is_told_to_stop_it(gateway, workspace):
    """A host cut off longer than the lapse still runs its agent; its turn ran on another host
    meanwhile. When it reconnects and says it still runs that turn, it is told to stop."""
    from django.utils import timezone

    from sessions.scheduling import turns_claim

    _, token = host_create(name="cut-off")
    elsewhere, _ = host_create(name="elsewhere")
    Host.objects.filter(id=elsewhere.id).update(channel_name="c", capacity=1, last_heartbeat_at=timezone.now())
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(workspace=workspace, owner=owner, title="t")
    message_post_by_person(thread=session.thread, member=owner, text="hello")
    (claimed,) = turns_claim(host_id=elsewhere.id)

    async def script(ws):
        await ws.send(json.dumps({"type": "register", "name": "x", "capacity": 1, "running": [claimed["turn"]]}))
        return await next_of(ws, "stop")

    stop = run(gateway, token, script)
    assert stop["turn"] == claimed["turn"]
    assert Turn.objects.get(id=claimed["turn"]).host_id == elsewhere.id  # still the other host's


def _runner_live(runner) -> bool:
    return Runner.objects.get(id=runner.id).revoked_at is None


def test_a_host_named_localhost_revokes_only_the_runners_it_started_of_its_own_workspace(
    gateway, workspace, other_workspace, stranger_member
):
    """Issued runners were once labelled "localhost": a host of workspace B with that name,
    registering with no runners, ends only its own stale ones, never A's (issued or A-host's)."""
    owner = Member.objects.filter(workspace=workspace).first()
    issued, _ = runner_start(session=session_start(workspace=workspace, owner=owner, title="issued"))
    acme_host, _ = host_create(name="acme-host", workspace=workspace)
    acme_hosted, _ = runner_start(session=session_start(workspace=workspace, owner=owner, title="a"), host=acme_host)
    # B's host started a runner of an Acme session while it served every workspace, then was made Globex's.
    globex_host, token = host_create(name="localhost")
    from_before, _ = runner_start(session=session_start(workspace=workspace, owner=owner, title="b"), host=globex_host)
    Host.objects.filter(id=globex_host.id).update(workspace=other_workspace)
    globex_host.refresh_from_db()
    globex_issued, _ = runner_start(session=session_start(workspace=other_workspace, owner=stranger_member))
    stale, _ = runner_start(session=session_start(workspace=other_workspace, owner=stranger_member), host=globex_host)
    held, _ = runner_start(session=session_start(workspace=other_workspace, owner=stranger_member), host=globex_host)

    async def script(ws):
        runners = [{"session": held.session_id, "generation": held.generation}]
        await ws.send(json.dumps({"type": "register", "name": "localhost", "capacity": 1, "runners": runners}))
        return await next_of(ws, "registered")

    assert run(gateway, token, script)["host"] == globex_host.id
    assert _runner_live(issued) and _runner_live(acme_hosted) and _runner_live(from_before)
    assert _runner_live(globex_issued)  # its own workspace's, but issued: no host's to end
    assert not _runner_live(stale)  # its own, and it no longer holds the token
    assert _runner_live(held)


def test_a_host_of_one_workspace_never_starts_a_runner_for_another(workspace, other_workspace):
    globex_host, _ = host_create(name="globex-only", workspace=other_workspace)
    owner = Member.objects.filter(workspace=workspace).first()
    session = session_start(workspace=workspace, owner=owner, title="acme")
    with pytest.raises(ValueError, match="runs only its own workspace's sessions"):
        runner_start(session=session, host=globex_host)
    assert not Runner.objects.filter(session=session).exists()


@pytest.mark.parametrize("end", ["revoke", "delete"])
def test_a_revoked_or_deleted_host_ends_its_runners_and_only_its_own(workspace, end):
    from sessions.hosts import host_delete, host_revoke

    owner = Member.objects.filter(workspace=workspace).first()
    doomed, _ = host_create(name="doomed")
    other, _ = host_create(name="other")
    idle, _ = runner_start(session=session_start(workspace=workspace, owner=owner, title="idle"), host=doomed)
    elsewhere, _ = runner_start(session=session_start(workspace=workspace, owner=owner, title="o"), host=other)
    issued, _ = runner_start(session=session_start(workspace=workspace, owner=owner, title="issued"))
    assert (host_revoke if end == "revoke" else host_delete)(host_id=doomed.id)
    assert not _runner_live(idle)  # no turn ran: only its host held the token, and it is not trusted now
    assert _runner_live(elsewhere) and _runner_live(issued)


def test_a_live_host_whose_heartbeat_lapsed_connects_again_instead_of_stopping(hosts, workspace):
    from tests.sessions.host_processes import wait_connected

    host = hosts("paused")
    wait_connected(host)
    first = Host.objects.get(id=host.host.id).connected_at
    # What the sweep does to a host it thinks is gone (a GC pause, a slow network): its
    # connection slot is cleared while the daemon still runs.
    Host.objects.filter(id=host.host.id).update(channel_name="", last_heartbeat_at=None)
    wait_for(lambda: Host.objects.get(id=host.host.id).connected_at != first, timeout=20)
    wait_connected(host)
    assert host.process.poll() is None, host.output()  # it registered again; it did not exit


def test_a_revoked_host_is_still_refused_on_its_next_heartbeat(hosts, workspace):
    from tests.sessions.host_processes import wait_connected

    host = hosts("revoked")
    wait_connected(host)
    Host.objects.filter(id=host.host.id).update(revoked_at=timezone.now())  # no close sent: the heartbeat finds it
    wait_for(lambda: host.process.poll() is not None, timeout=20)
    assert "revoked" in host.output()


def test_one_hosts_slow_database_work_does_not_hold_up_anothers(gateway, monkeypatch):
    """Each host's calls run in the thread pool: while one host's heartbeat is stuck in the
    database, another's is handled (on one shared thread it waited, pings went unread, and
    live hosts were swept as lapsed)."""
    from sessions import hosts

    (slow, slow_token), (quick, quick_token) = host_create(name="slow"), host_create(name="quick")
    real_heartbeat = hosts.host_heartbeat

    def heartbeat(*, host_id, channel_name):
        if host_id == slow.id:
            time.sleep(8)
        return real_heartbeat(host_id=host_id, channel_name=channel_name)

    monkeypatch.setattr(hosts, "host_heartbeat", heartbeat)

    async def both():
        headers = lambda token: {"Authorization": f"Bearer {token}"}  # noqa: E731
        async with (
            connect(ws_url(gateway), additional_headers=headers(slow_token)) as one,
            connect(ws_url(gateway), additional_headers=headers(quick_token)) as two,
        ):
            await registered(one)
            await registered(two)
            before = await asyncio.to_thread(lambda: Host.objects.get(id=quick.id).last_heartbeat_at)
            await one.send(json.dumps({"type": "heartbeat"}))
            await asyncio.sleep(0.5)  # the slow host's heartbeat is in the database now
            await two.send(json.dumps({"type": "heartbeat"}))
            beat = lambda: Host.objects.get(id=quick.id).last_heartbeat_at != before  # noqa: E731
            await asyncio.to_thread(wait_for, beat, 5)  # well before the slow one's 8 s

    asyncio.run(both())
